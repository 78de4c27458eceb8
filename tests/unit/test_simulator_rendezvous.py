"""Multi-node (rendezvous.py): the ranks of an instance meet at --dist-init-addr and watch each other."""

import signal
from pathlib import Path

import pytest

from simulator_process import READY_LINE, free_port, port_open
from sglang_simulator import checks, rendezvous


# ---------------------------------------------------------------- in-process

@pytest.mark.parametrize("value, address", [("10.0.0.1:5000", ("10.0.0.1", 5000)), ("[fd00::1]:5000", ("fd00::1", 5000)),
                                            ("node-0.example:29500", ("node-0.example", 29500))])
def test_dist_init_addr_is_host_and_port(value, address):
    assert rendezvous.split_dist_init_addr(value) == address


@pytest.mark.parametrize("value", [None, "", "10.0.0.1", "10.0.0.1:", ":5000", "10.0.0.1:port"])
def test_a_dist_init_addr_without_host_and_port_is_fatal(value):
    with pytest.raises(checks.Fatal, match="--dist-init-addr must be HOST:PORT"):
        rendezvous.split_dist_init_addr(value)


# ---------------------------------------------------------------- as a process


def thread_stop_masks(pid):
    """{thread name: True when it blocks both SIGTERM and SIGINT} for every thread of PID but the main one."""
    stop_bits = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
    masks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines())
        except FileNotFoundError:  # a request thread that ended meanwhile
            continue
        if int(task.name) != pid:
            masks[f"{status['Name']} ({task.name})"] = int(status["SigBlk"], 16) & stop_bits == stop_bits
    return masks


def start_instance(start_sim, *flags):
    """Rank 0 and rank 1 of a two-node instance that meet on a free loopback port."""
    common = ("--nnodes", "2", "--pp-size", "2", "--dist-init-addr", "127.0.0.1:%d" % free_port()) + flags
    return start_sim(*common, "--node-rank", "0"), start_sim(*common, "--node-rank", "1")


def test_node_rank_1_joins_rank_0_and_serves_only_a_dummy_health(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank0.wait_for(READY_LINE)
    rank1.wait_port()
    assert [rank1.get(path)[0] for path in ("/ping", "/health", "/health_generate")] == [200, 200, 200]
    assert rank1.get("/v1/models")[0] == 404 and rank0.get("/v1/models")[0] == 200
    assert "PP1 TP0] Load weight begin" in rank1.stderr and "PP0 TP0" not in rank1.stderr
    assert READY_LINE not in rank1.stderr and "Init parallel ends. elapsed=" in rank1.stderr
    assert "node_rank 1 joined from 127.0.0.1" in rank0.stderr
    # a stop signal the kernel gave another thread would never wake the main one (seen once in CI)
    for sim in (rank0, rank1):
        masks = thread_stop_masks(sim.proc.pid)
        assert len(masks) >= 2 and all(masks.values()), masks


def test_rank_0_ends_itself_when_rank_1_dies_as_nccl_would(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank0.wait_for(READY_LINE)
    rank1.proc.kill()
    assert rank0.wait_exit() == -signal.SIGKILL
    assert "Scheduler hit an exception" in rank0.stderr and "node_rank 1 was closed" in rank0.stderr


def test_rank_1_exits_1_when_rank_0_dies(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank1.wait_port()
    rank0.proc.kill()
    assert rank1.wait_exit() == 1
    assert "rank 0 exited without a ShutdownReq broadcast" in rank1.stderr


def test_rank_1_told_to_stop_waits_for_rank_0s_shutdown_broadcast(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank0.wait_for(READY_LINE)
    rank1.wait_port()
    rank1.proc.send_signal(signal.SIGTERM)
    rank1.wait_for("SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast")
    assert rank1.proc.poll() is None
    rank0.proc.send_signal(signal.SIGTERM)
    assert rank0.wait_exit() == 0 and rank1.wait_exit() == 0
    # rank 1 ended on the broadcast, which only rank 0's stop sends: it waited for it
    assert "Received the rank-0 ShutdownReq broadcast" in rank1.stderr


def test_rank_0_gives_up_after_dist_timeout_naming_who_joined(start_sim):
    sim = start_sim("--nnodes", "2", "--node-rank", "0", "--pp-size", "2",
                    "--dist-init-addr", "127.0.0.1:%d" % free_port(), "--dist-timeout", "1")
    assert sim.wait_exit() == 1
    assert "Timed out after 1 seconds waiting for clients. 1/2 clients joined." in sim.stderr
    assert not port_open(sim.port)
