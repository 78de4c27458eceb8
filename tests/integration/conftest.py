import os

import pytest

import k26deploy
from harness import demo_inventory, systemd_container
from promise_host import DEMO_FILES, UNIT, managed_files, redeploy


@pytest.fixture(scope="session")
def container():
    """One systemd container for the session, with the SGLang simulator copied in."""
    with systemd_container("k26-it-%d" % os.getpid()) as box:
        box.install_simulator()
        yield box


@pytest.fixture(scope="module")
def served(request, tmp_path_factory):
    """For test_promises*.py, one for each test file: a container deployed once with the demo's settings, and the
    artifact dirs of every run in the file."""
    name = request.module.__name__.rsplit(".", 1)[-1].replace("test_", "").replace("_", "-")
    with systemd_container("k26-it-%s-%d" % (name, os.getpid())) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        runs = tmp_path_factory.mktemp("runs")
        first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "first")
        assert first.exit_code == 0, first.to_json()
        DEMO_FILES[box.name] = managed_files(box)
        yield box, inventory, runs


@pytest.fixture
def changes(served):
    """The served container for a test that changes its configuration: the demo's is deployed again afterwards
    where the test left another one, or a service that does not run (also when the test failed half-way), so that
    the next test starts from it."""
    yield served
    box = served[0]
    if managed_files(box) != DEMO_FILES[box.name] or box.systemctl("is-active", "--quiet", UNIT, check=False).returncode:
        redeploy(served)
