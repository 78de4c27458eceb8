"""The collection as users get it: `ansible-galaxy collection build` makes a tarball that holds what a user installs
and its license. That tarball installed into an outside project, whose own playbook (FQCNs only) runs every entry
point against a fresh container, is make test's newest lane (scripts/newest_ansible.sh: the newest ansible-core on
Debian 13)."""

import json
import os
import subprocess
import tarfile

import pytest

from harness import ROOT, VENV_BIN

pytestmark = pytest.mark.integration


def run(argv, cwd, **env):
    proc = subprocess.run(argv, cwd=cwd, check=False, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ["PATH"]), **env))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    run(["ansible-galaxy", "collection", "build", "--output-path", str(out), str(ROOT)], cwd=out)
    (path,) = out.glob("k26-deploy-*.tar.gz")
    return path


def test_the_tarball_holds_what_a_user_installs(tarball):
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    for needed in ("MANIFEST.json", "meta/runtime.yml", "plugins/modules/sglang_ready.py",
                   "plugins/action/sglang_ready.py", "plugins/module_utils/sglang_readiness.py",
                   "roles/sglang_service/tasks/main.yml", "roles/sglang/files/sglang_simulator/__main__.py",
                   "playbooks/deploy.yml", "playbooks/vars/play_variables.yml"):
        assert needed in names, needed
    assert not {name for name in names if name.split("/")[0] in (
        ".collections", ".venv", "tests", "src", ".git", "ansible.cfg", "molecule", "inventories")}


def test_the_tarball_carries_the_license_its_manifest_names(tarball):
    """Issue 53: GPL-3.0-or-later, the license text in the artifact, the SPDX line in its code."""
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))
        license_text = archive.extractfile("LICENSE").read().decode()
        module = archive.extractfile("plugins/modules/sglang_guard_info.py").read().decode()
    assert manifest["collection_info"]["license"] == ["GPL-3.0-or-later"]
    assert "GNU GENERAL PUBLIC LICENSE" in license_text and "Version 3, 29 June 2007" in license_text
    assert "SPDX-License-Identifier: GPL-3.0-or-later" in module.splitlines()[4]
