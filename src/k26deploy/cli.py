# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``k26deploy`` command line: deploy|preflight|status|rollback|logs|bench|tune over ansible-runner.

Usage::

    k26deploy deploy  [-i INVENTORY] [-e key=value | -e @vars.yml | -e '{"k": 1}'] [--limit PATTERN]
                      [--check] [--diff] [--json] [--artifacts-dir DIR] [--quiet] [-v]
    k26deploy status  --json
    k26deploy logs    --limit gpu-01
    k26deploy tune    --layouts tp8pp1,tp4pp2,tp1pp8 [--objective c1|throughput --slo-ttft-ms MS] [--levels 1,8]

While a playbook runs, a live view goes to stderr (tasks, failures, and per host during the
readiness wait: phase, elapsed time, latest journal line); ``--quiet`` turns it off and
``-v`` shows Ansible's own output instead (``-vv`` also passes ``-v`` to ansible-playbook,
``-vvv`` passes ``-vv``, ...). At the end a
summary per host goes to stdout, or with ``--json`` the ``RunResult`` as JSON and nothing else.

Exit codes:

    0    ready / ok
    1    failed (a task failed, a host is not ready, the run did not succeed)
    2    bad input: argument validation or preflight failed, bad -e/-i, missing playbook
    3    timed out: readiness gave up (reason timeout or warmup_failed)
    4    a host was unreachable
    130  cancelled (Ctrl-C): the run is stopped and the hosts' last known state is printed

Ctrl-C once: ansible-runner's cancel_callback stops ansible-playbook cleanly, the CLI prints
where each host was (task, readiness phase, latest journal line) and exits 130. Ctrl-C again
while it stops: exit 130 at once.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TextIO

import yaml

from .progress import LiveView, format_elapsed, format_host_state
from . import tune as tune_module
from .results import EXIT_BAD_INPUT, EXIT_CANCELLED, EXIT_CODES, EXIT_FAILED, EXIT_OK, RunResult
from .runner import (PLAYBOOKS, BadInputError, K26DeployError, PlaybookRun, collection_module_utils,
                     find_project_dir, yaml_error_text)

COMMAND_HELP = {
    "deploy": "deploy Kimi K2.6 on SGLang (deploy_k26.yml) and wait until it is ready",
    "preflight": "check inputs and hosts without changing anything (playbooks/preflight.yml)",
    "status": "report each host's service: ready, model, endpoint (playbooks/status.yml)",
    "rollback": "restore the last configuration that reached ready (playbooks/rollback.yml)",
    "logs": "show each host's journal excerpt for the service (playbooks/logs.yml)",
    "incidents": "show what each replica's guard found and did, with the evidence (playbooks/incidents.yml)",
    "bench": "benchmark each host's endpoint at several concurrency levels and report (playbooks/benchmark.yml)",
}


def exit_codes_text() -> str:
    codes = "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES.items())
    return (
        f"exit codes:\n{codes}\n\n"
        "Ctrl-C once stops the run cleanly (ansible-runner cancel) and prints each host's last\n"
        "known state; Ctrl-C again quits at once. Artifacts (events, stdout) are kept and their\n"
        "path is printed."
    )


# -- extra vars ------------------------------------------------------------------------------
# Messages about extra vars never quote them: a value may be the API key (runner.yaml_error_text keeps only the YAML
# parser's position and problem, not the lines around the error that its own message shows).
def _load_mapping(text: str, origin: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInputError(f"extra vars {origin}: {yaml_error_text(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInputError(f"extra vars {origin}: expected a mapping, got {type(data).__name__}")
    return data


def parse_extra_vars(values: Iterable[str] | None, base_dir: str | Path | None = None) -> dict[str, Any]:
    """Merge ``-e`` values the way ``ansible-playbook -e`` reads them.

    * ``@file.yml``: a YAML or JSON mapping from a file (relative to ``base_dir`` or the cwd);
    * ``{...}``: an inline YAML/JSON mapping (values keep their types);
    * ``key=value [key2=value2 ...]``: shell-quoted pairs; values are strings, as in Ansible.

    Later values replace earlier ones key by key (Ansible's default ``hash_behaviour``).
    Raises ``BadInputError`` on anything else.
    """
    merged: dict[str, Any] = {}
    for number, raw in enumerate(values or (), start=1):
        value = raw.strip()
        if not value:
            continue
        if value.startswith("@"):
            path = Path(value[1:]).expanduser()
            if not path.is_absolute() and base_dir is not None:
                path = Path(base_dir) / path
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise BadInputError(f"extra vars file {path}: {exc.strerror or exc}") from exc
            merged.update(_load_mapping(text, str(path)))
        elif value.startswith("{"):
            merged.update(_load_mapping(value, f"-e number {number} (a mapping)"))
        elif value.startswith("["):
            raise BadInputError("extra vars: a list is not a mapping; use key=value, {...} or @file.yml")
        else:
            try:
                tokens = shlex.split(value)
            except ValueError as exc:
                raise BadInputError(f"extra vars -e number {number} (key=value words): {exc}") from None
            for word, token in enumerate(tokens, start=1):
                key, sep, val = token.partition("=")
                if not sep or not key.strip():
                    raise BadInputError(f"extra vars -e number {number}, word {word}: expected key=value, {{...}} or "
                                        "@file.yml (the word is not shown: it may be a secret)")
                merged[key.strip()] = val
    return merged


# -- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-i", "--inventory", action="append", default=[], metavar="INVENTORY",
                        help="inventory path or 'host1,host2,' (repeatable; default: ansible.cfg's)")
    common.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="key=value (strings, as ansible-playbook -e), a YAML/JSON mapping, or @file.yml; repeatable")
    common.add_argument("-l", "--limit", help="limit to a host pattern (as ansible-playbook --limit)")
    common.add_argument("-C", "--check", action="store_true", help="check mode: report, change nothing")
    common.add_argument("-D", "--diff", action="store_true", help="show diffs of changed files (in the artifacts)")
    common.add_argument("--json", action="store_true", help="print the RunResult as JSON on stdout and nothing else")
    common.add_argument("--artifacts-dir", metavar="DIR",
                        help="ansible-runner private data dir (artifacts in DIR/artifacts/<ident>); default: a new temporary dir, kept")
    common.add_argument("-q", "--quiet", action="store_true", help="no live view on stderr")
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="show Ansible's own output on stderr; -vv passes -v to ansible-playbook, -vvv passes -vv, ...")
    common.add_argument("--project-dir", metavar="DIR",
                        help="the playbook project (default: $K26DEPLOY_PROJECT_DIR, else this checkout)")
    common.add_argument("--playbook", metavar="PATH",
                        help="advanced: run this playbook (relative to the project) instead of the command's")

    parser = argparse.ArgumentParser(
        prog="k26deploy",
        description="Deploy Kimi K2.6 on SGLang with the project's Ansible playbooks (through ansible-runner).",
        epilog=exit_codes_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in PLAYBOOKS:
        command = sub.add_parser(
            name,
            parents=[common],
            help=COMMAND_HELP[name],
            description=COMMAND_HELP[name],
            epilog=exit_codes_text(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == "logs":
            command.add_argument("-n", "--lines", type=int, metavar="N",
                                 help="journal lines per host (extra var k26_log_lines; playbook default 200)")
        if name == "incidents":
            command.add_argument("-n", "--last", type=int, metavar="N",
                                 help="the newest incidents per host (extra var k26_incidents_last; default 20)")
        if name == "deploy":
            command.add_argument("--serial", metavar="N|P%",
                                 help="replicas behind a router changed at a time, a number or a percentage "
                                      "(extra var k26_serial; default 1)")
        if name == "bench":
            add_bench_arguments(command)
        if name in TUNE_REPORT_COMMANDS:
            command.add_argument("--tune-dir", metavar="DIR", default=str(DEFAULT_TUNE_DIR),
                                 help="where k26deploy tune wrote its reports: the newest one of this inventory is "
                                      "compared with the configuration (finding K26-TUNED; extra var "
                                      f"{TUNE_REPORT_VARIABLE}; default {DEFAULT_TUNE_DIR_SHOWN})")
        if name in ("deploy", "preflight"):
            command.add_argument("--strict", action="store_true",
                                 help="every preflight warning is an error: stop before anything changes "
                                      "(extra var k26_preflight_strict)")
    add_tune_command(sub, common)
    return parser


#: where tune writes its reports, and where preflight, deploy and status look for the newest one of their inventory
DEFAULT_TUNE_DIR = Path.home() / ".local/share/k26deploy/tune"
DEFAULT_TUNE_DIR_SHOWN = "~/.local/share/k26deploy/tune"
TUNE_REPORT_COMMANDS = ("deploy", "preflight", "status")
TUNE_REPORT_VARIABLE = "k26_preflight_tune_report"


def inventory_identity(inventories: Sequence[str]) -> str | None:
    """The inventories as one string that names them from any working directory (paths resolved); None when
    ansible.cfg's inventory is used."""
    if not inventories:
        return None
    return ",".join(str(Path(item).expanduser().resolve()) if Path(item).expanduser().exists() else item
                    for item in inventories)


TUNE_HELP = ("deploy each candidate layout (or configuration) in turn, benchmark it, and keep the one that wins "
             "in service; the comparison as JSON, Markdown and PNG")


def add_tune_command(sub: Any, common: argparse.ArgumentParser) -> None:
    command = sub.add_parser("tune", parents=[common], help=TUNE_HELP, description=TUNE_HELP,
                             epilog=exit_codes_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    chosen = command.add_mutually_exclusive_group()
    chosen.add_argument("--layouts", metavar="tpNppM,...",
                        help="layouts to compare, e.g. tp8pp1,tp4pp2,tp1pp8 (default: every tp x pp of the GPUs the "
                             "running layout uses)")
    chosen.add_argument("--profiles", metavar="NAME,...",
                        help="profiles of the sglang_service role to compare, e.g. kimi_k26,kimi_k26_latency,"
                             "kimi_k26_throughput (SGLang's Kimi K2.6 cookbook recipes)")
    chosen.add_argument("--candidates", metavar="FILE.json",
                        help='any configurations: a JSON list of {"name": ..., "extra_vars": {...}}')
    command.add_argument("--objective", choices=tune_module.OBJECTIVES, default=tune_module.OBJECTIVE_C1,
                         help="c1: tok/s of one request alone (default); throughput: the best level's tok/s whose "
                              "TTFT p99 stays within --slo-ttft-ms")
    command.add_argument("--slo-ttft-ms", type=float, metavar="MS", help="the TTFT p99 SLO of --objective throughput")
    command.add_argument("--levels", metavar="C,C,...", default="1,8", help="concurrency levels of each sweep (1,8)")
    command.add_argument("--results-dir", metavar="DIR", default=str(DEFAULT_TUNE_DIR),
                         help=f"where the comparison goes (default {DEFAULT_TUNE_DIR_SHOWN})")


def add_bench_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--levels", metavar="C,C,...",
                         help="concurrency levels, e.g. 1,8,16,32 (extra var sglang_benchmark_levels)")
    command.add_argument("--input-tokens", type=int, metavar="N",
                         help="prompt length in tokens (extra var sglang_benchmark_input_tokens)")
    command.add_argument("--output-tokens", type=int, metavar="N",
                         help="output length in tokens (extra var sglang_benchmark_output_tokens)")
    command.add_argument("--gate", type=float, metavar="SHARE",
                         help="fail when a level's tok/s fell by more than this share against the host's previous "
                              "sweep, e.g. 0.1 (extra var sglang_service_benchmark_gate)")
    command.add_argument("--results-dir", metavar="DIR",
                         help="where the results go on this machine (extra var sglang_benchmark_results_dir; "
                              "default ~/.local/share/k26deploy/benchmarks)")


def bench_extra_vars(args: argparse.Namespace) -> dict[str, Any]:
    """The bench command's flags as extra vars; BadInputError names a bad one before anything runs."""
    extra: dict[str, Any] = {}
    if args.levels is not None:
        try:
            levels = [int(part) for part in args.levels.split(",")]
        except ValueError:
            levels = []
        if not levels or min(levels) < 1:
            raise BadInputError(f"--levels must list whole numbers of 1 or more, like 1,8,16,32; not {args.levels!r}")
        extra["sglang_benchmark_levels"] = levels
    for flag, name, minimum in (("input_tokens", "sglang_benchmark_input_tokens", 1),
                                ("output_tokens", "sglang_benchmark_output_tokens", 2)):
        value = getattr(args, flag)
        if value is not None:
            if value < minimum:
                raise BadInputError(f"--{flag.replace('_', '-')} must be at least {minimum}, not {value}")
            extra[name] = value
    if args.gate is not None:
        if not 0 <= args.gate < 1:
            raise BadInputError(f"--gate is a share from 0 to below 1 (0.1 is 10%), not {args.gate}")
        extra["sglang_service_benchmark_gate"] = args.gate
    if args.results_dir is not None:
        extra["sglang_benchmark_results_dir"] = str(Path(args.results_dir).expanduser().resolve())
    return extra


def serial_is_valid(text: str) -> bool:
    """A batch size Ansible's serial takes: N >= 1, or P% with 1 <= P <= 100."""
    number = text[:-1] if text.endswith("%") else text
    if not number.isdigit():
        return False
    return 1 <= int(number) <= (100 if text.endswith("%") else int(number))


# -- output -------------------------------------------------------------------------------------
def _yesno(value: Any) -> str:
    return "yes" if value else "no"


def format_finding(finding: dict[str, Any]) -> str:
    """SEVERITY ID: message Fix: fix, as the collection's modules print a finding (k26_preflight_rules)."""
    return collection_module_utils("k26_preflight_rules").format_finding(finding)


#: the start-up phases in the order a start goes through them, as a summary names them
STARTUP_PHASES = (("weights_loaded", "weights"), ("kv_cache_allocated", "KV cache"), ("graphs_captured", "graphs"),
                  ("warmed_up", "warm-up"), ("ready", "ready"))


def format_model(model: dict[str, Any]) -> str:
    """model: /srv/models/k2.6: 64 shards, 595.1 GB, verified | pre-warmed 590.2 GB in 312.0s (or why not)."""
    prewarm = model.get("prewarm") or {}
    if prewarm.get("state") == "done":
        warm = f" | pre-warmed {prewarm.get('bytes', 0) / 1e9:.1f} GB in {prewarm.get('seconds', 0):.1f}s"
    elif prewarm.get("state") == "skipped" and prewarm.get("reason"):
        warm = f" | not pre-warmed: {prewarm['reason']}"
    else:
        warm = ""
    return f"model: {model.get('msg', '')}{warm}"


def format_startup(startup: dict[str, Any]) -> str:
    """start-up (seconds from the process start): weights 61.0s, KV cache 63.3s, ... | last good: ready 90.1s."""
    if startup.get("observed") is False:
        return ("start-up: not observed (no deploy started the invocation running now: started by hand, "
                "or by systemd after a crash)")
    phases = startup.get("phases") or {}
    shown = ", ".join(f"{words} {phases[name]:.1f}s" for name, words in STARTUP_PHASES if name in phases)
    last = ((startup.get("last_good") or {}).get("phases") or {}).get("ready")
    return (f"start-up (seconds from the process start): {shown or 'no phase line in the journal'}"
            + (f" | last good start: ready {last:.1f}s" if last is not None else ""))


def format_precompile(precompile: dict[str, Any]) -> str:
    """DeepGEMM precompiled before the start in 812.3s (configuration 1f2e..., unit ...)."""
    seconds = precompile.get("seconds")
    took = f" in {seconds:.1f}s" if isinstance(seconds, (int, float)) else ""
    return (f"DeepGEMM kernels precompiled before the start{took} (configuration {precompile.get('key') or '?'}, "
            f"{precompile.get('reason') or ''})")


def format_incident(record: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("time") or 0))
    line = f"{when} {record.get('verdict')}: {record.get('action')}{'' if record.get('acted', True) else ' (failed)'}"
    line += f" - {record.get('why')}"
    if record.get("recovered_after_seconds") is not None:
        line += f"; answered again after {format_elapsed(record['recovered_after_seconds'])}"
    return line


def format_guard(guard: dict[str, Any] | None, evidence: bool = False) -> list[str]:
    """The replica guard's word: its verdict, then its newest incidents (with their evidence for ``incidents``)."""
    if not guard:
        return []
    if not guard.get("installed"):
        return ["guard: none (sglang_service_guard is off, or it never ran)"]
    counts = ", ".join(f"{verdict} {count}" for verdict, count in sorted((guard.get("incidents") or {}).items()))
    head = f"guard: {guard.get('verdict')}"
    if guard.get("held"):
        head += f", HOLDING the service stopped ({guard['held']})"
    head += f" - {guard.get('why')}; incidents: {counts or 'none'}"
    lines = [head]
    for record in guard.get("last_incidents") or []:
        lines.append("  " + format_incident(record))
        if record.get("operator"):
            lines.append("    what to do: " + record["operator"])
        for name in ("kernel", "gpus", "journal") if evidence else ():
            for text in (record.get("evidence") or {}).get(name) or []:
                lines.append(f"    {name} | {text}")
    return lines


class TerminalSafe:
    """Writes to a terminal only what it may show: no escape sequence or control character but newlines
    (module_utils/sglang_options.printable), whatever a service wrote into its journal or its errors."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.printable = collection_module_utils("sglang_options").printable

    def write(self, text: str) -> int:
        return self.out.write(self.printable(text))

    def flush(self) -> None:
        self.out.flush()


def print_summary(result: RunResult, command: str, out: TextIO, excerpts: bool = False) -> None:
    """A short human summary of the run, one block per host."""
    out = TerminalSafe(out)  # type: ignore[assignment]
    duration = f" in {result.duration:.1f}s" if result.duration is not None else ""
    # ansible-runner's "successful" means only that ansible-playbook exited 0 (also with no host reached)
    status = "failed" if result.status == "successful" and result.exit_code != 0 else result.status
    out.write(f"{command}: {result.playbook}: {status} (exit {result.exit_code}){duration}\n")
    if result.error:
        out.write(f"  error: {result.error.strip()}\n")
    if not result.hosts and not (result.error or "").startswith("no host was reached"):
        out.write("  no host was reached\n")
    for host in result.hosts.values():
        fields = [f"{host.host}:", host.state]
        if host.endpoint:
            fields.append(f"endpoint={host.endpoint}")
        if host.model_id:
            fields.append(f"model={host.model_id}")
        if host.time_to_ready is not None:
            fields.append(f"time_to_ready={format_elapsed(host.time_to_ready)}")
        if host.reason and host.reason != "ready":
            fields.append(f"reason={host.reason}")
        if host.phase and host.ready is not True:
            fields.append(f"phase={host.phase}")
        if host.restarted is not None:
            fields.append(f"restarted={_yesno(host.restarted)}")
        if host.rolled_back:
            fields.append("rolled_back=yes")
        if host.workers is not None:
            healthy = sum(1 for worker in host.workers if worker.get("is_healthy"))
            fields.append(f"replicas={healthy}/{len(host.workers)} healthy")
        fields.append(f"changed={host.changed}")
        if host.simulator:
            fields.append("[SIMULATOR, not a real SGLang]")
        out.write("  " + " ".join(fields) + "\n")
        for worker in host.workers or []:
            out.write(f"    replica {worker.get('url')}: {worker.get('status')}"
                      f"{'' if worker.get('is_healthy') else ', not healthy'}\n")
        for finding in host.findings or []:
            out.write(f"    {format_finding(finding)}\n")
        if host.model and host.model.get("staged"):
            out.write(f"    {format_model(host.model)}\n")
        if host.precompile:
            out.write(f"    {format_precompile(host.precompile)}\n")
        if host.startup:
            out.write(f"    {format_startup(host.startup)}\n")
        for line in format_guard(host.guard, evidence=command == "incidents"):
            out.write(f"    {line}\n")
        for finding in (host.startup or {}).get("findings") or []:
            out.write(f"    {format_finding(finding)}\n")
        for line in (host.benchmark or {}).get("lines") or []:
            out.write(f"    {line}\n")
        files = (host.benchmark or {}).get("files") or {}
        if files:
            out.write("    report: " + ", ".join(str(path) for path in files.values() if path) + "\n")
        if host.failed_task and (host.failed or host.unreachable):
            out.write(f"    failed task: {host.failed_task}\n")
        if host.msg and (host.failed or host.unreachable or host.ready is False):
            for line in str(host.msg).splitlines() or [""]:
                out.write(f"    {line}\n")
        if host.last_log_line and host.ready is False and not host.journal_excerpt:
            out.write(f"    last log line: {host.last_log_line}\n")
        if host.journal_excerpt and (excerpts or host.failed or host.ready is False):
            out.write("    journal:\n")
            for line in host.journal_excerpt.splitlines():
                out.write(f"      | {line}\n")
    if result.artifacts_dir:
        out.write(f"  artifacts: {result.artifacts_dir}\n")
    out.flush()


def print_cancel_report(hosts: dict, out: TextIO) -> None:
    out.write("Cancelled. Last known state of each host:\n")
    if not hosts:
        out.write("  no host had started a task\n")
    for result in hosts.values():
        out.write("  " + format_host_state(result) + "\n")
    out.flush()


def _early_failure(args: argparse.Namespace, message: str, code: int) -> int:
    """The run could not start: message on stderr; with --json a RunResult with status 'error'."""
    sys.stderr.write(f"k26deploy: error: {message}\n")
    if args.json:
        result = RunResult(playbook=args.playbook or PLAYBOOKS.get(args.command, args.command or ""),
                           status="error", rc=None, bad_input=code == EXIT_BAD_INPUT, error=message,
                           command=args.command, check=bool(args.check))
        sys.stdout.write(result.to_json() + "\n")
    return code


# -- tune -----------------------------------------------------------------------------------
def tune_candidates(args: argparse.Namespace, running: Callable[[], Any]) -> list[Any]:
    """The candidates the flags name, or every layout of the GPUs the running layout uses."""
    if args.candidates:
        return tune_module.candidates_from_file(Path(args.candidates).read_text())
    if args.layouts:
        return [tune_module.layout_candidate(name) for name in args.layouts.split(",") if name.strip()]
    if args.profiles:
        profiles = find_project_dir(args.project_dir) / "roles" / "sglang_service" / "vars" / "profiles"
        known = [path.stem for path in profiles.glob("*.yml")]
        return [tune_module.profile_candidate(name, known) for name in args.profiles.split(",") if name.strip()]
    layouts = [host.layout for host in running().hosts.values() if host.layout]
    if not layouts:
        raise BadInputError("no running layout to start from: name the candidates with --layouts or --candidates")
    return tune_module.layouts_for(int(layouts[0]["tp_size"]) * int(layouts[0]["pp_size"]))


def tune_command(args: argparse.Namespace, extra_vars: dict[str, Any]) -> int:
    """k26deploy tune: every candidate deployed and swept in turn, the winner kept; a table, or --json."""
    options = {"project_dir": args.project_dir, "inventory": args.inventory or None, "limit": args.limit}

    def run(command: str, **kwargs: Any) -> Any:
        return PlaybookRun(command, **options, **kwargs).execute()

    try:
        levels = [int(part) for part in args.levels.split(",")]
        if not levels or min(levels) < 1:
            raise ValueError(args.levels)
        if args.objective == tune_module.OBJECTIVE_C1 and 1 not in levels:
            raise ValueError("--objective c1 needs level 1 in --levels")
        candidates = tune_candidates(args, lambda: run("status", extra_vars=extra_vars))
    except BadInputError as exc:
        return _early_failure(args, str(exc), EXIT_BAD_INPUT)
    except (ValueError, OSError) as exc:
        return _early_failure(args, f"tune: {exc}", EXIT_BAD_INPUT)

    def on_row(row: Any) -> None:
        if not args.quiet:
            shown = f"{row.score:.1f} tok/s (C={row.score_level})" if row.ok else row.error
            sys.stderr.write(f"  tune: {row.name}: {shown} [{row.seconds:.0f}s]\n")
            sys.stderr.flush()

    report = tune_module.tune(candidates, lambda **kw: run("deploy", **kw), lambda **kw: run("bench", **kw),
                              base_vars=extra_vars, objective=args.objective, slo_ttft_ms=args.slo_ttft_ms,
                              levels=levels, results_dir=Path(args.results_dir).expanduser(), on_row=on_row,
                              inventory=inventory_identity(args.inventory))
    if args.json:
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(tune_module.markdown(report) + f"report: {', '.join(report['files'].values())}\n")
    if not report["kept_serving"]:
        return EXIT_FAILED
    return EXIT_OK if report["winner"] else EXIT_FAILED


# -- main -----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``k26deploy`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT

    try:
        extra_vars = parse_extra_vars(args.extra_vars)
    except BadInputError as exc:
        return _early_failure(args, str(exc), EXIT_BAD_INPUT)
    if getattr(args, "lines", None) is not None:
        if args.lines < 1:
            return _early_failure(args, "--lines must be at least 1", EXIT_BAD_INPUT)
        extra_vars["k26_log_lines"] = args.lines
    if getattr(args, "last", None) is not None:
        if args.last < 1:
            return _early_failure(args, "--last must be at least 1", EXIT_BAD_INPUT)
        extra_vars["k26_incidents_last"] = args.last
    if getattr(args, "strict", False):
        extra_vars["k26_preflight_strict"] = True
    if getattr(args, "serial", None) is not None:
        if not serial_is_valid(args.serial):
            return _early_failure(args, "--serial must be a whole number above 0 or a percentage from 1% to 100%, "
                                        f"not {args.serial!r}", EXIT_BAD_INPUT)
        extra_vars["k26_serial"] = args.serial
    if args.command == "bench":
        try:
            extra_vars.update(bench_extra_vars(args))
        except BadInputError as exc:
            return _early_failure(args, str(exc), EXIT_BAD_INPUT)
    if args.command == "tune":
        return tune_command(args, extra_vars)
    if args.command in TUNE_REPORT_COMMANDS and TUNE_REPORT_VARIABLE not in extra_vars:
        try:
            report = tune_module.latest_report(Path(args.tune_dir).expanduser(), inventory_identity(args.inventory))
        except BadInputError as exc:
            return _early_failure(args, str(exc), EXIT_BAD_INPUT)
        if report is not None:
            extra_vars[TUNE_REPORT_VARIABLE] = report

    view = None if args.quiet else LiveView(sys.stderr, raw=args.verbose > 0)
    cancel_event = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if cancel_event.is_set():
            raise KeyboardInterrupt
        cancel_event.set()
        sys.stderr.write("\nk26deploy: cancelling (Ctrl-C again to quit at once) ...\n")
        sys.stderr.flush()

    def on_sigterm(signum: int, frame: Any) -> None:
        cancel_event.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_sigint)
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_sigterm)
    run = None
    try:
        run = PlaybookRun(
            args.playbook or args.command,
            project_dir=args.project_dir,
            inventory=args.inventory or None,
            extra_vars=extra_vars,
            limit=args.limit,
            check=args.check,
            diff=args.diff,
            verbosity=max(args.verbose - 1, 0),
            private_data_dir=args.artifacts_dir,
            event_callback=view.on_event if view else None,
            progress_callback=view.on_progress if view else None,
            cancel_event=cancel_event,
        )
        run.command = args.command
        result = run.execute()
    except BadInputError as exc:
        return _early_failure(args, str(exc), EXIT_BAD_INPUT)
    except K26DeployError as exc:
        return _early_failure(args, str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        # second Ctrl-C while ansible-runner was stopping: report what we know and leave
        if run is not None:
            print_cancel_report(run.snapshot(), sys.stderr)
        return EXIT_CANCELLED
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    if result.cancelled:
        print_cancel_report(result.hosts, sys.stderr)
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    else:
        print_summary(result, args.command, sys.stdout, excerpts=args.command == "logs")
    sys.stdout.flush()
    return result.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
