"""What the README promises, each shown by a real run against real systemd in a container: check mode, rollback
in its three outcomes, the exit codes 3, 4 and 130, live progress, no key in any artifact, and several hosts in
one run with --limit."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import k26deploy
from ansible_collections.k26.deploy.plugins.module_utils import sglang_args
from harness import ROOT, VENV_BIN, demo_inventory, snapshot_diff, systemd_container
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

pytestmark = pytest.mark.integration

MANAGED_FILES = ("/etc/systemd/system/sglang.service", "/etc/sglang/sglang.yaml", "/etc/sglang/sglang.env")
CRASH = {"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_FAILURE": "crash_loading"}
WAIT_TASK = "Wait until SGLang is ready (loaded, serving the model, warmed up)"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A container deployed once with the demo's settings, and the artifact dirs of every run in this module."""
    with systemd_container("k26-it-promise-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        runs = tmp_path_factory.mktemp("runs")
        first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "first")
        assert first.exit_code == 0, first.to_json()
        yield box, inventory, runs


def key_of(inventory):
    return (Path(inventory) / ".secrets" / "api_key").read_text().strip()


def managed_files(box):
    return {path: box.exec("base64 -w0 %s" % path).stdout for path in MANAGED_FILES}


def invocation(box):
    return box.exec("systemctl show sglang.service -p InvocationID --value").stdout.strip()


def cli(runs, name, *args, **popen):
    """k26deploy as a user runs it; (rc, stdout, stderr). Its artifacts go under runs/name."""
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), *args, "--artifacts-dir", str(runs / name)], cwd=ROOT,
                          check=False, capture_output=True, text=True, timeout=900, **popen)
    return proc.returncode, proc.stdout, proc.stderr


def parser_runner(argv):
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def redeploy(served_fixture):
    box, inventory, runs = served_fixture
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / ("redeploy-%d" % time.monotonic_ns()))
    assert result.exit_code == 0 and result.hosts[box.name].ready, result.to_json()


# ---------------------------------------------------------------- check mode

def test_deploy_check_mode_reports_what_would_change_and_changes_nothing(served):
    box, inventory, runs = served
    before, running = box.snapshot(), invocation(box)
    rc, out, err = cli(runs, "check", "deploy", "-i", inventory, "--check", "--json", "-e",
                       json.dumps({"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 9}}))
    result = json.loads(out)
    assert rc == 0, err[-2000:]
    assert result["check"] is True and result["hosts"][box.name]["changed"] > 0
    assert snapshot_diff(before, box.snapshot()) == [] and invocation(box) == running


def test_preflight_check_mode_changes_nothing(served):
    box, inventory, runs = served
    before = box.snapshot()
    rc, out, err = cli(runs, "preflight-check", "preflight", "-i", inventory, "--check", "--json")
    assert rc == 0, err[-2000:]
    assert json.loads(out)["hosts"][box.name]["changed"] == 0
    assert snapshot_diff(before, box.snapshot()) == []


# ---------------------------------------------------------------- rollback

def test_rollback_restores_the_exact_previous_files(served):
    box, inventory, runs = served
    good = managed_files(box)
    broken = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "broken",
                              extra_vars={"sglang_service_environment": CRASH, "sglang_service_rollback": False})
    assert broken.exit_code == 1 and broken.hosts[box.name].rolled_back is False, broken.to_json()
    assert managed_files(box) != good
    rolled = k26deploy.rollback(inventory=inventory, private_data_dir=runs / "rollback")
    host = rolled.hosts[box.name]
    assert rolled.exit_code == 0 and host.ready and host.rolled_back, rolled.to_json()
    assert managed_files(box) == good


def test_rollback_with_nothing_to_roll_back_to(served):
    box, inventory, runs = served
    again = k26deploy.rollback(inventory=inventory, private_data_dir=runs / "rollback-again")
    host = again.hosts[box.name]
    assert again.exit_code == 0 and host.ready and host.rolled_back is False, again.to_json()
    assert host.msg == "not attempted: the live configuration is already the last one that reached ready"


def test_a_restored_configuration_that_fails_too_is_reported(served):
    box, inventory, runs = served
    # The last good configuration no longer works either (here: its environment now makes it crash).
    box.exec("echo SGLANG_SIM_FAILURE=crash_loading >> /var/lib/sglang/rollback/env")
    try:
        result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "both-fail",
                                  extra_vars={"sglang_service_environment": CRASH})
        host = result.hosts[box.name]
        assert result.exit_code == 1 and host.rolled_back is False, result.to_json()
        assert host.summary["rollback_outcome"].startswith(
            "restored the previous configuration but it did not come up either")
    finally:
        box.exec("sed -i '/^SGLANG_SIM_FAILURE=crash_loading$/d' /var/lib/sglang/rollback/env")
        redeploy(served)


# ---------------------------------------------------------------- exit codes and Ctrl-C

@pytest.mark.parametrize("failure, reason", [("hang_loading", "timeout"), ("warmup_fail", "warmup_failed")])
def test_exit_code_3_when_the_wait_gives_up(served, failure, reason):
    box, inventory, runs = served
    change = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_FAILURE": failure},
              "sglang_service_ready_timeout": 15}
    rc, out, err = cli(runs, "exit3-" + failure, "deploy", "-i", inventory, "--json", "-e", json.dumps(change))
    host = json.loads(out)["hosts"][box.name]
    assert rc == 3 and host["reason"] == reason and host["state"] == "timeout", err[-2000:]
    assert host["rolled_back"] is True


def test_exit_code_4_when_a_host_is_unreachable(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"sglang_servers": {"hosts": {"k26-it-no-such-container": {
        "ansible_connection": "containers.podman.podman", "sglang_service_model_path": "/models/Kimi-K2.6"}}}}))
    rc, out, err = cli(tmp_path, "unreachable", "status", "-i", str(inventory), "--json")
    assert rc == 4, err[-2000:]
    assert json.loads(out)["hosts"]["k26-it-no-such-container"]["unreachable"] is True


def test_ctrl_c_during_a_readiness_wait(served):
    box, inventory, runs = served
    slow = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 120}}
    events = runs / "ctrl-c"
    proc = subprocess.Popen([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(slow),
                             "--artifacts-dir", str(events)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        waiting_started(events)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert "Cancelled. Last known state of each host:" in err
    assert "%s: cancelled, in task" % box.name in err and WAIT_TASK in err
    assert "canceled (exit 130)" in out
    redeploy(served)


def waiting_started(artifacts):
    for dummy in range(600):
        for path in artifacts.glob("artifacts/*/job_events/*.json"):
            try:
                text = path.read_text()
            except FileNotFoundError:  # ansible-runner renamed a -partial.json meanwhile
                continue
            if "runner_on_start" in text and WAIT_TASK in text:
                return
        time.sleep(0.5)
    raise AssertionError("the readiness wait never started")


# ---------------------------------------------------------------- progress

def test_live_progress_in_the_cli_and_the_api(served):
    box, inventory, runs = served
    slow = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 8}, "sglang_service_ready_progress_interval": 2}
    rc, dummy, err = cli(runs, "progress", "deploy", "-i", inventory, "-e", json.dumps(slow))
    assert rc == 0, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("  [%s] loading " % box.name)]
    assert len(lines) >= 2 and any("Loading safetensors checkpoint shards" in line for line in lines), err[-3000:]
    records = []
    slower = dict(slow, sglang_service_environment={"SGLANG_SIM_LOAD_SECONDS": 7})
    result = k26deploy.deploy(inventory=inventory, extra_vars=slower, progress_callback=records.append,
                              private_data_dir=runs / "progress-api")
    assert result.exit_code == 0, result.to_json()
    phases = [r["phase"] for r in records if r.get("host") == box.name]
    assert "loading" in phases, records
    redeploy(served)


# ---------------------------------------------------------------- secrets

def test_logs_hide_keys_that_sglang_printed_before(served):
    # An earlier SGLang start printed its arguments in clear (as 0.5.23 does without the launcher): a drop-in's
    # ExecStartPre writes such lines into the current run's journal, where `k26deploy logs` reads.
    box, inventory, runs = served
    old_key = "k26-earlier-key-3c1d9e"
    dropin = "/etc/systemd/system/sglang.service.d/k26-test-earlier-log.conf"
    box.put(dropin, "[Service]\nExecStartPre=/bin/echo \"server_args={'api_key': '%s', 'port': 30000}\"\n"
                    "ExecStartPre=/bin/echo launch_server --api-key %s\n" % (old_key, old_key))
    try:
        box.exec("systemctl daemon-reload && systemctl restart sglang.service")
    finally:
        box.exec("rm -f %s && systemctl daemon-reload" % dropin)
    redeploy(served)  # waits until it serves again, changing nothing: the journal stays this run's
    rc, out, err = cli(runs, "logs", "logs", "-i", inventory, "--json")
    assert rc == 0, err
    excerpt = json.loads(out)["hosts"][box.name]["journal_excerpt"]
    assert "server_args={'api_key': '********', 'port': 30000}" in excerpt and "launch_server --api-key '********'" in excerpt
    assert old_key not in out and old_key not in err


@requires_real_sglang
def test_the_rendered_config_passes_sglangs_own_parser(served, tmp_path):
    # The file a real converge wrote, not a copy of it, read by SGLang 0.5.23's parser and config merger.
    box = served[0]
    content = box.exec("cat /etc/sglang/sglang.yaml").stdout
    result, dummy = sglang_args.run_check(parser_runner, str(SGLANG_PYTHON), content=content, tmpdir=str(tmp_path))
    assert result["ok"] is True, result.get("error")
    assert result["parsed"]["pp_size"] == 8 and result["parsed"]["served_model_name"] == "kimi-k2.6"


def test_the_key_is_in_no_artifact_of_any_run(served):
    dummy, inventory, runs = served
    key = key_of(inventory).encode()
    files = [path for path in runs.rglob("*") if path.is_file()]
    assert len(files) > 100
    assert [str(path) for path in files if key in path.read_bytes()] == []


# ---------------------------------------------------------------- several hosts

def test_two_hosts_in_one_run_and_limit(tmp_path):
    names = ["k26-it-pair-a-%d" % os.getpid(), "k26-it-pair-b-%d" % os.getpid()]
    with systemd_container(names[0]) as first, systemd_container(names[1]) as second:
        inventory = demo_inventory(first, tmp_path, second)
        both = k26deploy.deploy(inventory=inventory)
        assert both.exit_code == 0, both.to_json()
        assert sorted(both.hosts) == sorted(names) and all(h.ready for h in both.hosts.values())
        untouched = invocation(second)
        limited = k26deploy.deploy(inventory=inventory, limit=names[0],
                                   extra_vars={"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 1}})
        assert limited.exit_code == 0 and list(limited.hosts) == [names[0]], limited.to_json()
        assert limited.hosts[names[0]].restarted is True
        assert invocation(second) == untouched
