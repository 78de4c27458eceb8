"""Shared test set-up: make the collection's plugins importable the way Ansible imports them, and under CI=true
make every skip a failure: a missing prerequisite (podman, the image, the SGLang CPU venv) must not turn a real
check into a silent pass."""
import os
import sys
from pathlib import Path

import pytest
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

ROOT = Path(__file__).resolve().parent.parent
# The checkout is the collection k26.deploy (.collections/ansible_collections/k26/deploy links to it): its plugins
# import each other as ansible_collections.k26.deploy.plugins..., here as under Ansible.
# (under `ansible-test units` its own finder, installed first, already knows the collection's tree)
if not any(isinstance(finder, _AnsibleCollectionFinder) for finder in sys.meta_path):
    _AnsibleCollectionFinder(paths=[str(ROOT / ".collections")])._install()
for sub in ("src",):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)

# The connection the integration tests' inventories name (harness.CONTAINER_HOST): see its documentation.
os.environ["ANSIBLE_CONNECTION_PLUGINS"] = str(ROOT / "tests" / "ansible_plugins" / "connection")

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = "skipped under CI=true, where every check must run: %s" % reason


# The test files that take longest (bench/suite_times.py on a two-core machine, 2026-12-07), longest first.
# pytest-xdist's --dist loadfile with --no-loadscope-reorder (scripts/part.sh) hands files to the workers in
# collection order: the long ones start at once and the short ones fill in at the end, so no worker is left alone with
# a long file while the others idle.
LONGEST_FIRST = (
    "tests/integration/test_router.py",
    "tests/integration/test_promises.py",
    "tests/integration/test_benchmark.py",
    "tests/integration/test_secrets.py",
    "tests/integration/test_promises_starts.py",
    "tests/integration/test_promises_waits.py",
    "tests/integration/test_bad_input.py",
    "tests/integration/test_multinode.py",
    "tests/integration/test_k26deploy_api.py",
    "tests/integration/test_guard.py",
    "tests/unit/test_sglang_memory_resolution.py",
    "tests/integration/test_sglang_ready.py",
)


def pytest_collection_modifyitems(items):
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
