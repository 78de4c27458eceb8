"""k26deploy tune: the pure parts (candidates, scores, the choice, the report) and the loop over deploy and bench,
with recorded results standing in for the runs (the real runs: tests/integration/test_tune.py)."""
import json
from types import SimpleNamespace

import pytest

from k26deploy import cli, tune


def level(concurrency, tok_s, ttft_p99=100.0, errors=0):
    return {"concurrency": concurrency, "output_tokens_per_second": tok_s, "ttft_ms": {"p99": ttft_p99},
            "errors": errors}


def test_layouts_are_every_tp_by_pp_of_the_gpus_widest_tensor_parallel_first():
    assert [c.name for c in tune.layouts_for(8)] == ["tp8pp1", "tp4pp2", "tp2pp4", "tp1pp8"]
    assert tune.layout_candidate("TP4PP2").extra_vars == {"sglang_service_tp_size": 4, "sglang_service_pp_size": 2}
    with pytest.raises(ValueError, match="no layout"):
        tune.layout_candidate("tp8")


def test_a_candidates_file_is_a_list_of_named_variable_sets():
    found = tune.candidates_from_file(json.dumps([
        {"name": "graphs-512", "extra_vars": {"sglang_service_options": {"cuda-graph-max-bs-decode": 512}}},
        {"name": "default", "extra_vars": {}}]))
    assert [c.name for c in found] == ["graphs-512", "default"]
    for bad in ("[]", '[{"name": "x"}]', '[{"name": "a", "extra_vars": {}}, {"name": "a", "extra_vars": {}}]'):
        with pytest.raises(ValueError):
            tune.candidates_from_file(bad)


def test_the_objectives_score_one_request_alone_or_the_best_level_within_the_slo():
    levels = [level(1, 35.6, 90), level(8, 95.6, 900), level(16, 156.4, 4000), level(32, 300.0, 100, errors=3)]
    assert tune.score(levels, tune.OBJECTIVE_C1) == (35.6, 1)
    assert tune.score(levels, tune.OBJECTIVE_THROUGHPUT, slo_ttft_ms=1000) == (95.6, 8)  # 16 misses, 32 failed
    assert tune.score(levels, tune.OBJECTIVE_THROUGHPUT) == (156.4, 16)
    assert tune.score(levels, tune.OBJECTIVE_THROUGHPUT, slo_ttft_ms=10) == (None, None)


RESULTS = {
    # name: (deploy exit, levels of the bench)
    "tp8pp1": (0, [level(1, 88.5), level(8, 340.7)]),
    "tp1pp8": (0, [level(1, 35.6), level(8, 95.6)]),
    "broken": (1, []),
}


def fake_runs(kept):
    def deploy(extra_vars):
        name = extra_vars.get("name", "inventory")
        kept.append(name)
        code = RESULTS.get(name, (0, []))[0]
        host = SimpleNamespace(host="gpu-1", failed=code != 0, bad_input=False, unreachable=False,
                               ready=code == 0, reason="crash_loop" if code else "ready",
                               msg="torch.OutOfMemoryError" if code else "", benchmark=None)
        return SimpleNamespace(exit_code=code, hosts={"gpu-1": host}, error="")

    def bench(extra_vars):
        assert extra_vars["sglang_benchmark_levels"] == [1, 8]
        levels = RESULTS[extra_vars["name"]][1]
        host = SimpleNamespace(host="gpu-1", benchmark={"levels": levels})
        return SimpleNamespace(exit_code=0, hosts={"gpu-1": host}, error="")
    return deploy, bench


def test_each_candidate_is_deployed_and_swept_a_failed_one_is_a_row_and_the_winner_is_kept(tmp_path):
    kept = []
    deploy, bench = fake_runs(kept)
    candidates = [tune.Candidate(name, {"name": name}) for name in ("tp1pp8", "broken", "tp8pp1")]
    report = tune.tune(candidates, deploy, bench, base_vars={"sglang_service_gpu_count": 8}, levels=[1, 8],
                       results_dir=tmp_path)
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["broken"]["ok"] is False and "did not serve: gpu-1: crash_loop: torch.OutOfMemoryError" in \
        rows["broken"]["error"]
    assert rows["tp8pp1"]["score"] == 88.5 and rows["tp1pp8"]["score"] == 35.6
    assert report["winner"] == "tp8pp1" and kept[-1] == "tp8pp1" and report["kept_serving"]
    assert report["why"] == "tp8pp1 wins with 88.5 tok/s of one request alone, 2.49x tp1pp8 (35.6)"
    stored = json.loads((tmp_path / report["files"]["json"]).read_text())
    assert stored["winner"] == "tp8pp1"
    table = (tmp_path / report["files"]["markdown"]).read_text()
    assert "| tp8pp1 (kept) | 88.5 | 1 | 88.5 | 340.7 |" in table and "| broken | - | - | - | - | did not serve" in table
    assert (tmp_path / report["files"]["png"]).read_bytes()[:4] == b"\x89PNG"


def test_when_no_candidate_serves_the_inventory_s_own_configuration_is_deployed_again():
    kept = []
    deploy, bench = fake_runs(kept)
    report = tune.tune([tune.Candidate("broken", {"name": "broken"})], deploy, bench, levels=[1, 8])
    assert report["winner"] is None and kept == ["broken", "inventory"]
    assert report["why"].startswith("no candidate produced a figure (broken failed")


def test_the_cli_refuses_bad_flags_before_anything_runs(capsys):
    assert cli.main(["tune", "-i", "nowhere,", "--layouts", "tp8", "-q"]) == 2
    assert "no layout" in capsys.readouterr().err
    assert cli.main(["tune", "-i", "nowhere,", "--layouts", "tp8pp1", "--levels", "8,16", "-q"]) == 2
    assert "needs level 1" in capsys.readouterr().err
