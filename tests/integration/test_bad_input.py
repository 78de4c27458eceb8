"""deploy_k26.yml refuses bad input with a clear message before anything on the host changes; preflight findings
reach Python callers and the CLI, and --strict turns the warnings into that refusal."""

import json
import os
import subprocess

import pytest
import yaml

import k26deploy
from harness import ROOT, VENV_BIN, demo_inventory, run_playbook, snapshot_diff, systemd_container, task_results

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A fresh container nothing was deployed to, and an inventory with the demo's settings for it."""
    with systemd_container("k26-it-input-%d" % os.getpid()) as box:
        yield box, demo_inventory(box, tmp_path_factory.mktemp("inventory"))


CASES = {
    "pp_size does not divide the GPUs": ({"sglang_service_pp_size": 3}, "pp-size 3 does not divide the 8 GPUs"),
    "tp x pp larger than the GPUs": ({"sglang_service_tp_size": 2, "sglang_service_pp_size": 8},
                                     "needs 16 GPUs per node but the node has 8"),
    "tp-size neither a number nor auto": ({"sglang_service_tp_size": "eight"}, "must be whole numbers or 'auto'"),
    "unknown attention backend": ({"sglang_service_attention_backend": "fa9"},
                                  "sglang_service_attention_backend must be one of"),
    "port out of range": ({"sglang_service_port": 70000}, "port 70000 is out of range"),
    "missing model path": ({"sglang_service_model_path": ""}, "no model path"),
    "public bind without a key": ({"sglang_service_api_key": ""}, "no API key is set"),
    "option SGLang does not know": ({"sglang_service_options": {"cuda-graph-max-bs": 256}}, "cuda-graph-max-bs"),
    "served model name ending in a backslash": ({"sglang_service_served_model_name": "kimi-k2.6\\"},
                                                'sglang_service_served_model_name ends with "\\"'),
    "model copied into the service's home": ({"sglang_service_model_path": "/var/lib/sglang/models/k26",
                                              "sglang_model_source": "controller",
                                              "sglang_model_controller_path": "/srv/k26"},
                                             "sglang_model_path /var/lib/sglang/models/k26 lies inside "
                                             "sglang_service_home /var/lib/sglang"),
    "API key SGLang would print escaped": ({"sglang_service_api_key": "with\\backslash-0123456789"},
                                           "sglang_service_api_key must be 16 or more letters, digits and - . _ ~"),
    "several tokenizer workers, which SGLang serves only without a key": (
        {"sglang_service_options": {"tokenizer-worker-num": 2}},
        "tokenizer-worker-num 2: SGLang 0.5.23 serves several tokenizer workers only without an API key"),
    "a password in pip's extra arguments": (
        {"sglang_pip_extra_args": "--extra-index-url https://k26:backslash-pw@index.invalid/simple"},
        "sglang_pip_extra_args holds a URL with credentials"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_before_any_change(bare, case, tmp_path):
    box, inventory = bare
    extra, message = CASES[case]
    extra_file = tmp_path / "extra.yml"
    extra_file.write_text(yaml.safe_dump(extra))
    before = box.snapshot()
    rc, data = run_playbook(str(ROOT / "deploy_k26.yml"), str(inventory), extra_args=["-e", "@%s" % extra_file])
    assert rc != 0
    failed = [res for dummy, res in task_results(data, box.name) if res.get("failed")]
    assert failed, "no task failed for %s" % case
    assert message in failed[0]["msg"], failed[0]["msg"]
    assert "backslash" not in json.dumps(data), "the refused key shows in the run's output"
    assert data["stats"][box.name]["changed"] == 0
    assert snapshot_diff(before, box.snapshot()) == [], "files changed on the host"
    assert box.exec("id sglang", check=False).returncode != 0


INJECTED = "\n[Service]\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"
# Every string the sglang_service role writes into its unit or environment file, each hostile, in one run: every
# one is named in the refusal (test_unit_values.py shows what systemd reads from the values that are accepted).
HOSTILE_SERVICE = {
    "sglang_service_name": "../../../tmp/pwned",
    "sglang_service_served_model_name": "kimi-k2.6" + INJECTED,
    "sglang_service_user": "root" + INJECTED,
    "sglang_service_group": "Users Group",
    "sglang_service_home": "/var/lib/sglang" + INJECTED,
    "sglang_service_cache_dir": "/var/cache/with space",
    "sglang_service_hf_home": "relative/hf",
    "sglang_service_config_dir": "/etc/../etc/sglang",
    "sglang_service_read_write_paths": ["/srv/ok", "/srv/x" + INJECTED],
    "sglang_service_launch_command": ["/usr/bin/python3", "--x" + INJECTED],
    "sglang_service_environment": {"LD_PRELOAD": "/tmp/pwned.so", "PYTHONPATH": "/tmp", "BAD\nNAME": "1",
                                   "GOOD_NAME": "value" + INJECTED},
    "sglang_service_syscall_deny": ["@privileged" + INJECTED],
    "sglang_service_syscall_allow": ["sched_setscheduler\n"],
    "sglang_service_ip_address_allow": ["10.0.0.0/8" + INJECTED],
}
HOSTILE_ROUTER = {
    "sglang_router_version": "1.13.0" + INJECTED,
    "sglang_router_user": "root" + INJECTED,
    "sglang_router_group": "Router",
    "sglang_router_base_dir": "opt/router",
    "sglang_router_venv_dir": "/opt/x/../venv",
    "sglang_router_config_dir": "/etc/router" + INJECTED,
    "sglang_router_host": "0.0.0.0" + INJECTED,
    "sglang_router_policy": "round_robin" + INJECTED,
    "sglang_router_health_check_endpoint": "/ready" + INJECTED,
    "sglang_router_prometheus_host": "127.0.0.1" + INJECTED,
    "sglang_router_extra_args": ["--request-timeout-secs", "1800" + INJECTED],
}


def refused_before_any_change(box, inventory, extra, tmp_path):
    """Run deploy_k26.yml with EXTRA; return the message of the task that failed, having checked that nothing
    on the host changed."""
    extra_file = tmp_path / "hostile.yml"
    extra_file.write_text(yaml.safe_dump(extra))
    before = box.snapshot()
    rc, data = run_playbook(str(ROOT / "deploy_k26.yml"), str(inventory), extra_args=["-e", "@%s" % extra_file])
    failed = [res for dummy, res in task_results(data, box.name) if res.get("failed")]
    assert rc != 0 and failed, "nothing failed"
    assert data["stats"][box.name]["changed"] == 0
    assert snapshot_diff(before, box.snapshot()) == [], "files changed on the host"
    assert box.exec("test -e /tmp/pwned", check=False).returncode != 0
    return failed[0]["msg"]


def test_every_hostile_service_value_is_refused_before_any_change(bare, tmp_path):
    box, inventory = bare
    message = refused_before_any_change(box, inventory, HOSTILE_SERVICE, tmp_path)
    assert message.startswith("Unsafe values for %s's unit: " % box.name), message
    for name in HOSTILE_SERVICE:
        assert name + " " in message or name + "[" in message, (name, message)
    for name in ("LD_PRELOAD", "PYTHONPATH", "'BAD\\nNAME'", "sglang_service_environment[GOOD_NAME]"):
        assert name in message, (name, message)


def test_every_hostile_router_value_is_refused_before_any_change(bare, tmp_path):
    box, dummy = bare
    inventory = demo_inventory(box, tmp_path / "inventory", routers=(box,))
    message = refused_before_any_change(box, inventory, HOSTILE_ROUTER, tmp_path)
    assert message.startswith("Unsafe values for %s's router unit: " % box.name), message
    for name in HOSTILE_ROUTER:
        assert name + " " in message, (name, message)


def test_a_router_open_to_other_machines_without_a_key_is_refused_before_any_change(bare, tmp_path):
    box, dummy = bare
    inventory = demo_inventory(box, tmp_path / "inventory", routers=(box,))
    message = refused_before_any_change(box, inventory, {"sglang_router_api_key": ""}, tmp_path)
    assert message == ("%s: host 0.0.0.0 is reachable from other machines but no API key is set: set "
                       "sglang_router_api_key (or sglang_router_allow_public_without_key: true to accept an open "
                       "endpoint)" % box.name), message


def test_an_account_or_directory_others_depend_on_is_refused_before_any_change(bare, tmp_path):
    box, inventory = bare
    box.exec("getent passwd alice >/dev/null || useradd --no-create-home --gid users alice")
    extra = {"sglang_service_user": "root", "sglang_service_group": "users", "sglang_service_cache_dir": "/var/lib",
             "sglang_service_config_dir": "/etc/", "sglang_service_read_write_paths": ["/srv", "/srv/no-such-dir"]}
    message = refused_before_any_change(box, inventory, extra, tmp_path)
    assert message.startswith("Unsafe account or directories for %s: " % box.name), message
    for expected in ("sglang_service_user root is root's account (uid 0)", "has other members (alice)",
                     "sglang_service_cache_dir is /var/lib, a directory the system shares",
                     "sglang_service_config_dir is /etc, a directory the system shares",
                     "sglang_service_read_write_paths names /srv/no-such-dir, which does not exist"):
        assert expected in message, (expected, message)


# The seed deployment's configuration: PP8 set by hand, CUDA graphs off (implicitly, through the attention backend),
# pp-async-batch-depth 0. Only the graphs cost it throughput at concurrency 1 (issue 37); the depth is information.
SEED = {"sglang_service_pp_size": 8, "sglang_service_attention_backend": "torch_native",
        "sglang_service_pp_async_batch_depth": 0}


def cli(*args):
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), *args], cwd=ROOT, check=False, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def test_preflight_findings_reach_the_python_api(bare):
    box, inventory = bare
    result = k26deploy.preflight(inventory=inventory, extra_vars=SEED)
    assert result.exit_code == 0, result.to_json()
    findings = {f["id"]: f for f in result.hosts[box.name].findings}
    graphs, depth, layout = findings["K26-CUDA-GRAPH-OFF"], findings["K26-PP-ASYNC-DEPTH"], findings["K26-LAYOUT"]
    assert (graphs["severity"], depth["severity"], layout["severity"]) == ("warning", "info", "info")
    assert graphs["fix"] == "use attention-backend triton, which keeps graphs"
    assert graphs["evidence"]["attention-backend"] == "torch_native"
    assert depth["evidence"] == {"pp-size": 8, "pp-async-batch-depth": 0, "micro-batch slots": 8}
    assert "the depth changes nothing" in depth["message"] and "1/8" not in depth["message"]
    assert layout["message"] == "tp-size 1, pp-size 8: set in the inventory"


def test_preflight_findings_in_the_cli_summary_and_json(bare, tmp_path):
    box, inventory = bare
    seed = tmp_path / "seed.yml"
    # a variable of a role preflight does not run (sglang_monitoring) is known too: the roles' specs are all read
    seed.write_text(yaml.safe_dump(dict(SEED, sglang_servce_port=31000, sglang_monitoring_package="prometheus")))
    rc, out, dummy = cli("preflight", "-i", inventory, "-e", "@%s" % seed, "-q")
    assert rc == 0, out
    lines = [line.strip() for line in out.splitlines() if line.startswith("    ")]
    assert lines[0].startswith("WARNING K26-CUDA-GRAPH-OFF: CUDA graphs will be off for decode")
    assert lines[1].endswith("Fix: did you mean sglang_service_port?"), lines
    assert any(line.startswith("INFO    K26-PP-ASYNC-DEPTH: pp-size 8 with pp-async-batch-depth 0: SGLang keeps "
                               "pp-size + depth = 8 micro-batch slots") for line in lines), lines
    rc, out, dummy = cli("preflight", "-i", inventory, "-e", "@%s" % seed, "--json")
    host = json.loads(out)["hosts"][box.name]
    assert [f["id"] for f in host["findings"] if f["severity"] == "warning"] == [
        "K26-CUDA-GRAPH-OFF", "K26-UNKNOWN-VARIABLE"]


def test_strict_deploy_fails_before_any_change(bare, tmp_path):
    box, inventory = bare
    seed = tmp_path / "seed.yml"
    seed.write_text(yaml.safe_dump(SEED))
    before = box.snapshot()
    rc, out, dummy = cli("deploy", "-i", inventory, "-e", "@%s" % seed, "--strict", "--json")
    result = json.loads(out)
    assert rc == 2 and result["exit_code"] == 2
    host = result["hosts"][box.name]
    assert host["state"] == "bad_input" and host["changed"] == 0
    severities = {f["id"]: f["severity"] for f in host["findings"]}
    assert (severities["K26-CUDA-GRAPH-OFF"], severities["K26-PP-ASYNC-DEPTH"]) == ("error", "info")
    assert snapshot_diff(before, box.snapshot()) == [] and box.exec("id sglang", check=False).returncode != 0


def test_clean_configuration_has_no_warning(bare):
    box, inventory = bare
    result = k26deploy.preflight(inventory=inventory)
    assert result.exit_code == 0, result.to_json()
    # On a host without GPU the GPU rules can only say that they were not checked.
    findings = {f["id"]: f for f in result.hosts[box.name].findings}
    assert {f["severity"] for f in findings.values()} <= {"info"}
    # no topology facts in the container: TP over the 8 GPUs, with the measurements that favour it
    layout = findings["K26-LAYOUT"]
    assert layout["message"].startswith("tp-size 8, pp-size 1: interconnect unknown")
    assert any("voipmonitor/rtx6kpro models/kimi-k26.md" in line for line in layout["evidence"]["layout.evidence"])
    assert "K26-PP-ASYNC-DEPTH" not in findings
