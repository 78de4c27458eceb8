"""The outcome of a deploy (plugins/module_utils/sglang_outcome.py): one record, changed only through its
transitions, and the host's result built from it in the one schema (sglang_result.py)."""
import dataclasses

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import sglang_outcome as outcome
from ansible_collections.k26.deploy.plugins.module_utils import sglang_result
from k26deploy.results import SUMMARY_FIELDS, HostResult, _take_summary

SERVICE = {"endpoint": "http://127.0.0.1:30000", "model_id": "kimi-k2.6", "unit": "sglang.service", "node_rank": 0,
           "instance": "", "layout": None, "simulator": True, "model": None}
READY = {"ready": True, "reason": "ready", "msg": "ready after 12.0s", "elapsed": 12.0, "phase": "ready",
         "model_ids": ["kimi-k2.6"], "restarts": 0, "timeline": {"loading": 1.0, "ready": 12.0},
         "unit_state": {"ActiveState": "active", "InvocationID": "a1"}, "last_log_line": "The server is fired up",
         "journal_excerpt": [], "invocation": {"module_args": {"api_key": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}},
         "changed": False, "failed": False}
CRASHED = {"ready": False, "reason": "unit_failed", "msg": "sglang.service failed while loading", "elapsed": 3.0,
           "phase": "loading", "journal_excerpt": ["RuntimeError: CUDA out of memory"], "failed": True,
           "unit_state": {"ActiveState": "failed", "InvocationID": "b2"}}


def deploy(*steps):
    record = outcome.start()
    for name, *args in steps:
        record = outcome.transition(record, name, *args)
    return record


def test_a_deploy_that_reached_ready_reports_its_wait_and_time_to_ready():
    result = outcome.result(deploy(("waited", READY), ("restarted", "a0")), SERVICE)
    assert result["ready"] is True and result["time_to_ready"] == 12.0 and result["restarted"] is True
    assert result["msg"] == "ready after 12.0s" and result["rolled_back"] is False and result["rollback_outcome"] == ""
    assert result["timeline"] == READY["timeline"] and result["endpoint"] == SERVICE["endpoint"]


def test_the_record_keeps_neither_the_modules_arguments_nor_ansibles_keys():
    record = deploy(("waited", READY))
    assert "invocation" not in record["wait"] and "changed" not in record["wait"]


def test_the_rollbacks_wait_never_replaces_the_failure_it_follows():
    record = deploy(("waited", CRASHED), ("rescued", {"msg": "the wait failed"}),
                    ("rolled_back", dict(READY, elapsed=9.6)))
    result = outcome.result(record, SERVICE)
    assert result["ready"] is False and result["reason"] == "unit_failed"
    assert result["msg"] == CRASHED["msg"] and result["journal_excerpt"] == CRASHED["journal_excerpt"]
    assert result["rolled_back"] is True and result["time_to_ready"] is None
    assert result["rollback_outcome"] == "restored the previous configuration; it is serving again after 9.6s"


def test_a_rollback_that_did_not_come_up_says_why():
    record = deploy(("waited", CRASHED), ("rescued", {}), ("rolled_back", CRASHED))
    result = outcome.result(record, SERVICE)
    assert result["rolled_back"] is False
    assert result["rollback_outcome"] == ("restored the previous configuration but it did not come up either: "
                                          + CRASHED["msg"])


def test_a_failed_task_after_a_ready_wait_speaks_for_itself():
    result = outcome.result(deploy(("waited", READY), ("rescued", {"msg": "router refused the replica"})), SERVICE)
    assert (result["ready"], result["reason"], result["msg"]) == (False, "error", "router refused the replica")


def test_the_first_failure_stays_when_the_rescue_sees_another():
    instance = dict(CRASHED, node="node-b", msg="node node-b (rank 1) of the instance did not come up: x")
    record = deploy(("waited", READY), ("failed", instance), ("rescued", {"msg": "Fail every node"}))
    assert outcome.result(record, SERVICE)["msg"] == instance["msg"]
    assert outcome.result(record, SERVICE)["node"] == "node-b"


@pytest.mark.parametrize("gate_fails, ready, msg", [
    (True, False, "the benchmark gate failed: level 8 lost 20%"),
    (False, True, "the benchmark gate failed: level 8 lost 20%"),
])
def test_a_gate_that_failed_is_the_deploys_failure_or_only_its_message(gate_fails, ready, msg):
    sweep = {"gate": {"passed": False, "msg": "level 8 lost 20%"}}
    record = deploy(("waited", READY), ("benchmarked", sweep, "", gate_fails))
    result = outcome.result(record, SERVICE)
    assert (result["ready"], result["msg"], result["benchmark"]) == (ready, msg, sweep)
    assert (result["reason"] == "benchmark_gate") is gate_fails


def test_a_sweep_that_could_not_run_is_the_message_of_a_ready_host():
    record = deploy(("waited", READY), ("benchmarked", None, "the benchmark could not run (AIPerf): no venv"))
    result = outcome.result(record, SERVICE)
    assert result["ready"] is True and result["msg"] == "the benchmark could not run (AIPerf): no venv"


@pytest.mark.parametrize("store, says", [
    ({"untrusted": "/var/lib/k26deploy/rollback is owned by uid 998", "can_roll_back": True},
     "not attempted: the rollback store is not root's alone, so root will not restore from it "
     "(/var/lib/k26deploy/rollback is owned by uid 998)"),
    ({"untrusted": "", "can_roll_back": False}, "not attempted: no configuration of this host has reached ready yet"),
    ({"untrusted": "", "can_roll_back": True},
     "not attempted: the live configuration is already the last one that reached ready"),
])
def test_a_rollback_not_attempted_says_why(store, says):
    record = deploy(("observed", READY), ("rollback_skipped", store))
    result = outcome.result(record, SERVICE)
    assert result["rollback_outcome"].startswith(says) and result["msg"] == result["rollback_outcome"]
    assert result["ready"] is True and result["rolled_back"] is False and result["time_to_ready"] is None


def test_an_observation_has_no_time_to_ready_and_takes_the_callers_fields():
    findings = [{"id": "K26-CUDA-GRAPH-OFF", "severity": "warning"}]
    result = outcome.result(deploy(("observed", READY)), SERVICE, {"findings": findings})
    assert result["time_to_ready"] is None and result["findings"] == findings and result["restarted"] is None


def test_a_node_reads_the_failure_else_the_wait():
    assert outcome.current(None) is None
    assert outcome.current(deploy(("waited", READY)))["ready"] is True
    assert outcome.current(deploy(("waited", READY), ("failed", CRASHED)))["reason"] == "unit_failed"


def test_an_unknown_transition_is_refused_by_name():
    with pytest.raises(outcome.OutcomeError, match="published is not a transition"):
        outcome.transition(None, "published")


def test_a_caller_cannot_add_a_field_the_schema_does_not_know():
    with pytest.raises(sglang_result.ResultError, match="colour is not a field"):
        outcome.result(deploy(("observed", READY)), SERVICE, {"colour": "green"})


@pytest.mark.parametrize("fields, says", [
    ({"ready": "yes"}, "ready is str, not bool"),
    ({"restarts": True}, "restarts is bool, not int"),
    ({"time_to_ready": "12"}, "time_to_ready is str, not int or float"),
    ({"findings": {}}, "findings is dict, not list"),
])
def test_a_value_of_the_wrong_type_is_refused(fields, says):
    with pytest.raises(sglang_result.ResultError, match=says):
        sglang_result.check(fields)


def test_none_means_not_known_and_every_field_may_be_left_out():
    assert sglang_result.check({"ready": None, "findings": []}) == {"ready": None, "findings": []}


def test_k26deploy_reads_exactly_the_fields_of_the_schema():
    assert sorted(SUMMARY_FIELDS) == sorted(sglang_result.FIELDS)
    host_fields = {f.name for f in dataclasses.fields(HostResult)}
    assert set(sglang_result.FIELDS) <= host_fields, set(sglang_result.FIELDS) - host_fields


def test_a_result_of_the_role_has_every_field_but_the_other_publishers():
    result = outcome.result(deploy(("waited", READY)), SERVICE)
    assert set(sglang_result.FIELDS) - set(result) == {"findings", "workers", "guard"}


@pytest.mark.parametrize("steps, before, restarted", [
    ((("waited", READY),), "a1", False),
    ((("waited", READY),), "a0", True),
    ((("waited", READY),), "", True),
    ((("waited", CRASHED), ("failed", CRASHED), ("rolled_back", dict(READY, unit_state={"InvocationID": "c3"}))),
     "b2", True),
    ((("waited", dict(READY, unit_state={})),), "a1", True),
])
def test_restarted_compares_the_invocation_before_with_the_one_sglang_ready_saw_last(steps, before, restarted):
    assert deploy(*steps, ("restarted", before))["restarted"] is restarted


PRECOMPILE_FAILED = {"failed": True, "msg": "the DeepGEMM precompile failed (exit 1) after 31.0s", "ran": False,
                     "reason_code": "precompile_failed", "journal_excerpt": ["TimeoutError: DeepGEMM Kernels ..."]}


def test_a_failed_precompile_speaks_with_its_reason_and_journal_before_any_wait():
    record = deploy(("rescued", PRECOMPILE_FAILED), ("rolled_back", dict(READY, elapsed=4.0)))
    result = outcome.result(record, SERVICE)
    assert (result["ready"], result["reason"], result["msg"]) == (False, "precompile_failed", PRECOMPILE_FAILED["msg"])
    assert result["journal_excerpt"] == PRECOMPILE_FAILED["journal_excerpt"] and result["rolled_back"] is True


def test_a_precompile_that_ran_is_in_the_result_without_the_modules_other_keys():
    ran = {"changed": True, "ran": True, "needed": True, "seconds": 812.3, "key": "0123456789abcdef",
           "unit": "sglang-deepgemm-0123456789abcdef-1.service", "reason": "block-FP8 weights", "record": "/r.json",
           "journal_excerpt": ["DeepGEMM Kernels compilation finished successfully."]}
    result = outcome.result(deploy(("precompiled", ran), ("waited", READY)), SERVICE)
    assert result["precompile"] == {"seconds": 812.3, "key": "0123456789abcdef", "unit": ran["unit"],
                                    "reason": "block-FP8 weights", "record": "/r.json"}
    assert outcome.result(deploy(("waited", READY)), SERVICE)["precompile"] is None


SICK = "GPU 0 (00000000:00:06.0): the driver asks for a GPU reset before the GPU is used again."


@pytest.mark.parametrize("routers, where", [(["router1", "router2"], "left out of its routers (router1, router2) and "),
                                            ([], "")])
def test_a_replica_left_out_for_its_gpus_fails_with_why_and_where_and_nothing_restarted(routers, where):
    result = outcome.result(deploy(("left_out", SICK, routers)), SERVICE)
    said = "%snot restarted, so as not to start it again on the same fault: %s" % (where, SICK)
    assert (result["ready"], result["reason"], result["msg"], result["left_out"]) == (False, "gpu_health", said, said)
    assert result["restarted"] is None and result["rolled_back"] is False and result["time_to_ready"] is None
    assert outcome.result(deploy(("waited", READY)), SERVICE)["left_out"] == ""


def test_a_sweep_that_could_not_run_says_which_task_failed_and_its_last_lines():
    failed = {"msg": "non-zero return code", "stderr_lines": ["line %d" % n for n in range(8)]}
    record = deploy(("waited", READY), ("sweep_failed", "Run AIPerf", failed))
    assert record["benchmark"] is None and record["failure"] is None
    assert record["benchmark_error"] == ("the benchmark could not run (Run AIPerf): non-zero return code "
                                         "line 2 | line 3 | line 4 | line 5 | line 6 | line 7")
    result = outcome.result(record, SERVICE)
    assert result["ready"] is True and result["msg"] == record["benchmark_error"]


def test_a_sweep_that_could_not_run_without_a_task_name_or_message():
    record = deploy(("sweep_failed", None, {}))
    assert record["benchmark_error"] == "the benchmark could not run (?):  "


def test_the_run_state_starts_with_the_invocation_before_and_whether_it_restarts():
    record = outcome.transition(None, "start", "a0", True)
    assert (record["invocation_before"], record["restarts"], record["retired"], record["left_routers"]) == (
        "a0", True, [], False)
    assert outcome.transition(record, "start")["invocation_before"] is None
    assert outcome.start("")["invocation_before"] == ""
    assert outcome.restarted(outcome.waited(record, READY))["restarted"] is True
    assert outcome.restarted(outcome.waited(outcome.start("a1"), READY))["restarted"] is False
    assert outcome.restarted(outcome.waited(record, READY), "a1")["restarted"] is False


def test_the_retired_services_are_kept_as_they_were():
    results = {"results": [
        {"item": "sglang-old", "status": {"ActiveState": "active", "UnitFileState": "enabled"}},
        {"item": "sglang-idle", "status": {"ActiveState": "inactive", "UnitFileState": "disabled"}},
        {"item": "sglang-gone", "failed": True, "msg": "Could not find the requested service sglang-gone"}]}
    record = deploy(("retiring", results))
    assert record["retired"] == [
        {"name": "sglang-old", "found": True, "was_running": True, "was_enabled": True},
        {"name": "sglang-idle", "found": True, "was_running": False, "was_enabled": False},
        {"name": "sglang-gone", "found": False, "was_running": False, "was_enabled": False}]
    assert deploy(("retiring", {}))["retired"] == [] and deploy(("retiring", {"skipped": True}))["retired"] == []


def test_leaving_and_rejoining_the_routers_is_recorded():
    record = deploy(("left_routers", True))
    assert record["left_routers"] is True
    assert outcome.transition(record, "left_routers", False)["left_routers"] is False
    assert outcome.result(record, SERVICE)["ready"] is False


def a_value_of(name, kind):
    """A distinct value of the field's type, so that a field read into another (or not read) shows."""
    sample = {bool: True, str: "the %s" % name, int: len(name), list: [{"field": name}],
              dict: {"field": name}}
    return sample[kind] if kind in sample else float(len(name)) + 0.5  # numbers: int or float


def test_every_value_of_the_published_record_reaches_the_host_result():
    """Issue 52: a field k26deploy names but does not carry over (a summary reader that skips startup, precompile or
    model) is a result the operator never sees: the record's every value must arrive, unchanged."""
    record = sglang_result.check({name: a_value_of(name, kind[0]) for name, kind in sglang_result.FIELDS.items()})
    record["journal_excerpt"] = ["Traceback (most recent call last):", "RuntimeError: CUDA out of memory"]
    host = HostResult(host="gpu-a")
    _take_summary(host, record)
    # the excerpt's lines arrive as one text, as the CLI prints it
    expected = dict(record, journal_excerpt="\n".join(record["journal_excerpt"]))
    assert {name: getattr(host, name) for name in sglang_result.FIELDS} == expected
