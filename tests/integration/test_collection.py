"""The collection as users get it: `ansible-galaxy collection build` makes a tarball that installs into a separate,
empty project, whose own playbook (FQCNs only) deploys the demo settings into a fresh container."""

import json
import os
import subprocess
import tarfile
import textwrap

import pytest
import yaml

from harness import ROOT, VENV_BIN, demo_inventory, key_of, systemd_container

pytestmark = pytest.mark.integration

# the outside project's playbook, FQCNs only (make newest runs the same one with the newest ansible-core)
SITE = (ROOT / "tests" / "fixtures" / "outside_project" / "site.yml").read_text()


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


def test_an_outside_project_deploys_with_fqcns_only(tarball, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "ansible.cfg").write_text(textwrap.dedent("""\
        [defaults]
        collections_path = collections
        interpreter_python = auto_silent
        """))
    # --no-deps: community.general comes with the `ansible` package here (no Galaxy access)
    # This project's config only: under the checkout's (which make test exports) k26.deploy counts as installed.
    config = str(project / "ansible.cfg")
    run(["ansible-galaxy", "collection", "install", "--no-deps", "--force", str(tarball), "-p", "collections"],
        cwd=project, ANSIBLE_CONFIG=config)
    (project / "site.yml").write_text(SITE)
    with systemd_container("k26-it-collection-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, project / "inventory")
        out = run(["ansible-playbook", "-i", inventory, "site.yml"], cwd=project,
                  ANSIBLE_CONFIG=config)
        assert "%s is serving kimi-k2.6" % box.name in out and "READY" in out
        # the other entry points, imported the same way, ran too
        assert out.count("Preflight passed on %s" % box.name) >= 2  # preflight.yml, and again inside deploy.yml
        assert "not attempted: the live configuration is already the last one that reached ready" in out
        assert "k26_log_lines_masked" in out and "The server is fired up and ready to roll!" in out
        key = key_of(project / "inventory")
        models = box.exec("curl -s -H 'Authorization: Bearer %s' http://127.0.0.1:30000/v1/models" % key).stdout
        assert [m["id"] for m in yaml.safe_load(models)["data"]] == ["kimi-k2.6"]
    # The roles, modules and playbooks came from the installed collection, not from this checkout.
    installed = project / "collections" / "ansible_collections" / "k26" / "deploy"
    assert (installed / "MANIFEST.json").is_file() and not (installed / ".collections").exists()
