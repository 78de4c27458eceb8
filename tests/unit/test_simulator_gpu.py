"""The simulator's GPU mode, the parts that run without a GPU: rank layout, decode-step pacing, mode choice.

The GPU work itself (memory, CUDA graphs, NCCL) is proven on a real GPU by tests/gpu/prove.sh.
"""
import subprocess
import sys
import threading
from argparse import Namespace
from pathlib import Path

import pytest

from simulator_process import SIMULATOR
from sglang_simulator import gpu, options


def settings(**over):
    args, knobs = options.parse_args(["--model-path", "m"], {})
    return knobs if not over else knobs.__class__(**dict(vars(knobs), **over))


def args(tp=1, pp=1, nnodes=1, node_rank=0, fraction=None, model="moonshotai/Kimi-K2.6"):
    return Namespace(tp_size=tp, pp_size=pp, nnodes=nnodes, node_rank=node_rank, mem_fraction_static=fraction,
                     model_path=model)


def test_one_rank_per_local_gpu_pipeline_stages_in_order():
    specs = gpu.local_rank_specs(args(tp=2, pp=2), settings(), True, 10)
    assert [(s.local_rank, s.pp_rank, s.tp_rank, s.gpu) for s in specs] == [
        (0, 0, 0, 0), (1, 0, 1, 1), (2, 1, 0, 2), (3, 1, 1, 3)]
    assert [s.label for s in specs] == [" PP0 TP0", " PP0 TP1", " PP1 TP0", " PP1 TP1"]
    assert {s.master_port for s in specs} == {specs[0].master_port}
    assert all(s.local_world == 4 and s.decode_graph for s in specs)


def test_second_node_runs_the_later_stages_on_its_own_gpus():
    specs = gpu.local_rank_specs(args(pp=8, nnodes=2, node_rank=1), settings(), False, 10)
    assert [(s.pp_rank, s.gpu) for s in specs] == [(4, 0), (5, 1), (6, 2), (7, 3)]


def test_knobs_reach_the_ranks():
    specs = gpu.local_rank_specs(args(fraction=0.5), settings(gpu_activation_gib=1.5, gpu_step_dim=1024,
                                                              gpu_step_matmuls=2), True, 10)
    assert (specs[0].mem_fraction, specs[0].activation_bytes, specs[0].step_dim, specs[0].step_matmuls) == (
        0.5, int(1.5 * gpu.GIB), 1024, 2)


def test_each_rank_reads_its_share_of_the_shards_and_a_hub_id_has_none(tmp_path):
    for index in range(5):
        (tmp_path / ("model-%05d-of-00005.safetensors" % (index + 1))).write_bytes(b"x")
    (tmp_path / "config.json").write_text("{}")
    specs = gpu.local_rank_specs(args(tp=2, model=str(tmp_path)), settings(), True, 10)
    assert [[Path(f).name[6:11] for f in s.shard_files] for s in specs] == [["00001", "00003", "00005"],
                                                                            ["00002", "00004"]]
    assert gpu.local_rank_specs(args(tp=2), settings(), True, 10)[0].shard_files == ()


class FakeRanks:
    """Counts steps; each step waits until the test lets it finish."""

    def __init__(self):
        self.steps = 0
        self.go = threading.Semaphore(0)

    def step(self):
        self.go.acquire()
        self.steps += 1


def test_a_step_gives_every_waiting_request_one_token():
    ranks = FakeRanks()
    engine = gpu.StepEngine(ranks)
    engine.start()
    got = []
    waiters = [threading.Thread(target=lambda: (engine.next_token(), got.append(1))) for dummy in range(3)]
    for waiter in waiters:
        waiter.start()
    while engine.waiting < 3:
        threading.Event().wait(0.01)
    ranks.go.release()
    for waiter in waiters:
        waiter.join(timeout=10)
    assert len(got) == 3 and ranks.steps == 1


def test_an_idle_engine_runs_no_step():
    ranks = FakeRanks()
    ranks.go.release()
    engine = gpu.StepEngine(ranks)
    engine.start()
    engine.thread.join(timeout=0.3)
    assert ranks.steps == 0 and engine.thread.is_alive()


def test_gpu_on_without_a_driver_fails_like_a_start_up_error(tmp_path):
    if Path(gpu.NVIDIA_DRIVER_VERSION_FILE).exists():
        pytest.skip("this machine has an NVIDIA driver")
    proc = subprocess.run([sys.executable, str(SIMULATOR), "--model-path", "m", "--sim-gpu", "on",
                           "--sim-load-seconds", "0"], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "--sim-gpu on: no NVIDIA driver loaded (/proc/driver/nvidia/version is missing)" in proc.stderr


def test_gpu_mode_choice_is_validated():
    proc = subprocess.run([sys.executable, str(SIMULATOR), "--model-path", "m",
                           "--sim-gpu", "maybe", "--sim-check-only"], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "argument --sim-gpu: invalid choice: 'maybe'" in proc.stderr


def test_only_the_rank_processes_import_torch():
    """The server (CPU mode and GPU mode's main process) never imports torch: it would take CUDA in the process that
    serves HTTP, and a host without PyTorch could not run the simulator at all."""
    script = ("import sys; from sglang_simulator import __main__, gpu, lifecycle; "
              "print(sorted(name for name in sys.modules if name.split('.')[0] in ('torch', 'pynvml')))")
    done = subprocess.run([sys.executable, "-c", script], env={"PYTHONPATH": str(SIMULATOR.parent)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == "[]\n", done.stderr


def test_a_rank_process_imports_the_package_afresh_from_where_the_server_found_it(tmp_path):
    """Rank processes are spawned: each imports this package by its name. A stand-in torch that fails on import shows
    that a rank got as far as PyTorch (its traceback on stderr, as SGLang's scheduler prints one)."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise RuntimeError('the stand-in torch of the test')\n")
    script = ("import sys; from sglang_simulator import gpu, options\n"
              "args, settings = options.parse_args(['--model-path', 'm'], {})\n"
              "ranks = gpu.GpuRanks(gpu.local_rank_specs(args, settings, True, 1))\n"
              "ranks.start()\n"
              "ranks.processes[0].join(60)\n"
              "sys.exit(ranks.processes[0].exitcode)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                          env={"PYTHONPATH": "%s:%s" % (SIMULATOR.parent, fake.parent)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "TP0] Scheduler hit an exception: Traceback" in done.stderr, done.stderr
    assert "RuntimeError: the stand-in torch of the test" in done.stderr, done.stderr
