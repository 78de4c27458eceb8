"""A model instance across two nodes (--nnodes 2), each node a container with real systemd on a podman network of
their own, described as one inventory group: nnodes, node ranks and rank 0's address come from the inventory and
the facts, the nodes meet at rank 0 (the simulator's multi-node mode: rank 0 waits for the others and ends itself
when one of them dies), rank 0 serves the API; a node that crashes fails the instance's readiness with its own
journal excerpt, and every node rolls back together; so does a node killed after it joined, while rank 0 warms
up."""

import threading
import time

import pytest
import yaml

import k26deploy
from fleet import chat
from harness import demo_inventory, key_of, podman_network, snapshot_diff, systemd_container, task_ok_on

pytestmark = pytest.mark.integration

GROUP = "k26_instance_a"
UNIT = "sglang.service"


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    tag = int(time.time())
    with podman_network("k26-it-mn-net-%d" % tag) as network, \
            systemd_container("k26-it-mn-rank0-%d" % tag, network=network) as rank0, \
            systemd_container("k26-it-mn-rank1-%d" % tag, network=network) as rank1:
        inventory = demo_inventory(rank0, tmp_path_factory.mktemp("inventory"), rank1)
        hosts = yaml.safe_load(open(inventory + "/hosts.yml"))
        hosts[GROUP] = {"hosts": {rank0.name: {}, rank1.name: {}}, "vars": {"sglang_service_instance_group": GROUP}}
        write_hosts(inventory, hosts)
        result = k26deploy.deploy(inventory=inventory)
        yield rank0, rank1, inventory, result


def write_hosts(inventory, hosts):
    with open(inventory + "/hosts.yml", "w") as handle:
        yaml.safe_dump(hosts, handle)


def config_of(box):
    return yaml.safe_load(box.exec("cat /etc/sglang/sglang.yaml").stdout)


def serving(rank0, inventory):
    status, text = chat(rank0, key_of(inventory), "are both nodes there?", url="http://127.0.0.1:30000")
    return status == 200, text


def test_the_inventory_group_is_the_instance(instance):
    rank0, rank1, inventory, result = instance
    assert result.exit_code == 0, result.to_json()
    first, second = result.hosts[rank0.name], result.hosts[rank1.name]
    assert first.ready and first.node_rank == 0 and first.instance == GROUP, first
    assert second.ready and second.node_rank == 1 and "dummy /health" in second.msg, second
    address = rank0.exec("ip -4 -o route get 1.1.1.1 | sed -E 's/.* src ([0-9.]+).*/\\1/'").stdout.strip()
    interface = rank0.exec("ip -4 -o route get 1.1.1.1 | sed -E 's/.* dev ([^ ]+).*/\\1/'").stdout.strip()
    for rank, box in enumerate((rank0, rank1)):
        options = config_of(box)
        assert (options["nnodes"], options["node-rank"]) == (2, rank)
        assert options["dist-init-addr"] == "%s:20000" % address
        env = box.exec("cat /etc/sglang/sglang.env").stdout
        assert 'NCCL_SOCKET_IFNAME="%s"' % interface in env and 'GLOO_SOCKET_IFNAME="%s"' % interface in env
    assert "node_rank 1 joined" in rank0.exec("journalctl -u %s -o cat --no-pager" % UNIT).stdout
    assert "Init parallel ends. elapsed=" in rank1.exec("journalctl -u %s -o cat --no-pager" % UNIT).stdout


def test_rank_0_serves_the_model_and_status_reports_every_node(instance):
    rank0, rank1, inventory, dummy = instance
    ok, text = serving(rank0, inventory)
    assert ok, text
    status = k26deploy.status(inventory=inventory)
    assert status.exit_code == 0, status.to_json()
    assert [(status.hosts[box.name].ready, status.hosts[box.name].node_rank) for box in (rank0, rank1)] == \
        [(True, 0), (True, 1)]


def test_an_instance_not_wholly_in_the_run_fails_before_anything_changes(instance):
    rank0, rank1, inventory, dummy = instance
    before = {box.name: (box.snapshot(), box.invocation()) for box in (rank0, rank1)}
    result = k26deploy.deploy(inventory=inventory, limit=rank0.name,
                              extra_vars={"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 2}})
    host = result.hosts[rank0.name]
    assert result.exit_code == 2 and host.bad_input and host.changed == 0, result.to_json()
    assert "start and roll back together" in host.msg and rank1.name in host.msg, host.msg
    for box in (rank0, rank1):
        snapshot, running = before[box.name]
        assert snapshot_diff(snapshot, box.snapshot()) == [] and box.invocation() == running, box.name


def test_a_node_that_crashes_fails_the_instance_with_its_own_excerpt_and_both_nodes_roll_back(instance):
    """Only rank 1's configuration changes (a host variable), so rank 0 restarts with it; rank 1 crashes while it
    loads, and rank 0 ends itself as NCCL would."""
    rank0, rank1, inventory, dummy = instance
    hosts = yaml.safe_load(open(inventory + "/hosts.yml"))
    before = {box.name: box.invocation() for box in (rank0, rank1)}
    environment = {"SGLANG_SIM_LOAD_SECONDS": 4, "SGLANG_SIM_GRAPH_SECONDS": 2, "SGLANG_SIM_WARMUP_SECONDS": 1,
                   "SGLANG_SIM_FAILURE": "crash_loading"}
    hosts[GROUP]["hosts"][rank1.name] = {"sglang_service_environment": environment}
    write_hosts(inventory, hosts)
    try:
        result = k26deploy.deploy(inventory=inventory)
    finally:
        del hosts[GROUP]["hosts"][rank1.name]["sglang_service_environment"]
        write_hosts(inventory, hosts)
    assert result.exit_code != 0
    for box in (rank0, rank1):
        host = result.hosts[box.name]
        assert host.node == rank1.name and "node %s (rank 1)" % rank1.name in host.msg, host
        assert "CUDA out of memory" in host.journal_excerpt, host.journal_excerpt
        assert host.rolled_back, host
        assert box.invocation() != before[box.name]
    assert "SGLANG_SIM_FAILURE" not in rank1.exec("cat /etc/sglang/sglang.env").stdout
    ok, text = serving(rank0, inventory)
    assert ok, text


def test_a_node_killed_after_it_joined_fails_the_instance_with_its_excerpt_and_both_roll_back(instance, tmp_path):
    """Rank 1's own readiness wait returns as soon as it serves its dummy /health; rank 0 then still warms up for
    15 s, and rank 1 is killed meanwhile: the instance's check must catch the node that died after it joined."""
    rank0, rank1, inventory, dummy = instance
    artifacts = tmp_path / "kill"

    def kill_rank1_once_its_wait_returned():
        task_ok_on(artifacts, "Wait until SGLang is ready", rank1.name)
        rank1.exec("systemctl kill -s KILL %s" % UNIT)

    killer = threading.Thread(target=kill_rank1_once_its_wait_returned, daemon=True)
    killer.start()
    slow = {"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_GRAPH_SECONDS": 1, "SGLANG_SIM_WARMUP_SECONDS": 15,
            "K26_CHANGE": "slow"}
    result = k26deploy.deploy(inventory=inventory, private_data_dir=artifacts,
                              extra_vars={"sglang_service_environment": slow})
    killer.join(timeout=60)
    assert result.exit_code == 1, result.to_json()
    for box in (rank0, rank1):
        host = result.hosts[box.name]
        assert host.node == rank1.name and "stopped after it had joined the instance" in host.msg, host
        assert "status=9/KILL" in host.journal_excerpt and host.rolled_back, host
    ok, text = serving(rank0, inventory)
    assert ok, text
