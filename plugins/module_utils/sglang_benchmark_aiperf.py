# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The load generator of the benchmark sweep: NVIDIA AIPerf (``aiperf profile``), one run per concurrency level.

Why AIPerf and not SGLang's ``python -m sglang.benchmark.serving``: SGLang 0.5.23's benchmark imports
``sglang.srt.disaggregation.utils``, whose package pulls in ``torchvision`` through ``sglang.srt.configs``; it
runs only where CUDA torch and a matching torchvision are installed, i.e. never on a CPU host, a router host or
in CI. AIPerf needs no torch, measures TTFT, inter-token and inter-chunk latency with p50/p90/p99, has goodput
against SLOs built in, and writes one JSON export per run, so the simulator and a GPU host are measured by the
same tool with the same definitions.

Definitions (AIPerf 0.13.0's export, schema 1.4; every metric is ``{"unit", "avg", "p50", "p90", "p99", ...}``):

- ``output_token_throughput.avg``: output tokens per second of the whole level (tokens/sec);
- ``output_token_throughput_per_user``: per request, 1000 / inter-token latency (tokens/sec/user);
- ``inter_token_latency``: per request, (latency - TTFT) / (output tokens - 1): SGLang's TPOT (ms);
- ``inter_chunk_latency``: the gaps between streamed chunks: SGLang's ITL (ms);
- ``error_request_count`` is absent when no request failed; when all fail AIPerf writes no export at all.
"""

from __future__ import annotations

import datetime

#: the export AIPerf writes into its --artifact-dir
EXPORT_FILE = "profile_export_aiperf.json"
#: AIPerf counts output tokens with the tokenizer over the returned text unless told to use the server's usage
PERCENTILES = ("p50", "p90", "p99")
#: our figure -> (AIPerf metric, statistic)
SCALARS = {
    "output_tokens_per_second": ("output_token_throughput", "avg"),
    "per_request_tokens_per_second": ("output_token_throughput_per_user", "p50"),
    "requests_per_second": ("request_throughput", "avg"),
    "goodput_requests_per_second": ("goodput", "avg"),
    "duration_s": ("benchmark_duration", "avg"),
    "output_tokens_mean": ("output_sequence_length", "avg"),
}
DISTRIBUTIONS = {
    "ttft_ms": "time_to_first_token",
    "tpot_ms": "inter_token_latency",
    "itl_ms": "inter_chunk_latency",
    "latency_ms": "request_latency",
}
#: run as ``python -c LAUNCH_CODE ARGS...`` with the venv's python and the API key (or nothing) as the first line of
#: its standard input: AIPerf's own CLI, the key added to its arguments inside the process, so that neither the
#: process list (/proc/PID/cmdline) nor its environment (/proc/PID/environ) shows it; standard input is /dev/null
#: afterwards. Its worker processes get their settings from it, not from argv.
LAUNCH_CODE = ("import os, sys; key = sys.stdin.readline().strip(); "
               "os.dup2(os.open(os.devnull, os.O_RDONLY), 0); sys.stdin = open(os.devnull); "
               "sys.argv = ['aiperf'] + sys.argv[1:] + (['--api-key', key] if key else []); "
               "from aiperf.cli import app; sys.exit(app())")
#: AIPerf's SLO names for goodput (milliseconds)
SLO_METRICS = {"ttft_ms": "time_to_first_token", "tpot_ms": "inter_token_latency"}


def aiperf_argv(aiperf, url, model, tokenizer, concurrency, requests, input_tokens, output_tokens, artifact_dir,
                slos=None, endpoint_type="chat", seed=42, duration=0):
    """The ``aiperf profile`` command line of one level (without the API key: the launcher adds it in-process):
    REQUESTS requests, or as many as DURATION seconds take when it is above 0.

    A request rate far above what a server reaches keeps AIPerf's timing process from spinning on a CPU core while
    the concurrency still bounds the requests in flight.
    """
    argv = [aiperf, "profile", "--model", model, "--tokenizer", tokenizer, "--url", url,
            "--endpoint-type", endpoint_type, "--streaming",
            "--concurrency", str(concurrency),
            *(("--benchmark-duration", str(duration)) if duration else ("--request-count", str(requests))),
            "--request-rate", str(max(200, 50 * concurrency)), "--arrival-pattern", "constant",
            "--isl", str(input_tokens), "--isl-stddev", "0", "--osl", str(output_tokens), "--osl-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--use-server-token-count",
            "--random-seed", str(seed), "--ui", "none", "--no-gpu-telemetry", "--no-server-metrics",
            "--export-level", "summary", "--artifact-dir", artifact_dir]
    goodput = " ".join("%s:%s" % (SLO_METRICS[key], value) for key, value in sorted((slos or {}).items())
                       if value and key in SLO_METRICS)
    if goodput:
        argv += ["--goodput", goodput]
    return argv


def requests_of(concurrency, per_concurrency, minimum):
    """Requests of one level: enough that every slot of the concurrency serves several."""
    return max(minimum, concurrency * per_concurrency)


def statistic(export, metric, name):
    value = (export.get(metric) or {}).get(name)
    return None if value is None else round(float(value), 3)


def level_record(concurrency, export, gpus=None):
    """One level's figures from AIPerf's export (None: AIPerf wrote none because every request failed)."""
    record = {"concurrency": concurrency, "gpus": list(gpus or [])}
    if export is None:
        record.update(dict.fromkeys(list(SCALARS) + list(DISTRIBUTIONS)), errors=None, requests=0, complete=False)
        return record
    for key, (metric, name) in SCALARS.items():
        record[key] = statistic(export, metric, name)
    for key, metric in DISTRIBUTIONS.items():
        record[key] = {name: statistic(export, metric, name) for name in PERCENTILES}
    record["requests"] = int(statistic(export, "completed_request_count", "avg") or 0)
    record["errors"] = int(statistic(export, "error_request_count", "avg") or 0)
    record["error_kinds"] = [{"type": (item.get("error_details") or {}).get("type"), "count": item.get("count")}
                             for item in export.get("error_summary") or []]
    record["complete"] = bool(export.get("is_complete")) and not export.get("was_cancelled")
    return record


def profiling_window(export):
    """(start, end) of the measured requests as Unix times (AIPerf writes local times without a zone), else
    (None, None); GPU samples outside it belong to AIPerf's own start and end, not to the level."""
    try:
        return tuple(datetime.datetime.fromisoformat(export[key]).timestamp() for key in ("start_time", "end_time"))
    except (KeyError, TypeError, ValueError):
        return None, None


def failed_level(concurrency, requests, gpus=None):
    """A level where every request failed (AIPerf exits 1 and writes no export)."""
    record = level_record(concurrency, None, gpus)
    record.update(requests=requests, errors=requests)
    return record


def server_decode_graph_max_bs(info):
    """The largest decode batch the server captured a CUDA graph for, from its /server_info (SGLang 0.5.23 answers with
    its resolved arguments: cuda_graph_config's decode max_bs; older ones with cuda_graph_max_bs), or None when it
    does not say (a server with graphs off, the simulator)."""
    config = (info or {}).get("cuda_graph_config")
    decode = config.get("decode") if isinstance(config, dict) else None
    value = decode.get("max_bs") if isinstance(decode, dict) else (info or {}).get("cuda_graph_max_bs")
    try:
        return int(value) if value else None
    except (TypeError, ValueError):
        return None
