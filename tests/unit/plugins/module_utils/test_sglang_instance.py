"""Multi-node instances: where a host stands (plugins/module_utils/sglang_instance.py), the failure that speaks for
an instance, and the preflight findings across its nodes (k26_preflight_rules.instance_findings)."""
import pytest

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils.sglang_instance import InstanceError, failure, plan, stopped_after_join

HOSTS = ["node-a", "node-b", "node-c"]
ADDRESSES = {"node-a": "10.0.0.1", "node-b": "10.0.0.2", "node-c": "10.0.0.3"}


def test_ranks_follow_the_host_order_and_rank_0_is_the_meeting_point():
    where = plan("node-c", "inst", HOSTS, addresses=ADDRESSES, port=20000, play_hosts=HOSTS)
    assert where == {"group": "inst", "hosts": HOSTS, "nnodes": 3, "node_rank": 2, "dist_init_addr": "10.0.0.1:20000"}


def test_explicit_ranks_win_and_reorder_the_nodes():
    ranks = {"node-a": 2, "node-b": 0, "node-c": 1}
    where = plan("node-a", "inst", HOSTS, explicit_ranks=ranks, addresses=ADDRESSES)
    assert (where["node_rank"], where["hosts"]) == (2, ["node-b", "node-c", "node-a"])
    assert where["dist_init_addr"] == "10.0.0.2:20000"


def test_an_ipv6_address_is_bracketed_and_a_set_dist_init_addr_wins():
    assert plan("a", "inst", ["a", "b"], addresses={"a": "fd00::1"}, port=5000)["dist_init_addr"] == "[fd00::1]:5000"
    assert plan("a", "inst", ["a", "b"], dist_init_addr="rank0.example:1234")["dist_init_addr"] == "rank0.example:1234"


@pytest.mark.parametrize("kwargs, words", [
    (dict(hosts=[]), "no such group"),
    (dict(hosts=["x", "y"]), "is not one of its hosts"),
    (dict(play_hosts=["node-a", "node-b"]), "node-c is not in this run"),
    (dict(explicit_ranks={"node-a": 0, "node-b": 0}), "rank 0: node-a, node-b"),
    (dict(explicit_ranks={"node-b": 5}), "node-b=5"),
    (dict(addresses={}), "no address known for node-a"),
])
def test_an_instance_that_cannot_start_is_refused_with_what_to_fix(kwargs, words):
    arguments = dict(hosts=HOSTS, addresses=ADDRESSES)
    arguments.update(kwargs)
    with pytest.raises(InstanceError, match=words):
        plan("node-a", "inst", **arguments)


def wait(ready, msg="", excerpt=()):
    return {"ready": ready, "reason": "ready" if ready else "crash_loop", "msg": msg, "journal_excerpt": list(excerpt)}


def test_no_failure_when_every_node_came_up():
    assert failure([{"host": h, "node_rank": n, "wait": wait(True)} for n, h in enumerate(HOSTS)]) is None


def test_a_failed_node_of_rank_1_or_more_speaks_for_the_instance_not_rank_0():
    nodes = [{"host": "node-a", "node_rank": 0, "wait": wait(False, "rank 0 killed", ["Scheduler hit an exception"])},
             {"host": "node-b", "node_rank": 1, "wait": wait(True)},
             {"host": "node-c", "node_rank": 2, "wait": wait(False, "crashed", ["CUDA out of memory"])}]
    chosen = failure(nodes)
    assert chosen["node"] == "node-c" and chosen["node_rank"] == 2 and chosen["ready"] is False
    assert chosen["journal_excerpt"] == ["CUDA out of memory"]
    assert chosen["msg"] == "node node-c (rank 2) of the instance did not come up: crashed (also failed: node-a)"


def test_rank_0_speaks_when_it_alone_failed_and_a_missing_wait_is_a_failure():
    chosen = failure([{"host": "node-a", "node_rank": "0", "wait": None},
                      {"host": "node-b", "node_rank": "1", "wait": wait(True)}])
    assert chosen["node"] == "node-a" and "no readiness result" in chosen["msg"]


def node(host, rank, version="0.5.23", driver="580.95.05", files="64 files, sha256 0123"):
    return {"host": host, "node_rank": rank, "sglang_version": version, "driver_version": driver, "model_files": files}


def test_a_node_that_stopped_after_joining_fails_with_its_state_and_keeps_its_excerpt():
    now = {"ready": True, "journal_excerpt": "status=9/KILL",
           "unit_state": {"ActiveState": "failed", "SubState": "failed", "NRestarts": "0"}}
    wait = stopped_after_join("sglang.service", now)
    assert (wait["ready"], wait["reason"], wait["journal_excerpt"]) == (False, "unit_failed", "status=9/KILL")
    assert wait["msg"] == ("sglang.service stopped after it had joined the instance (now failed/failed, NRestarts 0); "
                           "see journal_excerpt")
    assert stopped_after_join("u", {})["msg"].startswith("u stopped after it had joined the instance (now ?/?")


def test_nodes_that_share_everything_raise_no_finding():
    assert rules.instance_findings("inst", [node("a", 0), node("b", 1)]) == []


def test_each_fact_that_differs_is_an_error_naming_every_node():
    found = rules.instance_findings("inst", [node("a", 0), node("b", 1, version="0.5.22", files=None),
                                             node("c", 2, driver="575.57.08")])
    assert [(f["id"], f["severity"], f["evidence"]["fact"]) for f in found] == [
        ("K26-INSTANCE-MISMATCH", "error", "sglang_version"), ("K26-INSTANCE-MISMATCH", "error", "driver_version")]
    assert "a: 0.5.23, b: 0.5.22, c: 0.5.23" in found[0]["message"]


def test_instance_findings_join_a_preflight_result_in_order_with_its_counts():
    result = {"strict": False, "findings": [{"id": "K26-X", "severity": "warning", "title": "t", "message": "m",
                                             "fix": "f", "evidence": {}}]}
    merged = rules.with_findings(result, rules.instance_findings("inst", [node("a", 0), node("b", 1, driver="1")]))
    assert [f["id"] for f in merged["findings"]] == ["K26-INSTANCE-MISMATCH", "K26-X"]
    assert (merged["error_count"], merged["warning_count"], merged["info_count"]) == (1, 1, 0)
    assert merged["lines"][0].startswith("ERROR   K26-INSTANCE-MISMATCH: the nodes of instance inst")
