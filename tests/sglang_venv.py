"""Where the real SGLang 0.5.23 (CPU torch) lives for the tests that check against it.

scripts/setup_sglang_cpu.sh makes it, at $SGLANG_CPU_VENV or .cache/sglang-venv; the tests look in the same place.
Without it those tests are skipped with the reason, except under CI=true, where every skip fails the run
(tests/conftest.py).
"""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SGLANG_VENV = Path(os.environ.get("SGLANG_CPU_VENV") or ROOT / ".cache" / "sglang-venv")
SGLANG_PYTHON = SGLANG_VENV / "bin" / "python"
SGLANG_SITE = next(iter(sorted(SGLANG_VENV.glob("lib/python3*/site-packages"))), SGLANG_VENV / "lib")

requires_real_sglang = pytest.mark.skipif(
    not SGLANG_PYTHON.exists(),
    reason="real sglang not installed: run scripts/setup_sglang_cpu.sh to create %s" % SGLANG_VENV,
)
