"""Shared test set-up: make the project's module_utils importable the way Ansible imports them, and under CI=true
make every skip a failure: a missing prerequisite (podman, the image, the SGLang CPU venv) must not turn a real
check into a silent pass."""
import os
import sys
from pathlib import Path

import ansible.module_utils
import pytest

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils",):
    path = str(ROOT / sub)
    if path not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(path)
for sub in ("plugins/modules", "plugins/filter", "plugins/action", "src"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = "skipped under CI=true, where every check must run: %s" % reason
