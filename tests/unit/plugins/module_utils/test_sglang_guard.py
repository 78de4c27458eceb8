"""sglang_guard: the replica guard's verdicts and actions from observations (pure), the kernel lines from the recorded
fixture (tests/fixtures/nvidia/kernel-xid.txt)."""
from pathlib import Path

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import nvidia_health
from ansible_collections.k26.deploy.plugins.module_utils import sglang_guard as guard

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia"
POLICY = guard.policy_of({})


def unit(invocation="inv-1", active="active", pid="100", restarts=0, result="success"):
    return {"ActiveState": active, "SubState": "running" if active == "active" else "dead", "MainPID": pid,
            "InvocationID": invocation, "NRestarts": str(restarts), "Result": result}


OK = {"ok": True, "latency": 0.05, "error": "HTTP 200"}
MISSED = {"ok": False, "latency": 10.0, "error": "TimeoutError: timed out"}


def tick(state, now, canary="ok", progress=None, events=(), policy=None, **unit_args):
    canary = dict(OK) if canary == "ok" else canary
    return guard.decide(state, {"unit": unit(**unit_args), "canary": canary, "progress": progress, "events": list(events)},
                        policy or POLICY, now)


def answered_state():
    state = guard.initial_state()
    assert tick(state, 0.0)[:2] == (guard.HEALTHY, None)
    return state


def kernel_events(*codes):
    """The fixture's lines for these Xid codes, as the parser reads them."""
    lines = [line for line in (FIXTURES / "kernel-xid.txt").read_text().splitlines()
             if any("): %d," % code in line for code in codes)]
    return nvidia_health.parse_kernel_events("\n".join(lines))


def test_a_start_that_never_answered_is_never_acted_on_however_long_it_warms_up():
    state = guard.initial_state()
    for second in range(0, 3600, 5):
        verdict, action, why = tick(state, float(second), canary=MISSED)
        assert (verdict, action) == (guard.STARTING, None), why


def test_missed_canaries_of_a_start_that_answered_make_it_hung_and_restarted_at_the_third():
    state = answered_state()
    assert tick(state, 5.0, canary=MISSED, progress=7.0)[:2] == (guard.HEALTHY, None)
    assert tick(state, 10.0, canary=MISSED, progress=7.0)[:2] == (guard.HEALTHY, None)
    verdict, action, why = tick(state, 15.0, canary=MISSED, progress=7.0)
    assert (verdict, action) == (guard.HUNG, guard.RESTART)
    assert "3 canaries missed in a row" in why and "TimeoutError" in why and "process 100" in why
    # the restarted server starts: not acted on until it answers, and then the restart's time is known once
    assert tick(state, 20.0, canary=MISSED, invocation="inv-2")[:2] == (guard.STARTING, None)
    assert tick(state, 40.0, invocation="inv-2")[:2] == (guard.HEALTHY, None)
    assert guard.recovered(state, guard.HEALTHY, 40.0) == 25.0 and guard.recovered(state, guard.HEALTHY, 45.0) is None


def test_a_busy_server_whose_scheduler_runs_batches_is_not_hung_though_its_canary_misses():
    """The progress marker (the scheduler's gauges: KV tokens in use, running and queued requests, throughput) moves
    with every batch, a long prefill's chunks included, though no request finishes."""
    state = answered_state()
    tick(state, 1.0, progress=50.0)
    for second, tokens in zip(range(5, 200, 5), range(100, 10000, 250)):
        verdict, action, why = tick(state, float(second), canary=MISSED, progress=float(tokens))
        assert (verdict, action) == (guard.HEALTHY, None) and "busy" in why


def test_a_canary_that_answers_between_misses_starts_the_count_again():
    state = answered_state()
    for second in (5.0, 10.0):
        tick(state, second, canary=MISSED)
    tick(state, 15.0)
    assert tick(state, 20.0, canary=MISSED)[:2] == (guard.HEALTHY, None)


def test_restarts_beyond_the_budget_hold_the_replica_and_say_so():
    state = answered_state()
    policy = guard.policy_of({"max_restarts": 2, "hung_after": 1})
    actions = []
    for number in range(3):
        invocation = "inv-%d" % number
        tick(state, 100.0 * number, invocation=invocation, policy=policy)
        actions.append(tick(state, 100.0 * number + 5, canary=MISSED, invocation=invocation, policy=policy))
    assert [action for dummy, action, dummy in actions] == [guard.RESTART, guard.RESTART, guard.HOLD]
    assert "max_restarts" in actions[-1][2]
    # held: never acted on again, until someone else starts it
    assert tick(state, 400.0, canary=MISSED, invocation="inv-2", policy=policy)[:2] == (guard.HUNG, None)
    assert tick(state, 500.0, invocation="inv-3", policy=policy)[:2] == (guard.HEALTHY, None)
    # an hour later the budget is back
    assert guard.restart_allowed(state, policy, 100.0 + 3600.0 + 5)


def test_an_xid_that_needs_a_reboot_holds_the_replica_and_one_that_needs_a_restart_restarts_it():
    fell_off_the_bus = kernel_events(79)
    assert [event["code"] for event in fell_off_the_bus] == [79]
    state = answered_state()
    verdict, action, why = tick(state, 5.0, events=fell_off_the_bus)
    assert (verdict, action) == (guard.GPU_FAULT, guard.HOLD) and "GPU has fallen off the bus" in why
    assert tick(state, 10.0, active="inactive", pid="0")[:2] == (guard.GPU_FAULT, None)  # held, not restarted

    graphics = nvidia_health.parse_kernel_events("[ 99.0] NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception")
    state = answered_state()
    assert tick(state, 5.0, events=graphics)[:2] == (guard.GPU_FAULT, guard.RESTART)


def test_a_kernel_line_that_quotes_the_driver_is_no_event_and_changes_nothing():
    quoted = [line for line in (FIXTURES / "kernel-xid.txt").read_text().splitlines() if "-fs (loop" in line]
    events = nvidia_health.parse_kernel_events("\n".join(quoted))
    state = answered_state()
    assert events == [] and tick(state, 5.0, events=events)[:2] == (guard.HEALTHY, None)


def test_a_journal_entry_reads_as_dmesg_shows_it():
    """The driver's own line (identifier "kernel"), a line root wrote to /dev/kmsg (journald took its "NVRM:" for an
    identifier: dmesg, which preflight reads, shows "NVRM: Xid ..."), and a mount error quoting the driver."""
    driver = {"MESSAGE": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "SYSLOG_IDENTIFIER": "kernel"}
    written = {"MESSAGE": "Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "SYSLOG_IDENTIFIER": "NVRM"}
    mount = {"MESSAGE": "EXT4-fs (loop0): bad label NVRM: Xid (PCI:0000:3b:00): 79", "SYSLOG_IDENTIFIER": "kernel"}
    texts = [guard.kernel_message(entry) for entry in (driver, written, mount)]
    assert texts[0] == texts[1] == driver["MESSAGE"]
    assert [event["code"] for event in nvidia_health.parse_kernel_events("\n".join(texts))] == [79, 79]
    assert guard.kernel_message({"MESSAGE": list(b"NVRM: \xff")}) == "NVRM: \ufffd"
    assert guard.kernel_message({}) is None


def test_ignorable_xids_and_nvswitch_sxids_change_nothing():
    sxid = kernel_events(12028)
    ignored = nvidia_health.parse_kernel_events("NVRM: Xid (PCI:0000:00:06): 92, High single-bit ECC error rate")
    assert [event["kind"] for event in sxid] == ["SXid"] and ignored[0]["action"] == "IGNORE"
    state = answered_state()
    assert tick(state, 5.0, events=sxid + ignored)[:2] == (guard.HEALTHY, None)


def test_acting_off_records_the_verdict_without_an_action():
    policy = guard.policy_of({"act_on_gpu_fault": False, "act_on_hung": False, "hung_after": 1})
    state = answered_state()
    assert tick(state, 5.0, events=kernel_events(79), policy=policy)[:2] == (guard.GPU_FAULT, None)
    assert tick(state, 10.0, canary=MISSED, policy=policy)[:2] == (guard.HUNG, None)


def test_systemd_s_own_restarts_of_a_crashing_server_make_a_crash_loop_that_is_held():
    state = answered_state()
    assert tick(state, 10.0, canary=None, active="activating", pid="0", restarts=1)[:2] == (guard.STARTING, None)
    assert tick(state, 20.0, canary=None, active="activating", pid="0", restarts=2)[:2] == (guard.STARTING, None)
    verdict, action, why = tick(state, 30.0, canary=None, active="activating", pid="0", restarts=3)
    assert (verdict, action) == (guard.CRASH_LOOP, guard.HOLD) and "3 times" in why
    # a start by hand (systemd counts from 0 again) is a fresh attempt: its crashes are counted anew
    state = answered_state()
    for second, restarts in ((10.0, 1), (20.0, 2), (30.0, 0), (40.0, 1), (50.0, 2)):
        assert tick(state, second, canary=None, active="activating", pid="0", restarts=restarts,
                    invocation="inv-%d" % second)[:2] == (guard.STARTING, None)
    # systemd giving up by itself (its start limit) is a crash loop with nothing left to stop
    state = answered_state()
    assert tick(state, 5.0, canary=None, active="failed", pid="0", result="start-limit-hit")[:2] == (
        guard.CRASH_LOOP, None)


def test_a_systemd_that_does_not_answer_changes_nothing():
    """A failed systemctl show is no NRestarts of 0 (that would wipe the crash history, and the next answer would count
    old crashes as new) and no new start (that would forget that this one answered)."""
    state = answered_state()
    tick(state, 5.0, canary=None, active="activating", pid="0", restarts=2)
    before = dict(state)
    assert guard.decide(state, {"unit": {}, "canary": None, "progress": None, "events": []}, POLICY, 10.0)[:2] == (
        guard.STARTING, None)
    assert state == before
    assert tick(state, 15.0, canary=None, active="activating", pid="0", restarts=2)[:2] == (guard.STARTING, None)


def test_a_restart_class_xid_never_starts_a_service_that_is_not_running():
    graphics = nvidia_health.parse_kernel_events("NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception")
    state = answered_state()
    assert tick(state, 5.0, canary=None, events=graphics, active="inactive", pid="0")[:2] == (guard.GPU_FAULT, None)


def test_a_crash_loop_with_acting_off_is_said_once_and_the_guard_goes_on_watching():
    policy = guard.policy_of({"act_on_crash_loop": False})
    state = answered_state()
    for second, restarts in ((10.0, 1), (20.0, 2)):
        tick(state, second, canary=None, active="activating", pid="0", restarts=restarts, policy=policy)
    assert tick(state, 30.0, canary=None, active="activating", pid="0", restarts=3, policy=policy)[:2] == (
        guard.CRASH_LOOP, None)
    assert tick(state, 40.0, restarts=3, invocation="inv-4", policy=policy)[:2] == (guard.HEALTHY, None)


def test_an_instance_of_several_nodes_is_held_never_restarted():
    policy = guard.policy_of({"may_restart": False, "hung_after": 1})
    state = answered_state()
    verdict, action, why = tick(state, 5.0, canary=MISSED, policy=policy)
    assert (verdict, action) == (guard.HUNG, guard.HOLD) and "start only together" in why


def test_a_stopped_service_is_stopped_not_hung():
    state = answered_state()
    assert tick(state, 5.0, canary=None, active="inactive", pid="0")[:2] == (guard.STOPPED, None)


@pytest.mark.parametrize("values, message", [
    ({"interval": 0}, "interval must be above 0"),
    ({"hung_after": "three"}, "hung_after must be a number"),
    ({"act_on_hung": "yes"}, "act_on_hung must be true or false"),
    ({"unknown": 1}, "unknown guard policy key"),
])
def test_a_bad_policy_is_refused_with_its_key(values, message):
    with pytest.raises(ValueError, match=message):
        guard.policy_of(values)


def test_the_metrics_carry_one_verdict_the_canary_and_the_incidents():
    state = answered_state()
    text = guard.metrics_text("sglang", state, 0.25, {"hung": 2}, 1700000000.5)
    assert 'k26_guard_verdict{service="sglang",verdict="healthy"} 1' in text
    assert 'k26_guard_verdict{service="sglang",verdict="hung"} 0' in text
    assert 'k26_guard_canary_seconds{service="sglang"} 0.25' in text
    assert 'k26_guard_incidents_total{service="sglang",verdict="hung"} 2' in text
    assert 'k26_guard_last_look_timestamp_seconds{service="sglang"} 1700000000.5' in text
