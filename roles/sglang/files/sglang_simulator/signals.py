# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SIGTERM and SIGINT: handled in the main thread only, where they end the server."""

import contextlib
import signal


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ShutdownRequested(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler."""

    def __init__(self, signame):
        super().__init__(signame)
        self.signame = signame


def ignore_stop_signals():
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def stop_signals_blocked():
    """Threads started inside block SIGTERM and SIGINT, so the kernel hands those to the main thread.

    Python runs signal handlers in the main thread only, and only when it runs bytecode: a stop signal that the
    kernel gives another thread leaves the main thread asleep in sleep_forever() and the stop unanswered. Child
    processes are never started inside: they would inherit the mask through exec."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def install_signal_handlers():
    """SIGTERM/SIGINT raise ShutdownRequested in the main thread (once)."""
    def handler(signum, frame):
        ignore_stop_signals()
        raise ShutdownRequested(signal.Signals(signum).name)
    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
