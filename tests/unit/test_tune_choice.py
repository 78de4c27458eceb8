"""k26deploy tune: the pure parts (candidates, scores, the choice, the report) and the loop over deploy and bench,
with recorded results standing in for the runs (the real runs: tests/integration/test_benchmark.py)."""
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
    assert cli.main(["tune", "-i", "nowhere,", "--profiles", "kimi_k26,kimi_k26_fast", "-q"]) == 2
    assert "'kimi_k26_fast' is no profile of the sglang_service role: one of cpu, kimi_k26, kimi_k26_latency" in (
        capsys.readouterr().err)


def test_profiles_are_candidates_that_deploy_them():
    known = ["kimi_k26", "kimi_k26_latency", "kimi_k26_throughput"]
    assert [(c.name, c.extra_vars) for c in (tune.profile_candidate(n, known) for n in (" kimi_k26", "kimi_k26_latency"))] == [
        ("kimi_k26", {"sglang_service_profile": "kimi_k26"}),
        ("kimi_k26_latency", {"sglang_service_profile": "kimi_k26_latency"})]


def test_the_report_names_its_inventory_and_hosts_and_the_newest_one_of_an_inventory_is_what_preflight_reads(
        tmp_path):
    deploy, bench = fake_runs([])
    candidates = [tune.Candidate(name, {"name": name}) for name in ("tp1pp8", "broken", "tp8pp1")]
    report = tune.tune(candidates, deploy, bench, levels=[1, 8], results_dir=tmp_path, inventory="/srv/inv.yml")
    assert report["inventory"] == "/srv/inv.yml" and report["hosts"] == ["gpu-1"]
    other = dict(report, inventory="/srv/other.yml", time="2099-01-01T00:00:00Z")
    (tmp_path / "tune-2099-01-01T000000Z.json").write_text(json.dumps(other))
    (tmp_path / "tune-broken.json").write_text("{not json")
    older = dict(report, time="2000-01-01T00:00:00Z", winner="tp1pp8")
    (tmp_path / "tune-2000-01-01T000000Z.json").write_text(json.dumps(older))

    seen = tune.latest_report(tmp_path, "/srv/inv.yml")
    assert seen["time"] == report["time"] and seen["winner"] == "tp8pp1" and seen["hosts"] == ["gpu-1"]
    assert seen["file"] == report["files"]["json"] and seen["unit"] == "tok/s of one request alone"
    # the operator's candidates and the figures only: a host's error text never becomes an extra variable
    assert [sorted(row) for row in seen["rows"]] == [sorted(tune.PREFLIGHT_ROW_FIELDS)] * 3
    assert "OutOfMemoryError" not in json.dumps(seen)
    assert tune.latest_report(tmp_path, "/srv/none.yml") is None
    assert tune.latest_report(tmp_path / "absent", "/srv/inv.yml") is None


def test_preflight_deploy_and_status_pass_the_inventory_s_newest_report_on(tmp_path, monkeypatch):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: {}\n")
    deploy, bench = fake_runs([])
    tune.tune([tune.Candidate("tp8pp1", {"name": "tp8pp1"})], deploy, bench, levels=[1, 8], results_dir=tmp_path,
              inventory=cli.inventory_identity([str(inventory)]))
    passed = {}

    class Recorded:
        def __init__(self, command, extra_vars=None, **options):
            passed[command] = extra_vars

        def execute(self):
            return SimpleNamespace(exit_code=0, to_json=lambda: "{}", hosts={}, cancelled=False)

    monkeypatch.setattr(cli, "PlaybookRun", Recorded)
    for command in cli.TUNE_REPORT_COMMANDS:
        cli.main([command, "-i", str(inventory), "--tune-dir", str(tmp_path), "--json", "-q"])
        assert passed[command][cli.TUNE_REPORT_VARIABLE]["winner"] == "tp8pp1", command
    cli.main(["preflight", "-i", str(tmp_path / "elsewhere.yml"), "--tune-dir", str(tmp_path), "--json", "-q"])
    assert cli.TUNE_REPORT_VARIABLE not in passed["preflight"]
