"""Facts with one home, and the places that repeat them held to it: the collection's version, the SGLang release it
is checked against, and the name of the progress file's variable."""

import os
import pathlib
import re
import subprocess
import sys
import tomllib

import yaml

import k26deploy
from k26deploy import runner
from ansible_collections.k26.deploy.plugins.module_utils import k26_progress, sglang_version

ROOT = pathlib.Path(__file__).parents[2]


def _yaml(path):
    return yaml.safe_load((ROOT / path).read_text())


def _version(text):
    return tuple(int(part) for part in text.split('.'))


def test_the_package_has_the_collections_version():
    assert k26deploy.__version__ == _yaml('galaxy.yml')['version']
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())
    assert 'version' not in project['project'] and 'version' in project['project']['dynamic']
    assert project['tool']['setuptools']['dynamic']['version'] == {'attr': 'k26deploy.__version__'}


def test_the_version_is_the_next_release_of_the_changelog():
    released = [_version(v) for v in _yaml('changelogs/changelog.yaml')['releases']]
    unreleased = list((ROOT / 'changelogs' / 'fragments').glob('*.yml'))
    galaxy = _version(_yaml('galaxy.yml')['version'])
    assert galaxy > max(released) if unreleased else galaxy == max(released)


def test_the_sglang_release_has_one_home():
    pinned = sglang_version.SGLANG_VERSION
    assert _yaml('roles/sglang/defaults/main.yml')['sglang_version'] == pinned
    simulator = (ROOT / 'roles/sglang/files/sglang_simulator/__init__.py').read_text()
    assert re.search(r'^VERSION = "(.*)"$', simulator, re.M).group(1) == pinned + '-simulator'
    example = _yaml('inventories/example/group_vars/sglang_servers.yml')
    assert example.get('sglang_version', pinned) == pinned
    scripts = subprocess.run(['bash', '-c', 'source scripts/sglang_version.sh && echo "$SGLANG_VERSION"'],
                             cwd=ROOT, env={'PATH': '/usr/bin:/bin'}, capture_output=True, text=True, check=True)
    assert scripts.stdout.strip() == pinned


def test_the_progress_files_variable_has_one_name():
    assert runner.PROGRESS_FILE_ENV == k26_progress.PROGRESS_FILE_ENV


def test_the_execution_environment_pins_what_k26deploy_pins():
    dependencies = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['dependencies']
    ee = _yaml('execution-environment.yml')['dependencies']
    assert ee['ansible_core']['package_pip'] in dependencies
    assert ee['ansible_runner']['package_pip'] in dependencies


def test_the_command_prints_a_finding_as_the_modules_do_without_a_collection_loader(tmp_path):
    """k26deploy's summary formats findings with the collection's k26_preflight_rules.format_finding: imported from
    the project's .collections in a process where no Ansible collection loader runs (the command's own)."""
    script = ("from k26deploy.cli import format_finding\n"
              "print(format_finding({'id': 'K26-X', 'severity': 'warning', 'message': 'm', 'fix': 'do this.'}))\n"
              "print(format_finding({'message': 'm'}))\n")
    done = subprocess.run([sys.executable, '-c', script], cwd=tmp_path, capture_output=True, text=True, check=True,
                          env={'PATH': os.environ['PATH'], 'PYTHONPATH': str(ROOT / 'src')})
    assert done.stdout.splitlines() == ['WARNING K26-X: m Fix: do this.', '?       None: m']
