"""The sglang_router filters: the router role's worker list from the replicas' published results."""
from ansible_collections.k26.deploy.plugins.filter.sglang_router import worker_urls


def test_only_rank_0_of_an_instance_is_a_worker_of_the_router():
    """The router role's worker list (filter sglang_router_worker_urls) from each host's published result: a node of
    rank >= 1 serves only a dummy /health, so it is never a worker; rank 0 and single-node replicas are."""
    def replica(name, node_rank=None):
        result = {"endpoint": "http://127.0.0.1:30000"}
        if node_rank is not None:
            result["node_rank"] = node_rank
        return {"inventory_hostname": name, "sglang_service_result": result}

    replicas = [replica("a"), replica("rank0", 0), replica("rank1", 1), replica("b")]
    assert worker_urls(replicas) == ["http://a:30000", "http://rank0:30000", "http://b:30000"]
