"""The benchmark's AIPerf command line and the reading of its export.

The two exports under tests/fixtures/aiperf were written by AIPerf 0.13.0 against the SGLang simulator: one run
where all 16 requests were served, one where half of 4 went to a closed port (ClientConnectorError).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import sglang_benchmark_aiperf as aiperf

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "aiperf"


def export(name):
    return json.loads((FIXTURES / (name + ".json")).read_text())


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_argv_asks_for_exact_lengths_streaming_and_the_servers_token_count():
    argv = aiperf.aiperf_argv("/opt/aiperf/bin/aiperf", "http://127.0.0.1:30000", "k26", "/models/k26", 8, 32,
                              256, 128, "/tmp/level-8")
    assert argv[:2] == ["/opt/aiperf/bin/aiperf", "profile"]
    assert (flag(argv, "--concurrency"), flag(argv, "--request-count")) == ("8", "32")
    assert (flag(argv, "--isl"), flag(argv, "--isl-stddev"), flag(argv, "--osl"), flag(argv, "--osl-stddev")) == (
        "256", "0", "128", "0")
    assert flag(argv, "--extra-inputs") == "ignore_eos:true"
    assert {"--streaming", "--use-server-token-count", "--no-gpu-telemetry"} <= set(argv)
    assert flag(argv, "--artifact-dir") == "/tmp/level-8" and flag(argv, "--ui") == "none"
    assert "--api-key" not in argv and "--goodput" not in argv


def test_argv_sends_requests_for_a_duration_instead_of_a_count():
    argv = aiperf.aiperf_argv("aiperf", "u", "m", "t", 8, 32, 8, 8, "d", duration=60)
    assert flag(argv, "--benchmark-duration") == "60" and "--request-count" not in argv


def test_argv_turns_the_slos_into_goodput():
    slos = {"ttft_ms": 500, "tpot_ms": 40, "itl_ms": None}
    argv = aiperf.aiperf_argv("aiperf", "u", "m", "t", 1, 4, 8, 8, "d", slos=slos)
    assert flag(argv, "--goodput") == "inter_token_latency:40 time_to_first_token:500"


def test_a_served_level_reads_every_figure():
    level = aiperf.level_record(4, export("concurrency4_all_served"), gpus=[{"index": 0}])
    assert level["concurrency"] == 4 and level["gpus"] == [{"index": 0}]
    assert level["output_tokens_per_second"] == pytest.approx(169.576)
    assert level["per_request_tokens_per_second"] == pytest.approx(44.338)
    assert level["requests_per_second"] == pytest.approx(5.299)
    assert level["goodput_requests_per_second"] == pytest.approx(5.299)
    assert level["output_tokens_mean"] == 32.0
    assert set(level["ttft_ms"]) == {"p50", "p90", "p99"}
    assert level["ttft_ms"]["p50"] <= level["ttft_ms"]["p90"] <= level["ttft_ms"]["p99"]
    assert level["itl_ms"]["p50"] == pytest.approx(23.062)
    assert level["tpot_ms"]["p50"] > 0
    assert (level["requests"], level["errors"], level["error_kinds"], level["complete"]) == (16, 0, [], True)


def test_a_level_with_failed_requests_counts_them_by_kind():
    level = aiperf.level_record(4, export("concurrency4_half_failed"))
    assert (level["requests"], level["errors"]) == (4, 2)
    assert level["error_kinds"] == [{"type": "ClientConnectorError", "count": 2}]


def test_a_level_where_every_request_failed_has_no_figures():
    level = aiperf.failed_level(8, 16)
    assert (level["requests"], level["errors"], level["complete"]) == (16, 16, False)
    assert level["output_tokens_per_second"] is None and level["ttft_ms"] is None


@pytest.mark.parametrize("concurrency, requests", [(1, 8), (2, 8), (8, 32), (32, 128)])
def test_every_slot_of_a_level_serves_several_requests(concurrency, requests):
    assert aiperf.requests_of(concurrency, 4, 8) == requests


def test_the_launcher_adds_the_key_inside_the_process_only(tmp_path):
    """LAUNCH_CODE run by a real interpreter, with an aiperf.cli that reports what AIPerf would see, and what any
    local user sees of its process (/proc/PID/cmdline and /proc/PID/environ)."""
    (tmp_path / "aiperf").mkdir()
    (tmp_path / "aiperf" / "__init__.py").write_text("")
    (tmp_path / "aiperf" / "cli.py").write_text(
        "import json, sys\n"
        "def app():\n"
        "    seen = open('/proc/self/cmdline', 'rb').read() + open('/proc/self/environ', 'rb').read()\n"
        "    print(json.dumps({'argv': sys.argv, 'key_in_proc': b'k-123' in seen, 'stdin': sys.stdin.read()}))\n"
        "    return 0\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", aiperf.LAUNCH_CODE, "profile", "--url", "u"], env=env,
                          input="k-123\nmore input\n", capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"argv": ["aiperf", "profile", "--url", "u", "--api-key", "k-123"],
                                       "key_in_proc": False, "stdin": ""}
    without = subprocess.run([sys.executable, "-c", aiperf.LAUNCH_CODE, "profile"], env=env, input="\n",
                             capture_output=True, text=True, check=True)
    assert json.loads(without.stdout)["argv"] == ["aiperf", "profile"]


def test_the_profiling_window_is_read_from_the_export():
    import datetime
    start, end = aiperf.profiling_window(export("concurrency4_all_served"))
    assert start == datetime.datetime(2026, 12, 1, 18, 31, 57, 724590).timestamp()
    assert 3.0 < end - start < 3.1
    assert aiperf.profiling_window({}) == (None, None)
    assert aiperf.profiling_window({"start_time": "not a time", "end_time": None}) == (None, None)


@pytest.mark.parametrize("info, expected", [
    ({"cuda_graph_config": {"decode": {"max_bs": 512, "bs": [1, 2, 4]}, "prefill": {"max_bs": 8192}}}, 512),
    ({"cuda_graph_max_bs": 256}, 256),
    ({"cuda_graph_config": {"decode": {"max_bs": None}}}, None),
    ({"model_path": "/models/k26"}, None), (None, None), ({"cuda_graph_max_bs": "n/a"}, None),
], ids=["resolved config", "the older field", "graphs off", "not said", "no answer", "not a number"])
def test_the_servers_largest_decode_graph_is_read_from_its_server_info(info, expected):
    assert aiperf.server_decode_graph_max_bs(info) == expected
