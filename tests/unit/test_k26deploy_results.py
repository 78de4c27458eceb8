"""Pure tests of k26deploy's result building, exit codes and extra-vars parsing.

The events below have the shape ansible-runner 2.4 writes to ``artifacts/<ident>/job_events``
(copied from real runs, trimmed to the keys that matter): ``event``, ``counter``, ``uuid``,
``stdout`` and ``event_data`` with ``host``, ``task``, ``task_action`` and ``res``.
"""

from __future__ import annotations

import io
import itertools
import json

import pytest

from k26deploy.cli import parse_extra_vars, print_summary, serial_is_valid
from k26deploy.progress import LiveView, ProgressTail, format_elapsed, format_host_state, format_progress
from k26deploy.results import (
    EXIT_BAD_INPUT,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    HostResult,
    ResultBuilder,
    RunResult,
    build_run_result,
)
from k26deploy.runner import BadInputError

_counter = itertools.count(1)
PLAYBOOK = "deploy_k26.yml"


def event(name, host=None, task=None, action=None, res=None, stdout="", **extra):
    data = {"playbook": PLAYBOOK, "playbook_uuid": "1c434e52", "play": "Deploy Kimi K2.6", "play_pattern": "all"}
    if task is not None:
        data.update(task=task, name=task, task_action=action, resolved_action=action, task_path=f"/p/{PLAYBOOK}:6")
    if host is not None:
        data.update(host=host, remote_addr=host)
    if res is not None:
        data["res"] = res
    data.update(extra)
    n = next(_counter)
    return {
        "uuid": f"uuid-{n}",
        "counter": n,
        "stdout": stdout,
        "start_line": 0,
        "end_line": 0,
        "runner_ident": "ident",
        "event": name,
        "pid": 1234,
        "created": "2026-11-29T10:07:07.259043+00:00",
        "event_data": data,
    }


def stats(ok=None, changed=None, failures=None, dark=None, rescued=None, ignored=None, artifact_data=None):
    hosts = set()
    for part in (ok, changed, failures, dark, rescued, ignored):
        hosts |= set(part or {})
    return event(
        "playbook_on_stats",
        changed=changed or {},
        dark=dark or {},
        failures=failures or {},
        ignored=ignored or {},
        ok=ok or {},
        processed={h: 1 for h in hosts},
        rescued=rescued or {},
        skipped={},
        artifact_data=artifact_data or {},
    )


READY_RES = {
    "changed": False,
    "ready": True,
    "elapsed": 93.4,
    "reason": "ready",
    "model_ids": ["kimi-k2.6"],
    "restarts": 0,
    "unit_state": {"ActiveState": "active", "SubState": "running", "NRestarts": 0},
    "journal_excerpt": "",
    "last_log_line": "The server is fired up and ready to roll!",
    "timeline": {"loading": 0.0, "http_up": 80.1, "warm": 92.9, "ready": 93.4},
    "phase": "ready",
    "msg": "sglang ready after 93s",
    "invocation": {"module_args": {"unit": "sglang", "url": "http://10.0.0.5:30000", "api_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}},
    "_ansible_no_log": False,
}


def failed_ready_res(reason, excerpt=None):
    return {
        "changed": False,
        "failed": True,
        "ready": False,
        "elapsed": 41.0,
        "reason": reason,
        "model_ids": [],
        "restarts": 2,
        "unit_state": {"ActiveState": "activating", "SubState": "auto-restart", "NRestarts": 2, "ExecMainStatus": 1},
        "journal_excerpt": excerpt
        if excerpt is not None
        else ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "Loading safetensors 45%"],
        "last_log_line": "Loading safetensors 45%",
        "timeline": {"loading": 0.0, "http_up": None, "warm": None, "ready": None},
        "phase": "loading",
        "msg": f"sglang not ready: {reason}",
    }


def deploy_events_ready(host="gpu-01"):
    return [
        event("playbook_on_start"),
        event("playbook_on_play_start"),
        event("playbook_on_task_start", task="Render the SGLang config", action="ansible.builtin.template"),
        event("runner_on_start", host, "Render the SGLang config", "ansible.builtin.template"),
        event("runner_on_ok", host, "Render the SGLang config", "ansible.builtin.template", {"changed": True}),
        event("playbook_on_task_start", task="Wait for SGLang", action="sglang_ready"),
        event("runner_on_start", host, "Wait for SGLang", "sglang_ready"),
        event("runner_on_ok", host, "Wait for SGLang", "sglang_ready", dict(READY_RES)),
    ]


# -- building results ----------------------------------------------------------------------------
def test_ready_run_reads_readiness_result_from_events():
    events = deploy_events_ready() + [stats(ok={"gpu-01": 2}, changed={"gpu-01": 1})]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0, artifacts_dir="/a")
    host = result.hosts["gpu-01"]
    assert host.ready is True
    assert host.reason == "ready"
    assert host.model_id == "kimi-k2.6"
    assert host.time_to_ready == 93.4
    assert host.endpoint == "http://10.0.0.5:30000"  # from the module's invocation
    assert host.timeline["ready"] == 93.4
    assert host.changed == 1 and not host.failed
    assert "invocation" not in host.readiness and "_ansible_no_log" not in host.readiness
    assert result.stats["gpu-01"].ok == 2
    assert result.events_seen == len(events)
    assert result.exit_code == EXIT_OK and result.ok and result.ready


def test_set_stats_summary_wins_over_events():
    summary = {
        "gpu-01": {
            "ready": True,
            "endpoint": "https://k26.example.internal:30000",
            "model_id": "moonshotai/Kimi-K2.6",
            "time_to_ready": 120.0,
            "reason": "ready",
            "restarted": False,
            "rolled_back": False,
            "simulator": True,
            "msg": "ready",
        }
    }
    events = deploy_events_ready() + [stats(ok={"gpu-01": 2}, artifact_data={"k26_hosts": summary})]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0)
    host = result.hosts["gpu-01"]
    assert host.endpoint == "https://k26.example.internal:30000"
    assert host.model_id == "moonshotai/Kimi-K2.6"
    assert host.time_to_ready == 120.0
    assert host.restarted is False and host.simulator is True
    assert host.summary == summary["gpu-01"]
    assert result.set_stats == {"k26_hosts": summary}


def test_summary_strings_from_templating_are_coerced():
    summary = {"h": {"ready": "True", "restarted": "false", "time_to_ready": "93.4", "simulator": "False"}}
    result = build_run_result([stats(ok={"h": 1}, artifact_data={"k26_hosts": summary})],
                              playbook=PLAYBOOK, status="successful", rc=0)
    host = result.hosts["h"]
    assert (host.ready, host.restarted, host.time_to_ready, host.simulator) == (True, False, 93.4, False)


def test_summary_only_host_is_listed():
    # status.yml may publish hosts without running sglang_ready at all
    summary = {"gpu-02": {"ready": False, "reason": "unit_inactive", "unit_state": "inactive"}}
    result = build_run_result([stats(ok={"gpu-02": 3}, artifact_data={"k26_hosts": summary})],
                              playbook="playbooks/status.yml", status="successful", rc=0)
    assert result.hosts["gpu-02"].ready is False
    assert result.hosts["gpu-02"].state == "not_ready"
    assert result.exit_code == EXIT_FAILED


@pytest.mark.parametrize("reason,code", [("timeout", EXIT_TIMEOUT), ("warmup_failed", EXIT_TIMEOUT),
                                         ("crash_loop", EXIT_FAILED), ("unit_failed", EXIT_FAILED),
                                         ("auth_failed", EXIT_FAILED), ("model_mismatch", EXIT_FAILED)])
def test_failed_readiness_reason_and_exit_code(reason, code):
    events = [
        event("runner_on_start", "gpu-01", "Wait for SGLang", "sglang_ready"),
        event("runner_on_failed", "gpu-01", "Wait for SGLang", "sglang_ready", failed_ready_res(reason), ignore_errors=None),
        stats(failures={"gpu-01": 1}),
    ]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2)
    host = result.hosts["gpu-01"]
    assert host.failed and host.ready is False
    assert host.reason == reason
    assert host.journal_excerpt.startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert host.failed_task == "Wait for SGLang" and host.failed_action == "sglang_ready"
    assert host.unit_state["NRestarts"] == 2
    assert result.exit_code == code


def test_rollback_keeps_the_new_failure_excerpt_and_the_final_message():
    first = failed_ready_res("crash_loop", excerpt="RuntimeError: bad flag --tp-size 3")
    events = [
        event("runner_on_failed", "gpu-01", "Wait for SGLang", "sglang_ready", first, ignore_errors=None),
        event("runner_on_ok", "gpu-01", "Restore the last good config", "ansible.builtin.copy", {"changed": True}),
        event("runner_on_ok", "gpu-01", "Wait for SGLang after rollback", "sglang_ready", dict(READY_RES)),
        event("runner_on_failed", "gpu-01", "Fail after rollback", "ansible.builtin.fail",
              {"failed": True, "msg": "new config failed (crash_loop); rolled back, previous config ready"}),
        stats(ok={"gpu-01": 3}, changed={"gpu-01": 1}, failures={"gpu-01": 1}, rescued={"gpu-01": 1}),
    ]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2)
    host = result.hosts["gpu-01"]
    assert host.failed
    assert host.reason == "crash_loop"
    assert host.journal_excerpt == "RuntimeError: bad flag --tp-size 3"
    assert host.msg.startswith("new config failed")
    assert host.failed_task == "Fail after rollback"
    assert host.ready is True  # the previous configuration serves again
    assert result.exit_code == EXIT_FAILED


def test_rescued_failure_does_not_fail_the_host():
    events = [
        event("runner_on_failed", "gpu-01", "Probe", "ansible.builtin.uri", {"failed": True, "msg": "refused"}),
        event("runner_on_ok", "gpu-01", "Recover", "ansible.builtin.debug", {"changed": False}),
        stats(ok={"gpu-01": 1}, rescued={"gpu-01": 1}),
    ]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0)
    assert not result.hosts["gpu-01"].failed
    assert result.hosts["gpu-01"].failed_task is None
    assert result.stats["gpu-01"].rescued == 1
    assert result.exit_code == EXIT_OK


def test_a_looped_task_fails_with_its_failed_item_message():
    res = {"failed": True, "msg": "One or more items failed", "results": [
        {"failed": False, "msg": "", "item": "router-1"},
        {"failed": True, "msg": "the router at http://127.0.0.1:30080 did not list its workers", "item": "router-2"}]}
    events = [event("runner_on_failed", "gpu-01", "Leave the routers", "k26.deploy.sglang_router_worker", res),
              stats(failures={"gpu-01": 1})]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2)
    assert result.hosts["gpu-01"].msg == "the router at http://127.0.0.1:30080 did not list its workers"


def test_ignored_failure_is_not_a_failure_without_stats():
    events = [event("runner_on_failed", "gpu-01", "Optional", "ansible.builtin.command",
                    {"failed": True, "msg": "nope"}, ignore_errors=True)]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0)
    assert not result.hosts["gpu-01"].failed


@pytest.mark.parametrize("action", ["ansible.builtin.validate_argument_spec", "validate_argument_spec"])
def test_argument_validation_maps_to_exit_2(action):
    events = [
        event("runner_on_failed", "gpu-01", "Validating arguments against arg spec main", action,
              {"failed": True, "msg": "Validation of arguments failed:\nvalue of sglang_attention_backend must be one of: ..."}),
        stats(failures={"gpu-01": 1}),
    ]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2)
    host = result.hosts["gpu-01"]
    assert host.bad_input and host.reason == "bad_input" and host.state == "bad_input"
    assert "Validation of arguments failed" in host.msg
    assert result.exit_code == EXIT_BAD_INPUT


INPUT_CHECK_RES = {"failed": True, "evaluated_to": False, "assertion": "problems | length == 0",
                   "msg": "Bad SGLang configuration for k26-demo: port 70000 is out of range: choose 1-65535"}
#: where such a task may stand: the exit code must be the same from every one of them
TASK_PATHS = ["/p/roles/sglang_service/tasks/options.yml:39", "/p/roles/sglang_service/tasks/steps/options.yml:39",
              "/p/playbooks/preflight.yml:12", "roles/nvidia_cuda/tasks/validate_inputs.yml:3",
              "/p/roles/nvidia_cuda/tasks/verify.yml:20", "/p/roles/sglang_service/tasks/rollback.yml:5", None]


def _failed_run(action, res, path):
    events = [event("runner_on_failed", "k26-demo", "Refuse options that cannot work", action, res, task_path=path),
              stats(failures={"k26-demo": 1})]
    return build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2)


@pytest.mark.parametrize("path", TASK_PATHS)
@pytest.mark.parametrize("action,marked", [
    ("k26.deploy.input_check", True), ("ansible.builtin.assert", False), ("ansible.builtin.fail", False),
    ("ansible.builtin.set_fact", True), ("ansible.builtin.set_fact", False), ("k26.deploy.sglang_preflight", True),
    ("sglang_preflight", False), ("k26.deploy.sglang_args_check", True), ("ansible.builtin.command", False),
])
def test_only_the_failed_result_says_bad_input_not_the_task_file(action, marked, path):
    """The task's file (or a preflight-ish action without the mark) does not make a failure bad input: a result
    with k26_bad_input: true does, from any file; without it, the same failure is a plain failure from any file."""
    res = dict(INPUT_CHECK_RES, k26_bad_input=True) if marked else dict(INPUT_CHECK_RES)
    result = _failed_run(action, res, path)
    assert result.hosts["k26-demo"].bad_input is marked
    assert result.exit_code == (EXIT_BAD_INPUT if marked else EXIT_FAILED)


def test_exit_code_does_not_follow_a_renamed_task_file():
    """Moving an input check to another file (tasks/options.yml -> tasks/steps/options.yml) keeps exit code 2."""
    res = dict(INPUT_CHECK_RES, k26_bad_input=True)
    codes = {path: _failed_run("k26.deploy.input_check", res, path).exit_code for path in TASK_PATHS}
    assert set(codes.values()) == {EXIT_BAD_INPUT}, codes
    codes = {path: _failed_run("ansible.builtin.assert", dict(INPUT_CHECK_RES), path).exit_code for path in TASK_PATHS}
    assert set(codes.values()) == {EXIT_FAILED}, codes


def test_result_marker_is_bad_input():
    res = {"failed": True, "msg": "no GPUs", "k26_bad_input": True}
    events = [event("runner_on_failed", "h", "Check", "ansible.builtin.command", res), stats(failures={"h": 1})]
    assert build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2).exit_code == EXIT_BAD_INPUT


def test_unreachable_host():
    events = [
        event("runner_on_unreachable", "gpu-03", "Gathering Facts", "ansible.builtin.gather_facts",
              {"unreachable": True, "changed": False,
               "msg": "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.7 port 22: Connection refused"}),
        event("runner_on_failed", "gpu-01", "Wait for SGLang", "sglang_ready", failed_ready_res("timeout")),
        stats(dark={"gpu-03": 1}, failures={"gpu-01": 1}),
    ]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=4)
    assert result.hosts["gpu-03"].unreachable
    assert result.hosts["gpu-03"].reason == "unreachable"
    assert "Connection refused" in result.hosts["gpu-03"].msg
    assert result.exit_code == EXIT_UNREACHABLE  # unreachable wins over the other host's timeout
    assert result.stats["gpu-03"].unreachable == 1


def test_cancelled_run_reports_where_hosts_were():
    events = deploy_events_ready("gpu-01")[:-1]  # sglang_ready started, never answered
    progress = [{"host": "gpu-01", "unit": "sglang", "elapsed": 312.4, "phase": "loading",
                 "last_log_line": "Loading safetensors checkpoint shards:  45%", "restarts": 0, "time": 1.0}]
    result = build_run_result(events, playbook=PLAYBOOK, status="canceled", rc=254, cancelled=True, progress=progress)
    host = result.hosts["gpu-01"]
    assert host.interrupted and host.state == "cancelled"
    assert host.last_task == "Wait for SGLang" and host.last_status == "running"
    assert host.phase == "loading" and host.elapsed == 312.4
    assert "45%" in host.last_log_line
    assert result.stats == {}
    assert result.exit_code == EXIT_CANCELLED
    line = format_host_state(host)
    assert "in task 'Wait for SGLang'" in line and "phase loading" in line and "5m12s" in line


def test_progress_of_a_running_wait_beats_an_earlier_check():
    events = deploy_events_ready()  # a first wait answered "ready" ...
    events += [event("runner_on_start", "gpu-01", "Wait for SGLang after restart", "sglang_ready")]  # ... a second runs
    builder = ResultBuilder()
    for ev in events:
        builder.add_event(ev)
    builder.add_progress({"host": "gpu-01", "phase": "loading", "elapsed": 61, "last_log_line": "Loading 10%"})
    host = builder.snapshot()["gpu-01"]
    assert (host.phase, host.elapsed, host.last_log_line) == ("loading", 61, "Loading 10%")
    assert host.last_task == "Wait for SGLang after restart" and host.last_status == "running"


def test_parser_error_without_plays_is_bad_input():
    events = [event("verbose", stdout="[ERROR]: couldn't resolve module/action 'sglang_redy'.")]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=4)
    assert result.bad_input and result.exit_code == EXIT_BAD_INPUT
    assert "sglang_redy" in result.error


def test_run_level_failure_without_hosts_is_failed():
    result = build_run_result([], playbook=PLAYBOOK, status="failed", rc=1)
    assert result.exit_code == EXIT_FAILED and not result.hosts


def test_check_mode_not_ready_is_ok():
    res = dict(READY_RES, ready=False, reason="check_mode", msg="check mode: unit active, /v1/models not checked")
    events = [event("runner_on_ok", "gpu-01", "Wait for SGLang", "sglang_ready", res), stats(ok={"gpu-01": 1})]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0, check=True)
    assert result.exit_code == EXIT_OK


def test_status_observation_not_ready_is_a_failure():
    # playbooks/status.yml observes with check_mode: true on purpose; the run is not --check
    res = dict(READY_RES, ready=False, reason="check_mode", phase="loading", msg="not ready yet")
    summary = {"k26-demo": {"ready": False, "endpoint": "http://127.0.0.1:30000", "model_id": "kimi-k2.6",
                            "unit": "sglang", "reason": "check_mode", "phase": "loading",
                            "model_ids": [], "restarts": 0, "unit_state": {"ActiveState": "activating"},
                            "last_log_line": "Capturing CUDA graphs"}}
    events = [event("runner_on_ok", "k26-demo", "Observe the service once", "sglang_ready", res),
              stats(ok={"k26-demo": 3}, artifact_data={"k26_hosts": summary})]
    result = build_run_result(events, playbook="playbooks/status.yml", status="successful", rc=0)
    host = result.hosts["k26-demo"]
    assert host.state == "not_ready" and host.phase == "loading" and host.unit == "sglang"
    assert host.last_log_line == "Capturing CUDA graphs"
    assert host.time_to_ready is None  # an observation's elapsed is not a time to ready
    assert result.exit_code == EXIT_FAILED


def test_logs_summary_lines_become_one_excerpt():
    summary = {"k26-demo": {"unit": "sglang", "journal_excerpt": ["2026-11-29T10:00:00 a", "2026-11-29T10:00:01 b"]}}
    result = build_run_result([stats(ok={"k26-demo": 3}, artifact_data={"k26_hosts": summary})],
                              playbook="playbooks/logs.yml", status="successful", rc=0)
    assert result.hosts["k26-demo"].journal_excerpt == "2026-11-29T10:00:00 a\n2026-11-29T10:00:01 b"
    assert result.exit_code == EXIT_OK


def test_journal_excerpt_as_string_is_kept():
    res = failed_ready_res("unit_failed", excerpt="line one\nline two")
    result = build_run_result([event("runner_on_failed", "h", "Wait", "sglang_ready", res), stats(failures={"h": 1})],
                              playbook=PLAYBOOK, status="failed", rc=2)
    assert result.hosts["h"].journal_excerpt == "line one\nline two"


def test_to_json_round_trip():
    events = deploy_events_ready() + [stats(ok={"gpu-01": 2}, changed={"gpu-01": 1})]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0, artifacts_dir="/tmp/x")
    data = json.loads(result.to_json())
    assert data["exit_code"] == 0
    assert data["hosts"]["gpu-01"]["state"] == "ready"
    assert data["stats"]["gpu-01"]["changed"] == 1
    assert data["artifacts_dir"] == "/tmp/x"


@pytest.mark.parametrize("kwargs,code", [
    ({"status": "canceled", "rc": 254, "cancelled": True}, EXIT_CANCELLED),
    ({"status": "successful", "rc": 0}, EXIT_OK),
    ({"status": "failed", "rc": 2}, EXIT_FAILED),
    ({"status": "timeout", "rc": 254}, EXIT_FAILED),
    ({"status": "error", "rc": None, "bad_input": True}, EXIT_BAD_INPUT),
    ({"status": "failed", "rc": 5}, EXIT_BAD_INPUT),
])
def test_run_level_exit_codes(kwargs, code):
    assert RunResult(playbook=PLAYBOOK, **kwargs).exit_code == code


def test_builder_snapshot_is_live():
    builder = ResultBuilder()
    for ev in deploy_events_ready()[:-1]:
        builder.add_event(ev)
    builder.add_progress({"host": "gpu-01", "phase": "http_up", "elapsed": 80})
    snap = builder.snapshot()
    assert snap["gpu-01"].last_status == "running" and snap["gpu-01"].phase == "http_up"


# -- extra vars -------------------------------------------------------------------------------------
def test_extra_vars_key_value_are_strings_like_ansible():
    assert parse_extra_vars(["sglang_port=30001 name='two words'", "flag=true"]) == {
        "sglang_port": "30001", "name": "two words", "flag": "true"}


def test_extra_vars_inline_mapping_keeps_types_and_later_wins(tmp_path):
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text("sglang_port: 30000\nsglang_options:\n  pp-size: 8\n")
    merged = parse_extra_vars([f"@{vars_file}", '{"sglang_port": 31000, "check": true}', "extra=1"])
    assert merged == {"sglang_port": 31000, "sglang_options": {"pp-size": 8}, "check": True, "extra": "1"}


def test_extra_vars_file_relative_to_base_dir(tmp_path):
    (tmp_path / "v.json").write_text('{"a": [1, 2]}')
    assert parse_extra_vars(["@v.json"], base_dir=tmp_path) == {"a": [1, 2]}
    (tmp_path / "empty.yml").write_text("")
    assert parse_extra_vars(["@empty.yml"], base_dir=tmp_path) == {}


@pytest.mark.parametrize("bad", ["novalue", "=x", "[1, 2]", "{unclosed: [", "@/nonexistent/vars.yml", "a='unterminated"])
def test_extra_vars_errors_are_bad_input(bad):
    with pytest.raises(BadInputError):
        parse_extra_vars([bad])


SECRET = "sekrit-0123456789"


@pytest.mark.parametrize("bad", ["{sglang_service_api_key: '%s" % SECRET, "{a: 1, sglang_service_api_key: %s: [" % SECRET,
                                 "sglang_service_api_key='%s" % SECRET, "sglang_service_api_key %s" % SECRET,
                                 "a=1 %s" % SECRET])
def test_extra_vars_errors_never_show_a_value(bad):
    with pytest.raises(BadInputError) as raised:
        parse_extra_vars(["ok=1", bad])
    message = str(raised.value)
    assert SECRET not in message and "sekrit" not in message and "-e number 2" in message, message
    # no chained parser error either, whose text would show the value in a traceback
    assert raised.value.__cause__ is None and (raised.value.__context__ is None or raised.value.__suppress_context__)


def test_extra_vars_file_must_be_a_mapping(tmp_path):
    (tmp_path / "list.yml").write_text("- a\n- b\n")
    with pytest.raises(BadInputError, match="mapping"):
        parse_extra_vars([f"@{tmp_path / 'list.yml'}"])


# -- progress and live view --------------------------------------------------------------------------
def test_format_elapsed():
    assert format_elapsed(42) == "42s"
    assert format_elapsed(307.9) == "5m07s"
    assert format_elapsed(3723) == "1h02m03s"
    assert format_elapsed(None) == "?"


def test_progress_tail_handles_partial_lines_and_late_file(tmp_path):
    path = tmp_path / "progress.jsonl"
    seen = []
    tail = ProgressTail(path, seen.append)
    tail.poll()  # the file does not exist yet
    with open(path, "w") as handle:
        handle.write('{"host": "a", "phase": "loading", "elapsed": 30}\n{"host": "b", "pha')
    tail.poll()
    assert [r["host"] for r in seen] == ["a"]
    with open(path, "a") as handle:
        handle.write('se": "warm", "elapsed": 60}\nnot json\n')
    tail.poll()
    assert [r["host"] for r in seen] == ["a", "b"]
    assert seen[1]["phase"] == "warm"


def test_progress_tail_thread_stops_and_drains(tmp_path):
    path = tmp_path / "p.jsonl"
    seen = []
    tail = ProgressTail(path, seen.append, interval=0.05)
    tail.start()
    path.write_text('{"host": "a", "phase": "loading"}\n')
    tail.stop()
    assert seen and not tail.is_alive()


def test_live_view_lines():
    out = io.StringIO()
    view = LiveView(out)
    for ev in deploy_events_ready()[:-1]:
        view.on_event(ev)
    view.on_progress({"host": "gpu-01", "phase": "loading", "elapsed": 125, "restarts": 1,
                      "last_log_line": "Capturing CUDA graphs (bs=64)"})
    view.on_event(deploy_events_ready()[-1])
    view.on_progress({"host": "gpu-01", "phase": "loading", "elapsed": 126})  # late: suppressed
    text = out.getvalue()
    assert "[gpu-01] loading 2m05s restarts=1 | Capturing CUDA graphs (bs=64)" in text
    assert "[gpu-01] ready after 1m33s" in text
    assert "126" not in text and "2m06s" not in text
    assert format_progress({"host": "h", "phase": None, "elapsed": 5}) == "[h] waiting 5s"


def test_live_view_shows_a_benchmark_after_the_readiness_wait_ended():
    out = io.StringIO()
    view = LiveView(out)
    for ev in deploy_events_ready():
        view.on_event(ev)
    view.on_event(event("runner_on_start", "gpu-01", "Run the sweep", "k26.deploy.sglang_benchmark"))
    view.on_progress({"host": "gpu-01", "phase": "benchmark 1/2", "elapsed": 9,
                      "last_log_line": "C=1: 35.6 tok/s (35.6 per request), TTFT p50 40.0 ms, errors 0"})
    view.on_event(event("runner_on_ok", "gpu-01", "Run the sweep", "k26.deploy.sglang_benchmark", {"levels": []}))
    view.on_progress({"host": "gpu-01", "phase": "benchmark 2/2", "elapsed": 20})  # late: suppressed
    text = out.getvalue()
    assert "[gpu-01] benchmarking, one line per concurrency level ..." in text
    assert "[gpu-01] benchmark 1/2 9s | C=1: 35.6 tok/s (35.6 per request), TTFT p50 40.0 ms, errors 0" in text
    assert "benchmark 2/2" not in text


def test_summary_shows_failure_excerpt():
    events = [event("runner_on_failed", "gpu-01", "Wait for SGLang", "sglang_ready", failed_ready_res("crash_loop")),
              stats(failures={"gpu-01": 1})]
    result = build_run_result(events, playbook=PLAYBOOK, status="failed", rc=2, artifacts_dir="/tmp/a")
    out = io.StringIO()
    print_summary(result, "deploy", out)
    text = out.getvalue()
    assert "gpu-01: failed" in text and "reason=crash_loop" in text
    assert "| torch.OutOfMemoryError: CUDA out of memory" in text
    assert "artifacts: /tmp/a" in text


def test_findings_from_set_stats_are_data_errors_first_and_printed_one_per_line():
    findings = [
        {"id": "K26-CUDA-GRAPH-OFF", "severity": "warning", "message": "CUDA graphs will be off for decode.",
         "fix": "remove disable-cuda-graph", "evidence": {"disable-cuda-graph": True}},
        {"id": "K26-GPU-COUNT", "severity": "info", "message": "not checked", "fix": "nothing to do", "evidence": {}},
        {"id": "K26-SGLANG-REFUSES", "severity": "error", "message": "SGLang refuses the options.",
         "fix": "fix it", "evidence": {}},
    ]
    events = deploy_events_ready()[:-1] + [stats(ok={"gpu-01": 10}, artifact_data={"k26_hosts": {
        "gpu-01": {"findings": findings}}})]
    result = build_run_result(events, playbook=PLAYBOOK, status="successful", rc=0)
    host = result.hosts["gpu-01"]
    assert [f["id"] for f in host.findings] == ["K26-SGLANG-REFUSES", "K26-CUDA-GRAPH-OFF", "K26-GPU-COUNT"]
    assert host.findings_of("warning")[0]["evidence"] == {"disable-cuda-graph": True}
    assert json.loads(result.to_json())["hosts"]["gpu-01"]["findings"][1]["fix"] == "remove disable-cuda-graph"
    out = io.StringIO()
    print_summary(result, "deploy", out)
    lines = [line.strip() for line in out.getvalue().splitlines() if line.startswith("    ")]
    assert lines == ["ERROR   K26-SGLANG-REFUSES: SGLang refuses the options. Fix: fix it.",
                     "WARNING K26-CUDA-GRAPH-OFF: CUDA graphs will be off for decode. Fix: remove disable-cuda-graph.",
                     "INFO    K26-GPU-COUNT: not checked"]


@pytest.mark.parametrize("text, valid", [("1", True), ("4", True), ("25%", True), ("100%", True), ("0", False),
                                         ("0%", False), ("101%", False), ("-1", False), ("one", False), ("", False)])
def test_serial_takes_what_ansible_serial_takes(text, valid):
    assert serial_is_valid(text) is valid


def test_a_bad_serial_is_bad_input_before_any_run(capsys):
    from k26deploy.cli import main
    assert main(["deploy", "--serial", "0", "--json", "-i", "nowhere"]) == EXIT_BAD_INPUT
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "error" and "--serial" in result["error"] and result["bad_input"]


def test_strict_is_an_option_of_deploy_and_preflight_only():
    from k26deploy.cli import build_parser

    args = build_parser().parse_args(["deploy", "--strict"])
    assert args.strict is True
    with pytest.raises(SystemExit):
        build_parser().parse_args(["status", "--strict"])


def test_host_results_read_only_fields_that_progress_records_carry():
    from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import PROGRESS_RECORD_FIELDS
    from k26deploy.results import HOST_PROGRESS_FIELDS

    assert set(HOST_PROGRESS_FIELDS) <= set(PROGRESS_RECORD_FIELDS)


def bench_args(*flags):
    from k26deploy.cli import build_parser
    return build_parser().parse_args(["bench", *flags])


def test_bench_flags_become_the_benchmark_variables(tmp_path):
    from k26deploy.cli import bench_extra_vars

    extra = bench_extra_vars(bench_args("--levels", "1,8,16", "--input-tokens", "64", "--output-tokens", "32",
                                        "--gate", "0.1", "--results-dir", str(tmp_path)))
    assert extra == {"sglang_benchmark_levels": [1, 8, 16], "sglang_benchmark_input_tokens": 64,
                     "sglang_benchmark_output_tokens": 32, "sglang_service_benchmark_gate": 0.1,
                     "sglang_benchmark_results_dir": str(tmp_path.resolve())}
    assert bench_extra_vars(bench_args()) == {}


@pytest.mark.parametrize("flags, named", [
    (("--levels", "1,x"), "--levels"), (("--levels", "0,8"), "--levels"), (("--levels", ""), "--levels"),
    (("--output-tokens", "1"), "--output-tokens"), (("--input-tokens", "0"), "--input-tokens"),
    (("--gate", "1.5"), "--gate"), (("--gate", "-0.1"), "--gate"),
])
def test_bad_bench_flags_are_bad_input_before_any_run(flags, named, capsys):
    from k26deploy.cli import main
    assert main(["bench", *flags, "--json", "-i", "nowhere"]) == EXIT_BAD_INPUT
    result = json.loads(capsys.readouterr().out)
    assert result["bad_input"] and named in result["error"]


def test_the_summary_shows_the_benchmark_lines_and_report_files():
    host = HostResult(host="gpu-01", ready=True, benchmark={
        "lines": ["C=1: 35.6 tok/s (35.6 per request), +44.1% against the baseline"],
        "files": {"json": "/r/gpu-01.json", "markdown": "/r/gpu-01.md", "png": None}})
    out = io.StringIO()
    print_summary(RunResult(playbook="playbooks/benchmark.yml", status="successful", rc=0, hosts={"gpu-01": host}),
                  "bench", out)
    assert "    C=1: 35.6 tok/s (35.6 per request), +44.1% against the baseline\n" in out.getvalue()
    assert "    report: /r/gpu-01.json, /r/gpu-01.md\n" in out.getvalue()


GUARD = {"installed": True, "verdict": "gpu_fault", "why": "kernel: NVRM: Xid (PCI:0000:3b:00): 79", "held": "gpu_fault",
         "canary_seconds": 0.02, "incidents": {"gpu_fault": 1, "hung": 2},
         "last_incidents": [{"time": 0, "verdict": "gpu_fault", "action": "hold", "acted": True,
                             "why": "kernel: NVRM: Xid (PCI:0000:3b:00): 79", "recovered_after_seconds": None,
                             "operator": "reset the GPU or reboot, then start the service again",
                             "evidence": {"journal": ["\x1b]0;owned\x07last words\x1b[2K\r"],
                                          "kernel": ["NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."],
                                          "gpus": []}}]}


def test_status_shows_the_guard_s_verdict_and_incidents_shows_their_evidence_terminal_safe():
    host = HostResult(host="gpu-01", ready=False, guard=GUARD,
                      journal_excerpt="\x1b]8;;http://x.invalid/\x1b\\click\x1b]8;;\x1b\\ here\x07")
    result = RunResult(playbook="playbooks/status.yml", status="successful", rc=0, hosts={"gpu-01": host})
    out = io.StringIO()
    print_summary(result, "status", out)
    text = out.getvalue()
    assert "    guard: gpu_fault, HOLDING the service stopped (gpu_fault)" in text
    assert "incidents: gpu_fault 1, hung 2" in text and "what to do: reset the GPU or reboot" in text
    assert "last words" not in text  # the evidence only with incidents
    assert "| click here\n" in text and "\x1b" not in text and "\x07" not in text
    out = io.StringIO()
    print_summary(result, "incidents", out)
    text = out.getvalue()
    assert "journal | last words\n" in text and "kernel | NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen" in text
    assert not any(char in text for char in "\x1b\x07\r")
