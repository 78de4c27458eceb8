"""The simulator's performance model reproduces the seeds' K2.6 PP8 figures and the shape behind them."""
import sys
from pathlib import Path

import pytest

FILES = Path(__file__).resolve().parents[2] / "roles" / "sglang" / "files"
sys.path.insert(0, str(FILES))

import sglang_simulator as sim  # noqa: E402


def model(*flags):
    args = sim.parse_args(["--model-path", "/models/k26", "--pp-size", "8", *flags], {})[0]
    return sim.PerformanceModel.of(args)


BROKEN = ("--disable-cuda-graph",)  # depth 0 is SGLang's default
FIXED = ("--pp-async-batch-depth", "8")


@pytest.mark.parametrize("flags, concurrency, seed_tokens_per_second", [
    (BROKEN, 1, 24.7),
    (BROKEN, 8, 95.6),
    (FIXED, 1, 35.6),
    (FIXED, 16, 156.4),
])
def test_the_seed_configurations_give_the_seed_figures(flags, concurrency, seed_tokens_per_second):
    assert model(*flags).throughput(concurrency) == pytest.approx(seed_tokens_per_second, rel=0.01)


def test_depth_zero_keeps_one_micro_batch_in_a_pipeline_of_eight():
    assert model().micro_batches == 1
    assert model("--pp-async-batch-depth", "3").micro_batches == 4
    assert model("--pp-async-batch-depth", "8").micro_batches == 8
    assert model("--pp-size", "1", "--pp-async-batch-depth", "8").micro_batches == 1


def test_graphs_off_make_every_step_slower_whatever_turned_them_off():
    graphs_on = model(*FIXED).step_seconds(1)
    for flags in (("--disable-cuda-graph",), ("--cuda-graph-backend-decode", "disabled"),
                  ("--attention-backend", "torch_native"), ("--enable-mis",)):
        assert model(*FIXED, *flags).step_seconds(1) > graphs_on * 1.3, flags


def test_without_async_depth_the_aggregate_falls_behind_as_concurrency_grows():
    gains = [model(*FIXED).throughput(c) / model().throughput(c) for c in (1, 8, 32)]
    assert gains[0] == pytest.approx(1.0)
    assert gains[0] < gains[1] < gains[2]


def test_no_running_request_means_no_throughput():
    assert model().throughput(0) == 0.0
