"""What the README promises, each shown by a real run against real systemd in a container: check mode, rollback
in its three outcomes, a renamed service, the exit codes 3, 4 and 130, live progress, no key in any artifact.
(Several hosts in one run, and --limit, are shown on test_router.py's fleet.)"""

import hashlib
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import k26deploy
from ansible_collections.k26.deploy.plugins.module_utils import sglang_args
from harness import ROOT, VENV_BIN, demo_inventory, snapshot_diff, systemd_container, task_started
import sglang_parser
from safetensors_shards import shard_bytes
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

pytestmark = pytest.mark.integration

UNIT = "sglang.service"
STORE = "/var/lib/k26deploy/rollback/sglang"  # root's copy of the last configuration that reached ready
MANAGED_FILES = ("/etc/systemd/system/sglang.service", "/etc/sglang/sglang.yaml", "/etc/sglang/sglang.env")
CRASH = {"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_FAILURE": "crash_loading"}
WAIT_TASK = "Wait until SGLang is ready (loaded, serving the model, warmed up)"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A container deployed once with the demo's settings, and the artifact dirs of every run in this module."""
    with systemd_container("k26-it-promise-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        runs = tmp_path_factory.mktemp("runs")
        first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "first")
        assert first.exit_code == 0, first.to_json()
        DEMO_FILES[box.name] = managed_files(box)
        yield box, inventory, runs


DEMO_FILES = {}  # container -> its managed files as the demo's configuration writes them


def key_of(inventory):
    return (Path(inventory) / ".secrets" / "api_key").read_text().strip()


def managed_files(box):
    return {path: box.exec("base64 -w0 %s" % path).stdout for path in MANAGED_FILES}


def invocation(box):
    return box.exec("systemctl show sglang.service -p InvocationID --value").stdout.strip()


def cli(runs, name, *args, **popen):
    """k26deploy as a user runs it; (rc, stdout, stderr). Its artifacts go under runs/name."""
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), *args, "--artifacts-dir", str(runs / name)], cwd=ROOT,
                          check=False, capture_output=True, text=True, timeout=900, **popen)
    return proc.returncode, proc.stdout, proc.stderr


def redeploy(served_fixture):
    box, inventory, runs = served_fixture
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / ("redeploy-%d" % time.monotonic_ns()))
    assert result.exit_code == 0 and result.hosts[box.name].ready, result.to_json()


@pytest.fixture
def changes(served):
    """The served container for a test that changes its configuration: the demo's is deployed again afterwards
    where the test left another one, or a service that does not run (also when the test failed half-way), so that
    the next test starts from it."""
    yield served
    box = served[0]
    if managed_files(box) != DEMO_FILES[box.name] or box.systemctl("is-active", "--quiet", UNIT, check=False).returncode:
        redeploy(served)


# The simulator's loading goes on until this file exists: a load exactly as long as a test needs, however slow
# the machine is (the service's home is readable by the service).
HOLD_FILE = "/var/lib/sglang/k26-test-release-load"


def held_load(box, load_seconds):
    """sglang_service_environment for a start whose loading waits for release_load(box)."""
    box.exec("rm -f %s" % HOLD_FILE)
    return {"SGLANG_SIM_LOAD_SECONDS": load_seconds, "SGLANG_SIM_LOAD_HOLD_FILE": HOLD_FILE}


def release_load(box):
    box.exec("touch %s" % HOLD_FILE)


# ---------------------------------------------------------------- check mode

def test_deploy_check_mode_reports_what_would_change_and_changes_nothing(served):
    box, inventory, runs = served
    before, running = box.snapshot(), invocation(box)
    rc, out, err = cli(runs, "check", "deploy", "-i", inventory, "--check", "--json", "-e",
                       json.dumps({"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 9}}))
    result = json.loads(out)
    assert rc == 0, err[-2000:]
    assert result["check"] is True and result["hosts"][box.name]["changed"] > 0
    assert snapshot_diff(before, box.snapshot()) == [] and invocation(box) == running


def test_preflight_check_mode_changes_nothing(served):
    box, inventory, runs = served
    before = box.snapshot()
    rc, out, err = cli(runs, "preflight-check", "preflight", "-i", inventory, "--check", "--json")
    assert rc == 0, err[-2000:]
    assert json.loads(out)["hosts"][box.name]["changed"] == 0
    assert snapshot_diff(before, box.snapshot()) == []


# ---------------------------------------------------------------- rollback

def test_rollback_restores_the_exact_previous_files(changes):
    box, inventory, runs = changes
    good = managed_files(box)
    broken = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "broken",
                              extra_vars={"sglang_service_environment": CRASH, "sglang_service_rollback": False})
    assert broken.exit_code == 1 and broken.hosts[box.name].rolled_back is False, broken.to_json()
    assert managed_files(box) != good
    rolled = k26deploy.rollback(inventory=inventory, private_data_dir=runs / "rollback")
    host = rolled.hosts[box.name]
    assert rolled.exit_code == 0 and host.ready and host.rolled_back, rolled.to_json()
    assert managed_files(box) == good


def test_rollback_with_nothing_to_roll_back_to(served):
    box, inventory, runs = served
    again = k26deploy.rollback(inventory=inventory, private_data_dir=runs / "rollback-again")
    host = again.hosts[box.name]
    assert again.exit_code == 0 and host.ready and host.rolled_back is False, again.to_json()
    assert host.msg == "not attempted: the live configuration is already the last one that reached ready"


def test_a_restored_configuration_that_fails_too_is_reported(changes):
    box, inventory, runs = changes
    # The last good configuration no longer works either (here: its environment now makes it crash).
    box.exec("echo SGLANG_SIM_FAILURE=crash_loading >> %s/env" % STORE)
    try:
        host = crash_change(changes, "both-fail")
        assert host.rolled_back is False, host
        assert host.summary["rollback_outcome"].startswith(
            "restored the previous configuration but it did not come up either")
    finally:
        box.exec("sed -i '/^SGLANG_SIM_FAILURE=crash_loading$/d' %s/env" % STORE)


def crash_change(served_fixture, name):
    """Deploy a change that crashes while loading (its run's artifacts under runs/NAME): the host's result."""
    box, inventory, runs = served_fixture
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / name,
                              extra_vars={"sglang_service_environment": CRASH})
    assert result.exit_code == 1, result.to_json()
    return result.hosts[box.name]


def as_service_user(box, command):
    return box.exec("runuser -u sglang -- /bin/sh -c %s" % shlex.quote(command), check=False)


def test_the_service_account_cannot_plant_a_rollback(changes):
    """The account runs trust-remote-code models and JIT caches: design for it being compromised. Root restores only
    from its own store, which the account can neither write nor replace, and says why it refuses a store that
    someone else could have written."""
    box, inventory, runs = changes
    good = managed_files(box)
    # the live unit with a line that would run as root: what a compromised account would plant
    plant = "sed '/^\\[Service\\]/a ExecStartPre=+/bin/touch /root/k26-planted' /etc/systemd/system/sglang.service"
    denied = as_service_user(box, "%s > %s/unit" % (plant, STORE))
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    # Where the store used to be (the account's home, which it may write), a planted copy is never read.
    legacy = "/var/lib/sglang/rollback"
    planting = as_service_user(box, "mv {0} {0}.old 2>/dev/null; mkdir -p {0} && {1} > {0}/unit && "
                                    "cp /etc/sglang/sglang.yaml {0}/config.yaml && cp /etc/sglang/sglang.env {0}/env && "
                                    "grep -c k26-planted {0}/unit".format(legacy, plant))
    assert planting.returncode == 0 and planting.stdout.strip() == "1", planting
    assert crash_change(changes, "planted").rolled_back
    assert managed_files(box) == good and box.exec("test -e /root/k26-planted", check=False).returncode != 0
    # A saved file the account owns (as if it had replaced it): refused, and said so.
    box.exec("chown sglang %s/unit" % STORE)
    try:
        host = crash_change(changes, "untrusted")
        assert host.rolled_back is False, host
        assert "the rollback store is not root's alone" in host.summary["rollback_outcome"]
        assert "%s/unit is owned by uid" % STORE in host.summary["rollback_outcome"]
    finally:
        box.exec("chown root %s/unit" % STORE)
    assert box.exec("test -e /root/k26-planted", check=False).returncode != 0


def unit_state(box, unit):
    """[ActiveState, UnitFileState, LoadState] of UNIT."""
    shown = dict(line.split("=", 1) for line in box.exec(
        "systemctl show %s -p ActiveState -p UnitFileState -p LoadState" % unit).stdout.splitlines() if "=" in line)
    return [shown.get(name, "") for name in ("ActiveState", "UnitFileState", "LoadState")]


def test_a_renamed_service_is_refused_then_replaces_the_old_one_only_once_it_is_ready(changes):
    box, inventory, runs = changes
    served_invocation = invocation(box)
    renamed = {"sglang_service_name": "sglang-b"}
    refused = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "rename-refused", extra_vars=renamed)
    assert refused.exit_code == 2 and "another SGLang service deployed by this package (sglang;" in \
        refused.hosts[box.name].msg, refused.to_json()
    assert invocation(box) == served_invocation and unit_state(box, "sglang-b.service")[-1] == "not-found"
    # a renamed service that does not come up: the old one serves again, the new one is stopped and disabled
    retire = dict(renamed, sglang_service_other_services="retire")
    failed = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "rename-failed",
                              extra_vars=dict(retire, sglang_service_environment=CRASH))
    assert failed.exit_code == 1, failed.to_json()
    assert unit_state(box, UNIT) == ["active", "enabled", "loaded"] and invocation(box) != served_invocation
    assert unit_state(box, "sglang-b.service")[:2] in (["inactive", "disabled"], ["failed", "disabled"])
    replaced = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "renamed", extra_vars=retire)
    assert replaced.exit_code == 0 and replaced.hosts[box.name].ready, replaced.to_json()
    assert unit_state(box, "sglang-b.service") == ["active", "enabled", "loaded"]
    assert unit_state(box, UNIT)[-1] == "not-found"
    assert box.exec("ls %s /etc/sglang/sglang.yaml /etc/sglang/sglang.env" % STORE, check=False).returncode == 2
    back = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "rename-back",
                            extra_vars={"sglang_service_other_services": "retire"})
    assert back.exit_code == 0 and unit_state(box, "sglang-b.service")[-1] == "not-found", back.to_json()


# ---------------------------------------------------------------- exit codes and Ctrl-C

@pytest.mark.parametrize("failure, reason", [("hang_loading", "timeout"), ("warmup_fail", "warmup_failed")])
def test_exit_code_3_when_the_wait_gives_up(changes, failure, reason):
    box, inventory, runs = changes
    change = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_FAILURE": failure},
              "sglang_service_ready_timeout": 15}
    rc, out, err = cli(runs, "exit3-" + failure, "deploy", "-i", inventory, "--json", "-e", json.dumps(change))
    host = json.loads(out)["hosts"][box.name]
    assert rc == 3 and host["reason"] == reason and host["state"] == "timeout", err[-2000:]
    assert host["rolled_back"] is True


def test_exit_code_4_when_a_host_is_unreachable(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"sglang_servers": {"hosts": {"k26-it-no-such-container": {
        "ansible_connection": "containers.podman.podman", "sglang_service_model_path": "/models/Kimi-K2.6"}}}}))
    rc, out, err = cli(tmp_path, "unreachable", "status", "-i", str(inventory), "--json")
    assert rc == 4, err[-2000:]
    assert json.loads(out)["hosts"]["k26-it-no-such-container"]["unreachable"] is True


def test_ctrl_c_during_a_readiness_wait(changes):
    box, inventory, runs = changes
    slow = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 120}}
    events = runs / "ctrl-c"
    proc = subprocess.Popen([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(slow),
                             "--artifacts-dir", str(events)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        task_started(events, WAIT_TASK, timeout=300)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    assert "Cancelled. Last known state of each host:" in err
    assert "%s: cancelled, in task" % box.name in err and WAIT_TASK in err
    assert "canceled (exit 130)" in out


# ---------------------------------------------------------------- progress

def test_live_progress_in_the_cli_and_the_api(changes):
    box, inventory, runs = changes
    held = {"sglang_service_environment": held_load(box, 1), "sglang_service_ready_progress_interval": 1}
    with open(runs / "progress.out", "w") as out:
        proc = subprocess.Popen([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(held),
                                 "--artifacts-dir", str(runs / "progress")], cwd=ROOT, stdout=out,
                                stderr=subprocess.PIPE, text=True)
        try:
            err, lines = [], []
            for line in proc.stderr:  # the live view, as it is printed
                err.append(line)
                if line.startswith("  [%s] loading " % box.name):
                    lines.append(line)
                    if len(lines) == 2:
                        release_load(box)
            rc = proc.wait(timeout=300)
        finally:
            release_load(box)
            if proc.poll() is None:
                proc.kill()
    assert rc == 0, "".join(err)[-3000:]
    assert len(lines) >= 2 and any("Loading safetensors checkpoint shards" in line for line in lines), "".join(err)
    records = []

    def progress(record):
        records.append(record)
        if record.get("host") == box.name and record.get("phase") == "loading":
            release_load(box)

    slower = dict(held, sglang_service_environment=held_load(box, 2))
    try:
        result = k26deploy.deploy(inventory=inventory, extra_vars=slower, progress_callback=progress,
                                  private_data_dir=runs / "progress-api")
    finally:
        release_load(box)
    assert result.exit_code == 0, result.to_json()
    phases = [r["phase"] for r in records if r.get("host") == box.name]
    assert "loading" in phases, records


# ---------------------------------------------------------------- start-up timeline

PHASES = ["weights_loaded", "kv_cache_allocated", "graphs_captured", "warmed_up", "ready"]


def test_every_start_reports_its_timeline_and_a_slower_one_is_a_finding(changes, tmp_path):
    box, inventory, runs = changes
    kept = {"sglang_service_startup_dir": str(tmp_path / "startups"), "sglang_service_startup_slower_min_seconds": 2}
    first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "startup-first",
                             extra_vars=dict(kept, sglang_service_environment={"SGLANG_SIM_LOAD_SECONDS": 0.5}))
    assert first.exit_code == 0, first.to_json()
    startup = first.hosts[box.name].startup
    assert startup["invocation"] == invocation(box) and startup["findings"] == [] and startup["last_good"] is None
    phases = startup["phases"]  # the simulator's lines, each where SGLang 0.5.23 logs it
    assert list(phases) == PHASES and sorted(phases.values()) == list(phases.values()), phases
    slower = dict(kept, sglang_service_environment={"SGLANG_SIM_LOAD_SECONDS": 6})
    rc, out, err = cli(runs, "startup-slower", "deploy", "-i", inventory, "-e", json.dumps(slower))
    assert rc == 0, err
    assert "start-up (seconds from the process start): weights " in out
    assert "WARNING K26-START-SLOWER: loading the weights took" in out, out
    # nothing changed: the same start, not counted again; status shows the newest start kept
    rc, out, err = cli(runs, "startup-status", "status", "-i", inventory, "--json", "-e", json.dumps(kept))
    assert rc == 0, err
    shown = json.loads(out)["hosts"][box.name]["startup"]
    assert shown["invocation"] == invocation(box) and shown["phases"]["weights_loaded"] > phases["weights_loaded"] + 4
    assert [r["invocation"] for r in json.loads((tmp_path / "startups" / ("%s.json" % box.name)).read_text())] == [
        startup["invocation"], shown["invocation"]]


# ---------------------------------------------------------------- DeepGEMM's kernels, precompiled

PRECOMPILE = {"sglang_service_deepgemm_precompile": "always", "sglang_service_deepgemm_precompile_timeout": 15}
DEEP_GEMM_DIR = "/var/cache/sglang/sglang-0.5.23-cpu/deep_gemm"


def test_kernels_are_precompiled_before_the_start_that_needs_them_and_a_failed_precompile_is_rolled_back(changes):
    # The simulator's compile mode stands for `python -m sglang.compile_deep_gemm` (which needs a GPU): a whole
    # server on a loopback port, polled until it serves, then a request; "kernels" in the DeepGEMM cache.
    box, inventory, runs = changes
    box.systemctl("stop", "dbus.socket", "dbus.service")  # as on a host without a D-Bus daemon: systemctl only
    try:
        precompile_and_fail_one(box, inventory, runs)
    finally:
        box.systemctl("start", "dbus.socket")


def precompile_and_fail_one(box, inventory, runs):
    before = invocation(box)
    first = dict(PRECOMPILE, sglang_service_environment={"K26_TEST_PRECOMPILE": "1"})
    rc, out, err = cli(runs, "precompile-first", "deploy", "-i", inventory, "--json", "-e", json.dumps(first))
    assert rc == 0, err
    host = json.loads(out)["hosts"][box.name]
    precompile = host["precompile"]
    assert host["ready"] and invocation(box) != before and precompile["seconds"] > 0, precompile
    record = "/var/lib/k26deploy/deepgemm/sglang/%s.json" % precompile["key"]
    assert box.exec("stat -c %U:%a " + record).stdout.split() == ["root:644"]
    # ran as the service's user with its environment file: the kernels are the service's, in this release's cache
    kernels = box.exec("find %s -type f -printf '%%u %%p\\n'" % DEEP_GEMM_DIR).stdout.split("\n")
    assert kernels[0].startswith("sglang %s/" % DEEP_GEMM_DIR), kernels
    journal = box.exec("journalctl -o cat --no-pager -u %s" % precompile["unit"]).stdout
    assert "DeepGEMM Kernels compilation finished successfully." in journal and key_of(inventory) not in journal
    # the same configuration again: nothing to compile, nothing restarts
    again = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "precompile-again", extra_vars=first)
    assert again.exit_code == 0 and again.hosts[box.name].precompile is None, again.to_json()
    assert invocation(box) == json.loads(out)["hosts"][box.name]["unit_state"]["InvocationID"]
    # a change of the kernels (chunked-prefill-size) whose precompile fails: the server was stopped for it, so the
    # previous configuration is restored and serves again; no record for the failed configuration
    served_files = managed_files(box)
    failing = dict(PRECOMPILE, sglang_service_options={"chunked-prefill-size": 4096},
                   sglang_service_environment={"K26_TEST_PRECOMPILE": "1", "SGLANG_SIM_FAILURE": "crash_loading"})
    rc, out, err = cli(runs, "precompile-failed", "deploy", "-i", inventory, "--json", "-e", json.dumps(failing))
    assert rc == 1, out
    host = json.loads(out)["hosts"][box.name]
    assert (host["reason"], host["rolled_back"]) == ("precompile_timeout", True), host
    assert "did not finish within its timeout of 15s" in host["msg"], host["msg"]
    assert "TimeoutError: DeepGEMM Kernels compilation timeout." in host["journal_excerpt"]
    assert managed_files(box) == served_files and box.systemctl("is-active", "--quiet", UNIT, check=False).returncode == 0
    assert box.exec("ls /var/lib/k26deploy/deepgemm/sglang").stdout.split() == ["%s.json" % precompile["key"]]


# ---------------------------------------------------------------- the model's files

MODEL_DIR = "/srv/models/k26-test"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def controller_model(root):
    """A model directory on the controller: config, index and two shards of random bytes."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"]}))
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": SHARDS[0], "b": SHARDS[1]}}))
    for name in SHARDS:
        (root / name).write_bytes(shard_bytes(os.urandom(1 << 20)))
    return root


def test_the_model_is_staged_and_verified_before_anything_restarts(changes, tmp_path):
    box, inventory, runs = changes
    source = controller_model(tmp_path / "model")
    staged = {"sglang_service_model_path": MODEL_DIR, "sglang_model_source": "controller",
              "sglang_model_controller_path": str(source)}
    first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "model-staged", extra_vars=staged)
    assert first.exit_code == 0, first.to_json()
    model = first.hosts[box.name].model
    assert model["ready"] is True and (model["files"], model["shards"]) == (4, 2), model
    assert model["prewarm"]["state"] == "done" and model["prewarm"]["bytes"] == model["total_bytes"], model
    manifest = json.loads(box.exec("cat /var/lib/k26deploy/models/srv_models_k26-test.json").stdout)
    assert manifest["files"][SHARDS[0]]["sha256"] == hashlib.sha256((source / SHARDS[0]).read_bytes()).hexdigest()
    # one byte changes and the mtime is put back: only a hash can tell (verify always), against the manifest's
    shard = "%s/%s" % (MODEL_DIR, SHARDS[0])
    box.exec("cp -p {0} /tmp/k26-ref && printf X | dd of={0} bs=1 seek=1000 conv=notrunc status=none && "
             "touch -r /tmp/k26-ref {0}".format(shard))
    before = (managed_files(box), invocation(box))
    verified = dict(staged, sglang_model_source="path", sglang_model_verify="always",
                    sglang_service_environment={"K26_TEST_CHANGE": "1"})
    bad = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "model-corrupt", extra_vars=verified)
    assert bad.exit_code == 1 and (managed_files(box), invocation(box)) == before, bad.to_json()
    assert "%s: changed since the manifest: sha256 differs" % SHARDS[0] in json.dumps(bad.to_dict()), bad.to_json()
    # an interrupted copy is found without a hash, and a shard gone
    box.exec("truncate -s 4096 %s/%s && rm %s/config.json" % (MODEL_DIR, SHARDS[1], MODEL_DIR))
    cut = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "model-cut",
                           extra_vars=dict(verified, sglang_model_verify="size"))
    assert cut.exit_code == 1 and (managed_files(box), invocation(box)) == before, cut.to_json()
    said = json.dumps(cut.to_dict())
    assert "%s: truncated: 4096 of the " % SHARDS[1] in said and "config.json missing" in said, said


# ---------------------------------------------------------------- secrets

def test_logs_hide_keys_that_sglang_printed_before(changes):
    # An earlier SGLang start printed its arguments in clear (as 0.5.23 does without the launcher): a drop-in's
    # ExecStartPre writes such lines into the current run's journal, where `k26deploy logs` reads.
    box, inventory, runs = changes
    old_key = "k26-earlier-key-3c1d9e"
    dropin = "/etc/systemd/system/sglang.service.d/k26-test-earlier-log.conf"
    box.put(dropin, "[Service]\nExecStartPre=/bin/echo \"server_args={'api_key': '%s', 'port': 30000}\"\n"
                    "ExecStartPre=/bin/echo launch_server --api-key %s\n" % (old_key, old_key))
    try:
        box.exec("systemctl daemon-reload && systemctl restart sglang.service")
    finally:
        box.exec("rm -f %s && systemctl daemon-reload" % dropin)
    redeploy(changes)  # waits until it serves again, changing nothing: the journal stays this run's
    rc, out, err = cli(runs, "logs", "logs", "-i", inventory, "--json")
    assert rc == 0, err
    excerpt = json.loads(out)["hosts"][box.name]["journal_excerpt"]
    assert "server_args={'api_key': '********', 'port': 30000}" in excerpt and "launch_server --api-key '********'" in excerpt
    assert old_key not in out and old_key not in err


@requires_real_sglang
def test_the_rendered_config_passes_sglangs_own_parser(served, tmp_path):
    # The file a real converge wrote, not a copy of it, read by SGLang 0.5.23's parser and config merger.
    box = served[0]
    content = box.exec("cat /etc/sglang/sglang.yaml").stdout
    result, dummy = sglang_args.run_check(sglang_parser.run, str(SGLANG_PYTHON), content=content, tmpdir=str(tmp_path))
    assert result["ok"] is True, result.get("error")
    # auto without topology facts: TP8 ("parsed" holds what differs from SGLang's defaults: pp-size 1 is one)
    assert result["parsed"]["tp_size"] == 8 and result["parsed"].get("pp_size", 1) == 1
    assert result["parsed"]["served_model_name"] == "kimi-k2.6"


def test_the_key_is_in_no_artifact_of_any_run(served):
    dummy, inventory, runs = served
    key = key_of(inventory).encode()
    files = [path for path in runs.rglob("*") if path.is_file()]
    assert len(files) > 100
    assert [str(path) for path in files if key in path.read_bytes()] == []
