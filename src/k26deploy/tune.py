# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``k26deploy tune``: measure candidate configurations on the target and keep the one that wins.

Each candidate (a layout such as ``tp4pp2``, or any set of extra variables) is deployed in turn with the real
``deploy_k26.yml`` and swept with the real benchmark (``k26deploy bench``: AIPerf, the GPUs sampled); a candidate that
does not come up is a row with its error, and the deploy has already rolled the host back to the configuration that
served. The winner for the operator's objective is deployed last, so the host is left serving it (or, when no
candidate served, the configuration the inventory asks for). The comparison is written as JSON, Markdown and PNG.

The pure parts (candidates, scores, the choice, the report) are apart from the runs (:func:`tune`), which take the
``deploy`` and ``bench`` functions so that a caller can observe or replace them.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .runner import BadInputError, untrusted

#: objectives: what a sweep's figures are worth
OBJECTIVE_C1 = "c1"                  # output tok/s of one request alone (interactive use)
OBJECTIVE_THROUGHPUT = "throughput"  # output tok/s of the best level whose TTFT p99 stays within the SLO
OBJECTIVES = (OBJECTIVE_C1, OBJECTIVE_THROUGHPUT)
#: what a score is, per objective, in the report's sentences (and in preflight's K26-TUNED, through the report)
UNITS = {OBJECTIVE_C1: "tok/s of one request alone", OBJECTIVE_THROUGHPUT: "tok/s within the TTFT SLO"}
_LAYOUT = re.compile(r"^tp(\d+)pp(\d+)$")


@dataclass
class Candidate:
    name: str
    extra_vars: dict[str, Any]


@dataclass
class Row:
    """One candidate's outcome: its sweep's levels and score, or the error it failed with."""
    name: str
    extra_vars: dict[str, Any]
    ok: bool = False
    score: float | None = None
    score_level: int | None = None
    levels: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    deploy_exit: int | None = None
    seconds: float = 0.0


def layout_candidate(name: str) -> Candidate:
    """``tp4pp2`` -> the variables that deploy that layout."""
    match = _LAYOUT.match(name.strip().lower())
    if not match:
        raise ValueError(f"{name!r} is no layout: write tpNppM, e.g. tp8pp1 or tp4pp2")
    tp, pp = int(match.group(1)), int(match.group(2))
    if tp < 1 or pp < 1:
        raise ValueError(f"{name!r}: tp and pp are 1 or more")
    return Candidate(f"tp{tp}pp{pp}", {"sglang_service_tp_size": tp, "sglang_service_pp_size": pp})


def profile_candidate(name: str, known: Sequence[str]) -> Candidate:
    """A profile of the sglang_service role (``known``: the names its vars/profiles hold) -> the variables that
    deploy it."""
    name = name.strip()
    if name not in known:
        raise ValueError(f"{name!r} is no profile of the sglang_service role: one of {', '.join(sorted(known))}")
    return Candidate(name, {"sglang_service_profile": name})


def layouts_for(gpus: int) -> list[Candidate]:
    """Every tp x pp that uses ``gpus`` GPUs, tensor parallel widest first."""
    return [layout_candidate(f"tp{tp}pp{gpus // tp}") for tp in range(gpus, 0, -1) if gpus % tp == 0]


def candidates_from_file(text: str) -> list[Candidate]:
    """A JSON list of {"name": ..., "extra_vars": {...}} (any variables: graph sizes, batch limits, ...)."""
    data = json.loads(text)
    if not isinstance(data, list) or not data:
        raise ValueError("the candidates file holds a non-empty JSON list of {name, extra_vars}")
    found = []
    for item in data:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]
                and isinstance(item.get("extra_vars"), dict)):
            raise ValueError(f"a candidate is {{\"name\": text, \"extra_vars\": {{...}}}}, not {item!r}")
        found.append(Candidate(item["name"], dict(item["extra_vars"])))
    names = [candidate.name for candidate in found]
    if len(set(names)) != len(names):
        raise ValueError(f"candidate names repeat: {names}")
    return found


def score(levels: Sequence[Mapping[str, Any]], objective: str, slo_ttft_ms: float | None = None,
          concurrency: int = 1) -> tuple[float | None, int | None]:
    """(the sweep's worth for ``objective``, the concurrency it came from); (None, None) when no level qualifies."""
    served = [level for level in levels if not level.get("errors") and level.get("output_tokens_per_second")]
    if objective == OBJECTIVE_C1:
        chosen = [level for level in served if level.get("concurrency") == concurrency]
    elif objective == OBJECTIVE_THROUGHPUT:
        chosen = [level for level in served if slo_ttft_ms is None
                  or ((level.get("ttft_ms") or {}).get("p99") or float("inf")) <= slo_ttft_ms]
    else:
        raise ValueError(f"objective is one of {OBJECTIVES}, not {objective!r}")
    if not chosen:
        return None, None
    best = max(chosen, key=lambda level: level["output_tokens_per_second"])
    return float(best["output_tokens_per_second"]), int(best["concurrency"])


def winner(rows: Sequence[Row]) -> Row | None:
    """The row with the highest score (the first of equals: the order the operator gave)."""
    scored = [row for row in rows if row.ok and row.score is not None]
    return max(scored, key=_score) if scored else None


def _score(row: Row) -> float:
    """A scored row's score (0.0 for one without)."""
    return row.score or 0.0


def why(rows: Sequence[Row], best: Row | None, objective: str) -> str:
    """One sentence: what won and by how much, or why nothing did."""
    worth = UNITS[objective]
    if best is None:
        failed = [row.name for row in rows if not row.ok]
        return (f"no candidate produced a figure ({', '.join(failed)} failed to serve or to benchmark); "
                "the host was left with the configuration the inventory asks for")
    others = sorted((row for row in rows if row is not best and row.score), key=lambda row: -_score(row))
    if not others:
        return f"{best.name} is the only candidate that served: {_score(best):.1f} {worth}"
    runner_up = others[0]
    return (f"{best.name} wins with {_score(best):.1f} {worth}, {_score(best) / _score(runner_up):.2f}x "
            f"{runner_up.name} ({_score(runner_up):.1f})")


def markdown(report: Mapping[str, Any]) -> str:
    rows = report["rows"]
    out = [f"# k26deploy tune: {report['time']}", "", f"Objective: {report['objective']}"
           + (f" (TTFT p99 within {report['slo_ttft_ms']} ms)" if report.get("slo_ttft_ms") else "")
           + f"; levels {report['levels']}.", "", f"**{report['why']}.**", "",
           "| candidate | score tok/s | at C | " + " | ".join(f"C={c} tok/s" for c in report["levels"])
           + " | error |", "|---|---|---|" + "---|" * len(report["levels"]) + "---|"]
    for row in rows:
        by_level = {level.get("concurrency"): level for level in row["levels"]}
        cells = ["%.1f" % by_level[c]["output_tokens_per_second"]
                 if by_level.get(c, {}).get("output_tokens_per_second") else "-" for c in report["levels"]]
        out.append(f"| {row['name']}{' (kept)' if row['name'] == report['winner'] else ''} | "
                   + ("%.1f" % row["score"] if row["score"] is not None else "-")
                   + f" | {row['score_level'] or '-'} | " + " | ".join(cells) + f" | {row['error'] or ''} |")
    return "\n".join(out) + "\n"


def plot(report: Mapping[str, Any], path: Path) -> None:
    """tok/s per concurrency level, one line per candidate that served."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for row in report["rows"]:
        points = sorted((level["concurrency"], level["output_tokens_per_second"]) for level in row["levels"]
                        if level.get("output_tokens_per_second"))
        if points:
            axes.plot([c for c, dummy in points], [t for dummy, t in points], marker="o",
                      label=row["name"] + (" (kept)" if row["name"] == report["winner"] else ""))
    axes.set_xlabel("concurrency")
    axes.set_ylabel("output tok/s")
    axes.set_title("k26deploy tune")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def write_report(report: Mapping[str, Any], directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / ("tune-" + report["time"].replace(":", ""))
    files = {"json": str(stem.with_suffix(".json")), "markdown": str(stem.with_suffix(".md")),
             "png": str(stem.with_suffix(".png"))}
    # the one file preflight reads: never writable by the group or others, whatever the umask (latest_report)
    fd = os.open(files["json"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & ~0o022)
        handle.write(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    Path(files["markdown"]).write_text(markdown(report))
    plot(report, Path(files["png"]))
    return files


def _first_error(result: Any) -> str:
    for host in result.hosts.values():
        if host.failed or host.bad_input or host.unreachable or host.ready is False:
            return f"{host.host}: {host.reason or 'failed'}: {(host.msg or '').strip()[:300]}"
    return (result.error or f"exit {result.exit_code}").strip()


def _levels(result: Any) -> list[dict[str, Any]]:
    """The sweep's levels (the first host's; a tune targets one host, or hosts alike)."""
    for host in result.hosts.values():
        if host.benchmark and host.benchmark.get("levels"):
            return list(host.benchmark["levels"])
    return []


def run_candidate(candidate: Candidate, base: Mapping[str, Any], deploy: Callable[..., Any],
                  bench: Callable[..., Any], objective: str, slo_ttft_ms: float | None) -> Row:
    row = Row(candidate.name, dict(candidate.extra_vars))
    started = time.monotonic()
    extra = dict(base, **candidate.extra_vars)
    deployed = deploy(extra_vars=extra)
    row.deploy_exit = deployed.exit_code
    if deployed.exit_code != 0:
        row.error = "did not serve: " + _first_error(deployed)
    else:
        swept = bench(extra_vars=extra)
        row.levels = _levels(swept)
        if swept.exit_code != 0 and not row.levels:
            row.error = "benchmark failed: " + _first_error(swept)
        else:
            row.score, row.score_level = score(row.levels, objective, slo_ttft_ms)
            row.ok = row.score is not None
            if not row.ok:
                row.error = "no level met the objective"
    row.seconds = round(time.monotonic() - started, 1)
    return row


def tune(candidates: Sequence[Candidate], deploy: Callable[..., Any], bench: Callable[..., Any],
         base_vars: Mapping[str, Any] | None = None, objective: str = OBJECTIVE_C1,
         slo_ttft_ms: float | None = None, levels: Sequence[int] = (1, 8),
         results_dir: Path | None = None, on_row: Callable[[Row], None] | None = None,
         inventory: str | None = None) -> dict[str, Any]:
    """Deploy and sweep each candidate, keep the winner in service; the comparison (and its files) as a dict.
    ``inventory`` (its resolved path) and the hosts the winner was kept on are recorded: preflight and status of
    the same inventory compare those hosts' configuration with the rows (:func:`latest_report`)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective is one of {OBJECTIVES}, not {objective!r}")
    base = dict(base_vars or {}, sglang_benchmark_levels=list(levels))
    rows = []
    for candidate in candidates:
        rows.append(run_candidate(candidate, base, deploy, bench, objective, slo_ttft_ms))
        if on_row:
            on_row(rows[-1])
    best = winner(rows)
    kept = deploy(extra_vars=dict(base, **(best.extra_vars if best else {})))
    report = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "objective": objective,
              "unit": UNITS[objective],
              "slo_ttft_ms": slo_ttft_ms, "levels": list(levels), "rows": [asdict(row) for row in rows],
              "winner": best.name if best else None, "why": why(rows, best, objective),
              "kept_exit": kept.exit_code, "kept_serving": kept.exit_code == 0,
              "inventory": inventory, "hosts": sorted(kept.hosts)}
    if results_dir is not None:
        report["files"] = write_report(report, Path(results_dir))
    return report


#: what preflight needs of a report (k26.deploy's sglang_tune_evidence): the operator's candidates and the figures,
#: never a host's error text, which would pass through Ansible's templating as an extra variable
PREFLIGHT_ROW_FIELDS = ("name", "extra_vars", "ok", "score", "score_level")


def read_own_report(path: Path) -> str:
    """The text of the report at ``path``, refused (BadInputError) unless it is a file of the user who runs the
    command that neither its group nor others may write: what it holds reaches every host's preflight."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise BadInputError(f"tune report {path} is not a regular file: remove it")
        if info.st_uid != os.geteuid():
            raise BadInputError(f"tune report {path} is owned by uid {info.st_uid}, not by uid {os.geteuid()} who "
                                "runs k26deploy: remove it (or chown it to that user if you trust what it holds)")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise BadInputError(f"tune report {path} is writable by its group or others (mode "
                                f"{stat.S_IMODE(info.st_mode):04o}): remove it (or chmod go-w it if you trust it)")
        return handle.read().decode("utf-8")


def latest_report(directory: Path, inventory: str | None) -> dict[str, Any] | None:
    """The newest tune report in ``directory`` made with ``inventory``, in the form preflight reads, or None. Every
    text in it is :func:`~k26deploy.runner.untrusted`: Ansible takes it as data, never as a template. A report file
    of another user, or one its group or others may write, is refused (:func:`read_own_report`)."""
    found = []
    for path in Path(directory).glob("tune-*.json"):
        try:
            report = json.loads(read_own_report(path))
        except BadInputError:
            raise
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and report.get("inventory") == inventory and report.get("rows"):
            found.append((str(report.get("time", "")), path, report))
    if not found:
        return None
    dummy, path, report = max(found, key=lambda item: item[:2])
    return untrusted({"time": report.get("time"), "objective": report.get("objective"), "unit": report.get("unit"),
                      "winner": report.get("winner"),
                      "hosts": list(report.get("hosts") or []), "file": str(path),
                      "rows": [{key: row.get(key) for key in PREFLIGHT_ROW_FIELDS} for row in report["rows"]]})
