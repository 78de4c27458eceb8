# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a benchmark sweep means: change against the baseline, diagnosis lines, the gate, the Markdown table.

Pure functions over plain data, shared by the benchmark module (on the target) and the report module (on the
controller). A sweep result is a dict::

    {"host", "time", "config_hash", "options" (secrets stripped), "pp_size", "levels": [LEVEL, ...],
     "journal_lines": [str], "diagnosis": [...], "baseline": {...} or None, "changes": [...]}

and a LEVEL (sglang_benchmark_aiperf.level_record) carries ``concurrency``, ``output_tokens_per_second``,
``per_request_tokens_per_second``, ``requests_per_second``, ``ttft_ms`` / ``tpot_ms`` / ``itl_ms`` (p50, p90,
p99), ``errors``, ``goodput_requests_per_second`` and ``gpus`` (per GPU: utilization, power share, SM clock).
Config-only causes come from the preflight rules (one home); this file adds what only a measurement shows.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import option_keys, without_secrets

#: the figures compared with the baseline, per level; higher is better for all of them
COMPARED = ("output_tokens_per_second", "per_request_tokens_per_second")
#: the figure the gate holds: the aggregate output throughput of a level
GATED = "output_tokens_per_second"
#: a GPU drawing less than this share of its power limit at the highest concurrency is waiting, not working
LOW_POWER_PCT = 40.0
#: the aggregate at the highest concurrency grows by less than this factor from concurrency 8: flat
FLAT_FACTOR = 1.15
#: journal lines that show compilation while requests are being served (Triton, DeepGEMM, torch.compile)
JIT_PATTERN = re.compile(r"\bJIT\b|jit[ _-]?compil|Compiling .*kernel|torch\._inductor|torch\._dynamo|autotun",
                         re.IGNORECASE)
#: the rules whose config-only findings explain a slow benchmark
CONFIG_RULES = ("K26-CUDA-GRAPH-OFF", "K26-CUDA-GRAPH-PARTIAL", "K26-LAYOUT-TOPOLOGY")


def config_hash(options):
    """A short hash of the SGLang configuration (secrets left out), to tell results of different configs apart."""
    text = json.dumps(option_keys(without_secrets(options or {})), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def result_stem(host, when, digest):
    """The file name (without extension) of one sweep's results: host, UTC time and configuration hash."""
    return "%s-%s-%s" % (re.sub(r"[^A-Za-z0-9_.-]", "_", host), when.replace(":", "").replace("-", ""), digest)


def pick_baseline(host, previous):
    """The newest earlier sweep of HOST that did not fail its gate (a sweep the gate rolled back is no baseline)."""
    eligible = [sweep for sweep in previous if sweep.get("host") == host
                and (sweep.get("gate") or {}).get("passed") is not False]
    return max(eligible, key=lambda sweep: sweep.get("time") or "", default=None)


def read_sweeps(results_dir):
    """Every sweep result (JSON) in ``results_dir``, each with the ``file`` it came from; unreadable files skipped."""
    sweeps = []
    for path in glob.glob(os.path.join(results_dir, "*.json")):
        try:
            with open(path) as handle:
                sweep = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(sweep, dict):
            sweep["file"] = path
            sweeps.append(sweep)
    return sweeps


def monitoring_baseline(host, sweeps):
    """What Prometheus holds a server's throughput to: the baseline sweep of HOST (pick_baseline) at its highest
    concurrency that served without errors - {time, file, config_hash, concurrency, output_tokens_per_second} - or
    None."""
    baseline = pick_baseline(host, sweeps)
    served = [level for level in (baseline or {}).get("levels") or []
              if not level.get("errors") and level.get(GATED) and level.get("concurrency")]
    if not served:
        return None
    top = max(served, key=lambda level: level["concurrency"])
    return {"time": baseline.get("time"), "file": baseline.get("file"), "config_hash": baseline.get("config_hash"),
            "concurrency": int(top["concurrency"]), GATED: float(top[GATED])}


def baseline_reference(baseline):
    """What a result keeps of its baseline: when, which configuration, which file, its levels (not its baseline)."""
    if not baseline:
        return None
    return {key: baseline.get(key) for key in ("time", "config_hash", "file", "levels")}


def by_concurrency(levels):
    return {level["concurrency"]: level for level in levels or []}


def percent_change(before, after, digits=1):
    if before in (None, 0) or after is None:
        return None
    change = 100.0 * (after - before) / before
    return change if digits is None else round(change, digits)


def changes(levels, baseline_levels):
    """Per level present in both runs: each compared figure before, after and its change in %."""
    before = by_concurrency(baseline_levels)
    rows = []
    for level in levels:
        old = before.get(level["concurrency"])
        if old is None:
            continue
        for metric in COMPARED:
            rows.append({"concurrency": level["concurrency"], "metric": metric, "before": old.get(metric),
                         "after": level.get(metric), "change_pct": percent_change(old.get(metric), level.get(metric))})
    return rows


def gate(change_rows, max_loss_pct):
    """(passed, message): fails when a level's aggregate throughput fell by more than max_loss_pct %."""
    worse = [row for row in change_rows if row["metric"] == GATED
             and (percent_change(row["before"], row["after"], digits=None) or 0.0) < -max_loss_pct]
    if not worse:
        return True, "no level lost more than %.1f%% of its output throughput against the baseline" % max_loss_pct
    return False, "slower than the baseline by more than %.1f%%: %s" % (max_loss_pct, "; ".join(
        "C=%d %.1f -> %.1f tok/s (%+.1f%%)" % (row["concurrency"], row["before"], row["after"], row["change_pct"])
        for row in worse))


# ---------------------------------------------------------------------------------------------------- diagnosis

def diagnosis(sweep):
    """Diagnosis lines (dicts: id, message, evidence, fix), config causes first, then what only the run shows."""
    levels = sorted(sweep.get("levels") or [], key=lambda level: level["concurrency"])
    found = []
    graph = sweep.get("decode_graph_max_bs")  # the server's own (its /server_info), else not known
    resolution = {"ok": True, "resolved": {"cuda_graph": {"decode": {"max_bs": graph}}}} if graph else None
    context = rules.build_context(sweep.get("options") or {}, gpu={"topology": sweep.get("topology")},
                                  resolution=resolution)
    config_findings = {item["id"]: item for item in rules.evaluate(context) if item["id"] in CONFIG_RULES}
    graphs = config_findings.get("K26-CUDA-GRAPH-OFF")
    if graphs:
        found.append(cuda_graphs_off(graphs, levels))
    partial = config_findings.get("K26-CUDA-GRAPH-PARTIAL")
    if partial:
        found.append(cuda_graphs_partial(partial, levels))
    layout = config_findings.get("K26-LAYOUT-TOPOLOGY")
    if layout:
        found.append(layout_fights_interconnect(layout, levels))
    for check in (low_power, flat_throughput, errors_at_levels):
        line = check(levels)
        if line:
            found.append(line)
    jit = jit_compilation(sweep.get("journal_lines") or [])
    if jit:
        found.append(jit)
    return found


def line(diagnosis_id, message, fix, evidence):
    return {"id": diagnosis_id, "message": message, "fix": fix, "evidence": evidence}


def cuda_graphs_off(finding, levels):
    first = levels[0] if levels else {}
    evidence = dict(finding["evidence"])
    evidence["measured per-request tok/s at C=%s" % first.get("concurrency")] = first.get(
        "per_request_tokens_per_second")
    # the seed's +44% is one layout at one request (the rule's message cites it): no gain is promised for this one
    return line("K26-BENCH-CUDA-GRAPH-OFF", finding["message"] + " What graphs gain on this layout is not measured "
                "here: k26deploy tune compares graphs on and off.",
                finding["fix"], evidence)


def cuda_graphs_partial(finding, levels):
    """Graphs off for the batches above the largest captured one: what the sweep measured there, if anything."""
    graph = finding["evidence"].get("largest_decode_graph")
    evidence = dict(finding["evidence"], **top_level_evidence(levels))
    eager = [level["concurrency"] for level in levels if graph and level["concurrency"] > graph]
    if eager:
        measured = " Measured without a graph here: concurrency %s." % ", ".join(str(c) for c in eager)
    elif levels and graph:
        measured = (" This sweep stopped at concurrency %d, within the graphs: its figures do not show the loss."
                    % levels[-1]["concurrency"])
    else:
        measured = ""
    return line("K26-BENCH-CUDA-GRAPH-PARTIAL", finding["message"] + measured, finding["fix"], evidence)


def mean_utilization(level):
    values = [gpu["utilization_gpu_pct"]["mean"] for gpu in level.get("gpus") or []
              if gpu.get("utilization_gpu_pct", {}).get("mean") is not None]
    return round(sum(values) / len(values), 1) if values else None


def top_level_evidence(levels):
    """Throughput and GPU utilization at the highest concurrency measured (levels sorted by concurrency)."""
    if not levels:
        return {}
    top = levels[-1]
    evidence = {"tok/s at C=%d" % top["concurrency"]: top.get("output_tokens_per_second")}
    utilization = mean_utilization(top)
    if utilization is not None:
        evidence["GPU utilization at C=%d" % top["concurrency"]] = "%.1f%%" % utilization
    return evidence


def layout_fights_interconnect(finding, levels):
    evidence = dict(finding["evidence"], **top_level_evidence(levels))
    return line("K26-BENCH-LAYOUT", "Layout against the interconnect: " + finding["message"], finding["fix"], evidence)


def low_power(levels):
    if not levels or not levels[-1].get("gpus"):
        return None
    top = levels[-1]
    shares = [gpu["power_draw_pct_of_limit"] for gpu in top["gpus"] if gpu.get("power_draw_pct_of_limit") is not None]
    if not shares or max(shares) >= LOW_POWER_PCT:
        return None
    return line("K26-BENCH-LOW-POWER",
                "At concurrency %d the GPUs draw at most %.0f%% of their power limit: they wait for work instead of "
                "computing." % (top["concurrency"], max(shares)),
                "Look at the CUDA graph and pipeline findings; raise max-running-requests if requests queue.",
                {"power %% of limit per GPU at C=%d" % top["concurrency"]: shares,
                 "tok/s": top.get("output_tokens_per_second")})


def flat_throughput(levels):
    at = by_concurrency(levels)
    top = levels[-1] if levels else None
    if 8 not in at or top is None or top["concurrency"] <= 8:
        return None
    base, high = at[8].get("output_tokens_per_second"), top.get("output_tokens_per_second")
    if not base or high is None or high >= base * FLAT_FACTOR:
        return None
    return line("K26-BENCH-FLAT",
                "Throughput is flat from concurrency 8 upwards: %.1f tok/s at C=8, %.1f at C=%d (x%.2f for x%.0f "
                "the requests)." % (base, high, top["concurrency"], high / base, top["concurrency"] / 8.0),
                "Something caps the batch: check max-running-requests and cuda-graph-max-bs-decode against the "
                "concurrency you serve.",
                {"tok/s at C=8": base, "tok/s at C=%d" % top["concurrency"]: high})


def errors_at_levels(levels):
    failing = {level["concurrency"]: level.get("errors") for level in levels if level.get("errors")}
    if not failing:
        return None
    return line("K26-BENCH-ERRORS",
                "Requests failed or timed out: %s." % ", ".join(
                    "%d at C=%d" % (count, c) for c, count in sorted(failing.items())),
                "Read the journal of the benchmark's time (k26deploy logs) for the failing requests.",
                {"errors per concurrency": failing})


def jit_compilation(journal_lines):
    hits = [text for text in journal_lines if JIT_PATTERN.search(text)]
    if not hits:
        return None
    return line("K26-BENCH-JIT",
                "The server compiled kernels while the benchmark ran (%d journal line(s)): those requests paid for "
                "the compilation, and a cold cache will do it again after every restart." % len(hits),
                "Keep the JIT caches (Triton, DeepGEMM, torch.compile) on persistent disk and warm them before "
                "serving; benchmark again.",
                {"journal": hits[:5]})


# ---------------------------------------------------------------------------------------------------- Markdown

def cell(value, digits=1):
    return "-" if value is None else ("%.*f" % (digits, value) if isinstance(value, float) else str(value))


def markdown(sweep):
    """The human report: the sweep's table, the change per level against the baseline, the diagnosis."""
    out = ["# SGLang benchmark: %s, %s" % (sweep["host"], sweep["time"]), "",
           "Configuration %s; %s." % (sweep["config_hash"], sweep.get("tool", "aiperf")), "",
           "| C | tok/s | tok/s per request | req/s | TTFT p50/p90/p99 ms | TPOT p50/p90/p99 ms "
           "| ITL p50/p90/p99 ms | errors | goodput req/s | GPU util mean/max % | power % of limit | SM MHz |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for level in sweep["levels"]:
        gpus = level.get("gpus") or []
        out.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            level["concurrency"], cell(level.get("output_tokens_per_second")),
            cell(level.get("per_request_tokens_per_second")), cell(level.get("requests_per_second"), 2),
            percentiles(level.get("ttft_ms")), percentiles(level.get("tpot_ms")), percentiles(level.get("itl_ms")),
            cell(level.get("errors")), cell(level.get("goodput_requests_per_second"), 2),
            " ".join("%s/%s" % (cell(gpu["utilization_gpu_pct"]["mean"]), cell(gpu["utilization_gpu_pct"]["max"]))
                     for gpu in gpus) or "-",
            " ".join(cell(gpu.get("power_draw_pct_of_limit")) for gpu in gpus) or "-",
            " ".join(cell(gpu["clocks_sm_mhz"]["mean"], 0) for gpu in gpus) or "-"))
    baseline = sweep.get("baseline")
    out += ["", "## Against the baseline (%s)" % (
        "%s, configuration %s" % (baseline["time"], baseline["config_hash"]) if baseline else "none: first run")]
    if sweep.get("changes"):
        out += ["", "| C | figure | before | after | change |", "|---|---|---|---|---|"]
        out += ["| %d | %s | %s | %s | %s |" % (row["concurrency"], row["metric"], cell(row["before"]),
                                                cell(row["after"]), "-" if row["change_pct"] is None
                                                else "%+.1f%%" % row["change_pct"]) for row in sweep["changes"]]
    out += ["", "## Diagnosis", ""]
    out += ["- **%s** %s Fix: %s. Evidence: %s"
            % (item["id"], item["message"], item["fix"], json.dumps(item["evidence"], default=str))
            for item in sweep.get("diagnosis") or []] or ["Nothing found that costs throughput."]
    return "\n".join(out) + "\n"


def percentiles(values):
    values = values or {}
    return "/".join(cell(values.get(key)) for key in ("p50", "p90", "p99"))


def level_line(level, before=None):
    """'C=8: 95.6 tok/s (12.0 per request), +44.1% against the baseline, TTFT p50 80.1 ms, errors 0, GPU util 12%'."""
    change = percent_change((before or {}).get(GATED), level.get(GATED))
    utilization = mean_utilization(level)
    return "C=%d: %s tok/s (%s per request)%s, TTFT p50 %s ms, errors %s%s" % (
        level["concurrency"], cell(level.get(GATED)), cell(level.get("per_request_tokens_per_second")),
        "" if change is None else ", %+.1f%% against the baseline" % change,
        cell((level.get("ttft_ms") or {}).get("p50")), cell(level.get("errors")),
        "" if utilization is None else ", GPU util %.1f%%" % utilization)


def summary_lines(sweep):
    """One line per level and per diagnosis, for the CLI and the play's output."""
    before = by_concurrency((sweep.get("baseline") or {}).get("levels"))
    lines = [level_line(level, before.get(level["concurrency"])) for level in sweep["levels"]]
    lines += ["%s: %s Fix: %s" % (item["id"], item["message"], item["fix"]) for item in sweep.get("diagnosis") or []]
    return lines
