"""The sglang_service role's option merge, backend choice and input validation (plugins/filter/sglang_options.py)."""

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.k26.deploy.plugins.filter.sglang_options import (
    attention_backend_for, merge_options, option_problems, redact_log_lines)
from ansible_collections.k26.deploy.plugins.module_utils import sglang_options as options
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import client_host, is_loopback_host

GOOD = {"model-path": "/srv/models/Kimi-K2.6", "host": "127.0.0.1", "port": 30000, "tp-size": 1, "pp-size": 8}


def test_layers_merge_in_order_with_normalised_keys_and_null_removes():
    base = {"pp_size": 8, "--host": "127.0.0.1", "attention-backend": None}
    profile = {"pp-async-batch-depth": 8, "disable-cuda-graph": True}
    user = {"disable_cuda_graph": None, "pp_async_batch_depth": 4}
    assert merge_options(base, profile, user) == {"host": "127.0.0.1", "pp-async-batch-depth": 4, "pp-size": 8}


@pytest.mark.parametrize("name, variable", [("port", "sglang_service_port"), ("served_model_name",
                                            "sglang_service_served_model_name"), ("--pp-size", "sglang_service_pp_size")])
def test_options_the_role_reads_back_must_come_from_its_variables(name, variable):
    with pytest.raises(AnsibleFilterError, match=variable):
        merge_options(GOOD, {name: 1})


def test_merge_rejects_a_non_mapping():
    with pytest.raises(AnsibleFilterError, match="mapping"):
        merge_options({"a": 1}, ["pp-size", 8])


@pytest.mark.parametrize("cc, backend", [("12.0", "triton"), ("10.0", "trtllm_mla"), ("9.0", "fa3"),
                                         ("8.0", "triton"), ("", ""), (None, "")])
def test_attention_backend_follows_the_gpu_architecture(cc, backend):
    assert attention_backend_for(cc) == backend


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.1.1", True), ("::1", True),
                                            ("localhost", True), ("0.0.0.0", False), ("::", False),
                                            ("10.0.0.5", False), ("gpu-node-01", False)])
def test_loopback(host, loopback):
    assert is_loopback_host(host) is loopback


@pytest.mark.parametrize("bind, client", [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("", "127.0.0.1"),
                                          ("10.0.0.5", "10.0.0.5"), ("127.0.0.1", "127.0.0.1")])
def test_clients_reach_an_all_interfaces_bind_through_loopback(bind, client):
    assert client_host(bind) == client


def test_log_lines_lose_every_secret_value():
    lines = ["server_args=ServerArgs(api_key='old-key', admin_api_key='adm', port=1)", "plain line"]
    assert redact_log_lines(lines) == [
        "server_args=ServerArgs(api_key='********', admin_api_key='********', port=1)", "plain line"]


def test_good_options_have_no_problems():
    assert option_problems(GOOD, 8) == []
    recipes = {"tp-size": 8, "pp-size": 1, "attn-dp-size": 8, "speculative-algorithm": "EAGLE3",
               "speculative-draft-model-path": "/models/kimi-k2.6-eagle3.1-mla"}
    assert option_problems(dict(GOOD, **recipes), 8) == []


@pytest.mark.parametrize("change, gpus, message", [
    ({"pp-size": 3}, 8, "pp-size 3 does not divide the 8 GPUs"),
    ({"tp-size": 2}, 8, "needs 16 GPUs per node but the node has 8"),
    ({"attention-backend": "fa9"}, 8, "unknown attention backend 'fa9'"),
    ({"port": 70000}, 8, "port 70000 is out of range"),
    ({"port": 0}, 8, "port 0 is out of range"),
    ({"model-path": ""}, 8, "no model path"),
    ({"host": "0.0.0.0"}, 8, "no API key is set"),
    ({"nnodes": 3}, 8, "not divisible by nnodes 3"),
    ({"pp-size": 0}, 8, "pp-size must be >= 1"),
    ({"mem-fraction-static": 1.5}, 8, "mem-fraction-static 1.5 is not a fraction"),
    ({"tokenizer-worker-num": 2}, 8, "tokenizer-worker-num 2: SGLang 0.5.23 serves several tokenizer workers only "
                                     "without an API key"),
    ({"tp-size": 8, "pp-size": 1, "attn-dp-size": 3}, 8, "attn-dp-size 3 does not divide tp-size 8"),
    ({"attn-dp-size": 0}, 8, "attn-dp-size 0 does not divide"),
    ({"speculative-algorithm": "eagle3"}, 8, "speculative-algorithm EAGLE3 needs a draft model"),
    ({"speculative-algorithm": "DFLASH", "speculative-draft-model-path": " "}, 8, "DFLASH needs a draft model"),
])
def test_each_bad_input_is_named(change, gpus, message):
    problems = option_problems(dict(GOOD, **change), gpus)
    assert any(message in p for p in problems), problems


def test_several_tokenizer_workers_are_refused_with_a_key_or_without_one():
    """SGLang 0.5.23 asserts that no API key is set in multi-tokenizer mode and adds no auth of its own: with a key the
    start fails after the change is written, without one it serves with no auth at all."""
    for key in (True, False):
        problems = option_problems(dict(GOOD, **{"tokenizer-worker-num": 4}), 8, api_key_set=key)
        assert any("tokenizer-worker-num 4" in problem for problem in problems), problems
    assert option_problems(dict(GOOD, **{"tokenizer-worker-num": 1}), 8, api_key_set=True) == []


def test_public_bind_is_fine_with_a_key_or_explicit_permission():
    public = dict(GOOD, host="0.0.0.0")
    assert option_problems(public, 8, api_key_set=True) == []
    assert option_problems(public, 8, allow_public_without_key=True) == []


def test_reserved_options_are_refused_without_showing_their_value():
    with pytest.raises(AnsibleFilterError, match="use sglang_service_api_key instead") as error:
        merge_options(GOOD, {"api_key": "s3cret-value"})
    assert "s3cret-value" not in str(error.value)


def test_two_nodes_split_the_pipeline():
    assert option_problems(dict(GOOD, **{"pp-size": 16, "nnodes": 2}), 8) == []


def test_one_list_of_attention_backends_everywhere():
    """The module_utils list is the one home; the role's argument spec, the rules and the simulator agree with it."""
    import json
    from pathlib import Path

    import yaml

    from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules, sglang_options

    root = Path(__file__).resolve().parents[4]
    spec = yaml.safe_load((root / "roles/sglang_service/meta/argument_specs.yml").read_text())
    choices = spec["argument_specs"]["main"]["options"]["sglang_service_attention_backend"]["choices"]
    assert choices == [""] + list(sglang_options.ATTENTION_BACKENDS)
    assert set(k26_preflight_rules.ATTENTION_ARCH) <= set(sglang_options.ATTENTION_BACKENDS)
    assert set(sglang_options.MLA_DEFAULT_BACKEND.values()) <= set(sglang_options.ATTENTION_BACKENDS)
    table = json.loads((root / "roles/sglang/files/sglang_simulator/sglang_server_options.json").read_text())
    (real,) = [option["choices"] for option in table["options"] if option["dest"] == "attention_backend"]
    assert list(sglang_options.ATTENTION_BACKENDS) == real


def test_options_without_secrets_keep_everything_else():
    from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import without_secrets

    assert without_secrets({"api-key": "k", "admin_api_key": "a", "--ssl-keyfile-password": "p", "port": 1}) == {
        "port": 1}


@pytest.mark.parametrize("key", ["back\\slash-0123456789", "quote'0123456789abc", "space 0123456789abc", "plus+0123456789abc",
                                 "slash/0123456789abc", "short-key", "ünïcode-0123456789",
                                 "-dash-first-0123456789", "newline-last-0123456789\n"])
def test_an_api_key_that_prints_in_another_form_is_refused_without_showing_it(key):
    from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import api_key_problem
    problem = api_key_problem(key, "sglang_service_api_key")
    assert problem.startswith("sglang_service_api_key must be 16 or more letters") and key not in problem


@pytest.mark.parametrize("key", ["", "a-new-key-that-never-worked", "k26.rotated_key~0123456789"])
def test_keys_whose_every_printed_form_is_the_key_pass(key):
    from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import api_key_problem
    assert api_key_problem(key, "sglang_service_api_key") is None


@pytest.mark.parametrize("setting, profile, cpus, gpus, threads", [
    ("auto", "cores", 128, 8, 16),    # the host's cores shared by its ranks
    ("auto", "cores", 32, 8, 8),      # never fewer than SGLang's own 8
    ("auto", "cores", "2", 8, 8),     # nproc's output is text
    ("auto", 0, 128, 8, 0),           # the cpu and none profiles leave it to SGLang
    ("AUTO", "cores", 64, 1, 64),
    (24, "cores", 128, 8, 24),        # set by hand
    ("0", "cores", 128, 8, 0),
])
def test_load_threads(setting, profile, cpus, gpus, threads):
    assert options.load_threads(setting, profile, cpus, gpus) == threads


@pytest.mark.parametrize("setting", ["many", -1, "1.5", True])
def test_load_threads_refuses_what_is_not_a_count(setting):
    with pytest.raises(options.LoadThreadsError, match="sglang_service_load_threads must be auto or a whole number"):
        options.load_threads(setting, "cores", 8, 8)


def test_the_loader_config_names_multithreaded_loading():
    assert json.loads(options.loader_extra_config(16)) == {"enable_multithread_load": True, "num_threads": 16}
    assert options.loader_extra_config(0) is None


@pytest.mark.parametrize("tp, pp, nnodes, per_node", [(1, 8, 1, 8), (1, 16, 2, 8), (8, 2, 4, 4), (1, 8, 3, None),
                                                      (2, 3, 4, None), (1, 8, 0, None)])
def test_gpus_per_node_is_none_where_sglang_refuses_the_split(tp, pp, nnodes, per_node):
    assert options.gpus_per_node(tp, pp, nnodes) == per_node


@pytest.mark.parametrize("tp, pp, nnodes, gpus", [(1, 8, 1, 8), (2, 8, 1, 8), (1, 8, 3, 8), (1, 16, 2, 8),
                                                  (4, 2, 2, 4), (8, 1, 1, 4), (3, 2, 4, 8)])
def test_the_role_and_preflight_refuse_the_same_splits(tp, pp, nnodes, gpus):
    """One home for the split of tp-size x pp-size over nnodes: the role's option problems (module_utils, through
    the filter) and the preflight rules K26-NNODES-DIVISOR and K26-GPU-COUNT refuse the same layouts."""
    from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules

    chosen = dict(GOOD, **{"tp-size": tp, "pp-size": pp, "nnodes": nnodes})
    problems = " ".join(option_problems(chosen, gpus))
    facts = {"gpu_count": gpus, "gpus": [{"index": i, "memory_total_mib": 143771, "compute_capability": "9.0"}
                                         for i in range(gpus)]}
    found = dict((f["id"], f["severity"]) for f in rules.evaluate(rules.build_context(chosen, gpu=facts)))
    assert ("not divisible by nnodes" in problems) == ("K26-NNODES-DIVISOR" in found)
    assert ("GPUs per node but the node has" in problems) == (found.get("K26-GPU-COUNT") == "error")


def test_the_option_logic_raises_its_own_error_and_the_filter_ansibles():
    with pytest.raises(options.OptionsError, match="use sglang_service_port instead"):
        options.merge_options(GOOD, {"port": 1})
    with pytest.raises(AnsibleFilterError, match="must be an integer"):
        option_problems(dict(GOOD, port="http"), 8)
