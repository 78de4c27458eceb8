"""k26deploy tune end to end on the demo's simulator in a container with real systemd and real AIPerf: each
candidate deployed and swept in turn, a candidate that cannot start a row with its error (the host rolled back and
serving), the winner by the measured figures left in service, the comparison written as JSON, Markdown and PNG, and
preflight of the same inventory then saying what the report measured for the configuration it is given.
Which layout wins is the simulator's performance model's to say (bench/benchmark_model.py prints its figures):
here the choice is held to the figures this run measured, never to a number."""

import json
import os
import subprocess

import pytest
import yaml

from harness import ROOT, VENV_BIN, demo_inventory, systemd_container, wheelhouse
from sim_tokenizer import write_tokenizer

pytestmark = pytest.mark.integration

BENCH_DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_benchmark" / "defaults" / "main.yml").read_text())
AIPERF = "aiperf==%s" % BENCH_DEFAULTS["sglang_benchmark_aiperf_version"]
TOKENIZER = "/opt/k26-tokenizer"
CANDIDATES = [
    {"name": "tp1pp8", "extra_vars": {"sglang_service_tp_size": 1, "sglang_service_pp_size": 8}},
    {"name": "cannot-start", "extra_vars": {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 1,
                                                                           "SGLANG_SIM_FAILURE": "crash_loading"}}},
    {"name": "tp8pp1", "extra_vars": {"sglang_service_tp_size": 8, "sglang_service_pp_size": 1}},
]


def test_tune_keeps_the_candidate_that_measured_best_and_a_failed_one_is_a_row(tmp_path):
    with systemd_container("k26-it-tune-%d" % os.getpid()) as box:
        tokenizer = write_tokenizer(tmp_path / "tokenizer")
        box.exec("mkdir -p %s" % TOKENIZER)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            box.put("%s/%s" % (TOKENIZER, name), (tokenizer / name).read_text())
        inventory = demo_inventory(box, tmp_path / "inventory")
        settings = {"sglang_benchmark_input_tokens": 32, "sglang_benchmark_output_tokens": 32,
                    "sglang_benchmark_requests_per_concurrency": 2, "sglang_benchmark_min_requests": 4,
                    "sglang_benchmark_tokenizer": TOKENIZER, "sglang_benchmark_results_dir": str(tmp_path / "bench"),
                    "sglang_benchmark_wheelhouse": str(wheelhouse(AIPERF))}
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
