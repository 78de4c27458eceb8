"""The simulator's performance model reproduces every published measurement of the seed machine class (within 30%),
keeps the layouts in their measured order, and follows SGLang's pipeline semantics."""

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import sglang_perf_facts as facts

from sglang_simulator.options import parse_args
from sglang_simulator.performance import GPU_AVAIL_GB, PerformanceModel, weight_gb

LINKS = {"pcie": "pcie", "pcie-custom-allreduce": "pcie-custom-allreduce", "nvlink": "nvlink"}


def model(*flags, link="pcie"):
    args = parse_args(["--model-path", "/models/k26", *flags], {})[0]
    return PerformanceModel.of(args, link)


def flags_of(row):
    flags = ["--tp-size", str(row.tp), "--pp-size", str(row.pp)]
    if row.depth:
        flags += ["--pp-async-batch-depth", str(row.depth)]
    if not row.graphs:
        flags += ["--disable-cuda-graph"]
    return flags


ROWS = [(row, concurrency, measured) for row in facts.MEASUREMENTS for concurrency, measured in
        sorted(row.tokens_per_s.items())]


@pytest.mark.parametrize("row, concurrency, measured", ROWS,
                         ids=["%s C=%d" % (row.id, c) for row, c, _m in ROWS])
def test_each_measurement_is_reproduced_within_30_percent(row, concurrency, measured):
    predicted = model(*flags_of(row), link=LINKS[row.interconnect]).throughput(concurrency)
    assert predicted == pytest.approx(measured, rel=0.30), (row.id, concurrency, predicted, measured)


def test_the_rows_keep_their_measured_order_wherever_two_were_measured_at_one_concurrency():
    for concurrency in (1, 8, 16, 32):
        rows = [row for row in facts.MEASUREMENTS if concurrency in row.tokens_per_s]
        measured = sorted(rows, key=lambda row: row.tokens_per_s[concurrency])
        predicted = sorted(rows, key=lambda row: model(*flags_of(row), link=LINKS[row.interconnect])
                           .throughput(concurrency))
        assert [row.id for row in predicted] == [row.id for row in measured], concurrency


def test_tp8_beats_pp8_and_graphs_beat_eager_layer_for_layer():
    tp8 = model("--tp-size", "8")
    for depth in ("0", "8"):
        pp8 = model("--pp-size", "8", "--pp-async-batch-depth", depth)
        eager = model("--pp-size", "8", "--pp-async-batch-depth", depth, "--disable-cuda-graph")
        for concurrency in (1, 8, 16, 32):
            assert tp8.throughput(concurrency) > pp8.throughput(concurrency) > eager.throughput(concurrency)
    for concurrency in (1, 8, 16, 32):
        assert model("--tp-size", "8", link="nvlink").throughput(concurrency) > tp8.throughput(concurrency)
    # the measured ratio at C=1 (SGLang TP8 73-90 against the seed's PP8 35.6) is kept
    assert 2.0 < tp8.throughput(1) / model("--pp-size", "8").throughput(1) < 2.6


def test_micro_batches_are_sglangs_pp_size_plus_depth_slots_filled_by_requests():
    assert model("--pp-size", "8").micro_batches(8) == 8  # depth 0 still fills every stage
    assert model("--pp-size", "8").micro_batches(32) == 8
    assert model("--pp-size", "8", "--pp-async-batch-depth", "8").micro_batches(32) == 16
    assert model("--pp-size", "8", "--pp-async-batch-depth", "8").micro_batches(1) == 1
    assert model("--tp-size", "8", "--pp-async-batch-depth", "8").micro_batches(32) == 1


def test_at_concurrency_one_the_depth_changes_nothing_and_the_graphs_everything():
    depth0, depth8 = model("--pp-size", "8"), model("--pp-size", "8", "--pp-async-batch-depth", "8")
    assert depth0.throughput(1) == depth8.throughput(1)
    eager = model("--pp-size", "8", "--pp-async-batch-depth", "8", "--disable-cuda-graph")
    assert depth8.throughput(1) / eager.throughput(1) == pytest.approx(35.6 / 24.7, rel=0.05)


def test_depth_zero_keeps_the_pipeline_filled_and_depth_only_adds_overlap():
    depth0, depth8 = model("--pp-size", "8"), model("--pp-size", "8", "--pp-async-batch-depth", "8")
    # depth 0: eight requests give several times the throughput of one (not 1/8 of the GPUs busy)
    assert depth0.throughput(8) > 3 * depth0.throughput(1)
    # with the same micro-batches in flight, the depth lets the last stage's output processing overlap
    assert depth8.micro_batches(8) == depth0.micro_batches(8) == 8
    assert depth8.throughput(8) > depth0.throughput(8)


def test_graphs_off_make_every_step_slower_whatever_turned_them_off():
    graphs_on = model("--pp-size", "8").step_seconds(1)
    for flags in (("--disable-cuda-graph",), ("--cuda-graph-backend-decode", "disabled"),
                  ("--attention-backend", "torch_native"), ("--enable-mis",)):
        assert model("--pp-size", "8", *flags).step_seconds(1) > graphs_on * 1.3, flags


def test_no_running_request_means_no_throughput():
    assert model("--pp-size", "8").throughput(0) == 0.0


def test_the_weights_are_shared_by_the_ranks_and_never_fill_a_gpu():
    def weights(*flags):
        return weight_gb(parse_args(["--model-path", "m", *flags], {})[0])
    assert weights("--tp-size", "8") == pytest.approx(594.0 / 8)
    assert weights("--tp-size", "4", "--pp-size", "2") == weights("--pp-size", "8")
    assert weights() == pytest.approx(GPU_AVAIL_GB * 0.8)  # one GPU: what is left for the KV cache stays > 0


def predictions():
    """Each row's prediction, for the report: (id, C, predicted, measured)."""
    return [(row.id, c, round(model(*flags_of(row), link=LINKS[row.interconnect]).throughput(c), 1), m)
            for row, c, m in ROWS]
