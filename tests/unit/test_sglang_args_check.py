"""sglang_args_check: SGLang's own parser and ConfigArgumentMerger read the option mapping.

Tests marked ``sglang_real`` run against the real sglang package (CPU torch) in .cache/sglang-venv, which
scripts/setup_sglang_cpu.sh creates; without it they are skipped with that reason. The rest use a small fake
simulator or no subprocess at all.
"""
import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.k26.deploy.plugins.module_utils import sglang_args, sglang_options
import sglang_parser
from module_runner import run_module as run_shared
from sglang_venv import SGLANG_PYTHON
from sglang_venv import requires_real_sglang as real

ROOT = Path(__file__).resolve().parents[2]
SIMULATOR = ROOT / "roles" / "sglang" / "files" / "sglang_simulator"

# The Kimi K2.6 option set for 8x RTX PRO 6000 (PP8), as the sglang_service role renders it.
K26 = {
    "model-path": "/models/Kimi-K2.6",
    "served-model-name": "kimi-k2.6",
    "host": "127.0.0.1",
    "port": 30000,
    "tp-size": 1,
    "pp-size": 8,
    "pp-async-batch-depth": 8,
    "attention-backend": "triton",
    "mem-fraction-static": 0.88,
    "trust-remote-code": True,
    "tool-call-parser": "kimi_k2",
    "reasoning-parser": "kimi_k2",
    "cuda-graph-max-bs-decode": 64,
    "enable-metrics": True,
    "uvicorn-access-log-exclude-prefixes": ["/metrics", "/health_generate"],
    "watchdog-timeout": 300,
    "disable-radix-cache": False,
    "api-key": "k26-test-secret-0123",
}


PROFILE = ROOT / "roles" / "sglang_service" / "vars" / "profiles" / "kimi_k26.yml"


def test_the_option_set_checked_against_sglang_holds_the_k26_profile():
    profile = yaml.safe_load(PROFILE.read_text())["__sglang_service_profile_options"]
    assert profile.items() <= K26.items(), [item for item in profile.items() if item not in K26.items()]


def check(options=None, content=None, extra_args=None, tmpdir=None):
    result, _cmd = sglang_args.run_check(sglang_parser.run, str(SGLANG_PYTHON), options=options, content=content,
                                         extra_args=extra_args, tmpdir=tmpdir)
    return result


# ---------------------------------------------------------------- against the real sglang package

@pytest.mark.sglang_real
@real
def test_k26_options_pass(tmp_path):
    result = check(K26, tmpdir=str(tmp_path))
    assert result["ok"] is True, result
    assert result["sglang_version"] == "0.5.23"
    assert result["option_count"] > 500
    parsed = result["parsed"]
    assert parsed["pp_size"] == 8 and parsed["pp_async_batch_depth"] == 8
    assert parsed["attention_backend"] == "triton" and parsed["trust_remote_code"] is True
    assert parsed["uvicorn_access_log_exclude_prefixes"] == ["/metrics", "/health_generate"]
    assert list(tmp_path.iterdir()) == []  # the private config file is gone


@pytest.mark.sglang_real
@real
@pytest.mark.parametrize("change, stage, message", [
    # Gone since 0.5.20; argparse now sees a prefix of two newer flags.
    ({"cuda-graph-max-bs": 256}, "parse",
     "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
    ({"pp-async-batch-detph": 8}, "parse", "unrecognized arguments: --pp-async-batch-detph 8"),
    ({"attention-backend": "cutlass_mla"}, "parse", "argument --attention-backend: invalid choice: 'cutlass_mla'"),
    ({"disable-cuda-graph": True}, "merge",
     "ValueError: Unsupported config option 'disable_cuda_graph' with action 'DeprecatedStoreTrueAction'"),
    # SGLang 0.5.23 turns a key into --KEY as written: the underscore spelling is refused.
    ({"pp_size": 8}, "parse", "unrecognized arguments: --pp_size 8"),
], ids=["removed flag", "misspelt key", "removed backend", "deprecated flag in file", "underscore key"])
def test_bad_options_fail_with_sglangs_message(change, stage, message):
    options = dict(K26)
    options.update(change)
    result = check(options)
    assert result["ok"] is False
    assert result["stage"] == stage
    assert message in result["error"], result["error"]


@pytest.mark.sglang_real
@real
def test_abbreviation_passes_with_a_warning(capsys, monkeypatch):
    from ansible.module_utils.basic import AnsibleModule

    warned = []
    monkeypatch.setattr(AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    options = {"model-path": "/models/Kimi-K2.6", "pp-size": 8, "pp-async-batch-dept": 8}
    rc, result = run_module({"options": options, "python": str(SGLANG_PYTHON)}, capsys)
    assert rc == 0 and result["ok"] is True
    assert result["abbreviated"] == ["--pp-async-batch-dept"]
    assert result["parsed"]["pp_async_batch_depth"] == 8
    assert any("--pp-async-batch-dept is not an SGLang option" in w for w in warned)


@pytest.mark.sglang_real
@real
def test_extra_args_win_over_the_file_and_yaml_text():
    content = "model-path: /models/Kimi-K2.6\npp-size: 8\npp-async-batch-depth: 8\ntrust-remote-code: true\n"
    result = check(content=content, extra_args=["--pp-size", "4"])
    assert result["ok"] is True, result
    assert result["parsed"]["pp_size"] == 4 and result["parsed"]["pp_async_batch_depth"] == 8


@pytest.mark.sglang_real
@real
def test_module_hides_the_api_key(capsys):
    options = dict(K26)
    options["api-keyy"] = options["api-key"]  # misspelt: SGLang's message echoes the value
    rc, result = run_module({"options": options, "python": str(SGLANG_PYTHON)}, capsys)
    assert rc == 1 and result["ok"] is False
    assert "unrecognized arguments: --api-keyy ********" in result["error"]
    assert K26["api-key"] not in json.dumps(result)


# ---------------------------------------------------------------- without sglang

FAKE_SIMULATOR = r'''
import argparse, sys, json
p = argparse.ArgumentParser(prog="sglang_simulator.py")
p.add_argument("--sim-check-only", action="store_true")
p.add_argument("--config")
p.add_argument("--pp-size", type=int)
args, rest = p.parse_known_args()
options = json.load(open(args.config))
unknown = [k for k in options if k not in ("model-path", "pp-size", "api-key")]
if unknown or rest:
    p.error("unrecognized arguments: " + " ".join(["--%s %s" % (k, options[k]) for k in unknown] + rest))
sys.exit(0)
'''


@pytest.fixture
def fake_simulator(tmp_path):
    path = tmp_path / "sim.py"
    path.write_text(FAKE_SIMULATOR)
    return str(path)


def run_module(args, capsys):
    from ansible_collections.k26.deploy.plugins.modules import sglang_args_check

    return run_shared(sglang_args_check, args, capsys)


def test_simulator_mode_ok_and_error(fake_simulator, capsys):
    args = {"options": {"model-path": "/m", "pp-size": 8, "api-key": "sim-secret-42"},
            "simulator": fake_simulator, "simulator_python": sys.executable}
    rc, result = run_module(args, capsys)
    assert rc == 0 and result["ok"] is True and result["stage"] == "simulator"
    assert result["cmd"][1:5] == [fake_simulator, "--sim-check-only", "--config", "CONFIG.yaml"]

    args["options"]["cuda-graph-max-bs"] = 256
    args["extra_args"] = ["--api-key", "sim-secret-42"]
    rc, result = run_module(args, capsys)
    assert rc == 1 and result["error"] == "unrecognized arguments: --cuda-graph-max-bs 256 --api-key ********"
    assert "sim-secret-42" not in json.dumps(result)


def test_real_simulator_check_only(capsys):
    ok_options = {"model-path": "/models/Kimi-K2.6", "pp-size": 8, "pp-async-batch-depth": 8}
    rc, result = run_module({"options": ok_options, "simulator": str(SIMULATOR),
                             "simulator_python": sys.executable}, capsys)
    assert rc == 0, result
    rc, result = run_module({"options": dict(ok_options, **{"cuda-graph-max-bs": 256}), "simulator": str(SIMULATOR),
                             "simulator_python": sys.executable}, capsys)
    assert rc == 1 and "cuda-graph-max-bs" in result["error"]


def test_private_config_file_mode_and_content(tmp_path):
    path = sglang_args.write_private_config({"pp-size": 8, "trust-remote-code": True}, directory=str(tmp_path))
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert path.endswith(".yaml")
        assert json.loads(Path(path).read_text()) == {"pp-size": 8, "trust-remote-code": True}
    finally:
        os.unlink(path)


def test_secret_values():
    assert sglang_options.secret_values({"api_key": "a", "--admin-api-key": "b", "port": 1},
                                        ["--api-key=c", "--ssl-keyfile-password", "d", "--x"]) == ["a", "b", "c", "d"]
    assert sglang_options.secret_values_in_text("api-key: 'q1'\napi_key: \"q2\"\nport: 30000\n") == ["q1", "q2"]
    assert sglang_options.redact({"e": ["x q1 y"]}, ["q1"]) == {"e": ["x ******** y"]}


def test_parse_check_output():
    good = sglang_args.RESULT_MARKER + json.dumps({"ok": True, "stage": "parse", "error": None})
    assert sglang_args.parse_check_output(0, "noise\n" + good + "\n", "")["ok"] is True
    missing = sglang_args.parse_check_output(1, "", "Traceback ...\nModuleNotFoundError: No module named 'sglang'\n")
    assert missing["ok"] is False and missing["stage"] == "run" and "No module named 'sglang'" in missing["error"]
    sim = sglang_args.parse_check_output(2, "", "usage: sim [-h]\nsim: error: argument --pp-size: invalid int value: 'x'\n",
                                         simulator=True)
    assert sim == {"ok": False, "stage": "simulator", "error": "argument --pp-size: invalid int value: 'x'",
                   "sglang_version": None, "option_count": None, "parsed": {}, "abbreviated": []}


def test_module_requires_python_or_simulator(capsys):
    rc, result = run_module({"options": {"pp-size": 8}}, capsys)
    assert rc == 1 and "python" in result["msg"] and "simulator" in result["msg"]


@pytest.mark.sglang_real
@real
def test_pinned_requires_python_is_the_real_packages():
    """The interpreter rule's Requires-Python is the one in SGLang 0.5.23's own metadata."""
    from ansible_collections.k26.deploy.plugins.module_utils.sglang_version import SGLANG_REQUIRES_PYTHON, SGLANG_VERSION

    rc, out, err = sglang_parser.run([str(SGLANG_PYTHON), "-c", "import importlib.metadata as m; "
                                      "print(m.version('sglang'), m.metadata('sglang')['Requires-Python'])"])
    assert rc == 0, err
    assert out.split() == [SGLANG_VERSION, SGLANG_REQUIRES_PYTHON]
