"""What the README promises, each shown by a real run against real systemd in a container: check mode, rollback
in its three outcomes, a renamed service, no key in any log or artifact. (The exit codes, Ctrl-C and live progress:
test_promises_waits.py; the start-up timeline, DeepGEMM's precompile and the model's files: test_promises_starts.py;
several hosts in one run, and --limit: test_router.py's fleet.)"""

import json
import shlex

import pytest

import k26deploy
from ansible_collections.k26.deploy.plugins.module_utils import sglang_args
from harness import SIM_INSTALLED, event_texts, snapshot_diff
from promise_host import CRASH, STORE, UNIT, cli, keys_in_artifacts, managed_files, redeploy
import sglang_parser
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- check mode

def test_deploy_check_mode_reports_what_would_change_and_changes_nothing(served):
    box, inventory, runs = served
    box.exec("chmod 0600 " + DRIFTED)  # a simulator file that is not as the package has it: named, left alone
    try:
        before, running = box.snapshot(), box.invocation()
        rc, out, err = cli(runs, "check", "deploy", "-i", inventory, "--check", "--json", "-e",
                           json.dumps({"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 9}}))
        result = json.loads(out)
        assert rc == 0, err[-2000:]
        assert result["check"] is True and result["hosts"][box.name]["changed"] > 0
        assert snapshot_diff(before, box.snapshot()) == [] and box.invocation() == running
        assert any("would install %s" % DRIFTED in text for text in event_texts(runs / "check"))
    finally:
        box.exec("chmod 0644 " + DRIFTED)


DRIFTED = SIM_INSTALLED + "/api.py"


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


def test_a_change_whose_start_systemd_refuses_is_rolled_back(changes):
    """A failed start is a failed change (start.yml runs in main.yml's rolled-back block): a changed configuration that systemd
    refuses to start (here a drop-in's ExecStartPre that fails while the environment file holds the change's mark) is
    rolled back, and the previous configuration serves again."""
    box, inventory, runs = changes
    good = managed_files(box)
    dropin = "/etc/systemd/system/sglang.service.d/k26-test-refuse.conf"
    box.put(dropin, "[Service]\nExecStartPre=/bin/sh -c '! grep -q K26_TEST_REFUSED /etc/sglang/sglang.env'\n")
    box.exec("systemctl daemon-reload")
    try:
        refused = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "refused",
                                   extra_vars={"sglang_service_environment": {"K26_TEST_REFUSED": "1"}})
    finally:
        box.exec("rm -f %s && systemctl daemon-reload" % dropin)
    host = refused.hosts[box.name]
    assert refused.exit_code == 1 and host.rolled_back is True, refused.to_json()
    assert managed_files(box) == good and box.systemctl("is-active", "--quiet", UNIT, check=False).returncode == 0


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


def test_a_deploy_that_writes_nothing_puts_back_what_was_changed_by_hand(changes):
    """The deploy skips systemd's enable-and-start only where the service already runs, enabled, as written, and the
    account's tasks only where the account is as they would leave it: a service disabled by hand is enabled again
    without a restart, the account taken out of the devices' group is put back in, and a stopped service is started."""
    box, inventory, runs = changes
    invocation = box.invocation()
    assert "video" in box.exec("id -nG sglang").stdout.split()
    box.exec("systemctl disable %s && gpasswd -d sglang video" % UNIT)
    enabled = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "disabled")
    assert enabled.exit_code == 0, enabled.to_json()
    assert unit_state(box, UNIT) == ["active", "enabled", "loaded"] and box.invocation() == invocation
    assert "video" in box.exec("id -nG sglang").stdout.split()
    box.exec("systemctl stop " + UNIT)
    started = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "stopped")
    assert started.exit_code == 0 and started.hosts[box.name].ready, started.to_json()
    assert unit_state(box, UNIT) == ["active", "enabled", "loaded"] and box.invocation() != invocation


def test_a_renamed_service_is_refused_then_replaces_the_old_one_only_once_it_is_ready(changes):
    box, inventory, runs = changes
    served_invocation = box.invocation()
    renamed = {"sglang_service_name": "sglang-b"}
    refused = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "rename-refused", extra_vars=renamed)
    assert refused.exit_code == 2 and "another SGLang service deployed by this package (sglang;" in \
        refused.hosts[box.name].msg, refused.to_json()
    assert box.invocation() == served_invocation and unit_state(box, "sglang-b.service")[-1] == "not-found"
    # a renamed service that does not come up: the old one serves again, the new one is stopped and disabled
    retire = dict(renamed, sglang_service_other_services="retire")
    failed = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "rename-failed",
                              extra_vars=dict(retire, sglang_service_environment=CRASH))
    assert failed.exit_code == 1, failed.to_json()
    assert unit_state(box, UNIT) == ["active", "enabled", "loaded"] and box.invocation() != served_invocation
    assert unit_state(box, "sglang-b.service")[:2] in (["inactive", "disabled"], ["failed", "disabled"])
    replaced = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "renamed", extra_vars=retire)
    assert replaced.exit_code == 0 and replaced.hosts[box.name].ready, replaced.to_json()
    assert unit_state(box, "sglang-b.service") == ["active", "enabled", "loaded"]
    assert unit_state(box, UNIT)[-1] == "not-found"
    assert box.exec("ls %s /etc/sglang/sglang.yaml /etc/sglang/sglang.env" % STORE, check=False).returncode == 2
    back = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "rename-back",
                            extra_vars={"sglang_service_other_services": "retire"})
    assert back.exit_code == 0 and unit_state(box, "sglang-b.service")[-1] == "not-found", back.to_json()


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
    assert keys_in_artifacts(served) == []
