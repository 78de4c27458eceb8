"""What test_promises*.py (and test_k26deploy_api.py) share: the helpers they read and change the served host with (the fixtures `served` and
`changes`, in conftest.py, hold one host for each test file)."""

import subprocess
import time
import k26deploy
from harness import ROOT, VENV_BIN, key_of

UNIT = "sglang.service"
STORE = "/var/lib/k26deploy/rollback/sglang"  # root's copy of the last configuration that reached ready
MANAGED_FILES = ("/etc/systemd/system/sglang.service", "/etc/sglang/sglang.yaml", "/etc/sglang/sglang.env")
CRASH = {"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_FAILURE": "crash_loading"}
WAIT_TASK = "Wait until SGLang is ready (loaded, serving the model, warmed up)"


DEMO_FILES = {}  # container -> its managed files as the demo's configuration writes them


def managed_files(box):
    """The bytes of the unit, config and environment files (what a rollback must restore exactly)."""
    return {path: box.exec("base64 -w0 %s" % path).stdout for path in MANAGED_FILES}


def cli(runs, name, *args, **popen):
    """k26deploy as a user runs it; (rc, stdout, stderr). Its artifacts go under runs/name."""
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), *args, "--artifacts-dir", str(runs / name)], cwd=ROOT,
                          check=False, capture_output=True, text=True, timeout=900, **popen)
    return proc.returncode, proc.stdout, proc.stderr


def redeploy(served_fixture):
    box, inventory, runs = served_fixture
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / ("redeploy-%d" % time.monotonic_ns()))
    assert result.exit_code == 0 and result.hosts[box.name].ready, result.to_json()


def keys_in_artifacts(served_fixture):
    """The files of this module's runs (at least 100 of them) that hold its API key: none may."""
    dummy, inventory, runs = served_fixture
    key = key_of(inventory).encode()
    files = [path for path in runs.rglob("*") if path.is_file()]
    assert len(files) > 100
    return [str(path) for path in files if key in path.read_bytes()]
