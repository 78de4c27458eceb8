"""The simulator's options (options.py): a --config file merged as SGLang merges it, a parser built from
SGLang's own option table, the --sim-* knobs."""

import argparse
import json

import pytest

from simulator_process import free_port
from sglang_simulator import options


# ---------------------------------------------------------------- in-process

def test_config_is_split_from_the_flags_once():
    assert options.split_config_option(["--config", "a.yaml", "--tp-size", "2"]) == ("a.yaml", ["--tp-size", "2"])
    assert options.split_config_option(["--port", "1", "--config=b.yml"]) == ("b.yml", ["--port", "1"])
    with pytest.raises(options.ConfigError, match="only one --config file"):
        options.split_config_option(["--config", "a.yaml", "--config", "b.yaml"])
    with pytest.raises(options.ConfigError, match="expected one argument"):
        options.split_config_option(["--config"])


def test_config_values_become_flags_as_sglangs_merger_makes_them():
    parser = options.build_parser({})
    config = {"trust-remote-code": True, "disable-radix-cache": False, "tp-size": 8, "cuda-graph-bs-decode": [1, 2],
              "json-model-override-args": {"a": 1}}
    assert options.config_to_args(config, parser) == [
        "--trust-remote-code", "--tp-size", "8", "--cuda-graph-bs-decode", "1", "2",
        "--json-model-override-args", json.dumps({"a": 1})]
    assert options.option_to_args("--enable-metrics", False, False) == ["--enable-metrics", "false"]
    with pytest.raises(options.ConfigError, match="simulator knobs are SGLANG_SIM_"):
        options.config_to_args({"sim-load-seconds": 1}, parser)
    with pytest.raises(options.ConfigError, match="list items must be numbers or strings"):
        options.config_to_args({"cuda-graph-bs-decode": [[1]]}, parser)


@pytest.mark.parametrize("text, value", [("256k", 256000), ("1.5k", 1500), ("1Mi", 2**20), (" 42 ", 42)])
def test_human_readable_int_reads_sglangs_suffixes(text, value):
    assert options.human_readable_int(text) == value


@pytest.mark.parametrize("text, message", [("1.5Ki", "Decimals are not allowed"), ("8K", "Invalid integer value")])
def test_human_readable_int_refuses_what_sglang_refuses(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        options.human_readable_int(text)


def test_knobs_come_from_the_environment_and_a_flag_wins():
    environ = {"SGLANG_SIM_LOAD_SECONDS": "2.5", "SGLANG_SIM_WITHOUT_READY": "yes"}
    args, settings = options.parse_args(["--model-path", "m"], environ)
    assert settings.load_seconds == 2.5 and settings.without_ready is True and settings.tokens_per_second == "model"
    assert not [name for name in vars(args) if name.startswith("sim_")]
    assert args.served_model_name == args.tokenizer_path == "m"
    dummy, settings = options.parse_args(["--model-path", "m", "--sim-load-seconds", "0"],
                                         {"SGLANG_SIM_LOAD_SECONDS": "2.5"})
    assert settings.load_seconds == 0.0


def test_a_bad_knob_in_the_environment_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        options.parse_args(["--model-path", "m"], {"SGLANG_SIM_FAILURE": "explode"})
    assert stop.value.code == 2 and "argument --sim-failure: invalid choice: 'explode'" in capsys.readouterr().err


def test_the_parser_holds_every_option_of_the_table():
    table = options.load_option_table()
    flags = {flag for action in options.build_parser({})._actions for flag in action.option_strings}
    assert table["sglang"] and len(table["options"]) > 500
    for option in table["options"]:
        wanted = [flag for flag in option["flags"] if option["action"] != "boolean_optional" or not flag.startswith("--no-")]
        assert set(wanted) <= flags, option["flags"]


def test_an_action_the_table_does_not_know_stops_the_parser():
    table = {"cuda_graph_config": {"phases": [], "keys": {}},
             "options": [{"flags": ["--x"], "action": "append", "dest": "x", "default": None, "required": False}]}
    with pytest.raises(ValueError, match="unknown action 'append'"):
        options.add_server_options(argparse.ArgumentParser(), table)


# ---------------------------------------------------------------- as a process


def test_config_file_merges_and_cli_wins(start_sim):
    port = free_port()
    sim = start_sim("--port", str(port), "--tp-size", "2", config={
        "served-model-name": "kimi-k2.6", "port": free_port(), "tp-size": 8, "trust-remote-code": True,
        "disable-radix-cache": False, "enable-metrics": True,
    })
    sim.wait_port()
    status, dummy, body = sim.get("/v1/models")
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "kimi-k2.6"
    info = json.loads(sim.get("/server_info")[2])
    assert info["port"] == port and info["tp_size"] == 2
    assert info["trust_remote_code"] is True and info["disable_cuda_graph"] is False
    assert info["simulator"] is True and info["version"].endswith("-simulator")


@pytest.mark.parametrize("flags, config, message", [
    (["--cuda-graph-max-bs", "64"], None, "ambiguous option: --cuda-graph-max-bs could match"),
    ([], {"cuda-graph-max-bs": 64}, "ambiguous option: --cuda-graph-max-bs could match"),
    ([], {"tp_size": 8}, "unrecognized arguments: --tp_size 8"),
    ([], {"disable-cuda-graph": True},
     "Unsupported config option 'disable_cuda_graph' with action 'DeprecatedStoreTrueAction'"),
    ([], "- just\n- a list\n", "must contain a mapping"),
    ([], {"served-model-name": None}, "unsupported value"),
    (["--attention-backend", "cutlass_mla"], None, "invalid choice"),
])
def test_bad_options_fail_like_argparse(start_sim, flags, config, message):
    sim = start_sim(*flags, config=config)
    assert sim.wait_exit() == 2
    assert "usage:" in sim.stderr and message in sim.stderr
