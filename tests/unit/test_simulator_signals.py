"""SIGTERM and SIGINT in the simulator (signals.py): raised in the main thread once, blocked in the threads it starts."""
import os
import signal
import threading

import pytest

from sglang_simulator import signals


@pytest.fixture
def restored_handlers():
    saved = {signum: signal.getsignal(signum) for signum in signals.STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_a_stop_signal_raises_once_then_is_ignored(restored_handlers):
    signals.install_signal_handlers()
    with pytest.raises(signals.ShutdownRequested) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)  # a point where Python runs the handler
    assert stop.value.signame == "SIGTERM"
    assert all(signal.getsignal(signum) == signal.SIG_IGN for signum in signals.STOP_SIGNALS)
    os.kill(os.getpid(), signal.SIGINT)  # ignored now: the shutdown already runs


def test_threads_started_inside_block_the_stop_signals_and_the_caller_does_not():
    seen = {}

    def record():
        seen["mask"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])

    with signals.stop_signals_blocked():
        thread = threading.Thread(target=record)
        thread.start()
    thread.join()
    assert set(signals.STOP_SIGNALS) <= seen["mask"]
    assert not set(signals.STOP_SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, [])
