# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Live progress: tail the readiness progress file and render a compact view.

The ``sglang_ready`` action plugin appends one JSON object per line to the file named by the
controller environment variable ``K26DEPLOY_PROGRESS_FILE`` while it waits (about every 30 s); its fields are
``PROGRESS_RECORD_FIELDS`` of the collection's module_utils/sglang_readiness.py::

    {"host": "gpu-01", "unit": "sglang", "elapsed": 312.4, "phase": "loading",
     "last_log_line": "Loading safetensors checkpoint shards:  45% ...", "restarts": 0,
     "time": "2026-11-29T10:15:00Z"}

``ProgressTail`` follows that file from a thread and hands each record to a callback.
``LiveView`` turns ansible-runner events and progress records into one line each on a stream
(stderr in the CLI): what a human wants to see during a 20-minute model load.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import IO, Any, Callable, Mapping

from .results import HostResult, is_progress_action, is_readiness_action

ProgressCallback = Callable[[dict[str, Any]], None]


class ProgressTail(threading.Thread):
    """Follow a JSON-lines file that may not exist yet; call ``on_record`` for each complete line.

    Partial lines (a writer in the middle of a write) are kept until their newline arrives.
    Lines that are not JSON objects are ignored. ``stop()`` reads what is left and joins.
    """

    def __init__(self, path: str | os.PathLike[str], on_record: ProgressCallback, interval: float = 0.25) -> None:
        super().__init__(name="k26deploy-progress", daemon=True)
        self.path = os.fspath(path)
        self.on_record = on_record
        self.interval = interval
        self.records_seen = 0
        self._stop_event = threading.Event()
        self._offset = 0
        self._buffer = b""

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.poll()
            self._stop_event.wait(self.interval)
        self.poll()

    def poll(self) -> None:
        """Read whatever was appended since the last call."""
        try:
            with open(self.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < self._offset:  # truncated or replaced: start over
                    self._offset, self._buffer = 0, b""
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return
        except OSError:
            return
        if not chunk:
            return
        self._offset += len(chunk)
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            record = parse_progress_line(raw)
            if record is None:
                continue
            self.records_seen += 1
            try:
                self.on_record(record)
            except Exception:  # a broken consumer must not stop the tail
                pass

    def stop(self, timeout: float = 5.0) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)


def parse_progress_line(raw: bytes | str) -> dict[str, Any] | None:
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    raw = raw.strip()
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def format_elapsed(seconds: Any) -> str:
    """``42s``, ``5m07s``, ``1h02m03s``; ``?`` when unknown."""
    try:
        total = int(float(seconds))
    except (TypeError, ValueError):
        return "?"
    hours, rest = divmod(max(total, 0), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _clip(text: Any, width: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def format_progress(record: Mapping[str, Any]) -> str:
    """One line per host: phase, elapsed, restarts, latest journal line."""
    parts = [f"[{record.get('host', '?')}]", f"{record.get('phase') or 'waiting'}", format_elapsed(record.get("elapsed"))]
    if record.get("restarts"):
        parts.append(f"restarts={record['restarts']}")
    line = " ".join(parts)
    if record.get("last_log_line"):
        line += " | " + _clip(record["last_log_line"])
    return line


def format_host_state(result: HostResult) -> str:
    """Where a host stands (used after a cancel and in the summary)."""
    bits = [f"{result.host}: {result.state}"]
    if result.last_status == "running" and result.last_task:
        bits.append(f"in task '{result.last_task}'")
    elif result.last_task:
        bits.append(f"last task '{result.last_task}' {result.last_status or ''}".rstrip())
    if result.phase:
        bits.append(f"phase {result.phase}")
    if result.elapsed is not None:
        bits.append(f"after {format_elapsed(result.elapsed)}")
    line = ", ".join(bits)
    if result.last_log_line:
        line += " | " + _clip(result.last_log_line)
    return line


class LiveView:
    """Render events and progress records as lines on ``stream``.

    ``raw=True`` echoes Ansible's own output (the events' ``stdout``) instead of the compact
    lines; progress records are shown either way. Writes are serialised with a lock because
    events and progress records arrive from different threads.
    """

    def __init__(self, stream: IO[str] | None = None, raw: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.raw = raw
        self._lock = threading.Lock()
        self._answered: set[str] = set()

    def _write(self, line: str) -> None:
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def on_progress(self, record: Mapping[str, Any]) -> None:
        # The task's own result (an event) says how the wait ended: a final record ("done")
        # or one that the tail delivers after that result would only repeat or confuse it.
        if record.get("done") or record.get("host") in self._answered:
            return
        self._write("  " + format_progress(record))

    def on_event(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        data = event.get("event_data") or {}
        host = data.get("host")
        action = data.get("task_action")
        if is_progress_action(action):
            if name == "runner_on_start":
                self._answered.discard(host)
            elif name in ("runner_on_ok", "runner_on_failed") and host is not None:
                self._answered.add(host)
        if self.raw:
            text = event.get("stdout")
            if text:
                self._write(str(text).replace("\r\n", "\n").strip("\n"))
            return
        if name == "playbook_on_play_start":
            self._write(f"PLAY {data.get('play') or data.get('name') or ''}".rstrip())
        elif name == "playbook_on_task_start":
            self._write(f"  task: {data.get('task') or data.get('name')}")
        elif name == "runner_on_start" and is_readiness_action(action):
            self._write(f"  [{host}] waiting for readiness ...")
        elif name == "runner_on_start" and is_progress_action(action):
            self._write(f"  [{host}] benchmarking, one line per concurrency level ...")
        elif name == "runner_on_ok" and is_readiness_action(action):
            res = data.get("res") or {}
            state = "ready" if res.get("ready") else f"not ready ({res.get('reason')})"
            self._write(f"  [{host}] {state} after {format_elapsed(res.get('elapsed'))}")
        elif name == "runner_on_failed" and not data.get("ignore_errors"):
            res = data.get("res") or {}
            reason = f" ({res['reason']})" if isinstance(res, Mapping) and res.get("reason") else ""
            msg = res.get("msg") if isinstance(res, Mapping) else None
            self._write(f"  [{host}] FAILED{reason} in '{data.get('task')}': {_clip(msg or '', 300)}")
        elif name == "runner_on_unreachable":
            res = data.get("res") or {}
            self._write(f"  [{host}] UNREACHABLE: {_clip(res.get('msg') or '', 300)}")
