"""Real ansible-runner runs (no mocks) of the tiny playbooks in tests/fixtures/playbooks.

Everything runs against ``localhost`` with the local connection (and one ssh attempt at
127.0.0.1:1 for the unreachable case), so no container is needed. Each run takes 1-3 s.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import k26deploy
from k26deploy.results import EXIT_BAD_INPUT, EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, EXIT_UNREACHABLE
from k26deploy.runner import PROGRESS_FILE_NAME, PlaybookRun, check_inventory, run_processes

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "playbooks"


def run_fixture(playbook, tmp_path, **options):
    events = []
    run = PlaybookRun(playbook, project_dir=FIXTURES, private_data_dir=tmp_path / "pdd",
                      event_callback=events.append, **options)
    result = run.execute()
    return run, result, events


def job_event_files(artifacts_dir):
    return [p for p in glob.glob(os.path.join(artifacts_dir, "job_events", "*.json")) if "-partial" not in p]


def test_no_event_is_lost_and_stats_are_populated(tmp_path):
    run, result, events = run_fixture("ok.yml", tmp_path)
    files = job_event_files(result.artifacts_dir)
    # every event reached the callback AND was written, because the handler returned True
    assert len(events) == len(files) == result.events_seen > 5
    assert {e["uuid"] for e in events} == {json.load(open(f))["uuid"] for f in files}
    assert run.runner.stats is not None
    assert run.runner.stats["ok"]["localhost"] == 3
    assert run.runner.stats["changed"]["localhost"] == 1
    assert result.status == "successful" and result.rc == 0
    assert result.stats["localhost"].changed == 1
    assert result.artifacts_dir.startswith(str(tmp_path / "pdd" / "artifacts"))
    assert os.path.isfile(os.path.join(result.artifacts_dir, "stdout"))
    assert result.exit_code == EXIT_OK


def test_set_stats_summary_arrives_in_the_result(tmp_path):
    dummy, result, dummy = run_fixture("ok.yml", tmp_path, extra_vars={"fixture_model": "moonshotai/Kimi-K2.6"})
    host = result.hosts["localhost"]
    assert result.set_stats["k26_hosts"]["localhost"]["endpoint"] == "http://127.0.0.1:30000"
    assert host.ready is True and host.model_id == "moonshotai/Kimi-K2.6"
    assert host.time_to_ready == 12.5 and host.restarted is True and host.simulator is True
    assert host.state == "ready"


def test_failing_task_gives_failed_counts_and_fields(tmp_path):
    dummy, result, dummy = run_fixture("fail.yml", tmp_path)
    host = result.hosts["localhost"]
    assert result.stats["localhost"].failed == 1 and result.stats["localhost"].ok == 1
    assert host.failed and host.failed_task == "Break on purpose"
    assert host.failed_action == "ansible.builtin.fail"
    assert host.msg == "the fixture failed on purpose"
    assert host.reason == "failed"
    assert result.status == "failed" and result.exit_code == EXIT_FAILED


def test_validate_argument_spec_failure_is_bad_input_and_extra_vars_stay_off_argv(tmp_path):
    secret = "not-a-port-5f3a9c"
    dummy, result, dummy = run_fixture("validate.yml", tmp_path, extra_vars={"fixture_port": secret})
    host = result.hosts["localhost"]
    assert host.bad_input and host.failed_action == "ansible.builtin.validate_argument_spec"
    assert "fixture_port" in host.msg
    assert result.exit_code == EXIT_BAD_INPUT
    # extra vars went through a 0600 file that is gone now, never through the command line
    command = json.load(open(os.path.join(result.artifacts_dir, "command")))["command"]
    assert secret not in " ".join(command)
    assert not glob.glob(str(tmp_path / "pdd" / "env" / "extravars-*"))


def test_readiness_result_and_progress_records(tmp_path):
    progress = []
    dummy, result, events = run_fixture("readiness.yml", tmp_path, extra_vars={"fixture_outcome": "timeout"},
                                        progress_callback=progress.append)
    host = result.hosts["localhost"]
    assert host.reason == "timeout" and host.ready is False and host.failed
    assert host.journal_excerpt.startswith("torch.OutOfMemoryError")
    assert result.exit_code == EXIT_TIMEOUT
    assert [r["phase"] for r in progress] == ["loading", "loading", "http_up"]
    assert os.path.isfile(os.path.join(result.artifacts_dir, PROGRESS_FILE_NAME))
    failed = [e for e in events if e["event"] == "runner_on_failed"]
    assert failed and failed[0]["event_data"]["task_action"] == "sglang_ready"


def test_readiness_ready(tmp_path):
    dummy, result, dummy = run_fixture("readiness.yml", tmp_path)
    host = result.hosts["localhost"]
    assert host.ready is True and host.model_id == "kimi-k2.6" and host.timeline["ready"] is not None
    assert result.exit_code == EXIT_OK


def test_unreachable_host(tmp_path):
    dummy, result, dummy = run_fixture("unreachable.yml", tmp_path)
    assert result.hosts["ghost"].unreachable
    assert result.exit_code == EXIT_UNREACHABLE


def test_cancel_stops_a_long_task(tmp_path):
    cancel = threading.Event()

    def on_event(event):
        if event["event"] == "runner_on_start" and event["event_data"].get("task") == "Sleep a long time":
            threading.Timer(0.5, cancel.set).start()

    run = PlaybookRun("sleep.yml", project_dir=FIXTURES, private_data_dir=tmp_path / "pdd",
                      event_callback=on_event, cancel_event=cancel)
    result = run.execute()
    assert "Sleep a long time" not in finished_tasks(result.artifacts_dir)  # stopped, not waited for
    assert result.cancelled and result.status == "canceled"
    assert result.exit_code == EXIT_CANCELLED
    host = result.hosts["localhost"]
    assert host.state == "cancelled" and host.last_task == "Sleep a long time"
    assert run_processes(run.ident) == []  # no worker or `sleep 60` left behind


def finished_tasks(artifacts_dir):
    """Names of the tasks that ended (ok, failed or skipped) in a run, from its job events on disk."""
    names = []
    for path in glob.glob(os.path.join(str(artifacts_dir), "job_events", "*.json")):
        with open(path) as handle:
            event = json.load(handle)
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            names.append(event["event_data"].get("task"))
    return names


def test_missing_playbook_is_bad_input(tmp_path):
    with pytest.raises(k26deploy.BadInputError):
        PlaybookRun("does-not-exist.yml", project_dir=FIXTURES)
    with pytest.raises(k26deploy.BadInputError):
        PlaybookRun("ok.yml", project_dir=FIXTURES, inventory=str(tmp_path / "no-inventory.yml"))


# -- the CLI, as a user runs it ------------------------------------------------------------------
def cli(*args, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "k26deploy.cli", *args], check=False, capture_output=True, text=True,
                          env=env, cwd=str(ROOT), timeout=60, **kwargs)


def test_cli_json_prints_only_the_result(tmp_path):
    proc = cli("status", "--json", "--project-dir", str(FIXTURES), "--playbook", "ok.yml",
               "--artifacts-dir", str(tmp_path), "-e", "fixture_model=k2")
    assert proc.returncode == EXIT_OK, proc.stderr
    data = json.loads(proc.stdout)  # nothing but JSON on stdout
    assert data["hosts"]["localhost"]["model_id"] == "k2"
    assert data["exit_code"] == 0 and data["command"] == "status"
    assert data["artifacts_dir"].startswith(str(tmp_path))


def test_cli_bad_extra_vars_exit_2_with_json(tmp_path):
    proc = cli("deploy", "--json", "--project-dir", str(FIXTURES), "-e", "novalue")
    assert proc.returncode == EXIT_BAD_INPUT
    assert json.loads(proc.stdout)["bad_input"] is True
    assert "key=value" in proc.stderr


def interrupted(argv, artifacts, **popen):
    """Run argv, send SIGINT once sleep.yml's long task has started; (rc, stdout, stderr). Never leaks the process."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
                "Sleep a long time" in open(p).read() and "runner_on_start" in open(p).read()
                for p in glob.glob(str(artifacts / "artifacts" / "*" / "job_events" / "*.json"))):
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        return proc.returncode, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_cli_ctrl_c_cancels_and_reports_host_states(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    rc, out, err = interrupted([sys.executable, "-m", "k26deploy.cli", "deploy", "--project-dir", str(FIXTURES),
                                "--playbook", "sleep.yml", "--artifacts-dir", str(tmp_path)],
                               tmp_path, env=env, cwd=str(ROOT))
    assert rc == EXIT_CANCELLED, err
    assert "Cancelled. Last known state of each host:" in err
    assert "localhost: cancelled, in task 'Sleep a long time'" in err
    assert "canceled (exit 130)" in out


def test_api_keyboard_interrupt_cancels_the_run(tmp_path):
    # A Python caller without its own SIGINT handler: the first KeyboardInterrupt cancels.
    script = (
        "import signal, sys, time, k26deploy\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"r = k26deploy.run('x', playbook='sleep.yml', project_dir={str(FIXTURES)!r}, private_data_dir={str(tmp_path)!r})\n"
        "print(r.status, r.exit_code, r.hosts['localhost'].state, r.artifacts_dir)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    dummy, out, err = interrupted([sys.executable, "-c", script], tmp_path, env=env)
    status, code, state, artifacts_dir = out.split()
    assert (status, int(code), state) == ("canceled", EXIT_CANCELLED, "cancelled"), err
    assert "Sleep a long time" not in finished_tasks(artifacts_dir)


INVENTORY_SECRET = "k26-inventory-secret-4242abcd"


def test_cli_a_malformed_inventory_is_bad_input_and_its_lines_are_not_printed(tmp_path):
    bad = tmp_path / "hosts.yml"
    bad.write_text("all:\n  hosts:\n    gpu-01:\n      sglang_service_api_key: %s\n     broken: [indent\n"
                   % INVENTORY_SECRET)
    proc = cli("preflight", "-v", "-i", str(bad), "--artifacts-dir", str(tmp_path / "pdd"))
    assert proc.returncode == EXIT_BAD_INPUT, proc.stdout + proc.stderr
    assert INVENTORY_SECRET not in proc.stdout + proc.stderr
    assert "inventory %s: not valid YAML/JSON at line 5" % bad in proc.stderr, proc.stderr
    assert not list(tmp_path.rglob("stdout"))  # nothing ran, so no artifact holds the line either


@pytest.mark.parametrize("name", ["hosts", "hosts.ini"])
def test_cli_a_malformed_ini_inventory_is_bad_input_with_its_line_and_no_value(tmp_path, name):
    """Issue 50: an INI inventory is checked like YAML and JSON: exit 2, the file and the line, never the value
    (Ansible's own message quotes the line; k26deploy -v used to echo it with the secret in it)."""
    bad = tmp_path / name
    bad.write_text("[sglang_servers]\ngpu-01 ansible_host=127.0.0.1 ansible_port=9\n\n[sglang_servers:vars]\n"
                   "sglang_service_api_key %s\n" % INVENTORY_SECRET)
    proc = cli("preflight", "-v", "-i", str(bad), "--artifacts-dir", str(tmp_path / "pdd"))
    assert proc.returncode == EXIT_BAD_INPUT, proc.stdout + proc.stderr
    assert INVENTORY_SECRET not in proc.stdout + proc.stderr
    assert "inventory %s: not a valid INI inventory at line 5" % bad in proc.stderr, proc.stderr
    good = tmp_path / "good"
    good.mkdir()
    (good / "hosts").write_text("[sglang_servers]\ngpu-01 ansible_host=127.0.0.1 ansible_port=9 sglang_service_gpu_count=8\n"
                                "[sglang_servers:vars]\nsglang_service_api_key=%s\n" % INVENTORY_SECRET)
    check_inventory(good)  # a good one passes, in a directory as in a file
    check_inventory(good / "hosts")
    yaml_named_hosts = tmp_path / "yaml" / "hosts"  # Ansible's yaml plugin reads a file without an extension too
    yaml_named_hosts.parent.mkdir()
    yaml_named_hosts.write_text("all:\n  hosts:\n    gpu-01: {ansible_host: 127.0.0.1}\n")
    check_inventory(yaml_named_hosts.parent)


def test_cli_a_run_that_reached_no_host_is_not_a_success(tmp_path):
    empty = tmp_path / "hosts.yml"
    empty.write_text("all:\n  hosts: {}\n")
    proc = cli("preflight", "-i", str(empty), "--artifacts-dir", str(tmp_path / "pdd"))
    assert proc.returncode == EXIT_BAD_INPUT, proc.stdout + proc.stderr
    assert "no host was reached" in proc.stdout and "successful" not in proc.stdout
