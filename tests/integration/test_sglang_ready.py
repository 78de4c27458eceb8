"""sglang_ready against real systemd + journald in a container, the simulator as the service.

One test per scenario of the readiness issue. Each asserts the reason, the order of events and the evidence: the
journal excerpt holds the root-cause line, and a fail-fast reason (anything but "timeout") proves that the module
did not wait for its timeout. How fast it notices is measured by bench/readiness_latency.py, not asserted here.
"""

import itertools
import json

import pytest

from harness import SIM_IN_CONTAINER, run_task

pytestmark = pytest.mark.integration

FAST = {
    "SGLANG_SIM_LOAD_SECONDS": "2",
    "SGLANG_SIM_GRAPH_SECONDS": "0.5",
    "SGLANG_SIM_WARMUP_SECONDS": "0.5",
    "SGLANG_SIM_HEALTH_GENERATE_SECONDS": "0.2",
}
TIMEOUT = 300
_ports = itertools.count(31000)


def start_sim(container, name, failure=None, config=None, restart="no", env=None):
    port = next(_ports)
    cfg = {"model-path": "moonshotai/Kimi-K2.6", "served-model-name": "kimi-k2.6", "port": port, "pp-size": 8,
           "pp-async-batch-depth": 8}
    cfg.update(config or {})
    environment = dict(FAST, **(env or {}))
    if failure:
        environment["SGLANG_SIM_FAILURE"] = failure
    container.write_unit(name, "/usr/bin/python3 " + SIM_IN_CONTAINER, environment=environment, config=cfg,
                         extra_service="Restart=%s\nRestartSec=1" % restart)
    container.systemctl("reset-failed", name, check=False)
    container.systemctl("restart", name)
    return "http://127.0.0.1:%d" % port


def wait(container, unit, url, **args):
    params = {"unit": unit + ".service", "url": url, "timeout": TIMEOUT}
    params.update(args)
    return run_task(container, {"k26.deploy.sglang_ready": params})


def excerpt(result):
    return "\n".join(result.get("journal_excerpt", []))


def test_ready(container):
    url = start_sim(container, "sim-ready")
    res = wait(container, "sim-ready", url, model="kimi-k2.6")
    assert res["ready"] is True and res["reason"] == "ready", res.get("msg")
    assert not res.get("failed")
    assert "kimi-k2.6" in res["model_ids"]
    assert set(res["timeline"]) >= {"http_up", "warm", "ready"}
    assert res["timeline"]["http_up"] <= res["timeline"]["warm"] <= res["timeline"]["ready"]
    assert res["timeline"]["ready"] <= res["elapsed"]
    assert res["warmup_probe"] == "ready"
    container.systemctl("stop", "sim-ready.service")


def test_crash_while_loading(container):
    url = start_sim(container, "sim-crash", failure="crash_loading")
    res = wait(container, "sim-crash", url)
    assert res["failed"] and res["reason"] == "unit_failed", res.get("msg")
    assert "torch.OutOfMemoryError: CUDA out of memory." in excerpt(res)
    assert res["unit_state"]["ActiveState"] == "failed" and res["unit_state"]["ExecMainStatus"] == "1"
    assert "torch.OutOfMemoryError" in res["msg"]


def test_a_crash_excerpt_holds_the_last_words_that_reach_the_journal_after_systemd_s_own_lines(container):
    """The process's stderr reaches journald through the unit's stream, which journald may read after systemd's
    "Main process exited" (a loaded machine): here a child of the main process holds the stream open and writes the
    error 1.5 s after the main process exited (KillMode=process keeps it), deterministically later than systemd's
    lines. The excerpt must wait for the stream to close and hold that line."""
    script = '(sleep 1.5; echo "RuntimeError: the real cause, written last" >&2) & echo starting; exit 2'
    # started 4 s late (ExecStartPre), so that the wait is already watching when the main process exits
    container.write_unit("late-words", "/bin/sh -c '%s'" % script,
                         extra_service="KillMode=process\nExecStartPre=/bin/sleep 4")
    container.systemctl("reset-failed", "late-words", check=False)
    container.systemctl("start", "--no-block", "late-words")
    res = wait(container, "late-words", "http://127.0.0.1:31999")
    assert res["failed"] and res["reason"] == "unit_failed", res.get("msg")
    assert "Main process exited" in excerpt(res)
    assert "RuntimeError: the real cause, written last" in excerpt(res), excerpt(res)


def test_crash_loop_with_restart_on_failure(container):
    url = start_sim(container, "sim-loop", failure="crash_loading", restart="on-failure")
    res = wait(container, "sim-loop", url)
    container.systemctl("stop", "sim-loop.service", check=False)
    assert res["failed"] and res["reason"] == "crash_loop", res.get("msg")
    # max_restarts 0: the wait ends at the first crash, before systemd's restart has run.
    assert res["restarts"] == 1
    assert "torch.OutOfMemoryError: CUDA out of memory." in excerpt(res)


def test_hang_then_timeout(container):
    url = start_sim(container, "sim-hang", failure="hang_loading")
    res = wait(container, "sim-hang", url, timeout=8)
    container.systemctl("stop", "sim-hang.service", check=False)
    assert res["failed"] and res["reason"] == "timeout", res.get("msg")
    assert res["phase"] == "loading" and "http_up" not in res["timeline"]
    assert "Loading safetensors checkpoint shards" in excerpt(res)


def test_warmup_never_succeeds(container):
    url = start_sim(container, "sim-warm", failure="warmup_fail")
    res = wait(container, "sim-warm", url, warmup_timeout=5)
    container.systemctl("stop", "sim-warm.service", check=False)
    assert res["failed"] and res["reason"] == "warmup_failed", res.get("msg")
    assert "Warmup request failed" in excerpt(res)
    assert "http_up" in res["timeline"] and "warm" not in res["timeline"] and "ready" not in res["timeline"]


def test_wrong_model(container):
    url = start_sim(container, "sim-model", config={"served-model-name": "some-other-model"})
    res = wait(container, "sim-model", url, model="kimi-k2.6", model_mismatch_grace=2)
    container.systemctl("stop", "sim-model.service", check=False)
    assert res["failed"] and res["reason"] == "model_mismatch", res.get("msg")
    assert res["model_ids"] == ["some-other-model"]
    assert "some-other-model" in res["msg"]


def test_bad_api_key(container):
    url = start_sim(container, "sim-auth", config={"api-key": "the-right-key"})
    res = wait(container, "sim-auth", url, api_key="a-wrong-key")
    container.systemctl("stop", "sim-auth.service", check=False)
    assert res["failed"] and res["reason"] == "auth_failed", res.get("msg")
    assert "HTTP 401" in res["msg"]
    # Neither the key the module was given nor the server's own key (SGLang logs it in its start-up
    # server_args line, and the journal excerpt is read from there) comes back in the result.
    assert "a-wrong-key" not in json.dumps(res)
    assert "the-right-key" not in json.dumps(res)


def test_right_api_key(container):
    url = start_sim(container, "sim-key", config={"api-key": "the-right-key"})
    res = wait(container, "sim-key", url, api_key="the-right-key", model="kimi-k2.6")
    container.systemctl("stop", "sim-key.service", check=False)
    assert res["ready"] is True, res.get("msg")


def test_unit_missing_is_reported_without_waiting_for_the_startup_grace(container):
    # No start job can be queued for a unit that does not exist. The grace is longer than the wait's timeout:
    # had it applied, the reason would be "timeout".
    res = wait(container, "no-such-unit", "http://127.0.0.1:1", startup_grace=10 * TIMEOUT)
    assert res["failed"] and res["reason"] == "unit_missing", res.get("msg")
    assert res["unit_state"]["LoadState"] == "not-found" and res["unit_state"]["Job"] == ""


def test_check_mode_reports_without_waiting(container):
    url = start_sim(container, "sim-check", failure="hang_loading")
    res = run_task(container, {"k26.deploy.sglang_ready": {"unit": "sim-check.service", "url": url, "timeout": TIMEOUT}}, check=True)
    container.systemctl("stop", "sim-check.service", check=False)
    assert res["ready"] is False and not res.get("failed"), res
    assert res["reason"] == "check_mode" and res["phase"] == "loading"


def test_progress_is_reported_during_long_waits(container, tmp_path):
    progress = tmp_path / "progress.jsonl"
    # loading lasts several progress intervals even when each slice's module start takes seconds on a loaded machine
    url = start_sim(container, "sim-slow", env={"SGLANG_SIM_LOAD_SECONDS": "12"})
    res = run_task(container, {"k26.deploy.sglang_ready": {"unit": "sim-slow.service", "url": url, "progress_interval": 2}},
                   extra_env={"K26DEPLOY_PROGRESS_FILE": str(progress)})
    container.systemctl("stop", "sim-slow.service", check=False)
    assert res["ready"] is True, res.get("msg")
    records = [json.loads(line) for line in progress.read_text().splitlines()]
    assert len(records) >= 2
    assert {r["phase"] for r in records} & {"loading", "starting"}
    assert all(r["unit"] == "sim-slow.service" for r in records)
    assert any("Load" in (r.get("last_log_line") or "") for r in records)


def test_server_without_ready_is_confirmed_with_health_generate(container):
    url = start_sim(container, "sim-old", env={"SGLANG_SIM_WITHOUT_READY": "yes"})
    res = wait(container, "sim-old", url, model="kimi-k2.6")
    served = container.exec("curl -s -o /dev/null -w '%%{http_code}' %s/ready" % url).stdout
    container.systemctl("stop", "sim-old.service", check=False)
    assert res["ready"] is True, res.get("msg")
    assert served == "404" and res["warmup_probe"] == "health_generate"


def test_max_restarts_tolerates_that_many_crashes(container):
    url = start_sim(container, "sim-tolerant", failure="crash_loading", restart="on-failure")
    res = wait(container, "sim-tolerant", url, max_restarts=2)
    container.systemctl("stop", "sim-tolerant.service", check=False)
    # Two restarts are waited through; the third crash ends the wait.
    assert res["failed"] and res["reason"] == "crash_loop", res.get("msg")
    assert res["restarts"] == 3
    assert "torch.OutOfMemoryError: CUDA out of memory." in excerpt(res)


def test_inactive_unit_without_a_start_job(container):
    start_sim(container, "sim-idle")
    container.systemctl("stop", "sim-idle.service")
    res = wait(container, "sim-idle", "http://127.0.0.1:1", startup_grace=10 * TIMEOUT)
    assert res["failed"] and res["reason"] == "unit_inactive", res.get("msg")
    assert res["unit_state"]["ActiveState"] == "inactive" and "no start job is queued" in res["msg"]
