"""make test's cache of Ansible's module_utils walk (tests/controller/k26_ansiballz_cache.py), with Ansible's own
recursive_finder and real modules: the payload is the same with and without it, a changed module is walked again,
a damaged entry is walked again, and the hook is installed in .venv but inert unless K26_ANSIBALLZ_CACHE is set."""

import datetime
import importlib.util
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ansible._internal._ansiballz import _builder
from ansible.executor import module_common

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "tests" / "controller" / "k26_ansiballz_cache.py"
STAT = Path(module_common.__file__).resolve().parents[1] / "modules" / "stat.py"


def _hook():
    spec = importlib.util.spec_from_file_location("k26_ansiballz_cache_under_test", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # ENV is unset here: install() does nothing
    return module


hook = _hook()


class Counted:
    """Ansible's recursive_finder, counting its walks."""

    def __init__(self):
        self.walks = 0

    def __call__(self, *args):
        self.walks += 1
        return module_common.recursive_finder(*args)


def payload(finder, source, fqn="ansible.modules.stat"):
    """The files `finder` puts into a payload for the module `source`, and the module's metadata."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        metadata = finder(fqn.rsplit(".", 1)[-1], fqn, source, zf, datetime.datetime(2026, 1, 1),
                          _builder.ExtensionManager.create(task_vars={}))
    with zipfile.ZipFile(buffer) as zf:
        return {name: zf.read(name) for name in zf.namelist()}, metadata


def test_the_payload_is_ansibles_own_and_the_second_build_does_not_walk(tmp_path):
    source = STAT.read_bytes()
    expected = payload(module_common.recursive_finder, source)
    walker = Counted()
    cached = hook.cached(module_common, walker, str(tmp_path))
    assert payload(cached, source) == expected
    assert payload(cached, source) == expected
    assert walker.walks == 1, "the second build walked again"
    assert "ansible/module_utils/basic.py" in expected[0] and len(list(tmp_path.iterdir())) == 1


def test_a_changed_module_is_walked_again_and_gets_its_own_imports(tmp_path):
    walker = Counted()
    cached = hook.cached(module_common, walker, str(tmp_path))
    source = STAT.read_bytes()
    changed = source.replace(b"from ansible.module_utils.basic import AnsibleModule",
                             b"from ansible.module_utils.basic import AnsibleModule\n"
                             b"from ansible.module_utils.urls import fetch_url", 1)
    assert changed != source
    first, dummy = payload(cached, source)
    second, dummy = payload(cached, changed)
    assert walker.walks == 2
    assert "ansible/module_utils/urls.py" in second and "ansible/module_utils/urls.py" not in first
    assert (second, dummy) == payload(module_common.recursive_finder, changed)


def test_a_damaged_entry_is_walked_again(tmp_path):
    source = STAT.read_bytes()
    walker = Counted()
    cached = hook.cached(module_common, walker, str(tmp_path))
    payload(cached, source)
    (entry,) = tmp_path.iterdir()
    entry.write_bytes(b"not a pickle")
    assert payload(cached, source) == payload(module_common.recursive_finder, source)
    assert walker.walks == 2


@pytest.mark.parametrize("setting, expected", [("", "recursive_finder"), ("cache", "recursive_finder_cached")])
def test_the_venv_hooks_ansible_only_when_asked(tmp_path, setting, expected):
    env = dict(os.environ)
    env.pop(hook.ENV, None)
    if setting:
        env[hook.ENV] = str(tmp_path / setting)
    done = subprocess.run([sys.executable, "-c", "import ansible.executor.module_common as m; "
                           "print(m.recursive_finder.__name__)"], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected, "scripts/setup.sh installs the hook in .venv: run it again"
