# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang-style log lines on stderr."""

import sys
import threading
import time


LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


class Log:
    """SGLang-style lines on stderr: thread-safe, one flushed line at a time."""

    def __init__(self, level="info", stream=None):
        self.threshold = LOG_LEVELS.get(str(level).lower(), LOG_LEVELS["info"])
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()

    def enabled(self, level):
        return LOG_LEVELS[level] >= self.threshold

    def raw(self, text, level="info"):
        """Write TEXT as it is (tqdm bars, tracebacks, uvicorn lines)."""
        if not self.enabled(level):
            return
        with self._lock:
            self.stream.write(text if text.endswith("\n") else text + "\n")
            self.stream.flush()

    def line(self, message, level="info", rank=""):
        """A ``[YYYY-mm-dd HH:MM:SS PP0 TP0] message`` line."""
        label = "ERROR: " if level == "error" else ""
        self.raw(f"[{timestamp()}{rank}] {label}{message}", level)

    def info(self, message, rank=""):
        self.line(message, "info", rank)

    def warning(self, message, rank=""):
        self.line(message, "warning", rank)

    def error(self, message, rank=""):
        self.line(message, "error", rank)

    def uvicorn(self, message, level="info"):
        """A uvicorn line as SGLang logs it: ``[YYYY-mm-dd HH:MM:SS] INFO:     message``."""
        self.raw(f"[{timestamp()}] {level.upper() + ':':<10}{message}", level)


def timestamp():
    return time.strftime("%Y-%m-%d %H:%M:%S")
