"""The exit codes 3, 4 and 130 and the live view of a deploy, each shown by a real run against real systemd in a
container (the helpers: promise_host.py; the fixtures: conftest.py)."""

import json
import signal
import subprocess

import pytest
import yaml

import k26deploy
from harness import ROOT, VENV_BIN, task_started
from promise_host import WAIT_TASK, cli, keys_in_artifacts

pytestmark = pytest.mark.integration

# The simulator's loading goes on until this file exists: a load exactly as long as a test needs, however slow
# the machine is (the service's home is readable by the service).
HOLD_FILE = "/var/lib/sglang/k26-test-release-load"


def held_load(box, load_seconds):
    """sglang_service_environment for a start whose loading waits for release_load(box)."""
    box.exec("rm -f %s" % HOLD_FILE)
    return {"SGLANG_SIM_LOAD_SECONDS": load_seconds, "SGLANG_SIM_LOAD_HOLD_FILE": HOLD_FILE}


def release_load(box):
    box.exec("touch %s" % HOLD_FILE)


# ---------------------------------------------------------------- exit codes and Ctrl-C

@pytest.mark.parametrize("failure, reason", [("hang_loading", "timeout"), ("warmup_fail", "warmup_failed")])
def test_exit_code_3_when_the_wait_gives_up(changes, failure, reason):
    box, inventory, runs = changes
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


def test_ctrl_c_during_a_readiness_wait(changes):
    box, inventory, runs = changes
    slow = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 120}}
    events = runs / "ctrl-c"
    proc = subprocess.Popen([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(slow),
                             "--artifacts-dir", str(events)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        task_started(events, WAIT_TASK, timeout=300)
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


# ---------------------------------------------------------------- progress

def test_live_progress_in_the_cli_and_the_api(changes):
    box, inventory, runs = changes
    held = {"sglang_service_environment": held_load(box, 1), "sglang_service_ready_progress_interval": 1}
    with open(runs / "progress.out", "w") as out:
        proc = subprocess.Popen([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(held),
                                 "--artifacts-dir", str(runs / "progress")], cwd=ROOT, stdout=out,
                                stderr=subprocess.PIPE, text=True)
        try:
            err, lines = [], []
            for line in proc.stderr:  # the live view, as it is printed
                err.append(line)
                if line.startswith("  [%s] loading " % box.name):
                    lines.append(line)
                    if len(lines) == 2:
                        release_load(box)
            rc = proc.wait(timeout=300)
        finally:
            release_load(box)
            if proc.poll() is None:
                proc.kill()
    assert rc == 0, "".join(err)[-3000:]
    assert len(lines) >= 2 and any("Loading safetensors checkpoint shards" in line for line in lines), "".join(err)
    records = []

    def progress(record):
        records.append(record)
        if record.get("host") == box.name and record.get("phase") == "loading":
            release_load(box)

    slower = dict(held, sglang_service_environment=held_load(box, 2))
    try:
        result = k26deploy.deploy(inventory=inventory, extra_vars=slower, progress_callback=progress,
                                  private_data_dir=runs / "progress-api")
    finally:
        release_load(box)
    assert result.exit_code == 0, result.to_json()
    phases = [r["phase"] for r in records if r.get("host") == box.name]
    assert "loading" in phases, records


def test_the_key_is_in_no_artifact_of_any_run(served):
    assert keys_in_artifacts(served) == []
