"""The test image's compile cache (tests/image/k26_zipimport_cache.py) is active in its containers: a module that
ran once is compiled from the cache the next time."""

import pytest

from harness import ZIPIMPORT_CACHE, run_task

pytestmark = pytest.mark.integration


def cached(container):
    return set(container.exec("ls -A %s" % ZIPIMPORT_CACHE).stdout.split())


def test_a_module_is_compiled_once_per_container(container):
    task = {"ansible.builtin.stat": {"path": "/etc/hostname"}}
    assert run_task(container, task)["stat"]["exists"]
    first = cached(container)
    assert len(first) > 20, first  # ansible.module_utils.basic and what it imports
    assert run_task(container, task)["stat"]["exists"]
    assert cached(container) == first
