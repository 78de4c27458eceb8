"""Verify what a user of the deployment depends on, against the real SGLang 0.5.23 serving a tiny model on the CPU.

The tests run in file order: the failure case (a deploy that real SGLang cannot load, rolled back) comes last,
because it restarts the service.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

KEY = "molecule-test-key-0123456789"
MASK = "********"
CONFIG = "/etc/sglang/sglang.yaml"
ADMIN_KEY_FILE = "/etc/sglang/sglang.admin-key"
UNIT = "/etc/systemd/system/sglang.service"
VENV = "/opt/sglang/venvs/sglang-0.5.23"
MODEL = "tiny-gpt2"
BASE = "http://127.0.0.1:30000"
ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or Path(__file__).resolve().parents[3])
HOST = "k26-molecule-default"


def unit_properties(host, *names):
    out = host.check_output("systemctl show sglang.service " + " ".join("--property=" + n for n in names))
    return dict(line.split("=", 1) for line in out.splitlines())


def curl(host, path, *args, key=KEY):
    auth = "-H 'Authorization: Bearer %s' " % key if key else ""
    return host.check_output("curl -s %s%s %s%s" % (auth, " ".join(args), BASE, path))


def chat(host, stream=False):
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8,
                       "stream": stream})
    return curl(host, "/v1/chat/completions", "-H 'Content-Type: application/json'", "-d '%s'" % body)


READY_LINE = "The server is fired up and ready to roll!"


def journal(host, since_invocation=False):
    if since_invocation:
        invocation = host.check_output("systemctl show sglang.service --property=InvocationID --value")
        return host.check_output("journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID=%s" % invocation)
    return host.check_output("journalctl --no-pager -o cat -u sglang.service")


def k26deploy(command, *args):
    """The package's own CLI against this scenario's inventory; its JSON result."""
    env = dict(os.environ, ANSIBLE_CONNECTION_PLUGINS=str(ROOT / "tests" / "ansible_plugins" / "connection"))
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    done = subprocess.run([str(Path(sys.executable).parent / "k26deploy"), command, "-i", str(inventory), "--json",
                           "-q", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=900)
    try:
        return done.returncode, json.loads(done.stdout)
    except json.JSONDecodeError as error:
        raise AssertionError("k26deploy %s printed no JSON (rc %s): %s" % (command, done.returncode,
                                                                           done.stderr[-3000:])) from error


def test_unit_starts_the_real_sglang_with_the_config_file_only(host):
    unit = host.file(UNIT)
    assert unit.user == "root" and unit.mode == 0o644
    exec_start = [line for line in unit.content_string.splitlines() if line.startswith("ExecStart=")]
    assert exec_start == ["ExecStart=%s/bin/python /opt/sglang/launcher/sglang_launcher.py -m sglang.launch_server "
                          "--config %s" % (VENV, CONFIG)]
    assert KEY not in unit.content_string


def test_the_sglang_role_installed_sglang_with_pip_from_the_wheelhouse(host):
    version = host.check_output("%s/bin/python -c \"import importlib.metadata as m; print(m.version('sglang'))\"" % VENV)
    assert version == "0.5.23"
    assert not host.file("/opt/sglang/wheelhouse-0.5.23").exists  # removed once installed


def test_hardening_as_systemd_applies_it(host):
    """What systemd loaded, not what the file says: a misspelt directive would only be a warning in the journal."""
    props = unit_properties(host, "User", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp",
                            "CapabilityBoundingSet", "AmbientCapabilities", "DevicePolicy", "PrivateDevices",
                            "RestrictNamespaces", "LimitNOFILE", "Restart", "ReadWritePaths", "UMask",
                            "SystemCallFilter", "ProtectKernelModules", "ProtectProc", "SystemCallErrorNumber",
                            "PrivateMounts", "IPAddressDeny", "IPAddressAllow", "KillMode", "PrivateUsers")
    assert props["User"] == "sglang"
    assert props["NoNewPrivileges"] == "yes" and props["ProtectSystem"] == "strict"
    assert props["ProtectHome"] == "yes" and props["PrivateTmp"] == "yes" and props["PrivateUsers"] == "yes"
    assert props["CapabilityBoundingSet"] == "" and props["AmbientCapabilities"] == ""
    assert props["DevicePolicy"] == "closed" and props["PrivateDevices"] == "yes"  # no GPU in the container
    assert props["RestrictNamespaces"] == "yes" and props["ProtectKernelModules"] == "yes"
    assert props["ProtectProc"] == "invisible" and props["UMask"] == "0077"
    assert props["LimitNOFILE"] == "16384" and props["Restart"] == "on-failure"
    assert props["KillMode"] == "mixed"
    assert set(props["ReadWritePaths"].split()) == {"/var/cache/sglang", "/var/lib/sglang",
                                                    "/var/cache/sglang/huggingface"}
    # an allow-list (@system-service) less @privileged and @resources; a refused call fails with EPERM
    allowed = set(props["SystemCallFilter"].split())
    assert {"read", "openat", "mmap", "ioctl", "clone3"} <= allowed
    assert not {"reboot", "mount", "chroot", "sched_setaffinity", "set_mempolicy"} & allowed
    assert props["SystemCallErrorNumber"] == "1" and props["PrivateMounts"] == "yes"  # 1: EPERM
    # sglang_service_ip_address_allow (molecule.yml): nothing else reaches the service
    assert set(props["IPAddressDeny"].split()) == {"0.0.0.0/0", "::/0"}
    assert set(props["IPAddressAllow"].split()) == {"127.0.0.0/8", "::1/128", "10.88.0.0/16"}


def test_config_carries_the_cpu_profile_and_the_key_privately(host):
    config = host.file(CONFIG)
    assert (config.user, config.group, config.mode) == ("root", "sglang", 0o640)
    options = yaml.safe_load(config.content_string)
    assert options["device"] == "cpu" and options["attention-backend"] == "torch_native"
    assert options["max-total-tokens"] == 8192
    assert options["pp-size"] == 1 and "pp-async-batch-depth" not in options
    assert options["api-key"] == KEY
    admin = host.file(ADMIN_KEY_FILE)
    assert (admin.user, admin.group, admin.mode) == ("root", "root", 0o600)
    assert options["admin-api-key"] == admin.content_string.strip() != KEY


def test_the_api_key_can_neither_read_a_key_nor_call_real_sglangs_admin_endpoints(host):
    """Issue 50 item 2, on the real SGLang 0.5.23: the admin key the role keeps closes the admin routes (here
    /flush_cache, AuthLevel.ADMIN_OPTIONAL) to the API key, and the launcher keeps both keys out of what SGLang
    answers: /server_info (srt/utils/common.py build_server_info returns every option, both keys and the launch
    command included, to a holder of the API key) still answers, the keys masked."""
    admin_key = host.file(ADMIN_KEY_FILE).content_string.strip()
    assert curl(host, "/flush_cache", "-o /dev/null -w '%{http_code}'") == "401"
    assert curl(host, "/flush_cache", "-o /dev/null -w '%{http_code}'", key=admin_key) == "200"
    for path in ("/server_info", "/get_server_info"):
        text = curl(host, path)
        info = json.loads(text)
        assert info["api_key"] == info["admin_api_key"] == MASK and info["model_path"]
        assert KEY not in text and admin_key not in text


def test_environment_file(host):
    env = host.file("/etc/sglang/sglang.env")
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o640)
    # every value double-quoted, as systemd's EnvironmentFile= reads it (plugins/module_utils/systemd_unit_values.py)
    lines = env.content_string.splitlines()
    # the compile caches of this release on this (GPU-less) host: an upgrade starts from an empty directory
    assert 'SGLANG_CACHE_DIR="/var/cache/sglang/sglang-0.5.23-cpu"' in lines
    assert 'SGLANG_JIT_CACHE_DIR="/var/cache/sglang/sglang-0.5.23-cpu/jit"' in lines
    assert 'SGLANG_DG_CACHE_DIR="/var/cache/sglang/sglang-0.5.23-cpu/deep_gemm"' in lines


def test_service_user_and_cache_directories(host):
    user = host.user("sglang")
    assert user.exists and user.shell == "/usr/sbin/nologin" and user.home == "/var/lib/sglang"
    for path in ("/var/cache/sglang", "/var/cache/sglang/huggingface", "/var/lib/sglang"):
        d = host.file(path)
        assert d.is_directory and d.user == "sglang"


def test_service_is_active_and_enabled(host):
    service = host.service("sglang")
    assert service.is_running and service.is_enabled


def test_models_endpoint_lists_the_served_name(host):
    assert [m["id"] for m in json.loads(curl(host, "/v1/models"))["data"]] == [MODEL]


def test_a_chat_completion_answers(host):
    answer = json.loads(chat(host))
    assert answer["model"] == MODEL and answer["object"] == "chat.completion"
    assert answer["usage"]["completion_tokens"] > 0
    assert isinstance(answer["choices"][0]["message"]["content"], str)


def test_a_streamed_chat_completion_answers(host):
    events = [line[len("data: "):] for line in chat(host, stream=True).splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert len(chunks) >= 2 and all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)


PROMETHEUS = "http://127.0.0.1:9090"
DASHBOARD = ROOT / "roles" / "sglang_monitoring" / "files" / "sglang-dashboard.json"


def prometheus(host, path):
    return json.loads(host.check_output("curl -s %s" % shlex.quote(PROMETHEUS + path)))


def sglang_names(text):
    """sglang: names in PromQL, without the suffixes Prometheus adds to a histogram's series."""
    return {re.sub(r"_(bucket|sum|count)$", "", name) for name in re.findall(r"sglang:[a-z_0-9]+", text)}


# Labelled counters of events that a healthy server may never see: prometheus_client writes such a series from its
# first event on (test_monitoring holds their names to SGLang's source).
EVENT_COUNTERS = {"sglang:num_aborted_requests_total", "sglang:num_retracted_requests_total"}


def test_prometheus_from_the_role_holds_the_real_servers_series_after_a_chat(host):
    """Issue 39: the sglang_monitoring role's Prometheus, beside the real SGLang, scrapes its /metrics; after a chat,
    the query API returns the prompt tokens it counted under SGLang's own name (sglang:*, which Debian 12's Prometheus
    would store as sglang_* without the role's relabelling), and the dashboard queries only metrics it exposes."""
    assert host.service("prometheus").is_running
    chat(host)
    chat(host, stream=True)
    queried = sglang_names(DASHBOARD.read_text()) - EVENT_COUNTERS
    deadline = time.monotonic() + 120
    while True:  # until a scrape after both chats (the first may hold one chat's series and not the other's)
        reply = prometheus(host, "/api/v1/query?query=sglang:prompt_tokens_total")
        counted = [series for series in reply["data"]["result"] if float(series["value"][1]) > 0]
        missing = queried - sglang_names(" ".join(prometheus(host, "/api/v1/label/__name__/values")["data"]))
        if (counted and not missing) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert counted and counted[0]["metric"]["job"] == "sglang", reply
    assert counted[0]["metric"]["instance"] == HOST + ":30000", counted
    assert queried and not missing, sorted(missing)
    # its web UI and API answer without authentication: on loopback only (sglang_monitoring_listen_address)
    listening = host.check_output("ss -Htln 'sport = :9090'")
    assert "127.0.0.1:9090" in listening and "*:9090" not in listening and "0.0.0.0:9090" not in listening, listening


def test_key_is_required(host):
    assert curl(host, "/v1/models", "-o /dev/null -w '%{http_code}'", key=None) == "401"
    assert json.loads(curl(host, "/v1/models", key=None)) == {"error": "Unauthorized"}
    assert curl(host, "/v1/models", "-o /dev/null -w '%{http_code}'", key="wrong-key-0123456789") == "401"


def test_key_is_not_in_argv_or_systemctl_show(host):
    pid = host.check_output("systemctl show sglang.service --property=MainPID --value")
    cmdline = host.file("/proc/%s/cmdline" % pid).content_string
    assert KEY not in cmdline and CONFIG in cmdline
    assert KEY not in host.check_output("systemctl show sglang.service")


def test_real_sglang_printed_its_server_args_with_the_key_masked(host):
    """SGLang 0.5.23 prints every option at start, the key in clear; the launcher masks it. First the line itself
    (a server that exited before printing it would prove nothing), then the key nowhere."""
    lines = journal(host, since_invocation=True).splitlines()
    server_args = [line for line in lines if "server_args=ServerArgs(" in line or "server_args={" in line]
    assert server_args, "no server_args line from SGLang in the journal:\n" + "\n".join(lines[-20:])
    assert "'api_key': '%s'" % MASK in server_args[0] or "api_key='%s'" % MASK in server_args[0], server_args[0][:300]
    assert any(line.endswith(READY_LINE) for line in lines)
    assert "'admin_api_key': '%s'" % MASK in server_args[0] or "admin_api_key='%s'" % MASK in server_args[0]
    assert KEY not in journal(host) and host.file(ADMIN_KEY_FILE).content_string.strip() not in journal(host)


def test_k26deploy_status_reports_the_real_server(host):
    rc, result = k26deploy("status")
    status = result["hosts"][HOST]
    assert rc == 0 and status["ready"] is True, status
    assert status["model_id"] == MODEL and status["simulator"] is False
    # the converge's start, read from real SGLang's own lines in its journal (no CUDA graphs on a CPU)
    phases = status["startup"]["phases"]
    # a JSON object has no order: the phases in the order they ended (warmed_up and ready may end together)
    assert sorted(phases, key=lambda name: (phases[name], name != "warmed_up")) == \
        ["weights_loaded", "kv_cache_allocated", "warmed_up", "ready"], status["startup"]
    assert phases["ready"] < 600, phases


def test_k26deploy_logs_show_the_journal_masked(host):
    # the guard's canary and Prometheus's scrapes add about 20 lines a minute: 2000 reach back to the start (where
    # SGLang prints its server_args) however slowly the tests before this one ran (200 did not, on a busy CI machine)
    rc, result = k26deploy("logs", "-n", "2000")
    excerpt = result["hosts"][HOST]["journal_excerpt"]
    assert rc == 0 and READY_LINE in excerpt
    assert MASK in excerpt and KEY not in excerpt


def test_idempotent_converge_did_not_restart_the_service(host):
    record = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "service-identity"
    lines = record.read_text().splitlines()
    assert len(lines) == 2, "expected one record per converge (converge + idempotence), got %r" % lines
    assert lines[0] == lines[1], "the service was restarted by the second converge: %r" % lines
    now = " ".join(sorted(host.check_output(
        "systemctl show sglang.service --property=InvocationID --property=MainPID").splitlines()))
    assert now == lines[1]


PROBE_DIR = "/tmp/k26-probe"
# Where the simulator may differ from the real server, and why; everything else in the probes' reports must be equal.
PROBE_DIFFERENCES = {
    "seconds_to_ready": "timing: the simulator's start-up phases are set by its environment",
    "seconds_to_stop": "timing: the real server drains and stops three processes",
    "last_lines": "the last lines carry timestamps and process ids",
}


def probe(host, name, command, port):
    """scripts/sglang_probe.py in the container against COMMAND with the service's options on another port."""
    options = dict(yaml.safe_load(host.file(CONFIG).content_string), host="127.0.0.1", port=port)
    written = shlex.quote(yaml.safe_dump(options))
    host.check_output("mkdir -p %s && printf '%%s' %s > %s/%s.yaml" % (PROBE_DIR, written, PROBE_DIR, name))
    out = host.check_output("python3 %s/sglang_probe.py --port %d --api-key %s --admin-api-key %s -- %s --config %s/%s.yaml"
                            % (PROBE_DIR, port, KEY, options["admin-api-key"], command, PROBE_DIR, name))
    return json.loads(out)


def test_the_simulator_behaves_as_the_real_server_in_what_the_package_reads(host):
    """Item 4 of issue 26: the same options to the real SGLang and to the simulator, probed the same way."""
    for source in (ROOT / "scripts" / "sglang_probe.py", ROOT / "roles" / "sglang" / "files" / "sglang_simulator"):
        host.check_output("mkdir -p %s" % PROBE_DIR)
        subprocess.run(["podman", "cp", str(source), "%s:%s/" % (HOST, PROBE_DIR)], check=True)
    real = probe(host, "real", "%s/bin/python -m sglang.launch_server" % VENV, 31001)
    simulated = probe(host, "simulated", "python3 %s/sglang_simulator" % PROBE_DIR, 31002)
    assert real["ready"] and simulated["ready"], (real, simulated)
    assert real["lines"]["server_args"] and real["lines"]["fired_up"]  # the probe saw the real server's output
    differences = {key: (real.get(key), simulated.get(key)) for key in set(real) | set(simulated)
                   if key not in PROBE_DIFFERENCES and real.get(key) != simulated.get(key)}
    assert not differences, json.dumps(differences, indent=1)


GUARD_STATE = "/var/lib/k26deploy/guard/sglang"


def guard_incidents(host):
    names = host.check_output("ls %s/incidents 2>/dev/null || true" % GUARD_STATE).split()
    return [json.loads(host.check_output("cat %s/incidents/%s" % (GUARD_STATE, name))) for name in names]


def wait_for(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "never happened within %d s: %s" % (timeout, what)
        time.sleep(1)


def test_the_guard_restarts_real_sglang_whose_scheduler_stopped_and_it_serves_again(host):
    """SIGSTOP on real SGLang's scheduler process: HTTP stays up (the main process), no token is made. The replica
    guard finds it hung, restarts the service, and the real server serves again; one incident holds the journal of
    the invocation it restarted."""
    before = host.check_output("systemctl show sglang.service --property=InvocationID --value")
    seen = len(guard_incidents(host))
    assert host.run("systemctl is-active sglang-guard.service").stdout.strip() == "active"
    host.check_output("pkill -STOP -f '^sglang::scheduler'")
    try:
        wait_for(lambda: host.check_output("systemctl show sglang.service --property=InvocationID --value") != before,
                 "the guard restarts the service", timeout=180)
    finally:
        host.run("pkill -CONT -f '^sglang::scheduler'")
    wait_for(lambda: (guard_incidents(host)[-1:] or [{}])[0].get("recovered_after_seconds") is not None,
             "the restarted real server answers the guard's canary", timeout=600)
    new = guard_incidents(host)[seen:]
    assert [(record["verdict"], record["action"], record["acted"]) for record in new] == [("hung", "restart", True)]
    assert new[0]["invocation"] == before
    # the restarted invocation's own journal lines (its last ones: the canaries it still answered)
    assert new[0]["evidence"]["journal"] and "canaries missed in a row" in new[0]["why"], new[0]
    assert KEY not in json.dumps(new)
    assert [m["id"] for m in json.loads(curl(host, "/v1/models"))["data"]] == [MODEL]
    assert json.loads(chat(host))["usage"]["completion_tokens"] > 0


def test_a_model_real_sglang_cannot_load_fails_with_its_own_error_and_rolls_back(host):
    """Last: it restarts the service twice (the broken model, then the rollback). The model's verification is
    turned off (sglang_model_source none) so that real SGLang meets the broken file itself."""
    before = host.check_output("systemctl show sglang.service --property=InvocationID --value")
    rc, result = k26deploy("deploy", "-e", "sglang_service_model_path=/srv/models/tiny-gpt2-broken",
                           "-e", "sglang_model_source=none")
    outcome = result["hosts"][HOST]
    assert rc == 1 and outcome["rolled_back"] is True, outcome
    assert outcome["reason"] in ("crashed", "crash_loop"), outcome
    # real SGLang's own words about the weight file, in the excerpt the operator gets
    assert "safetensors" in outcome["journal_excerpt"].lower(), outcome["journal_excerpt"]
    assert KEY not in json.dumps(result)
    # the rollback restored the configuration that reached ready, and the real server serves it again
    assert yaml.safe_load(host.file(CONFIG).content_string)["model-path"] == "/srv/models/tiny-gpt2"
    assert host.check_output("systemctl show sglang.service --property=InvocationID --value") != before
    assert [m["id"] for m in json.loads(curl(host, "/v1/models"))["data"]] == [MODEL]
    # every stop was SGLang's clean one (KillMode=mixed): no child "crash" at a restart
    assert "crashed with exit code -15" not in journal(host)
