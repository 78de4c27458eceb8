"""SGLang's router (the real smg package) in front of two replicas (the simulator), each in a container of its own
with real systemd, on a podman network of their own: one deploy_k26.yml run deploys all three, requests through
the router reach both replicas, the key is in no argv, unit or journal, a second run changes nothing, bad
input or a router that cannot start fails with the reason, and a change written but never restarted for restarts
on the next run; a rolling change under a steady stream of requests loses none and takes each replica out of the
router while it restarts, one at a time, in order (the router's workers sampled during the roll); a bad change
fails on the first replica, is rolled back there and rejoins, and never reaches the second, which keeps its running
invocation."""

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import k26deploy
from ansible_collections.k26.deploy.plugins.module_utils import prometheus_text
from fleet import (ROUTER_DEFAULTS, ROUTER_URL, RequestStream, WorkerSamples, admin_key_of, chat, fleet_containers,
                   restart_times, router_workers)
from harness import (QUICK_START, ROOT, SIM_INSTALLED, SIMULATOR, VENV_BIN, key_of, play_batches, task_started,
                     wait_until)

pytestmark = pytest.mark.integration

LOAD = "SGLANG_SIM_LOAD_SECONDS"
# while it exists, the replica's scheduler hangs (the simulator's knob): HTTP answers, no token is made
HANG_FILE = "/var/lib/sglang/hang"


# An index URL with a password, which the first deploy gives every pip of the run (the router installs from its
# wheelhouse with --no-index, so pip never asks it): it must appear in no result or event of the run.
INDEX_PASSWORD = "index-pw-0123456789"
INDEX = {name: "https://k26:%s@index.invalid/simple" % INDEX_PASSWORD
         for name in ("sglang_pip_index_url", "sglang_router_pip_index_url", "sglang_benchmark_pip_index_url")}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with fleet_containers("k26-it", 2, tmp_path_factory.mktemp("inventory"),
                          environment={"SGLANG_SIM_HANG_FILE": HANG_FILE}) as (replicas, router, inventory):
        result = k26deploy.deploy(inventory=inventory, extra_vars=INDEX)
        yield replicas[0], replicas[1], router, inventory, result


def served_chats(replica):
    return replica.exec("journalctl -u sglang.service -o cat --no-pager | grep -c 'POST /v1/chat/completions'",
                        check=False).stdout.strip()


def test_one_run_deploys_the_replicas_then_the_router(fleet):
    first, second, router, dummy, result = fleet
    assert result.exit_code == 0, result.to_json()
    assert result.hosts[first.name].ready and result.hosts[second.name].ready
    front = result.hosts[router.name]
    assert front.ready and front.reason == "ready" and front.endpoint == ROUTER_URL, front
    assert front.model_id == "kimi-k2.6" and front.unit == "sglang-router.service"
    # smg lists its workers in no fixed order
    assert {worker["url"]: worker["is_healthy"] for worker in front.workers} == \
        {"http://%s:30000" % box.name: True for box in (first, second)}
    assert "/readiness" in front.msg
    version = router.exec("/opt/sglang-router/venvs/smg-%s/bin/python -c \"import importlib.metadata as m; "
                          "print(m.version('smg'))\"" % ROUTER_DEFAULTS["sglang_router_version"]).stdout.strip()
    assert version == ROUTER_DEFAULTS["sglang_router_version"]


def test_requests_through_the_router_reach_every_replica(fleet):
    first, second, router, inventory, dummy = fleet
    key = key_of(inventory)
    for number in range(8):
        status, text = chat(router, key, "hello %d" % number)
        assert status == 200, text
        assert json.loads(text)["choices"][0]["message"]["content"]
    assert int(served_chats(first)) >= 1 and int(served_chats(second)) >= 1
    assert chat(router, "not-the-key", "hello")[0] == 401
    readiness = json.loads(router.exec("curl -s %s/readiness" % ROUTER_URL).stdout)
    assert readiness["status"] == "ready" and readiness["healthy_workers"] == 2
    # smg's own metrics are on by default, on loopback only (sglang_router_prometheus_host): they count the requests
    # above, and a replica on the same network does not reach them
    port = ROUTER_DEFAULTS["sglang_router_prometheus_port"]
    metrics = router.exec("curl -s http://127.0.0.1:%d/metrics" % port).stdout
    served = sum(value for name, dummy, value in prometheus_text.samples(metrics) if name == "smg_http_requests_total")
    assert served >= 1, metrics[-3000:]
    reached = first.exec("curl -s -o /dev/null -w '%%{http_code}' --max-time 5 http://%s:%d/metrics || true"
                         % (router.name, port)).stdout.strip()
    assert reached == "000", reached


def test_a_replica_that_hangs_leaves_the_routing_and_the_other_answers_every_request_after(fleet):
    """smg's health checks on /health_generate (a one-token generation) take a replica whose scheduler hangs out of
    the routing within seconds; from then on every request is answered by the other. A request that reached the hung
    one before is not answered within curl's deadline: it counts as failed (status 0), and only those do."""
    first, second, router, inventory, dummy = fleet
    key = key_of(inventory)
    url = "http://%s:30000" % first.name
    with RequestStream(router, key, parallel=2, max_tokens=4, max_seconds=20) as stream:
        time.sleep(2)
        hung_at = time.monotonic()
        first.exec("touch %s" % HANG_FILE)
        try:
            wait_until(lambda: router_workers(router).get(url) is False,
                       "the router takes the hung replica out", timeout=60)
            out_at = time.monotonic()
            time.sleep(8)
        finally:
            first.exec("rm -f %s" % HANG_FILE)
    assert out_at - hung_at < 30, out_at - hung_at
    after = [status for started, status in stream.requests if started > out_at]
    assert len(after) > 4 and set(after) == {200}, stream.requests
    # (a request that began within the last seconds before the hang may have met it: only the earlier ones count)
    before = [status for started, status in stream.requests if started < hung_at - 2]
    assert before and set(before) == {200}, stream.requests
    wait_until(lambda: router_workers(router).get(url) is True, "back in once it answers again",
               timeout=60)


def test_status_reports_the_fleet(fleet):
    first, second, router, inventory, dummy = fleet
    result = k26deploy.status(inventory=inventory)
    assert result.exit_code == 0, result.to_json()
    assert result.hosts[first.name].ready and result.hosts[second.name].ready
    front = result.hosts[router.name]
    assert front.ready and front.endpoint == ROUTER_URL and front.changed == 0, front
    assert {worker["url"]: worker["is_healthy"] for worker in front.workers} == \
        {"http://%s:30000" % box.name: True for box in (first, second)}


def test_the_clients_key_cannot_reach_the_routers_control_plane(fleet):
    """Issue 50 item 2, through the router: smg 1.13 with a control-plane key (the role's admin_key) refuses the
    clients' key on /workers and /flush_cache (401) and lets its own key through; the clients' key still generates,
    and the control-plane key does not."""
    router, inventory = fleet[2], fleet[3]

    def status(method, path, key):
        return router.exec("curl -s -o /dev/null -w '%%{http_code}' -X %s -H 'Authorization: Bearer %s' %s%s"
                           % (method, key, ROUTER_URL, path)).stdout

    key, admin_key = key_of(inventory), admin_key_of(router)
    assert admin_key and admin_key != key
    assert (status("GET", "/workers", key), status("POST", "/flush_cache", key)) == ("401", "401")
    # past smg's check the answer is the replicas' (206: smg fans the flush out and the simulator has no /flush_cache;
    # a real SGLang replica with an admin key refuses smg's worker key there: flush each replica with its own)
    assert (status("GET", "/workers", admin_key), status("POST", "/flush_cache", admin_key)) == ("200", "206")
    assert status("GET", "/v1/models", key) == "200"
    assert chat(router, key, "still served", max_tokens=2)[0] == 200 and chat(router, admin_key, "no")[0] == 401


def test_the_keys_are_in_no_argv_unit_or_journal(fleet):
    router, inventory = fleet[2], fleet[3]
    key, admin_key = key_of(inventory), admin_key_of(router)
    pid = router.exec("systemctl show sglang-router.service -p MainPID --value").stdout.strip()
    for secret in (key, admin_key):
        assert secret not in router.exec("cat /etc/systemd/system/sglang-router.service").stdout
        assert pid != "0" and secret not in router.exec("tr '\\0' ' ' < /proc/%s/cmdline" % pid).stdout
        assert secret not in router.exec("journalctl --no-pager -o cat").stdout
    for name in ("api_key", "admin_key"):
        assert router.exec("stat -c '%%U:%%G %%a' /etc/sglang-router/%s" % name).stdout.strip() == "root:sglang-router 640"
    # hardened: the unit's exposure as systemd-analyze rates it (1.2 in systemd 252, the GPU proof's too; aim 1.5)
    assert router.exec("systemd-analyze security --threshold=15 sglang-router.service", check=False).returncode == 0, \
        router.exec("systemd-analyze security sglang-router.service", check=False).stdout[-3000:]


def test_an_index_password_is_in_no_result_or_event(fleet):
    dummy, dummy, router, dummy, result = fleet
    installed = [path for path in Path(result.artifacts_dir).rglob("*.json")
                 if "Install the router package with pip" in path.read_text(errors="replace")]
    assert installed, "the router's install task did not run"
    leaks = [str(path) for path in Path(result.artifacts_dir).rglob("*")
             if path.is_file() and INDEX_PASSWORD in path.read_text(errors="replace")]
    assert leaks == [] and INDEX_PASSWORD not in result.to_json()


# Both replicas in one batch (k26_serial 2, README's --serial 2) where the test is about the router or one replica:
# a batch of unchanged replicas costs a whole pass of the roles.
BOTH = {"k26_serial": 2}
ROLLING_PLAY = "Deploy SGLang serving Kimi K2.6 (rolling)"


# nvidia-smi replayed from the H200's recording, with four readings of a GPU that needs a reset (tests/fixtures/nvidia)
NVIDIA = ROOT / "tests" / "fixtures" / "nvidia"


def test_a_replica_whose_gpus_turned_sick_leaves_the_router_unrestarted_while_the_others_roll(fleet, tmp_path):
    first, second, router, inventory, dummy = fleet
    before = first.invocation()
    # the same inventory, with a change for the second replica alone
    changed = tmp_path / "inventory"
    shutil.copytree(inventory, changed)
    hosts = yaml.safe_load((changed / "hosts.yml").read_text())
    hosts["sglang_servers"]["hosts"][second.name]["sglang_service_environment"] = dict(QUICK_START, FLEET_CHANGE="b")
    (changed / "hosts.yml").write_text(yaml.safe_dump(hosts))
    first.put("/usr/local/bin/nvidia-smi-q.txt", (NVIDIA / "h200-nvidia-smi-q-sick.txt").read_text())
    first.put("/usr/local/bin/nvidia-smi", "#!/usr/bin/python3\n" + (NVIDIA / "replay_nvidia_smi.py").read_text(),
              mode="0755")
    # the recording has one GPU, the replicas' configuration eight (their simulator needs none)
    one_gpu = {"k26_preflight_severity_overrides": {"K26-GPU-COUNT": "off"}}
    try:
        sick = k26deploy.deploy(inventory=str(changed), extra_vars=one_gpu)
    finally:
        first.exec("rm -f /usr/local/bin/nvidia-smi /usr/local/bin/nvidia-smi-q.txt")
    host = sick.hosts[first.name]
    assert sick.exit_code == 1 and host.ready is False and host.reason == "gpu_health", sick.to_json()
    assert host.left_out.startswith("left out of its routers (%s) and not restarted" % router.name), host
    assert "GPU Recovery Action: Reset" in host.msg and host.msg == host.left_out, host
    assert first.invocation() == before  # neither restarted nor stopped
    assert sick.hosts[second.name].ready and sick.hosts[second.name].restarted  # the other one rolls
    assert router_workers(router) == {"http://%s:30000" % second.name: True}
    # healthy again, and nothing to change on it: the next run's router routes to it again
    healthy = k26deploy.deploy(inventory=inventory)
    assert healthy.exit_code == 0 and healthy.hosts[first.name].left_out == "", healthy.to_json()
    assert first.invocation() == before and healthy.hosts[second.name].restarted
    assert router_workers(router) == {"http://%s:30000" % box.name: True for box in (first, second)}


def test_a_second_run_changes_nothing(fleet, tmp_path):
    first, second, router, inventory, dummy = fleet
    before = router.invocation("sglang-router.service")
    again = k26deploy.deploy(inventory=inventory, private_data_dir=tmp_path)
    assert again.exit_code == 0, again.to_json()
    # replicas behind a router go one at a time by default, in inventory order
    assert play_batches(tmp_path, ROLLING_PLAY) == [[first.name], [second.name]]
    assert again.hosts[router.name].ready and again.hosts[router.name].changed == 0
    assert router.invocation("sglang-router.service") == before


def test_a_router_key_other_than_the_replicas_is_refused_before_any_change(fleet):
    router, inventory = fleet[2], fleet[3]
    before = router.invocation("sglang-router.service")
    result = k26deploy.deploy(inventory=inventory, extra_vars=dict(BOTH, sglang_router_api_key="a-different-key"))
    host = result.hosts[router.name]
    assert result.exit_code == 2 and host.bad_input and host.changed == 0, result.to_json()
    assert "same one" in host.msg and "a-different-key" not in json.dumps(result.to_dict())
    assert router.invocation("sglang-router.service") == before


def test_a_router_that_cannot_start_fails_with_its_own_error(fleet):
    router, inventory = fleet[2], fleet[3]
    result = k26deploy.deploy(inventory=inventory, extra_vars=dict(BOTH, sglang_router_extra_args=["--no-such-flag"]))
    host = result.hosts[router.name]
    assert result.exit_code == 1 and host.ready is False, result.to_json()
    assert host.reason in ("unit_failed", "crash_loop"), host
    assert "unrecognized arguments: --no-such-flag" in host.journal_excerpt
    back = k26deploy.deploy(inventory=inventory)  # the router is down: the replicas deploy together
    assert back.exit_code == 0 and back.hosts[router.name].ready, back.to_json()


LEAVE_TASK = "Take the replica out of the routers and let its requests finish"


def test_a_change_written_but_never_restarted_restarts_on_the_next_run(fleet, tmp_path):
    first, second, router, inventory, dummy = fleet
    change = {"sglang_service_environment": {LOAD: 1}}
    before = first.invocation()
    # A long request on the first replica holds its drain open: the run is stopped (Ctrl-C) after the replica's
    # files were written and it left the router, before its restart, however fast or slow the machine is.
    long_request = subprocess.Popen(
        ["podman", "exec", first.name, "curl", "-s", "-o", "/dev/null", "-H", "Authorization: Bearer %s" % key_of(inventory),
         "-H", "Content-Type: application/json", "-d", json.dumps({"model": "kimi-k2.6", "max_tokens": 20000,
                                                                   "messages": [{"role": "user", "content": "long"}]}),
         "http://127.0.0.1:30000/v1/chat/completions"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events = tmp_path / "stopped"
    # The run's output goes to files, never to pipes nobody reads until it ends: the live view writes a line per
    # task, and a full pipe would stop the run before the task this test waits for.
    with open(tmp_path / "stopped.out", "w") as out, open(tmp_path / "stopped.err", "w") as err:
        run = subprocess.Popen([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(change),
                                "--artifacts-dir", str(events)], cwd=ROOT, stdout=out, stderr=err, text=True)

    def said():
        return (tmp_path / "stopped.err").read_text()[-3000:]
    try:
        task_started(events, LEAVE_TASK, running=run, output=said)
        wait_until(lambda: "http://%s:30000" % first.name not in router_workers(router), "the replica left")
        assert running_requests(first) >= 1  # the drain waits for it
        run.send_signal(signal.SIGINT)
        run.wait(timeout=120)
    finally:
        for proc in (run, long_request):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert run.returncode == 130, said()
    assert 'SGLANG_SIM_LOAD_SECONDS="1"' in first.exec("cat /etc/sglang/sglang.env").stdout
    assert first.invocation() == before
    # left out of the router while it serves its old configuration
    assert router_workers(router) == {"http://%s:30000" % second.name: True}
    # the CLI's --serial 2 (README) puts both replicas in one batch
    proc = subprocess.run([str(VENV_BIN / "k26deploy"), "deploy", "-i", inventory, "-e", json.dumps(change),
                           "--serial", "2", "--artifacts-dir", str(tmp_path / "again"), "--json", "-q"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert play_batches(tmp_path / "again", ROLLING_PLAY) == [[first.name, second.name]]  # two at a time
    again = json.loads(proc.stdout)
    assert proc.returncode == 0 and again["hosts"][first.name]["restarted"], proc.stderr[-3000:]
    assert first.invocation() != before
    assert router_workers(router) == {"http://%s:30000" % box.name: True for box in (first, second)}


def running_requests(replica):
    metrics = replica.exec("curl -s http://127.0.0.1:30000/metrics").stdout
    return sum(value for name, dummy, value in prometheus_text.samples(metrics) if name == "sglang:num_running_reqs")


# What an older simulator left on a host: its one-file version, and a module the package no longer has.
OLD_SIMULATOR = ("/opt/sglang/simulator/sglang_simulator.py", SIM_INSTALLED + "/gone.py")


def test_limit_deploys_only_the_hosts_it_names(fleet):
    first, second, router, inventory, dummy = fleet
    untouched = second.invocation()
    for path in OLD_SIMULATOR:
        first.put(path, "raise SystemExit('an older simulator')\n")
    first.exec("echo '# drifted' >> %s/log.py && chmod 0600 %s/api.py && rm %s/gpu.py" % ((SIM_INSTALLED,) * 3))
    # and two configuration files the deploy would leave as they are, changed by hand (content; mode)
    first.exec("echo '# drifted' >> /etc/sglang/sglang.yaml && chmod 0600 /etc/systemd/system/sglang.service")
    limited = k26deploy.deploy(inventory=inventory, limit=first.name,
                               extra_vars={"sglang_service_environment": {LOAD: 1, "FLEET_CHANGE": "limited"}})
    assert limited.exit_code == 0 and list(limited.hosts) == [first.name], limited.to_json()
    assert limited.hosts[first.name].restarted is True
    assert second.invocation() == untouched
    left = first.exec("ls -d %s" % " ".join(OLD_SIMULATOR), check=False)
    assert left.stdout == "", left.stdout  # the upgrade removed both
    assert first.exec("test -f %s/__main__.py" % SIM_INSTALLED, check=False).returncode == 0
    # and the package's files that differed are as the package has them again (content, mode), the others untouched
    installed = first.exec("cd %s && stat -c '%%n %%a %%U' *.py *.json && sha1sum *.py *.json" % SIM_INSTALLED).stdout
    for source in sorted(SIMULATOR.glob("*.*")):
        assert "%s 644 root" % source.name in installed and hashlib.sha1(source.read_bytes()).hexdigest() in installed
    assert "# drifted" not in first.exec("cat /etc/sglang/sglang.yaml").stdout
    assert first.exec("stat -c '%a %U:%G' /etc/systemd/system/sglang.service").stdout.strip() == "644 root:root"


# molecule/fleet/files/roll_check.py: the verdict on a roll from the samples (tests/unit/test_fleet_roll_check.py)
ROLL_CHECK = ROOT / "molecule" / "fleet" / "files" / "roll_check.py"
# the replicas' weights load for 2 s after each restart: roll_check.py expects the port closed that long
ROLLED = {LOAD: 2, "SGLANG_SIM_GRAPH_SECONDS": 0.5, "SGLANG_SIM_WARMUP_SECONDS": 0.5, "FLEET_CHANGE": "rolled"}


def test_a_rolling_change_drains_each_replica_in_turn_and_loses_no_request(fleet):
    first, second, router, inventory, dummy = fleet
    key = key_of(inventory)
    with RequestStream(router, key) as stream, WorkerSamples(router) as workers:
        rolled = k26deploy.deploy(inventory=inventory, extra_vars={"sglang_service_environment": ROLLED})
    assert rolled.exit_code == 0, rolled.to_json()
    assert rolled.hosts[first.name].restarted and rolled.hosts[second.name].restarted
    assert stream.sent > 10 and stream.failed == 0, stream.codes
    verdict = subprocess.run([sys.executable, str(ROLL_CHECK)], check=False, capture_output=True, text=True,
                             input=json.dumps({"samples": workers.samples, "replicas": [first.name, second.name],
                                               "serial": 1, "url": "http://{name}:30000",
                                               "identities": {box.name: restart_times(box) for box in (first, second)}}))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert "drained and rolled batch by batch, in order: %s then %s" % (first.name, second.name) in verdict.stdout


def test_a_bad_change_stops_at_the_first_replica_which_rolls_back_and_rejoins(fleet):
    first, second, router, inventory, dummy = fleet
    before = {box.name: box.invocation() for box in (first, second)}
    bad = k26deploy.deploy(inventory=inventory, extra_vars={
        "sglang_service_environment": dict(ROLLED, SGLANG_SIM_FAILURE="crash_loading")})
    assert bad.exit_code == 1, bad.to_json()
    host = bad.hosts[first.name]
    assert host.rolled_back and "torch.OutOfMemoryError" in host.journal_excerpt, host
    assert first.invocation() != before[first.name]
    assert second.invocation() == before[second.name]  # its running service, not merely its files
    for box in (first, second):
        env = box.exec("cat /etc/sglang/sglang.env").stdout
        assert 'FLEET_CHANGE="rolled"' in env and "crash_loading" not in env
    assert router_workers(router) == {"http://%s:30000" % box.name: True for box in (first, second)}
