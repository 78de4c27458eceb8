# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Typed results of a k26deploy run, built only from ansible-runner events.

Nothing here reads Ansible's stdout text to learn a task's result: every field comes from
an event dict as ansible-runner delivers it to an ``event_handler`` (or writes it to
``artifacts/<ident>/job_events/``):

* ``playbook_on_stats``: per-host counts (``ok``, ``changed``, ``failures``, ``dark``, ...)
  and ``artifact_data``, the aggregated ``ansible.builtin.set_stats`` data. The project's
  playbooks publish ``k26_hosts: {<host>: {ready, endpoint, model_id, ...}}`` there; when it
  is present it is the authoritative summary.
* ``runner_on_ok`` / ``runner_on_failed`` / ``runner_on_unreachable``: ``event_data.res`` of
  each task next to ``host``, ``task`` and ``task_action``. The readiness module
  ``sglang_ready`` returns ``ready``, ``reason``, ``journal_excerpt``, ``timeline``, ... there.
* ``runner_on_start``: which task a host is busy with (used to say where a cancelled run stopped).
* progress records (not events): the JSON lines the ``sglang_ready`` action plugin appends
  to ``K26DEPLOY_PROGRESS_FILE`` during long waits (phase, elapsed, latest journal line).

Exit codes (``RunResult.exit_code``), in order of precedence:

===  ==========================================================================
130  cancelled (Ctrl-C / SIGTERM / ``cancel_event``)
2    bad input: role argument validation (``validate_argument_spec``) or a
     task whose result says so (``k26_bad_input: true``: the input checks
     ``k26.deploy.input_check``, ``sglang_preflight``, ``sglang_args_check``,
     a filter refusing the input; see ``is_bad_input_failure``) failed, the
     playbook or inventory was not found, or Ansible rejected the
     playbook/options (rc 4/5 with no play run)
4    at least one host unreachable
3    timed out: a host's readiness reason is ``timeout`` or ``warmup_failed``
1    failed: any other failed host, a host reported ``ready: false``
     (outside check mode), or a non-successful run
0    ready / ok
===  ==========================================================================
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .project import collection_module_utils

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_TIMEOUT = 3
EXIT_UNREACHABLE = 4
EXIT_CANCELLED = 130

EXIT_CODES = {
    EXIT_OK: "ready / ok",
    EXIT_FAILED: "failed",
    EXIT_BAD_INPUT: "bad input (argument validation, preflight, missing playbook/inventory)",
    EXIT_TIMEOUT: "timed out (readiness reason timeout or warmup_failed)",
    EXIT_UNREACHABLE: "a host was unreachable",
    EXIT_CANCELLED: "cancelled (Ctrl-C)",
}

#: readiness reasons that mean "waited and gave up" rather than "saw it fail"
TIMEOUT_REASONS = frozenset({"timeout", "warmup_failed"})

#: Ansible's own argument validation: its failure means "the input was wrong, nothing was changed" (its result
#: cannot carry the collection's mark)
BAD_INPUT_ACTIONS = frozenset(
    {
        "validate_argument_spec",
        "ansible.builtin.validate_argument_spec",
        "ansible.legacy.validate_argument_spec",
    }
)

#: the key of a failed task's result that marks bad input (plugins/plugin_utils/k26_bad_input.py sets it)
BAD_INPUT_KEY = "k26_bad_input"

#: ansible-playbook return codes for a parser error and an options error
ANSIBLE_RC_PARSER_ERROR = 4
ANSIBLE_RC_OPTIONS_ERROR = 5

#: the collection's schema of a host's result (plugins/module_utils/sglang_result.py FIELDS: name -> (types,
#: meaning)), the one definition: every field of a ``k26_hosts`` entry (set_stats) is copied onto ``HostResult``,
#: read by the types it gives
RESULT_SCHEMA = collection_module_utils("sglang_result").FIELDS
SUMMARY_FIELDS = tuple(RESULT_SCHEMA)

#: fields of a readiness progress record (the sglang_ready action plugin's, see its PROGRESS_RECORD_FIELDS) that a
#: host result takes over
HOST_PROGRESS_FIELDS = ("phase", "elapsed", "last_log_line", "restarts")

#: finding severities, most severe first (the order findings are shown in)
FINDING_SEVERITIES = ("error", "warning", "info")

_RESULT_EVENTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped")


def is_readiness_action(task_action: str | None) -> bool:
    """True for the ``sglang_ready`` module, however it is spelled (FQCN or short)."""
    return bool(task_action) and str(task_action).rsplit(".", maxsplit=1)[-1] == "sglang_ready"


def is_progress_action(task_action: str | None) -> bool:
    """True for the modules whose action plugins write progress records: ``sglang_ready``, ``sglang_benchmark``."""
    return bool(task_action) and str(task_action).rsplit(".", maxsplit=1)[-1] in ("sglang_ready", "sglang_benchmark")


def is_bad_input_failure(task_action: str | None, res: Mapping[str, Any] | None = None) -> bool:
    """Does this failed task mean "the input is wrong, nothing was changed"?

    Only when the task says so: Ansible's ``validate_argument_spec`` (role argument specs), or a result that
    carries ``k26_bad_input: true`` (``k26.deploy.input_check``, ``sglang_preflight``, ``sglang_args_check``, a
    filter of the collection that refused the input). Which file the task came from, or its name, does not count.
    """
    if task_action and str(task_action) in BAD_INPUT_ACTIONS:
        return True
    return isinstance(res, Mapping) and res.get(BAD_INPUT_KEY) is True


def _text(value: Any) -> str | None:
    """Journal excerpts may come as a list of lines or one string: always give one string."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return "\n".join(str(line) for line in value)
    return str(value)


_BOOL_FIELDS = frozenset(name for name, (kind, dummy) in RESULT_SCHEMA.items() if kind is bool)
#: the schema's numbers, and the progress record's elapsed seconds
_FLOAT_FIELDS = frozenset(["elapsed"] + [name for name, (kind, dummy) in RESULT_SCHEMA.items()
                                         if isinstance(kind, tuple) and float in kind])


def _coerce(name: str, value: Any) -> Any:
    """set_stats data went through templating: accept "true"/"False" and "93.4" too."""
    if name in _BOOL_FIELDS and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "yes", "1"):
            return True
        if lowered in ("false", "no", "0", ""):
            return False
    if name in _FLOAT_FIELDS and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    if name == "node_rank" and isinstance(value, str):
        return int(value) if value.strip().isdigit() else None
    if name in ("msg", "journal_excerpt", "last_log_line"):
        return _text(value)
    if name == "findings":
        return sorted(value or [], key=lambda f: FINDING_SEVERITIES.index(f.get("severity"))
                      if f.get("severity") in FINDING_SEVERITIES else len(FINDING_SEVERITIES))
    return value


def _clean_res(res: Mapping[str, Any]) -> dict[str, Any]:
    """A module result without Ansible's private keys and the invocation (it may hold arguments)."""
    return {k: v for k, v in res.items() if not k.startswith("_ansible") and k != "invocation"}


@dataclass
class HostStats:
    """Counts from ``playbook_on_stats`` for one host."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0


@dataclass
class HostResult:
    """What one host ended up as. Fields the run did not produce stay ``None``."""

    host: str
    ready: bool | None = None
    endpoint: str | None = None
    model_id: str | None = None
    time_to_ready: float | None = None
    reason: str | None = None
    journal_excerpt: str | None = None
    msg: str | None = None
    restarted: bool | None = None
    rolled_back: bool | None = None
    #: what the rollback did, in words ('' when none was needed)
    rollback_outcome: str | None = None
    #: why this replica was left out of its routers and not restarted (its GPUs' health); '' when it was not
    left_out: str | None = None
    simulator: bool | None = None
    unit_state: Any = None
    unit: str | None = None
    #: a node of a multi-node instance: its rank and the instance (inventory group); rank 0 serves the API
    node_rank: int | None = None
    instance: str | None = None
    #: the instance failed: the node whose failure (and journal excerpt) speaks for it
    node: str | None = None
    #: number of tasks that changed something on the host
    changed: int = 0
    failed: bool = False
    unreachable: bool = False
    #: failed in argument validation or preflight (nothing was changed)
    bad_input: bool = False
    failed_task: str | None = None
    failed_action: str | None = None
    #: last known readiness phase (loading, http_up, warm, ready...) and journal line
    phase: str | None = None
    elapsed: float | None = None
    last_log_line: str | None = None
    restarts: int | None = None
    model_ids: list[str] | None = None
    timeline: dict[str, Any] | None = None
    #: the last task seen for the host and its outcome (ok/changed/failed/skipped/unreachable/running)
    last_task: str | None = None
    last_status: str | None = None
    #: the run was cancelled while this host was busy with ``last_task``
    interrupted: bool = False
    #: the host's last ``sglang_ready`` result (private keys and invocation removed)
    readiness: dict[str, Any] | None = None
    #: the host's raw ``k26_hosts`` entry from set_stats, if the playbook published one
    summary: dict[str, Any] | None = None
    #: preflight findings (deploy, preflight) or those of the running configuration (status): each a dict with
    #: ``id``, ``severity`` (error, warning, info), ``title``, ``message``, ``fix`` and ``evidence``; errors first
    findings: list[dict[str, Any]] | None = None
    #: the tensor and pipeline parallel sizes served and why (the sglang_service role's sglang_service_layout):
    #: ``tp_size``, ``pp_size``, ``source`` (inventory, topology or default), ``interconnect``, ``reason``
    layout: dict[str, Any] | None = None
    #: on a router host (the sglang_router role): the replicas it routes to as it lists them, each a dict with
    #: ``url``, ``status`` and ``is_healthy``
    workers: list[dict[str, Any]] | None = None
    #: the host's benchmark sweep (bench, or deploy with sglang_service_benchmark): ``levels``, ``diagnosis``,
    #: ``changes`` against the baseline, ``gate`` (enabled, passed, msg), ``files`` on the controller, ``lines``
    benchmark: dict[str, Any] | None = None
    #: the start this run caused (deploy) or the host's newest recorded one (status): ``phases`` (seconds from the
    #: process start to weights_loaded, kv_cache_allocated, graphs_captured, warmed_up, ready), ``durations``,
    #: ``last_good`` and ``findings`` (K26-START-SLOWER)
    startup: dict[str, Any] | None = None
    #: the DeepGEMM precompile the deploy ran before its start: ``seconds``, ``key``, ``unit``, ``reason``, ``record``
    precompile: dict[str, Any] | None = None
    #: the model's files on the host (the sglang_model role): ``source``, ``staged``, ``ready``, ``files``,
    #: ``shards``, ``total_bytes``, ``digest``, ``msg``, ``prewarm`` (state, bytes, seconds, reason)
    model: dict[str, Any] | None = None
    #: the replica guard's word (status, incidents): ``installed``, ``verdict`` (healthy, starting, stopped, hung,
    #: gpu_fault, crash_loop), ``why``, ``held``, ``canary_seconds``, ``incidents`` by verdict, ``last_incidents``
    #: (each ``time``, ``verdict``, ``action``, ``acted``, ``why``, ``recovered_after_seconds``, ``operator``, and
    #: with incidents ``evidence``)
    guard: dict[str, Any] | None = None

    def findings_of(self, severity: str) -> list[dict[str, Any]]:
        return [f for f in self.findings or [] if f.get("severity") == severity]

    @property
    def timed_out(self) -> bool:
        return self.ready is not True and self.reason in TIMEOUT_REASONS

    @property
    def state(self) -> str:
        """One word: unreachable, cancelled, bad_input, timeout, failed, ready, not_ready, ok."""
        if self.unreachable:
            return "unreachable"
        if self.interrupted:
            return "cancelled"
        if self.bad_input:
            return "bad_input"
        if self.failed and self.timed_out:
            return "timeout"
        if self.failed:
            return "failed"
        if self.ready is True:
            return "ready"
        if self.ready is False:
            return "timeout" if self.timed_out else "not_ready"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["state"] = self.state
        return data


@dataclass
class RunResult:
    """The outcome of one playbook run through ansible-runner."""

    playbook: str
    #: ansible-runner's status: successful, failed, canceled, timeout; ``error`` when it never started
    status: str
    rc: int | None
    hosts: dict[str, HostResult] = field(default_factory=dict)
    #: per-host counts from playbook_on_stats (empty when the run never reached the end)
    stats: dict[str, HostStats] = field(default_factory=dict)
    artifacts_dir: str | None = None
    events_seen: int = 0
    cancelled: bool = False
    check: bool = False
    #: the aggregated set_stats data (``artifact_data`` of playbook_on_stats)
    set_stats: dict[str, Any] = field(default_factory=dict)
    #: run-level bad input (missing playbook/inventory, bad -e, Ansible parser/options error)
    bad_input: bool = False
    #: run-level error text when no task result explains the failure
    error: str | None = None
    duration: float | None = None
    command: str | None = None

    @property
    def exit_code(self) -> int:
        """Map the run to the CLI's exit codes (see the module docstring for the precedence)."""
        if self.cancelled or self.status == "canceled":
            return EXIT_CANCELLED
        hosts = list(self.hosts.values())
        if self.bad_input or any(h.bad_input for h in hosts):
            return EXIT_BAD_INPUT
        if not self.stats and self.rc in (ANSIBLE_RC_PARSER_ERROR, ANSIBLE_RC_OPTIONS_ERROR):
            return EXIT_BAD_INPUT
        if any(h.unreachable for h in hosts):
            return EXIT_UNREACHABLE
        if any(h.timed_out and (h.failed or h.ready is False) for h in hosts):
            return EXIT_TIMEOUT
        if any(h.failed for h in hosts):
            return EXIT_FAILED
        # "not ready" counts, except when the run itself was a --check run and the module
        # only said it did not wait (status.yml observes in check mode on purpose: there a
        # host that is not ready is a failure)
        if any(h.ready is False and not (self.check and h.reason == "check_mode") for h in hosts):
            return EXIT_FAILED
        if self.status != "successful" or (self.rc not in (0, None)):
            return EXIT_FAILED
        return EXIT_OK

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    @property
    def ready(self) -> bool:
        """True when every host reported ready (False when none did or any did not)."""
        return bool(self.hosts) and all(h.ready is True for h in self.hosts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "playbook": self.playbook,
            "command": self.command,
            "status": self.status,
            "rc": self.rc,
            "exit_code": self.exit_code,
            "cancelled": self.cancelled,
            "check": self.check,
            "bad_input": self.bad_input,
            "error": self.error,
            "duration": self.duration,
            "artifacts_dir": self.artifacts_dir,
            "events_seen": self.events_seen,
            "stats": {h: dataclasses.asdict(s) for h, s in sorted(self.stats.items())},
            "hosts": {h: r.to_dict() for h, r in sorted(self.hosts.items())},
            "set_stats": self.set_stats,
        }

    def to_json(self, **kwargs: Any) -> str:
        kwargs.setdefault("indent", 2)
        kwargs.setdefault("sort_keys", False)
        return json.dumps(self.to_dict(), default=str, **kwargs)


@dataclass
class _HostTrack:
    """Everything seen for one host while events stream in."""

    host: str
    failures: list[dict[str, Any]] = field(default_factory=list)
    unreachable: dict[str, Any] | None = None
    readiness: list[dict[str, Any]] = field(default_factory=list)
    changed_events: int = 0
    running_task: str | None = None
    running_action: str | None = None
    last_task: str | None = None
    last_status: str | None = None
    progress: dict[str, Any] | None = None


class ResultBuilder:
    """Accumulates ansible-runner events (and progress records) and builds a ``RunResult``.

    Thread-safe enough for one writer (ansible-runner's event thread) and one progress
    tailer: each call only touches its own host entry, and ``snapshot``/``build`` copy.
    """

    def __init__(self) -> None:
        self._hosts: dict[str, _HostTrack] = {}
        self.events_seen = 0
        self.stats_event: dict[str, Any] | None = None
        self.error_lines: list[str] = []

    # -- feeding ---------------------------------------------------------------------------
    def _track(self, host: str) -> _HostTrack:
        track = self._hosts.get(host)
        if track is None:
            track = self._hosts[host] = _HostTrack(host)
        return track

    def add_event(self, event: Mapping[str, Any]) -> None:
        self.events_seen += 1
        name = event.get("event")
        data = event.get("event_data") or {}
        if name == "playbook_on_stats":
            self.stats_event = dict(data)
            return
        if name in ("verbose", "error") and not data.get("host"):
            # Ansible prints fatal errors (syntax, missing files) before any task runs;
            # kept only as run-level context when no task result explains the failure.
            stdout = str(event.get("stdout") or "").strip()
            if stdout and ("ERROR" in stdout[:12] or stdout.startswith("[ERROR]")):
                self.error_lines.append(stdout)
            return
        host = data.get("host")
        if not host:
            return
        track = self._track(str(host))
        task = data.get("task")
        action = data.get("task_action")
        if name == "runner_on_start":
            track.running_task = task
            track.running_action = action
            track.last_task = task
            track.last_status = "running"
            return
        if name not in _RESULT_EVENTS:
            return
        res = data.get("res") or {}
        track.running_task = None
        track.running_action = None
        track.last_task = task
        if name == "runner_on_ok":
            track.last_status = "changed" if res.get("changed") else "ok"
            if res.get("changed"):
                track.changed_events += 1
        elif name == "runner_on_failed":
            track.last_status = "failed"
            if not data.get("ignore_errors"):
                track.failures.append({"task": task, "action": action, "res": dict(res),
                                       "bad_input": is_bad_input_failure(action, res)})
        elif name == "runner_on_unreachable":
            track.last_status = "unreachable"
            track.unreachable = {"task": task, "action": action, "res": dict(res)}
        else:
            track.last_status = "skipped"
        if is_readiness_action(action) and name in ("runner_on_ok", "runner_on_failed"):
            entry = dict(res)
            invocation = (res.get("invocation") or {}).get("module_args") or {}
            if invocation.get("url"):
                entry.setdefault("url", invocation["url"])
            entry["_failed_event"] = name == "runner_on_failed"
            track.readiness.append(entry)

    def add_progress(self, record: Mapping[str, Any]) -> None:
        host = record.get("host")
        if not host:
            return
        track = self._track(str(host))
        track.progress = dict(record)

    # -- reading ---------------------------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    def host_result(self, host: str, artifact_data: Mapping[str, Any] | None = None) -> HostResult:
        """One host's result. Each step may overwrite what the steps before it set: their order is the
        precedence, from the weakest source (counted events) to the strongest (the playbook's own summary)."""
        track = self._hosts.get(host) or _HostTrack(host)
        result = HostResult(host=host)
        _take_counts(result, track, _stats_from_event(self.stats_event).get(host))
        _take_failure(result, track)
        _take_readiness(result, track)
        _take_progress(result, track)
        _take_summary(result, (artifact_data or {}).get("k26_hosts", {}).get(host) if artifact_data else None)
        _take_fallback_reason(result)
        result.last_task = track.running_task or track.last_task
        result.last_status = "running" if track.running_task else track.last_status
        return result

    def snapshot(self) -> dict[str, HostResult]:
        """Host results as known right now (used for the cancel report and live views)."""
        artifact_data = (self.stats_event or {}).get("artifact_data") or {}
        return {host: self.host_result(host, artifact_data) for host in list(self._hosts)}

    def build(
        self,
        *,
        playbook: str,
        status: str,
        rc: int | None,
        artifacts_dir: str | None = None,
        cancelled: bool = False,
        check: bool = False,
        duration: float | None = None,
        command: str | None = None,
    ) -> RunResult:
        artifact_data = dict((self.stats_event or {}).get("artifact_data") or {})
        stats = _stats_from_event(self.stats_event)
        for host in stats:
            self._track(host)
        for host in (artifact_data.get("k26_hosts") or {}):
            self._track(str(host))
        hosts = {host: self.host_result(host, artifact_data) for host in sorted(self._hosts)}
        if cancelled:
            for result in hosts.values():
                result.interrupted = result.last_status == "running"
        error = None
        if self.error_lines and (status != "successful" or rc not in (0, None)):
            error = "\n".join(self.error_lines)[-4000:]
        # ansible-playbook ends a run whose inventory gave its plays no host (one it could not parse, a --limit or
        # group that matches nothing) "successful": nothing was checked or deployed, so it is bad input here.
        reached_none = not hosts and not stats and not cancelled and status == "successful"
        if reached_none:
            error = ("no host was reached: the inventory gave the playbook's plays no host (one that could not be "
                     "parsed, an empty group, a --limit that matches nothing); nothing was checked or changed")
        return RunResult(
            playbook=playbook,
            status=status,
            rc=rc,
            hosts=hosts,
            stats=stats,
            artifacts_dir=artifacts_dir,
            events_seen=self.events_seen,
            cancelled=cancelled,
            check=check,
            set_stats=artifact_data,
            bad_input=reached_none or (not stats and not cancelled
                                       and rc in (ANSIBLE_RC_PARSER_ERROR, ANSIBLE_RC_OPTIONS_ERROR)),
            error=error,
            duration=duration,
            command=command,
        )


# -- the steps of ResultBuilder.host_result, in order of precedence ---------------------------------
def _take_counts(result: HostResult, track: _HostTrack, stats: HostStats | None) -> None:
    """Changed/failed/unreachable: the stats event is authoritative (it knows about rescued failures)."""
    if stats is not None:
        result.changed = stats.changed
        result.failed = stats.failed > 0
        result.unreachable = stats.unreachable > 0
    else:
        result.changed = track.changed_events
        result.failed = bool(track.failures)
        result.unreachable = track.unreachable is not None


def _failure_msg(res: dict) -> str | None:
    """A looped task's own msg only says that an item failed: the first failed item's says why."""
    items = [item for item in res.get("results") or [] if isinstance(item, dict) and item.get("failed")]
    return _text(items[0].get("msg") if items else res.get("msg"))


def _take_failure(result: HostResult, track: _HostTrack) -> None:
    """The last failure is the one that stopped the host (earlier ones may have been rescued)."""
    last_failure = track.failures[-1] if (track.failures and result.failed) else None
    if last_failure:
        result.failed_task = last_failure["task"]
        result.failed_action = last_failure["action"]
        result.msg = _failure_msg(last_failure["res"])
        result.bad_input = bool(last_failure["bad_input"])
    if result.unreachable and track.unreachable:
        result.failed_task = result.failed_task or track.unreachable["task"]
        result.msg = result.msg or _text(track.unreachable["res"].get("msg"))


def _take_readiness(result: HostResult, track: _HostTrack) -> None:
    """The first failed readiness check explains a failure (a rollback may have passed later);
    otherwise the last check is the current truth."""
    if not track.readiness:
        return
    failed_checks = [r for r in track.readiness if r.get("_failed_event") or r.get("ready") is False]
    last = track.readiness[-1]
    primary = failed_checks[0] if (result.failed and failed_checks) else last
    result.ready = bool(last.get("ready")) if "ready" in last else None
    if result.failed and last.get("ready"):
        result.ready = True  # the service came back (e.g. after a rollback) but the play still failed
    result.reason = primary.get("reason")
    result.journal_excerpt = _text(primary.get("journal_excerpt")) or None
    result.unit_state = primary.get("unit_state")
    result.restarts = primary.get("restarts")
    result.timeline = last.get("timeline")
    result.model_ids = last.get("model_ids")
    result.phase = last.get("phase")
    result.elapsed = last.get("elapsed")
    result.last_log_line = primary.get("last_log_line") or last.get("last_log_line")
    if primary.get("msg") and not result.msg:
        result.msg = _text(primary.get("msg"))
    if last.get("ready"):
        result.time_to_ready = last.get("elapsed")
        ids = last.get("model_ids") or []
        result.model_id = ids[0] if ids else None
    if last.get("url"):
        result.endpoint = last.get("url")
    result.readiness = _clean_res({k: v for k, v in last.items() if k != "_failed_event"})


def _take_progress(result: HostResult, track: _HostTrack) -> None:
    """Live progress: the newest truth while a readiness wait runs; otherwise it only fills gaps."""
    if not track.progress:
        return
    waiting = bool(track.running_task) and is_readiness_action(track.running_action)
    for name in HOST_PROGRESS_FIELDS:
        value = track.progress.get(name)
        if waiting and value not in (None, ""):
            setattr(result, name, value)
        elif getattr(result, name) in (None, ""):
            setattr(result, name, value)


def _take_summary(result: HostResult, summary: Any) -> None:
    """The playbook's own summary (set_stats k26_hosts) wins for every field it carries."""
    if not isinstance(summary, Mapping):
        return
    result.summary = dict(summary)
    if summary.get("time_to_ready") is None:
        result.time_to_ready = None  # e.g. status.yml observes once: its check's elapsed is no time to ready
    for name in SUMMARY_FIELDS:
        if name in summary and summary[name] is not None:
            setattr(result, name, _coerce(name, summary[name]))


def _take_fallback_reason(result: HostResult) -> None:
    if result.reason is None:
        if result.unreachable:
            result.reason = "unreachable"
        elif result.bad_input:
            result.reason = "bad_input"
        elif result.failed:
            result.reason = "failed"


def _stats_from_event(data: Mapping[str, Any] | None) -> dict[str, HostStats]:
    if not data:
        return {}
    columns = {
        "ok": "ok",
        "changed": "changed",
        "failures": "failed",
        "dark": "unreachable",
        "skipped": "skipped",
        "rescued": "rescued",
        "ignored": "ignored",
    }
    out: dict[str, HostStats] = {}
    for key, attr in columns.items():
        per_host = data.get(key) or {}
        if not isinstance(per_host, Mapping):
            continue
        for host, count in per_host.items():
            stats = out.setdefault(str(host), HostStats())
            setattr(stats, attr, int(count or 0))
    for host in data.get("processed") or {}:
        out.setdefault(str(host), HostStats())
    return out


def build_run_result(
    events: Iterable[Mapping[str, Any]],
    *,
    playbook: str,
    status: str,
    rc: int | None,
    artifacts_dir: str | None = None,
    cancelled: bool = False,
    check: bool = False,
    progress: Iterable[Mapping[str, Any]] = (),
    duration: float | None = None,
    command: str | None = None,
) -> RunResult:
    """Build a ``RunResult`` from recorded events (e.g. read back from ``job_events/``)."""
    builder = ResultBuilder()
    for event in events:
        builder.add_event(event)
    for record in progress:
        builder.add_progress(record)
    return builder.build(
        playbook=playbook,
        status=status,
        rc=rc,
        artifacts_dir=artifacts_dir,
        cancelled=cancelled,
        check=check,
        duration=duration,
        command=command,
    )
