"""The pure decisions of the sglang_router_worker module: the replica in smg's GET /workers answer, and its
running and queued requests from SGLang's /metrics."""

import pytest

from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_workers import (
    busy_requests, entries_for, healthy_count, join_state, summary, worker_entries,
)

A = "http://10.0.0.11:30000"
B = "http://10.0.0.12:30000"


def entry(url, status="ready", healthy=True, ident="01a2"):
    return {"id": ident, "url": url, "status": status, "is_healthy": healthy, "load": 0}


def test_worker_entries_read_smg_answer_and_refuse_others():
    assert worker_entries({"workers": [entry(A), {"no": "url"}], "total": 2}) == [entry(A)]
    assert worker_entries({"detail": "Not Found"}) is None
    assert worker_entries(None) is None


def test_entries_match_the_url_with_or_without_a_trailing_slash():
    assert entries_for([entry(A + "/"), entry(B)], A) == [entry(A + "/")]


@pytest.mark.parametrize("entries, state", [
    ([entry(A), entry(B)], "present"),
    ([entry(A, status="draining", healthy=False), entry(B)], "pending"),
    ([entry(A, status="pending", healthy=False)], "pending"),
    ([entry(A, healthy=False)], "pending"),
    ([entry(B)], "absent"),
    ([], "absent"),
])
def test_join_state(entries, state):
    assert join_state(entries, A) == state


def test_summary_keeps_what_a_message_needs():
    assert summary([entry(A)]) == [{"id": "01a2", "url": A, "status": "ready", "is_healthy": True}]


METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="kimi-k2.6",engine_type="unified",pp_rank="0",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="kimi-k2.6",engine_type="unified",pp_rank="1",tp_rank="0"} 1.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="kimi-k2.6"} 2.0
sglang:num_used_tokens{model_name="kimi-k2.6"} 4096.0
"""


def test_busy_requests_sum_running_and_queued_samples():
    assert busy_requests(METRICS) == 6


def test_an_idle_replica_has_none_busy():
    assert busy_requests(METRICS.replace(" 3.0", " 0.0").replace(" 1.0", " 0.0").replace(" 2.0", " 0")) == 0


@pytest.mark.parametrize("text", ["", None, "sglang:num_used_tokens 1.0\n", "<html>404</html>"])
def test_busy_requests_unknown_without_the_gauges(text):
    assert busy_requests(text) is None


def test_healthy_count_counts_what_the_router_routes_to():
    assert healthy_count([entry(A), entry(B, status="draining", healthy=False), entry(B, healthy=False)]) == 1
