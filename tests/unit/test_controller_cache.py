"""make test's caches of what each ansible-playbook process computes again (tests/controller/k26_controller_cache.py),
each with Ansible's or Jinja's own code: the payload walk (the payload is the same with and without it, a changed or
damaged entry is walked again), the collection loader's code objects (a second process compiles nothing, and the
module works), Jinja's compiled templates and expressions (the same results, a second environment compiles nothing, a
changed source or delimiter compiles anew), and the hook installed in .venv but inert unless K26_CONTROLLER_CACHE is
set."""

import datetime
import json
import importlib.util
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import jinja2
import pytest
from ansible._internal._ansiballz import _builder
from ansible.executor import module_common

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "tests" / "controller" / "k26_controller_cache.py"
STAT = Path(module_common.__file__).resolve().parents[1] / "modules" / "stat.py"


def _hook():
    spec = importlib.util.spec_from_file_location("k26_controller_cache_under_test", HOOK)
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
    next_process = hook.cached(module_common, walker, str(tmp_path))
    assert payload(next_process, source) == payload(module_common.recursive_finder, source)
    assert walker.walks == 2


# A second process importing a module_util of the collection through Ansible's collection loader: what it compiles
LOAD_A_MODULE_UTIL = """
import builtins, importlib.util, json, sys
from ansible.utils.collection_loader import _collection_finder
if sys.argv[3]:  # the checkout's hook, not the copy in .venv (inert here)
    spec = importlib.util.spec_from_file_location("hook", sys.argv[2])
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    hook._patch_collection_finder(_collection_finder, sys.argv[3])
compiled = []
real_compile = builtins.compile
def counting_compile(*args, **kwargs):
    compiled.append(str(kwargs.get("filename", args[1] if len(args) > 1 else "")))
    return real_compile(*args, **kwargs)
builtins.compile = counting_compile
_collection_finder._AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
from ansible_collections.k26.deploy.plugins.module_utils import k26_paths
print(json.dumps({"compiled": [name for name in compiled if name.endswith("k26_paths.py")],
                  "works": k26_paths.file_hashes.__name__}))
"""


def load_a_module_util(directory):
    env = dict(os.environ)
    env.pop(hook.ENV, None)
    done = subprocess.run([sys.executable, "-c", LOAD_A_MODULE_UTIL, str(ROOT / ".collections"), str(HOOK), directory],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_second_process_loads_the_collections_code_without_compiling_it(tmp_path):
    first, second = load_a_module_util(str(tmp_path)), load_a_module_util(str(tmp_path))
    assert len(first["compiled"]) == 1 and second["compiled"] == [], (first, second)
    assert first["works"] == second["works"] == "file_hashes"
    assert len(load_a_module_util("")["compiled"]) == 1  # without the cache: compiled each time


def environment(directory, **settings):
    """A Jinja environment class of its own with the cache (another process's, for a second one on `directory`), and
    a count of what it compiled (templates and expressions)."""
    compiled = []

    class Counted(jinja2.Environment):
        def _generate(self, source, *args, **kwargs):
            compiled.append(source)
            return super()._generate(source, *args, **kwargs)

    hook.cached_jinja(Counted, str(directory))
    return Counted(**settings), compiled


TEMPLATE = "{% for name in names %}{{ name | upper }}{{ ', ' if not loop.last }}{% endfor %} ({{ names | length }})"
NAMES = {"names": ["a", "b"]}


def test_a_second_environment_gets_jinjas_templates_without_compiling_them(tmp_path):
    expected = jinja2.Environment().from_string(TEMPLATE).render(NAMES)
    first, compiled_first = environment(tmp_path)
    second, compiled_second = environment(tmp_path)
    for env in (first, second):
        assert env.from_string(TEMPLATE).render(NAMES) == expected == "A, B (2)"
        assert env.compile_expression("names | length > 1")(**NAMES) is True
        assert env.compile_expression("missing")() is None
        assert env.compile_expression("missing", undefined_to_none=False)() is not None
    assert len(compiled_first) == 3 and compiled_second == [], (compiled_first, compiled_second)


def test_a_changed_template_or_delimiter_is_compiled_anew(tmp_path):
    both = "[[ names | first ]] {{ names | last }}"
    first, dummy = environment(tmp_path)
    assert first.from_string(both).render(NAMES) == "[[ names | first ]] b"
    assert first.compile_expression("names | length")(**NAMES) == 2
    second, compiled = environment(tmp_path, variable_start_string="[[", variable_end_string="]]")
    assert second.from_string(both).render(NAMES) == "a {{ names | last }}"
    assert len(compiled) == 1
    third, compiled = environment(tmp_path)
    assert third.from_string(TEMPLATE.replace("upper", "lower")).render(NAMES) == "a, b (2)"
    assert third.compile_expression("names | first")(**NAMES) == "a"
    assert third.compile_expression("names | length")(**NAMES) == 2
    assert len(compiled) == 2


@pytest.mark.parametrize("setting, expected", [("", "recursive_finder get_code compile"),
                                               ("cache", "recursive_finder_cached get_code_cached compile_cached")])
def test_the_venv_hooks_ansible_only_when_asked(tmp_path, setting, expected):
    env = dict(os.environ)
    env.pop(hook.ENV, None)
    if setting:
        env[hook.ENV] = str(tmp_path / setting)
    done = subprocess.run([sys.executable, "-c", "import ansible.executor.module_common as m, jinja2; "
                           "from ansible.utils.collection_loader import _collection_finder as f; "
                           "print(m.recursive_finder.__name__, f._AnsibleCollectionPkgLoaderBase.get_code.__name__, "
                           "jinja2.Environment.compile.__name__)"],
                          env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected, "scripts/setup.sh installs the hook in .venv: run it again"
