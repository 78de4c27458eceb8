"""The replica guard after a real deploy into a container (real systemd and journald, the simulator as SGLang): a
scheduler that hangs (HTTP up, no token made: the simulator's hang file) is found hung, restarted and answers again,
with one incident holding that invocation's journal; a long start is never acted on; the guard runs hardened, its
key in a root-only file, never in argv; a deploy without it removes it."""

import hashlib
import json
import os
import shlex

import pytest
import yaml

import k26deploy
from harness import ROOT, demo_inventory, key_of, systemd_container, wait_until

pytestmark = pytest.mark.integration

UNIT = "sglang.service"
GUARD = "sglang-guard.service"
STATE = "/var/lib/k26deploy/guard/sglang"
HANG_FILE = "/var/lib/sglang/hang"
LOAD_RELEASE = "/var/lib/sglang/load-may-end"
# A tight policy, so that the test waits seconds, not minutes.
POLICY = {"sglang_service_guard_interval": 1, "sglang_service_guard_canary_timeout": 2,
          "sglang_service_guard_hung_after": 3}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    with systemd_container("k26-it-guard-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"), guard=True)
        servers = os.path.join(inventory, "group_vars", "sglang_servers.yml")
        settings = yaml.safe_load(open(servers))
        settings["sglang_service_environment"].update(SGLANG_SIM_HANG_FILE=HANG_FILE,
                                                      SGLANG_SIM_LOAD_HOLD_FILE=LOAD_RELEASE,
                                                      SGLANG_HEALTH_CHECK_TIMEOUT="3")
        settings.update(POLICY)
        with open(servers, "w") as handle:
            yaml.safe_dump(settings, handle)
        box.exec("mkdir -p /var/lib/sglang && touch %s" % LOAD_RELEASE)
        runs = tmp_path_factory.mktemp("runs")
        first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "first")
        assert first.exit_code == 0, first.to_json()
        yield box, inventory, runs


def guard_state(box):
    result = box.exec("cat %s/state.json" % STATE, check=False)
    return json.loads(result.stdout) if result.returncode == 0 and result.stdout else {}


def incidents(box):
    names = box.exec("ls %s/incidents" % STATE).stdout.split()
    return [json.loads(box.exec("cat %s/incidents/%s" % (STATE, shlex.quote(name))).stdout) for name in names]


def test_the_guard_runs_hardened_with_its_key_in_a_root_only_file(guarded):
    box, inventory, runs = guarded
    wait_until(lambda: guard_state(box).get("verdict") == "healthy", "the guard finds the deployed server healthy",
               timeout=60)
    exposure = box.exec("systemd-analyze security %s | tail -1" % GUARD).stdout
    assert float(exposure.split("level for %s: " % GUARD)[1].split()[0]) <= 1.5, exposure
    key = key_of(inventory)
    pid = box.exec("systemctl show %s -p MainPID --value" % GUARD).stdout.strip()
    assert key not in box.exec("tr '\\0' ' ' </proc/%s/cmdline" % pid).stdout
    assert box.exec("stat -c '%a %U:%G' /etc/sglang/sglang.guard.json").stdout.split() == ["600", "root:root"]
    assert key not in box.exec("journalctl -u %s --no-pager" % GUARD).stdout
    metrics = box.exec("curl -s http://127.0.0.1:29100/metrics").stdout
    assert 'k26_guard_verdict{service="sglang",verdict="healthy"} 1' in metrics, metrics


def test_a_hung_scheduler_is_restarted_and_answers_again_with_one_incident(guarded):
    box, inventory, runs = guarded
    wait_until(lambda: guard_state(box).get("verdict") == "healthy", "a healthy server", timeout=60)
    before = box.invocation(UNIT)
    seen = len(incidents(box))
    box.exec("touch %s" % HANG_FILE)
    try:
        wait_until(lambda: box.invocation(UNIT) != before, "the guard restarts the hung server", timeout=90)
    finally:
        box.exec("rm -f %s" % HANG_FILE)
    wait_until(lambda: (incidents(box)[-1:] or [{}])[0].get("recovered_after_seconds") is not None,
               "the restarted server answers a canary again", timeout=90)
    new = incidents(box)[seen:]
    assert [(record["verdict"], record["action"], record["acted"]) for record in new] == [("hung", "restart", True)]
    record = new[0]
    assert record["invocation"] == before and "canaries missed in a row" in record["why"]
    assert any("The server is fired up and ready to roll!" in line for line in record["evidence"]["journal"])
    assert key_of(inventory) not in json.dumps(record)
    assert guard_state(box)["verdict"] == "healthy"


def test_status_and_incidents_show_the_guard_s_word_and_its_evidence(guarded):
    box, inventory, runs = guarded
    status = k26deploy.status(inventory=inventory, private_data_dir=runs / "status")
    assert status.exit_code == 0, status.to_json()
    guard = status.hosts[box.name].guard
    assert guard["installed"] and guard["verdict"] == "healthy" and guard["incidents"] == {"hung": 1}
    assert [record["verdict"] for record in guard["last_incidents"]] == ["hung"]
    assert "evidence" not in guard["last_incidents"][0]
    shown = k26deploy.incidents(inventory=inventory, private_data_dir=runs / "incidents")
    assert shown.exit_code == 0, shown.to_json()
    record = shown.hosts[box.name].guard["last_incidents"][-1]
    assert record["action"] == "restart" and record["recovered_after_seconds"] > 0
    assert any("ready to roll" in line for line in record["evidence"]["journal"])


def test_a_long_start_is_never_acted_on(guarded):
    """A start that has not answered yet (weights loading, the port closed) is SGLang's and the deploy's to judge."""
    box, inventory, runs = guarded
    seen = len(incidents(box))
    box.exec("rm -f %s" % LOAD_RELEASE)
    try:
        box.systemctl("restart", UNIT)
        # many times the hung verdict's 3 missed canaries of 1-2 s each
        wait_until(lambda: guard_state(box).get("verdict") == "starting", "the guard sees the start", timeout=30)
        invocation = box.invocation(UNIT)
        box.exec("sleep 12")
        assert box.invocation(UNIT) == invocation and guard_state(box)["verdict"] == "starting"
    finally:
        box.exec("touch %s" % LOAD_RELEASE)
    wait_until(lambda: guard_state(box).get("verdict") == "healthy", "healthy once warm", timeout=60)
    assert len(incidents(box)) == seen


def test_a_link_the_service_account_put_in_place_of_its_cache_is_refused_never_followed(guarded):
    """Issue 50: the service account owns its cache directory, so it can replace the Hugging Face cache inside it with
    a link to /etc; the next deploy, as root, must neither follow it (/etc would become the account's) nor go on."""
    box, inventory, runs = guarded
    hf_home = "/var/cache/sglang/huggingface"
    etc = box.exec("stat -c '%a %U:%G' /etc").stdout
    box.exec("runuser -u sglang -- sh -c 'rm -rf %s && ln -s /etc %s'" % (hf_home, hf_home))
    try:
        result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "planted")
        host = result.hosts[box.name]
        assert result.exit_code == 1 and hf_home in (host.msg or "") and "link" in host.msg, result.to_json()
        assert box.exec("stat -c '%a %U:%G' /etc").stdout == etc
    finally:
        box.exec("rm -f %s && install -d -o sglang -g sglang -m 0750 %s" % (hf_home, hf_home))


GUARD_CONFIG = "/etc/sglang/sglang.guard.json"


def test_a_guard_file_changed_on_the_host_is_put_back_and_only_the_guard_restarts(guarded):
    """The deploy looks at the guard's program and configuration once (content, owner, mode) and writes only what
    differs."""
    box, inventory, runs = guarded
    program = "/opt/k26deploy/guard"
    config = box.exec("cat " + GUARD_CONFIG).stdout
    box.exec("echo '# changed' >> %s/sglang_guard.py && chmod 0600 %s/nvidia_health.py" % (program, program))
    box.exec("echo ' ' >> %s && chmod 0640 %s" % (GUARD_CONFIG, GUARD_CONFIG))
    service, guard = box.invocation(UNIT), box.invocation(GUARD)
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "guard-files")
    assert result.exit_code == 0, result.to_json()
    for name in ("sglang_guard.py", "nvidia_health.py"):
        there = box.exec("sha1sum %s/%s && stat -c %%a %s/%s" % (program, name, program, name)).stdout.split()
        here = hashlib.sha1((ROOT / "plugins" / "module_utils" / name).read_bytes()).hexdigest()
        assert (there[0], there[-1]) == (here, "644"), (name, there)
    assert box.exec("cat " + GUARD_CONFIG).stdout == config
    assert box.exec("stat -c '%a %U' " + GUARD_CONFIG).stdout.strip() == "600 root"
    assert box.invocation(GUARD) != guard and box.invocation(UNIT) == service


def test_a_guard_stopped_and_disabled_by_hand_is_started_and_enabled_again(guarded):
    """The deploy skips the guard's start only where the guard already runs, enabled, as written."""
    box, inventory, runs = guarded
    service = box.invocation(UNIT)
    box.exec("systemctl disable --now " + GUARD)
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "guard-stopped")
    assert result.exit_code == 0, result.to_json()
    shown = box.exec("systemctl show %s -p ActiveState -p UnitFileState" % GUARD).stdout.split()
    assert shown == ["ActiveState=active", "UnitFileState=enabled"] and box.invocation(UNIT) == service


def test_a_deploy_without_the_guard_removes_it(guarded):
    box, inventory, runs = guarded
    result = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "without",
                              extra_vars={"sglang_service_guard": False})
    assert result.exit_code == 0, result.to_json()
    assert box.systemctl("is-active", "--quiet", GUARD, check=False).returncode != 0
    assert box.exec("test -e /etc/systemd/system/%s || test -e /etc/sglang/sglang.guard.json" % GUARD,
                    check=False).returncode != 0
    assert box.systemctl("is-active", "--quiet", UNIT, check=False).returncode == 0
