"""The pure meaning of a benchmark sweep (sglang_benchmark_report): the config hash, the change per level against the
baseline, the gate, the diagnosis lines (config causes from the preflight rules plus what only a measurement shows),
the Markdown report and the summary lines."""

import json

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import sglang_benchmark_report as report

# ---------------------------------------------------------------------------------------------------- data

#: the seed deployment: PP8, graphs off, pp-async-batch-depth unset (0)
SEED_OPTIONS = {"pp-size": 8, "disable-cuda-graph": True}
#: the same deployment with graphs back on (and the depth 8 the seed set with them)
FIXED_OPTIONS = {"pp-size": 8, "pp-async-batch-depth": 8}


def gpu(index=0, util_mean=12.0, util_max=30, power_mean=85.0, power_pct=14.2, sm_mean=1500.0, limit=600.0):
    """A GPU entry as nvidia_smi.summarize_samples writes it."""
    return {"index": index, "samples": 5,
            "utilization_gpu_pct": {"mean": util_mean, "min": 0, "max": util_max},
            "power_draw_w": {"mean": power_mean, "min": 80.0, "max": 90.0},
            "clocks_sm_mhz": {"mean": sm_mean, "min": 1400, "max": 1600},
            "power_limit_w": limit, "power_draw_pct_of_limit": power_pct}


def level(concurrency, tok_s, per_request=None, errors=0, gpus=(), rps=0.5, goodput=0.4,
          ttft=(500.0, 600.0, 700.0), tpot=(40.0, 45.0, 50.0), itl=(39.0, 44.0, 49.0)):
    """A level record as sglang_benchmark_aiperf.level_record writes it."""
    def pcts(values):
        return dict(zip(("p50", "p90", "p99"), values))
    return {"concurrency": concurrency, "output_tokens_per_second": tok_s,
            "per_request_tokens_per_second": tok_s / concurrency if per_request is None else per_request,
            "requests_per_second": rps, "ttft_ms": pcts(ttft), "tpot_ms": pcts(tpot), "itl_ms": pcts(itl),
            "errors": errors, "goodput_requests_per_second": goodput, "gpus": list(gpus)}


def seed_levels():
    return [level(1, 24.7, per_request=24.7), level(8, 95.6, per_request=12.0)]


def sweep(levels, options=None, journal_lines=(), baseline=None, changes=(), diagnosis=None, host="gpu-node-1",
          time="2026-05-01T10:00:00Z"):
    data = {"host": host, "time": time, "config_hash": report.config_hash(options or {}),
            "options": dict(options or {}), "levels": levels, "journal_lines": list(journal_lines),
            "baseline": baseline, "changes": list(changes), "tool": "aiperf"}
    data["diagnosis"] = report.diagnosis(data) if diagnosis is None else diagnosis
    return data


def ids(lines):
    return [item["id"] for item in lines]


def by_id(lines, diagnosis_id):
    matches = [item for item in lines if item["id"] == diagnosis_id]
    assert len(matches) == 1, ids(lines)
    return matches[0]


# ---------------------------------------------------------------------------------------------------- config_hash

def test_config_hash_is_a_short_hex_digest():
    value = report.config_hash(SEED_OPTIONS)
    assert len(value) == 12
    int(value, 16)


def test_config_hash_ignores_key_spelling_and_order():
    dashed = {"pp-size": 8, "disable-cuda-graph": True, "attention-backend": "triton"}
    spelled = {"attention_backend": "triton", "--disable-cuda-graph": True, "pp_size": 8}
    assert report.config_hash(dashed) == report.config_hash(spelled)


def test_config_hash_changes_with_an_option_value_or_an_added_option():
    base = report.config_hash({"pp-size": 8, "pp-async-batch-depth": 8})
    assert report.config_hash({"pp-size": 8, "pp-async-batch-depth": 4}) != base
    assert report.config_hash({"pp-size": 4, "pp-async-batch-depth": 8}) != base
    assert report.config_hash({"pp-size": 8, "pp-async-batch-depth": 8, "disable-cuda-graph": True}) != base


def test_config_hash_leaves_the_api_key_out():
    plain = report.config_hash(FIXED_OPTIONS)
    assert report.config_hash(dict(FIXED_OPTIONS, **{"api-key": "s3cret"})) == plain
    assert report.config_hash(dict(FIXED_OPTIONS, api_key="other-secret")) == plain


def test_config_hash_of_no_options_equals_empty_options():
    assert report.config_hash(None) == report.config_hash({})
    assert report.config_hash({}) != report.config_hash(FIXED_OPTIONS)


# ---------------------------------------------------------------------------------------------------- changes

def test_changes_per_level_and_compared_figure():
    baseline = [level(1, 24.7, per_request=24.7), level(8, 95.6, per_request=12.0)]
    current = [level(1, 35.6, per_request=35.6), level(8, 191.2, per_request=23.9)]
    rows = report.changes(current, baseline)
    assert rows == [
        {"concurrency": 1, "metric": "output_tokens_per_second", "before": 24.7, "after": 35.6, "change_pct": 44.1},
        {"concurrency": 1, "metric": "per_request_tokens_per_second", "before": 24.7, "after": 35.6,
         "change_pct": 44.1},
        {"concurrency": 8, "metric": "output_tokens_per_second", "before": 95.6, "after": 191.2, "change_pct": 100.0},
        {"concurrency": 8, "metric": "per_request_tokens_per_second", "before": 12.0, "after": 23.9,
         "change_pct": 99.2},
    ]


def test_changes_skip_levels_present_in_only_one_run():
    baseline = [level(1, 24.7), level(4, 60.0)]
    current = [level(1, 30.0), level(8, 120.0)]
    rows = report.changes(current, baseline)
    assert {row["concurrency"] for row in rows} == {1}
    assert [row["metric"] for row in rows] == list(report.COMPARED)


def test_changes_without_a_baseline_are_empty():
    assert report.changes([level(1, 24.7)], None) == []
    assert report.changes([level(1, 24.7)], []) == []


@pytest.mark.parametrize("before", [0, 0.0, None])
def test_change_pct_is_none_when_before_is_zero_or_missing(before):
    old = level(1, 24.7)
    old["output_tokens_per_second"] = before
    rows = report.changes([level(1, 30.0, per_request=30.0)], [old])
    gated = [row for row in rows if row["metric"] == "output_tokens_per_second"]
    assert gated == [{"concurrency": 1, "metric": "output_tokens_per_second", "before": before, "after": 30.0,
                      "change_pct": None}]


def test_percent_change_is_rounded_and_signed():
    assert report.percent_change(100.0, 80.0) == -20.0
    assert report.percent_change(3.0, 4.0) == 33.3
    assert report.percent_change(10.0, None) is None


# ---------------------------------------------------------------------------------------------------- gate

def gated_rows(before, after, concurrency=8):
    return report.changes([level(concurrency, after)], [level(concurrency, before)])


def test_gate_passes_within_the_allowed_loss():
    passed, message = report.gate(gated_rows(100.0, 96.0), 5.0)
    assert passed is True
    assert "5.0%" in message


def test_gate_passes_when_faster():
    passed = report.gate(gated_rows(100.0, 150.0), 5.0)[0]
    assert passed is True


def test_gate_passes_at_exactly_the_allowed_loss():
    passed = report.gate(gated_rows(100.0, 95.0), 5.0)[0]
    assert passed is True


@pytest.mark.parametrize("slower_c1, allowed, named, not_named", [
    (49.0, 5.0, ["C=8 100.0 -> 80.0 tok/s (-20.0%)"], ["C=1"]),  # -2% at C=1 is within the allowed loss
    (25.0, 10.0, ["C=8 100.0 -> 80.0 tok/s (-20.0%)", "C=1 50.0 -> 25.0 tok/s (-50.0%)"], []),
])
def test_gate_fails_beyond_the_allowed_loss_naming_each_level_and_figures(slower_c1, allowed, named, not_named):
    rows = gated_rows(100.0, 80.0, concurrency=8) + gated_rows(50.0, slower_c1, concurrency=1)
    passed, message = report.gate(rows, allowed)
    assert passed is False
    assert "%.1f%%" % allowed in message
    assert all(text in message for text in named)
    assert not any(text in message for text in not_named)


def test_gate_holds_only_the_aggregate_output_throughput():
    baseline = [level(8, 100.0, per_request=20.0)]
    current = [level(8, 100.0, per_request=5.0)]  # per request -75%, aggregate unchanged
    rows = report.changes(current, baseline)
    assert any(row["metric"] == "per_request_tokens_per_second" and row["change_pct"] == -75.0 for row in rows)
    passed = report.gate(rows, 5.0)[0]
    assert passed is True


def test_gate_ignores_rows_without_a_change():
    old = level(8, 100.0)
    old["output_tokens_per_second"] = 0
    passed = report.gate(report.changes([level(8, 10.0)], [old]), 5.0)[0]
    assert passed is True


def test_gate_of_no_rows_passes():
    assert report.gate([], 5.0)[0] is True


# ---------------------------------------------------------------------------------------------------- diagnosis: config

def test_seed_story_names_graphs_off_and_no_pipeline_bubble():
    lines = report.diagnosis(sweep(seed_levels(), SEED_OPTIONS, diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-CUDA-GRAPH-OFF"]

    graphs = by_id(lines, "K26-BENCH-CUDA-GRAPH-OFF")
    assert graphs["evidence"]["disable-cuda-graph"] is True
    assert graphs["evidence"]["measured per-request tok/s at C=1"] == 24.7
    assert "remove disable-cuda-graph" in graphs["fix"]
    assert "disable-cuda-graph is set" in graphs["message"]
    assert "not measured here: k26deploy tune compares graphs on and off." in graphs["message"]
    assert "Expected gain" not in graphs["message"]  # one PP8 point at one request is no promise for every layout
    assert "1/8" not in json.dumps(lines) and "bubble" not in json.dumps(lines).lower()


def test_seed_story_on_its_pcie_machine_also_names_the_layout_with_the_measurements():
    import topologies
    data = sweep(seed_levels(), SEED_OPTIONS, diagnosis=[])
    data["topology"] = topologies.RECORDED_RTX_PRO_6000_2NUMA8
    lines = report.diagnosis(data)
    assert ids(lines) == ["K26-BENCH-CUDA-GRAPH-OFF", "K26-BENCH-LAYOUT"]
    layout = by_id(lines, "K26-BENCH-LAYOUT")
    assert "pp-size 8 puts 8 pipeline stages on GPUs that share PCIe" in layout["message"]
    assert layout["fix"].startswith("tp-size 8 and pp-size 1")
    assert layout["evidence"]["tok/s at C=8"] == 95.6 and len(layout["evidence"]["measurements"]) == 3


def test_seed_story_with_underscore_option_spelling_finds_the_same():
    lines = report.diagnosis(sweep(seed_levels(), {"pp_size": 8, "disable_cuda_graph": True}, diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-CUDA-GRAPH-OFF"]


def test_fixed_config_gives_neither_config_line():
    lines = report.diagnosis(sweep(seed_levels(), FIXED_OPTIONS, diagnosis=[]))
    assert "K26-BENCH-CUDA-GRAPH-OFF" not in ids(lines)
    assert "K26-BENCH-PIPELINE-BUBBLE" not in ids(lines)
    assert lines == []


def test_no_options_give_no_config_line():
    data = sweep(seed_levels(), None, diagnosis=[])
    data["options"] = None
    assert report.diagnosis(data) == []


def test_batches_beyond_the_largest_graph_are_named_when_the_server_says_its_largest():
    # the server captured decode graphs up to 512 (its /server_info); 1024 running requests decode beyond them
    options = {"tp-size": 8, "max-running-requests": 1024}
    data = sweep([level(1, 30.0), level(600, 9000.0)], options, diagnosis=[])
    assert "K26-BENCH-CUDA-GRAPH-PARTIAL" not in ids(report.diagnosis(data))  # the server did not say: no verdict
    data["decode_graph_max_bs"] = 512
    partial = by_id(report.diagnosis(data), "K26-BENCH-CUDA-GRAPH-PARTIAL")
    assert "decode batches of 513 to 1024 requests" in partial["message"]
    assert partial["message"].endswith("Measured without a graph here: concurrency 600.")
    assert partial["evidence"]["largest_decode_graph"] == 512 and partial["evidence"]["tok/s at C=600"] == 9000.0
    data["levels"] = [level(1, 30.0), level(32, 900.0)]
    assert report.diagnosis(data)[0]["message"].endswith(
        "This sweep stopped at concurrency 32, within the graphs: its figures do not show the loss.")


def test_torch_native_attention_is_named_as_the_cause_of_graphs_off():
    lines = report.diagnosis(sweep(seed_levels(), {"pp-size": 8, "pp-async-batch-depth": 8,
                                                   "attention-backend": "torch_native"}, diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-CUDA-GRAPH-OFF"]
    graphs = lines[0]
    assert "attention-backend torch_native" in graphs["message"]
    assert graphs["evidence"]["attention-backend"] == "torch_native"
    assert "attention-backend triton" in graphs["fix"]
    assert "disable-cuda-graph" not in graphs["evidence"]


def on_pcie(data):
    import topologies
    data["topology"] = topologies.PCIE8
    return data


def test_the_layout_line_reports_gpu_utilization_at_the_top_level():
    levels = [level(1, 24.7, per_request=24.7), level(8, 95.6, gpus=[gpu(0, util_mean=10.0), gpu(1, util_mean=20.0)])]
    layout = by_id(report.diagnosis(on_pcie(sweep(levels, SEED_OPTIONS, diagnosis=[]))), "K26-BENCH-LAYOUT")
    assert layout["evidence"]["GPU utilization at C=8"] == "15.0%"


def test_the_layout_line_uses_the_highest_concurrency_whatever_the_order():
    levels = [level(8, 95.6), level(1, 24.7, per_request=24.7)]
    lines = report.diagnosis(on_pcie(sweep(levels, SEED_OPTIONS, diagnosis=[])))
    assert by_id(lines, "K26-BENCH-LAYOUT")["evidence"]["tok/s at C=8"] == 95.6
    assert by_id(lines, "K26-BENCH-CUDA-GRAPH-OFF")["evidence"]["measured per-request tok/s at C=1"] == 24.7


def test_config_lines_without_levels_still_come_out():
    lines = report.diagnosis(on_pcie(sweep([], SEED_OPTIONS, diagnosis=[])))
    assert ids(lines) == ["K26-BENCH-CUDA-GRAPH-OFF", "K26-BENCH-LAYOUT"]
    assert not any(key.startswith("tok/s at") for key in by_id(lines, "K26-BENCH-LAYOUT")["evidence"])


def test_diagnosis_lines_carry_id_message_fix_and_evidence():
    for item in report.diagnosis(sweep(seed_levels(), SEED_OPTIONS, diagnosis=[])):
        assert set(item) == {"id", "message", "fix", "evidence"}
        assert item["message"] and item["fix"]
        json.dumps(item["evidence"])


# ------------------------------------------------------------------------------------------------ diagnosis: measured

def test_low_power_at_the_top_level():
    levels = [level(1, 24.7, gpus=[gpu(0, power_pct=60.0)]), level(8, 95.6, gpus=[gpu(0, power_pct=14.0),
                                                                                  gpu(1, power_pct=12.5)])]
    lines = report.diagnosis(sweep(levels, FIXED_OPTIONS, diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-LOW-POWER"]
    low = lines[0]
    assert "At concurrency 8" in low["message"]
    assert "at most 14%" in low["message"]
    assert low["evidence"] == {"power % of limit per GPU at C=8": [14.0, 12.5], "tok/s": 95.6}


def test_no_low_power_when_a_gpu_works():
    levels = [level(1, 24.7), level(8, 95.6, gpus=[gpu(0, power_pct=80.0)])]
    assert report.diagnosis(sweep(levels, FIXED_OPTIONS, diagnosis=[])) == []


def test_no_low_power_at_exactly_the_threshold():
    levels = [level(8, 95.6, gpus=[gpu(0, power_pct=report.LOW_POWER_PCT)])]
    assert report.low_power(levels) is None


def test_low_power_reads_only_the_top_level():
    levels = [level(1, 24.7, gpus=[gpu(0, power_pct=10.0)]), level(8, 95.6, gpus=[gpu(0, power_pct=80.0)])]
    assert report.diagnosis(sweep(levels, FIXED_OPTIONS, diagnosis=[])) == []


def test_no_low_power_without_gpu_samples():
    assert report.diagnosis(sweep([level(1, 24.7), level(8, 95.6)], FIXED_OPTIONS, diagnosis=[])) == []
    no_share = gpu(0)
    no_share["power_draw_pct_of_limit"] = None
    assert report.low_power([level(8, 95.6, gpus=[no_share])]) is None
    assert report.low_power([]) is None


def test_low_power_when_the_gpus_draw_nothing():
    assert report.low_power([level(8, 95.6, gpus=[gpu(0, power_mean=0.0, power_pct=0.0)])]) is not None


def test_flat_throughput_from_concurrency_8():
    levels = [level(1, 24.7), level(8, 100.0), level(32, 105.0)]
    lines = report.diagnosis(sweep(levels, FIXED_OPTIONS, diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-FLAT"]
    flat = lines[0]
    assert "100.0 tok/s at C=8, 105.0 at C=32 (x1.05 for x4 the requests)" in flat["message"]
    assert flat["evidence"] == {"tok/s at C=8": 100.0, "tok/s at C=32": 105.0}
    assert "max-running-requests" in flat["fix"] and "pp-async-batch-depth" not in flat["fix"]


def test_no_flat_when_throughput_grows():
    levels = [level(1, 24.7), level(8, 100.0), level(32, 200.0)]
    assert report.diagnosis(sweep(levels, FIXED_OPTIONS, diagnosis=[])) == []


def test_flat_threshold_is_the_flat_factor():
    assert report.flat_throughput([level(8, 100.0), level(32, 114.0)]) is not None
    assert report.flat_throughput([level(8, 100.0), level(32, 115.0)]) is None


def test_no_flat_without_a_level_at_concurrency_8():
    assert report.flat_throughput([level(1, 24.7), level(4, 60.0), level(32, 61.0)]) is None


def test_no_flat_when_8_is_the_top_level():
    assert report.flat_throughput([level(1, 24.7), level(8, 25.0)]) is None
    assert report.flat_throughput([]) is None


def test_errors_name_count_and_level():
    levels = [level(1, 24.7), level(8, 95.6, errors=3), level(32, 200.0, errors=1)]
    lines = report.diagnosis(sweep(levels, FIXED_OPTIONS, diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-ERRORS"]
    errors = lines[0]
    assert "3 at C=8" in errors["message"]
    assert "1 at C=32" in errors["message"]
    assert "C=1" not in errors["message"]
    assert errors["evidence"] == {"errors per concurrency": {8: 3, 32: 1}}


def test_no_errors_line_when_every_request_succeeded():
    levels = [level(1, 24.7, errors=0), level(8, 95.6, errors=None)]
    assert report.errors_at_levels(levels) is None


JIT_LINES = [
    "May 01 10:00:01 node sglang[123]: DeepGEMM JIT compiling kernel gemm_fp8_fp8_bf16_nt",
    "May 01 10:00:02 node sglang[123]: torch._inductor.utils: compiling fused kernel",
    "May 01 10:00:03 node sglang[123]: Triton autotuning for function _fwd_kernel",
    "May 01 10:00:04 node sglang[123]: jit-compiling moe kernel for E=384",
    "May 01 10:00:05 node sglang[123]: torch._dynamo hit config.recompile_limit",
    "May 01 10:00:06 node sglang[123]: Compiling CUDA kernel for fused_moe",
]
ORDINARY_LINES = [
    "May 01 10:00:00 node sglang[123]: Decode batch. #running-req: 8, #token: 4096, gen throughput (token/s): 95.6",
    "May 01 10:00:00 node sglang[123]: Prefill batch. #new-seq: 1, #new-token: 512",
    "May 01 10:00:00 node sglang[123]: INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
]


def test_jit_lines_are_named_with_the_lines_as_evidence():
    lines = report.diagnosis(sweep(seed_levels(), FIXED_OPTIONS, journal_lines=ORDINARY_LINES + JIT_LINES[:2],
                                   diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-JIT"]
    jit = lines[0]
    assert jit["evidence"] == {"journal": JIT_LINES[:2]}
    assert "(2 journal line(s))" in jit["message"]


@pytest.mark.parametrize("text", JIT_LINES)
def test_each_kind_of_jit_line_is_recognised(text):
    assert report.jit_compilation([text])["evidence"]["journal"] == [text]


def test_jit_evidence_keeps_five_lines_but_counts_all():
    jit = report.jit_compilation(JIT_LINES)
    assert len(jit["evidence"]["journal"]) == 5
    assert jit["evidence"]["journal"] == JIT_LINES[:5]
    assert "(6 journal line(s))" in jit["message"]


def test_ordinary_journal_lines_give_no_jit_line():
    assert report.jit_compilation(ORDINARY_LINES) is None
    assert report.jit_compilation([]) is None
    assert report.diagnosis(sweep(seed_levels(), FIXED_OPTIONS, journal_lines=ORDINARY_LINES, diagnosis=[])) == []


def test_diagnosis_orders_config_causes_before_measurements():
    levels = [level(1, 24.7, per_request=24.7), level(8, 95.6, errors=2),
              level(32, 100.0, errors=0, gpus=[gpu(0, power_pct=14.0)])]
    lines = report.diagnosis(sweep(levels, SEED_OPTIONS, journal_lines=JIT_LINES[:1], diagnosis=[]))
    assert ids(lines) == ["K26-BENCH-CUDA-GRAPH-OFF", "K26-BENCH-LOW-POWER", "K26-BENCH-FLAT", "K26-BENCH-ERRORS",
                          "K26-BENCH-JIT"]


# ---------------------------------------------------------------------------------------------------- markdown

TABLE_HEADER = ("| C | tok/s | tok/s per request | req/s | TTFT p50/p90/p99 ms | TPOT p50/p90/p99 ms "
                "| ITL p50/p90/p99 ms | errors | goodput req/s | GPU util mean/max % | power % of limit | SM MHz |")


def test_markdown_first_run():
    levels = [level(1, 24.7, per_request=24.7, rps=0.05, goodput=0.04),
              level(8, 95.6, per_request=12.0, errors=2,
                    gpus=[gpu(0), gpu(1, util_mean=20.0, util_max=40, power_pct=15.0, sm_mean=1600.0)])]
    data = sweep(levels, SEED_OPTIONS)
    text = report.markdown(data)
    lines = text.splitlines()
    assert lines[0] == "# SGLang benchmark: gpu-node-1, 2026-05-01T10:00:00Z"
    assert "Configuration %s; aiperf." % data["config_hash"] in lines
    assert TABLE_HEADER in lines
    assert "| 1 | 24.7 | 24.7 | 0.05 | 500.0/600.0/700.0 | 40.0/45.0/50.0 | 39.0/44.0/49.0 | 0 | 0.04 | - | - | - |" \
        in lines
    assert "| 8 | 95.6 | 12.0 | 0.50 | 500.0/600.0/700.0 | 40.0/45.0/50.0 | 39.0/44.0/49.0 | 2 | 0.40 " \
           "| 12.0/30 20.0/40 | 14.2 15.0 | 1500 1600 |" in lines
    assert len([line for line in lines if line.startswith("| 1 |") or line.startswith("| 8 |")]) == 2
    assert "## Against the baseline (none: first run)" in lines
    assert "| C | figure | before | after | change |" not in text
    assert "## Diagnosis" in lines
    for item in data["diagnosis"]:
        assert "- **%s** " % item["id"] in text
    assert "**K26-BENCH-CUDA-GRAPH-OFF**" in text
    assert "PIPELINE-BUBBLE" not in text
    assert "**K26-BENCH-ERRORS**" in text
    assert text.endswith("\n")


def test_markdown_with_a_baseline_shows_the_change_rows():
    old = sweep([level(1, 24.7, per_request=24.7)], SEED_OPTIONS, time="2026-04-01T10:00:00Z")
    new_levels = [level(1, 35.6, per_request=35.6), level(8, 191.2)]
    rows = report.changes(new_levels, old["levels"])
    data = sweep(new_levels, FIXED_OPTIONS, baseline=old, changes=rows)
    text = report.markdown(data)
    lines = text.splitlines()
    assert "## Against the baseline (2026-04-01T10:00:00Z, configuration %s)" % old["config_hash"] in lines
    assert "| C | figure | before | after | change |" in lines
    assert "| 1 | output_tokens_per_second | 24.7 | 35.6 | +44.1% |" in lines
    assert "| 1 | per_request_tokens_per_second | 24.7 | 35.6 | +44.1% |" in lines
    assert not any(line.startswith("| 8 | output_tokens_per_second") for line in lines)
    assert "Nothing found that costs throughput." in lines


def test_markdown_change_row_without_a_change_shows_a_dash():
    old = level(1, 24.7)
    old["output_tokens_per_second"] = 0
    rows = report.changes([level(1, 30.0, per_request=30.0)], [old])
    data = sweep([level(1, 30.0, per_request=30.0)], FIXED_OPTIONS,
                 baseline={"time": "t0", "config_hash": "abc", "levels": [old]}, changes=rows)
    assert "| 1 | output_tokens_per_second | 0 | 30.0 | - |" in report.markdown(data).splitlines()


def test_markdown_shows_negative_changes_with_their_sign():
    rows = report.changes([level(8, 80.0)], [level(8, 100.0)])
    data = sweep([level(8, 80.0)], FIXED_OPTIONS, baseline={"time": "t0", "config_hash": "abc",
                                                            "levels": [level(8, 100.0)]}, changes=rows)
    assert "| 8 | output_tokens_per_second | 100.0 | 80.0 | -20.0% |" in report.markdown(data).splitlines()


def test_markdown_missing_figures_show_dashes():
    bare = {"concurrency": 4, "gpus": []}
    data = sweep([bare], FIXED_OPTIONS)
    assert "| 4 | - | - | - | -/-/- | -/-/- | -/-/- | - | - | - | - | - |" in report.markdown(data).splitlines()


def test_markdown_diagnosis_entry_carries_fix_and_evidence_as_json():
    data = sweep([level(1, 24.7), level(8, 95.6, errors=3)], FIXED_OPTIONS)
    text = report.markdown(data)
    entry = [line for line in text.splitlines() if line.startswith("- **K26-BENCH-ERRORS**")]
    assert len(entry) == 1
    assert "Fix: Read the journal" in entry[0]
    assert entry[0].endswith('Evidence: {"errors per concurrency": {"8": 3}}')


# ---------------------------------------------------------------------------------------------------- summary_lines

def test_summary_lines_first_run():
    levels = [level(1, 24.7, per_request=24.7),
              level(8, 95.6, per_request=12.0, errors=1, gpus=[gpu(0, util_mean=10.0), gpu(1, util_mean=20.0)])]
    data = sweep(levels, SEED_OPTIONS)
    lines = report.summary_lines(data)
    assert lines[0] == "C=1: 24.7 tok/s (24.7 per request), TTFT p50 500.0 ms, errors 0"
    assert lines[1] == "C=8: 95.6 tok/s (12.0 per request), TTFT p50 500.0 ms, errors 1, GPU util 15.0%"
    assert [line.split(":")[0] for line in lines[2:]] == ids(data["diagnosis"])
    assert len(lines) == 2 + len(data["diagnosis"])
    assert all("against the baseline" not in line for line in lines)
    graphs = lines[2]
    assert graphs.startswith("K26-BENCH-CUDA-GRAPH-OFF: ")
    assert "Fix: remove disable-cuda-graph" in graphs


def test_summary_lines_with_a_baseline_level():
    old = sweep([level(1, 24.7, per_request=24.7)], SEED_OPTIONS, time="2026-04-01T10:00:00Z")
    new_levels = [level(1, 35.6, per_request=35.6), level(8, 191.2, per_request=23.9)]
    data = sweep(new_levels, FIXED_OPTIONS, baseline=old, changes=report.changes(new_levels, old["levels"]))
    lines = report.summary_lines(data)
    assert lines == [
        "C=1: 35.6 tok/s (35.6 per request), +44.1% against the baseline, TTFT p50 500.0 ms, errors 0",
        "C=8: 191.2 tok/s (23.9 per request), TTFT p50 500.0 ms, errors 0",
    ]


def test_summary_lines_show_a_loss_with_its_sign():
    data = sweep([level(8, 80.0)], FIXED_OPTIONS, baseline={"time": "t0", "config_hash": "abc",
                                                            "levels": [level(8, 100.0)]})
    assert report.summary_lines(data)[0].startswith("C=8: 80.0 tok/s (10.0 per request), -20.0% against the baseline")


@pytest.mark.parametrize("depth", [0, 1, 3, 8])
def test_no_depth_is_diagnosed_as_a_pipeline_bubble(depth):
    """SGLang keeps pp-size + depth micro-batch slots: no depth leaves 7 of 8 stages idle (issue 37)."""
    lines = report.diagnosis({"options": {"pp-size": 8, "pp-async-batch-depth": depth}, "levels": []})
    assert lines == []


def test_the_gate_holds_the_unrounded_loss():
    rows = report.changes([{"concurrency": 8, "output_tokens_per_second": 94.96}],
                          [{"concurrency": 8, "output_tokens_per_second": 100.0}])
    assert report.gate(rows, 5.0)[0] is False


def sweep_at(time, host="gpu-01", passed=None):
    return {"host": host, "time": time, "config_hash": "abc", "gate": {"passed": passed}, "levels": []}


def test_the_baseline_is_the_newest_earlier_sweep_of_the_host_that_did_not_fail_its_gate():
    previous = [sweep_at("2026-12-01T10:00:00Z"), sweep_at("2026-12-01T11:00:00Z", passed=True),
                sweep_at("2026-12-01T12:00:00Z", passed=False), sweep_at("2026-12-01T13:00:00Z", host="gpu-02")]
    assert report.pick_baseline("gpu-01", previous)["time"] == "2026-12-01T11:00:00Z"
    assert report.pick_baseline("gpu-03", previous) is None


def test_a_result_names_host_time_and_configuration_and_keeps_only_a_reference_to_its_baseline():
    assert report.result_stem("gpu 01/a", "2026-12-01T10:00:00Z", "abc123") == "gpu_01_a-20261201T100000Z-abc123"
    baseline = dict(sweep_at("2026-12-01T10:00:00Z"), file="/r/x.json", baseline={"time": "older"})
    assert report.baseline_reference(baseline) == {"time": "2026-12-01T10:00:00Z", "config_hash": "abc",
                                                   "file": "/r/x.json", "levels": []}
    assert report.baseline_reference(None) is None


def test_a_layout_that_fights_the_interconnect_is_diagnosed_with_what_was_measured():
    import topologies
    levels = [level(1, 30.0, per_request=30.0), level(8, 120.0, gpus=[gpu(0, util_mean=40.0), gpu(1, util_mean=50.0)])]
    data = sweep(levels, {"tp-size": 1, "pp-size": 8}, diagnosis=[])
    data["topology"] = topologies.PCIE8
    layout = by_id(report.diagnosis(data), "K26-BENCH-LAYOUT")
    assert "share PCIe" in layout["message"] and layout["fix"].startswith("tp-size 8 and pp-size 1")
    assert layout["evidence"]["tok/s at C=8"] == 120.0 and layout["evidence"]["GPU utilization at C=8"] == "45.0%"
    data["topology"] = topologies.NVSWITCH8
    assert "cookbook serves 8x H200 with --tp 8" in by_id(report.diagnosis(data), "K26-BENCH-LAYOUT")["message"]
    data["options"] = {"tp-size": 8, "pp-size": 1}
    data["topology"] = topologies.PCIE8
    assert "K26-BENCH-LAYOUT" not in ids(report.diagnosis(data))  # TP8 over PCIe is what was measured fastest
    data["options"] = {"tp-size": 1, "pp-size": 8}
    data["topology"] = None
    assert "K26-BENCH-LAYOUT" not in ids(report.diagnosis(data))
