"""The seed's story end to end, against the simulator in a container with real systemd and real AIPerf.

Deploy the seed's configuration (PP8 set by hand, CUDA graphs off, pp-async-batch-depth 0) and benchmark it -> the
diagnosis names the graphs, and no pipeline bubble (SGLang keeps pp-size + depth micro-batch slots; issue 37) ->
deploy the inventory's own configuration (layout auto: TP8, graphs on) -> the benchmark measures it against the
stored baseline (faster) -> a deploy that makes it slower again fails the gate and is rolled back -> `k26deploy
bench` compares with the fix, not with the rolled-back sweep -> `k26deploy tune` on the same host (AIPerf in place).
This tests the plumbing (sweep, report, baseline, gate, diagnosis, rollback); the figures the simulator's performance
model gives are measured by bench/benchmark_model.py, never asserted on two shared cores.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

import k26deploy
from harness import ROOT, VENV_BIN, demo_inventory, systemd_container, wheelhouse
from sim_tokenizer import write_tokenizer

pytestmark = pytest.mark.integration

BENCH_DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_benchmark" / "defaults" / "main.yml").read_text())
AIPERF = "aiperf==%s" % BENCH_DEFAULTS["sglang_benchmark_aiperf_version"]
TOKENIZER = "/opt/k26-tokenizer"
LEVELS = [1, 8]
SLOW = {"sglang_service_pp_size": 8, "sglang_service_pp_async_batch_depth": 0,
        "sglang_service_options": {"cuda-graph-backend-decode": "disabled"}}
FIXED = {"sglang_service_pp_size": "auto", "sglang_service_pp_async_batch_depth": "auto", "sglang_service_options": {}}


@pytest.fixture(scope="module")
def bench_host(tmp_path_factory):
    """A container with the tokenizer in place and an inventory that benchmarks after every deploy."""
    with systemd_container("k26-it-bench-%d" % os.getpid()) as box:
        tokenizer = write_tokenizer(tmp_path_factory.mktemp("tokenizer"))
        box.exec("mkdir -p %s" % TOKENIZER)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            box.put("%s/%s" % (TOKENIZER, name), (tokenizer / name).read_text())
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        results = tmp_path_factory.mktemp("results")
        settings = {"sglang_service_benchmark": True, "sglang_benchmark_levels": LEVELS,
                    "sglang_benchmark_input_tokens": 32, "sglang_benchmark_output_tokens": 32,
                    "sglang_benchmark_requests_per_concurrency": 2, "sglang_benchmark_min_requests": 4,
                    "sglang_benchmark_tokenizer": TOKENIZER, "sglang_benchmark_results_dir": str(results),
                    "sglang_benchmark_wheelhouse": str(wheelhouse(AIPERF))}
        yield box, inventory, results, settings


@pytest.fixture(scope="module")
def story(bench_host):
    """The deploys of the story, in order, each with its result (the tests below read them)."""
    box, inventory, results, settings = bench_host
    runs = {}
    progress = []
    runs["slow"] = k26deploy.deploy(inventory=inventory, extra_vars=dict(settings, **SLOW),
                                    progress_callback=progress.append)
    runs["slow_progress"] = progress
    # the inventory itself asks for the fixed configuration: status must judge what the service runs with now
    runs["slow_status"] = k26deploy.status(inventory=inventory)
    # the gate compares the levels both sweeps ran: C=1 is enough for it (an AIPerf level costs 5 to 10 s here)
    gated = dict(settings, sglang_service_benchmark_gate=0.1, sglang_benchmark_levels=[1])
    runs["fixed"] = k26deploy.deploy(inventory=inventory, extra_vars=dict(gated, **FIXED))
    runs["slower_again"] = k26deploy.deploy(inventory=inventory, extra_vars=dict(gated, **SLOW))
    return runs


def benchmark_of(result, box):
    return result.hosts[box.name].benchmark


def levels_of(benchmark):
    return {level["concurrency"]: level for level in benchmark["levels"]}


def assert_measured(benchmark):
    """Every level ran its requests without an error and measured a speed (figures belong to bench/, not here:
    two shared cores make any expected tok/s a coin toss)."""
    for level in levels_of(benchmark).values():
        assert level["errors"] == 0 and level["requests"] >= 4, level
        assert level["output_tokens_per_second"] > 0, level


def test_the_slow_configuration_is_measured_and_the_graphs_are_named(bench_host, story):
    box = bench_host[0]
    result = story["slow"]
    assert result.exit_code == 0, result.to_json()
    benchmark = benchmark_of(result, box)
    assert [level["concurrency"] for level in benchmark["levels"]] == LEVELS
    assert_measured(benchmark)
    diagnosis = {item["id"]: item for item in benchmark["diagnosis"]}
    graphs = diagnosis["K26-BENCH-CUDA-GRAPH-OFF"]
    assert graphs["evidence"]["cuda-graph-backend-decode"] == "disabled"
    assert "cuda-graph-backend-decode: full" in graphs["fix"] and "k26deploy tune" in graphs["message"]
    # depth 0 is no cause: no pipeline-bubble line; no topology in a container, so no layout line either
    assert set(diagnosis) <= {"K26-BENCH-CUDA-GRAPH-OFF", "K26-BENCH-LOW-POWER", "K26-BENCH-FLAT", "K26-BENCH-JIT"}
    assert "1/8" not in json.dumps(benchmark["diagnosis"])
    assert benchmark["baseline"] is None and benchmark["gate"]["passed"] is None


def test_status_judges_the_configuration_the_service_runs_with(bench_host, story):
    box = bench_host[0]
    result = story["slow_status"]
    assert result.exit_code == 0 and result.hosts[box.name].ready, result.to_json()
    findings = {finding["id"]: finding for finding in result.hosts[box.name].findings}
    assert findings["K26-CUDA-GRAPH-OFF"]["severity"] == "warning", findings
    # the running PP8's depth is information, not a warning
    assert findings.get("K26-PP-ASYNC-DEPTH", {}).get("severity", "info") == "info", findings


def test_each_level_is_reported_live_as_it_ends(bench_host, story):
    box = bench_host[0]
    records = [record for record in story["slow_progress"]
               if record.get("host") == box.name and str(record.get("phase")).startswith("benchmark")]
    assert [record["phase"] for record in records] == ["benchmark 1/2", "benchmark 2/2"]
    assert records[0]["last_log_line"].startswith("C=1: ") and records[1]["last_log_line"].startswith("C=8: ")


def test_the_report_lands_on_the_controller_as_json_markdown_and_png(bench_host, story):
    box, dummy, results, dummy = bench_host
    files = benchmark_of(story["slow"], box)["files"]
    assert Path(files["json"]).parent == results
    stored = json.loads(Path(files["json"]).read_text())
    assert stored["host"] == box.name and [level["concurrency"] for level in stored["levels"]] == LEVELS
    assert "api-key" not in stored["options"] and stored["options"]["pp-async-batch-depth"] == 0
    markdown = Path(files["markdown"]).read_text()
    assert "| C | tok/s |" in markdown and "K26-BENCH-CUDA-GRAPH-OFF" in markdown
    assert "PIPELINE-BUBBLE" not in markdown
    assert Path(files["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_fix_is_measured_against_the_slow_sweep_as_baseline(bench_host, story):
    box, dummy, results, dummy = bench_host
    result = story["fixed"]
    assert result.exit_code == 0, result.to_json()
    assert result.hosts[box.name].restarted is True
    benchmark = benchmark_of(result, box)
    assert_measured(benchmark)
    assert benchmark["baseline"]["file"] == benchmark_of(story["slow"], box)["files"]["json"]
    # the change is reported against the stored baseline's own figure, and the fix is faster
    change = {(row["concurrency"], row["metric"]): row["change_pct"] for row in benchmark["changes"]}
    slow, fixed = (levels_of(benchmark_of(story[run], box))[1]["output_tokens_per_second"] for run in ("slow", "fixed"))
    assert change[(1, "output_tokens_per_second")] == pytest.approx(100 * (fixed - slow) / slow, abs=0.1)
    assert change[(1, "output_tokens_per_second")] > 0, benchmark["changes"]
    ids = {item["id"] for item in benchmark["diagnosis"]}
    assert "K26-BENCH-CUDA-GRAPH-OFF" not in ids
    assert benchmark["gate"] == {"enabled": True, "passed": True, "msg": benchmark["gate"]["msg"]}


def test_a_slower_change_fails_the_gate_and_is_rolled_back(bench_host, story):
    box = bench_host[0]
    result = story["slower_again"]
    assert result.exit_code == 1, result.to_json()
    host = result.hosts[box.name]
    assert host.reason == "benchmark_gate" and host.rolled_back is True
    assert "the benchmark gate failed" in host.msg and "C=1" in host.msg
    benchmark = host.benchmark
    assert benchmark["gate"]["passed"] is False
    config = yaml.safe_load(box.exec("cat /etc/sglang/sglang.yaml").stdout)
    assert "cuda-graph-backend-decode" not in config and (config["tp-size"], config["pp-size"]) == (8, 1)
    assert "pp-async-batch-depth" not in config
    assert k26deploy.status(inventory=bench_host[1]).hosts[box.name].ready is True


def test_bench_compares_with_the_last_sweep_that_passed(bench_host, story):
    box, inventory, results, settings = bench_host
    out = subprocess.run([str(VENV_BIN / "k26deploy"), "bench", "-i", inventory, "--levels", "1",
                          "--results-dir", str(results), "--json",
                          "-e", json.dumps({key: value for key, value in settings.items()
                                            if key != "sglang_service_benchmark"})],
                         capture_output=True, text=True, timeout=900, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    benchmark = json.loads(out.stdout)["hosts"][box.name]["benchmark"]
    assert benchmark["baseline"]["file"] == benchmark_of(story["fixed"], box)["files"]["json"]
    assert_measured(benchmark)


def test_bench_refuses_bad_levels_before_anything_runs(bench_host):
    out = subprocess.run([str(VENV_BIN / "k26deploy"), "bench", "-i", bench_host[1], "--levels", "1,0"],
                         capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert out.returncode == 2 and "--levels must list whole numbers of 1 or more" in out.stderr


CANDIDATES = [
    {"name": "tp1pp8", "extra_vars": {"sglang_service_tp_size": 1, "sglang_service_pp_size": 8}},
    {"name": "cannot-start", "extra_vars": {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 1,
                                                                           "SGLANG_SIM_FAILURE": "crash_loading"}}},
    {"name": "tp8pp1", "extra_vars": {"sglang_service_tp_size": 8, "sglang_service_pp_size": 1}},
]


def test_tune_keeps_the_candidate_that_measured_best_and_a_failed_one_is_a_row(bench_host, tmp_path):
    """k26deploy tune on the same host, after the story (AIPerf is installed there already): each candidate deployed
    and swept in turn, a candidate that cannot start a row with its error (the host rolled back and serving), the
    winner by the measured figures left in service, the comparison written as JSON, Markdown and PNG, and preflight
    of the same inventory then saying what the report measured for the configuration it is given. Which layout wins
    is the simulator's performance model's to say (bench/benchmark_model.py prints its figures): here the choice is
    held to the figures this run measured, never to a number."""
    box, inventory, dummy, bench_settings = bench_host
    settings = {key: value for key, value in bench_settings.items()
                if key not in ("sglang_service_benchmark", "sglang_benchmark_levels")}
    settings["sglang_benchmark_results_dir"] = str(tmp_path / "bench")
    (tmp_path / "candidates.json").write_text(json.dumps(CANDIDATES))
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), "tune", "-i", inventory, "-e", json.dumps(settings),
                           "--candidates", str(tmp_path / "candidates.json"), "--levels", "1", "--json", "-q",
                           "--results-dir", str(tmp_path / "tune")], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    report = json.loads(proc.stdout)
    rows = {row["name"]: row for row in report["rows"]}
    assert rows["cannot-start"]["ok"] is False and "did not serve" in rows["cannot-start"]["error"]
    assert "crash_loop" in rows["cannot-start"]["error"] or "unit_failed" in rows["cannot-start"]["error"]
    measured = {name: row["score"] for name, row in rows.items() if row["ok"]}
    assert set(measured) == {"tp1pp8", "tp8pp1"} and all(score > 0 for score in measured.values())
    best = max(measured, key=measured.get)
    assert report["winner"] == best and report["kept_serving"], report["why"]
    # the winner is what the host serves now, with the inventory's other settings (the failed candidate's
    # environment is gone)
    config = yaml.safe_load(box.exec("cat /etc/sglang/sglang.yaml").stdout)
    wanted = CANDIDATES[0 if best == "tp1pp8" else 2]["extra_vars"]
    assert (config.get("tp-size", 1), config.get("pp-size", 1)) == (wanted["sglang_service_tp_size"],
                                                                    wanted["sglang_service_pp_size"])
    assert "SGLANG_SIM_FAILURE" not in box.exec("cat /etc/sglang/sglang.env").stdout
    assert box.exec("systemctl is-active sglang.service").stdout.strip() == "active"
    for kind in ("json", "markdown", "png"):
        assert os.path.getsize(report["files"][kind]) > 0
    assert "(kept)" in open(report["files"]["markdown"]).read()

    loser = min(measured, key=measured.get)
    sizes = CANDIDATES[0 if loser == "tp1pp8" else 2]["extra_vars"]
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), "preflight", "-i", inventory, "-e", json.dumps(sizes),
                           "--tune-dir", str(tmp_path / "tune"), "--json", "-q"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    findings = json.loads(proc.stdout)["hosts"][box.name]["findings"]
    (tuned,) = [f for f in findings if f["id"] == "K26-TUNED"]
    ratio = measured[best] / measured[loser]
    assert tuned["severity"] == ("warning" if ratio >= 1.1 else "info"), (ratio, tuned)
    assert "this configuration (%s) at %.1f tok/s" % (loser, measured[loser]) in tuned["message"], tuned
    assert "slower than %s (%.1f)" % (best, measured[best]) in tuned["message"], tuned
    assert tuned["evidence"]["tune.report"] == report["files"]["json"]
