"""The seed's two configurations and TP8, measured with the benchmark's load generator against the simulator.

Starts the SGLang simulator on loopback (CPU mode, its performance model) for the seed's slow configuration
(PP8, CUDA graphs disabled, pp-async-batch-depth 0), its fix (PP8, graphs on, depth 8; at concurrency 1 only the
graphs can matter, the depth acts with more requests than stages) and TP8, the layout the published measurements
of 8x RTX PRO 6000 over PCIe favour. Runs AIPerf (.cache/aiperf-venv, made by scripts/setup_aiperf.sh) at each
concurrency level against each, through the collection's own argv builder and export parser, and prints per level:
tok/s measured, what the model predicts, the published figure where there is one, and each configuration's gain
over the slow one. Then the diagnosis the report gives for the slow configuration on that machine's PCIe
topology.

Usage: .venv/bin/python bench/benchmark_model.py [--levels 1 8 16 32] [--output-tokens 32]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / ".collections"), str(ROOT / "roles" / "sglang" / "files"), str(ROOT / "tests" / "integration"),
                str(ROOT / "tests" / "unit")]

from sglang_simulator.options import parse_args  # noqa: E402
from sglang_simulator.performance import PerformanceModel  # noqa: E402
from ansible_collections.k26.deploy.plugins.module_utils import sglang_benchmark_aiperf as aiperf  # noqa: E402
from ansible_collections.k26.deploy.plugins.module_utils import sglang_benchmark_report as report  # noqa: E402
from sim_tokenizer import write_tokenizer  # noqa: E402
import topologies  # noqa: E402

SIMULATOR = ROOT / "roles" / "sglang" / "files" / "sglang_simulator"
AIPERF = Path(os.environ.get("AIPERF_VENV", ROOT / ".cache" / "aiperf-venv")) / "bin" / "aiperf"
CONFIGS = {
    "PP8 graphs off, depth 0": ["--pp-size", "8", "--disable-cuda-graph"],
    "PP8 graphs on, depth 8": ["--pp-size", "8", "--pp-async-batch-depth", "8"],
    "TP8": ["--tp-size", "8"],
}
# the published figures (sglang_perf_facts.MEASUREMENTS): the seed's own, and vLLM's TP8 on the same hardware
SEED = {("PP8 graphs off, depth 0", 1): 24.7, ("PP8 graphs off, depth 0", 8): 95.6,
        ("PP8 graphs on, depth 8", 1): 35.6, ("PP8 graphs on, depth 8", 16): 156.4,
        ("PP8 graphs on, depth 8", 32): 248.0, ("TP8", 1): 88.5, ("TP8", 8): 340.7, ("TP8", 16): 475.2}
KEY = "bench-key-not-secret"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_simulator(model_dir, flags, log_path):
    port = free_port()
    env = dict(os.environ, SGLANG_SIM_LOAD_SECONDS="0", SGLANG_SIM_GRAPH_SECONDS="0", SGLANG_SIM_WARMUP_SECONDS="0",
               SGLANG_SIM_GPU="off")
    proc = subprocess.Popen([sys.executable, str(SIMULATOR), "--model-path", str(model_dir), "--served-model-name",
                             "k26", "--host", "127.0.0.1", "--port", str(port), "--api-key", KEY, *flags],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1)
            return proc, "http://127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the simulator did not become healthy: %s" % Path(log_path).read_text()[-2000:])


def run_level(url, model_dir, concurrency, requests, output_tokens, workdir):
    artifacts = Path(workdir) / ("c%d-%d" % (concurrency, time.monotonic_ns()))
    argv = aiperf.aiperf_argv(str(AIPERF), url, "k26", str(model_dir), concurrency, requests, 64, output_tokens,
                              str(artifacts)) + ["--api-key", KEY]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    export = artifacts / aiperf.EXPORT_FILE
    if not export.exists():
        raise SystemExit("aiperf wrote no export (exit %d): %s" % (done.returncode, done.stdout[-2000:]))
    return aiperf.level_record(concurrency, json.loads(export.read_text()))


def predicted(flags, concurrency):
    args = parse_args(["--model-path", "m", *flags], {})[0]
    return PerformanceModel.of(args).throughput(concurrency)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--output-tokens", type=int, default=32)
    options = parser.parse_args()
    if not AIPERF.exists():
        raise SystemExit("%s is missing: run scripts/setup_aiperf.sh" % AIPERF)
    results = {}
    with tempfile.TemporaryDirectory(prefix="k26-bench-model-") as workdir:
        model_dir = write_tokenizer(Path(workdir) / "model")
        for name, flags in CONFIGS.items():
            proc, url = start_simulator(model_dir, flags, Path(workdir) / "sim.log")
            try:
                results[name] = [run_level(url, model_dir, level, max(4, 2 * level), options.output_tokens, workdir)
                                 for level in options.levels]
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    slow = next(iter(CONFIGS))
    print("%-28s %4s %10s %10s %10s %12s %8s" % ("configuration", "C", "tok/s", "model", "published", "per request",
                                                 "errors"))
    for name, levels in results.items():
        for level in levels:
            print("%-28s %4d %10.1f %10.1f %10s %12.1f %8d" % (
                name, level["concurrency"], level["output_tokens_per_second"],
                predicted(CONFIGS[name], level["concurrency"]),
                SEED.get((name, level["concurrency"]), "-"), level["per_request_tokens_per_second"], level["errors"]))
    for name in list(CONFIGS)[1:]:
        print("\n%s against the slow configuration (same run):" % name)
        for before, after in zip(results[slow], results[name]):
            print("  C=%-3d %+6.1f%% tok/s   %+6.1f%% per request" % (
                before["concurrency"],
                report.percent_change(before["output_tokens_per_second"], after["output_tokens_per_second"]),
                report.percent_change(before["per_request_tokens_per_second"],
                                      after["per_request_tokens_per_second"])))
    sweep = {"options": {"tp-size": 1, "pp-size": 8, "disable-cuda-graph": True}, "levels": results[slow],
             "topology": topologies.RECORDED_RTX_PRO_6000_2NUMA8}
    print("\ndiagnosis of the slow configuration on 8x RTX PRO 6000 over PCIe (recorded topology):")
    for item in report.diagnosis(sweep):
        print("  %s: %s\n    fix: %s" % (item["id"], item["message"], item["fix"]))


if __name__ == "__main__":
    main()
