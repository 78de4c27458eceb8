"""Real systemd in a real container, and real Ansible runs against it.

`SystemdContainer` starts a container from the project's image (scripts/container.sh) and offers a few
helpers to write units and run commands inside. `run_task` runs one task through ansible-playbook with the
podman connection and returns the task's result as a dict (the json callback: no text parsing).
"""

import contextlib
import fcntl
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
SIMULATOR = ROOT / "roles" / "sglang" / "files" / "sglang_simulator"
SIM_IN_CONTAINER = "/opt/sim/sglang_simulator"
# Where the sglang role installs the simulator (roles/sglang: sglang_base_dir /opt/sglang)
SIM_INSTALLED = "/opt/sglang/simulator/sglang_simulator"
# The tests' connection plugins (podman_nsenter, see CONTAINER_HOST): every playbook the harness runs finds them,
# whether a test or a bench runs it.
CONNECTION_PLUGINS = ROOT / "tests" / "ansible_plugins" / "connection"


def _nsenter_plugin():
    """The tests' connection plugin, whose way into a container (its init's cached PID, a clean environment) the
    harness's own commands use too: `podman exec` costs 0.3 s of wall time a call and its helpers' CPU, nsenter
    milliseconds, and the suite runs thousands of them (checks, snapshots, polls while a deploy runs)."""
    path = ROOT / "tests" / "ansible_plugins" / "connection" / "podman_nsenter.py"
    spec = importlib.util.spec_from_file_location("k26_tests_podman_nsenter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NSENTER = _nsenter_plugin()


class SystemdContainer:
    def __init__(self, name, publish=None, network=None):
        self.name = name
        args = [str(ROOT / "scripts" / "container.sh"), name]
        if publish:
            args += ["-p", publish]
        if network:
            args += ["--network", network]
        subprocess.run(args, check=True)

    def exec(self, command, check=True, input=None, timeout=60):
        """Run a shell command inside (as root, in /, with a clean environment, as `podman exec` would); returns
        CompletedProcess with text output."""
        argv = (["nsenter", "--ipc", "--mount", "--net", "--pid", "--uts", "--target=%d" % NSENTER.init_pid(self.name),
                 "--"] + NSENTER.CLEAN_ENVIRONMENT + ["bash", "-c", "cd / && " + command])
        return subprocess.run(argv, check=check, capture_output=True, text=True, input=input, timeout=timeout)

    def put(self, path, content, mode="0644"):
        self.exec("mkdir -p %s && cat > %s && chmod %s %s" % (
            shlex.quote(os.path.dirname(path)), shlex.quote(path), mode, shlex.quote(path)), input=content)

    def install_simulator(self):
        """The simulator's package (its modules and the table of SGLang's options), run as its directory."""
        for source in sorted(path for path in SIMULATOR.iterdir() if path.is_file()):
            self.put(os.path.join(SIM_IN_CONTAINER, source.name), source.read_text())

    def write_unit(self, name, exec_start, environment=None, extra_service="", config=None):
        """Write /etc/systemd/system/NAME.service running exec_start; optional SGLang config file."""
        if config is not None:
            self.put("/etc/sim/%s.yaml" % name, yaml.safe_dump(config))
            exec_start = "%s --config /etc/sim/%s.yaml" % (exec_start, name)
        env_lines = "\n".join('Environment="%s=%s"' % (k, v) for k, v in (environment or {}).items())
        unit = textwrap.dedent("""\
            [Unit]
            Description=test unit {name}
            [Service]
            ExecStart={exec_start}
            {env}
            {extra}
            """).format(name=name, exec_start=exec_start, env=env_lines, extra=extra_service)
        self.put("/etc/systemd/system/%s.service" % name, unit)
        self.exec("systemctl daemon-reload")

    def systemctl(self, *args, check=True):
        return self.exec("systemctl " + " ".join(shlex.quote(a) for a in args), check=check)

    def invocation(self, unit="sglang.service"):
        """The InvocationID of UNIT's current run (empty when it has none): a restart changes it."""
        return self.exec("systemctl show %s -p InvocationID --value" % shlex.quote(unit)).stdout.strip()

    def remove(self):
        remove_container(self.name)

    def snapshot(self):
        """{path: "mode uid:gid sha256-or-link-target"} of every file, directory and link outside the kernel's and
        systemd's volatile trees, the journal (Ansible's own module runs are logged there) and the image's compile cache
        of those modules (tests/image/k26_zipimport_cache.py), to compare before and
        after a run that must change nothing. A file that cannot be read fails the snapshot; so does one that is
        implausibly small (a failed exec must not give two empty snapshots that compare equal)."""
        entries = json.loads(self.exec("python3 -c %s" % shlex.quote(SNAPSHOT_SCRIPT), timeout=300).stdout)
        missing = [path for path in SNAPSHOT_SENTINELS if path not in entries]
        assert len(entries) > 5000 and not missing, "partial snapshot: %d entries, missing %s" % (len(entries), missing)
        return entries


# What every snapshot of a container of the project's image holds.
SNAPSHOT_SENTINELS = ("/etc/passwd", "/usr/bin/python3", "/usr/lib/systemd/systemd", "/etc/systemd/system")
# The image's compile cache of Ansible's modules (tests/image/k26_zipimport_cache.py, CACHE_DIR)
ZIPIMPORT_CACHE = "/var/cache/k26-zipimport"
SNAPSHOT_SKIP = ("/proc", "/sys", "/run", "/tmp", "/dev", "/var/log/journal", "/root/.ansible", ZIPIMPORT_CACHE)
SNAPSHOT_SCRIPT = "SKIP = %r\n" % set(SNAPSHOT_SKIP) + r"""
import hashlib, json, os, stat, sys
def fail(error):
    sys.exit("snapshot: %s" % error)
def describe(path):
    info = os.lstat(path)
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        content = digest.hexdigest()
    elif stat.S_ISLNK(info.st_mode):
        content = "-> " + os.readlink(path)
    else:
        content = ""
    return "%o %d:%d %s" % (info.st_mode, info.st_uid, info.st_gid, content)
root_device = os.lstat("/").st_dev
entries = {}
for top, dirs, files in os.walk("/", onerror=fail):
    dirs[:] = [name for name in dirs if os.path.join(top, name) not in SKIP
               and os.lstat(os.path.join(top, name)).st_dev == root_device]
    for name in dirs + files:
        path = os.path.join(top, name)
        try:
            entries[path] = describe(path)
        except FileNotFoundError:  # gone between the listing and the look: not part of the state now
            continue
        except OSError as error:
            fail(error)
json.dump(entries, sys.stdout)
"""


def remove_container(name):
    subprocess.run(["podman", "rm", "-f", "-t", "0", name], check=False, capture_output=True)


@contextlib.contextmanager
def systemd_container(name, publish=None, network=None):
    """A SystemdContainer that is removed whatever happens, also when starting it failed half-way."""
    try:
        yield SystemdContainer(name, publish=publish, network=network)
    finally:
        remove_container(name)


@contextlib.contextmanager
def podman_network(name):
    """A podman network of our own (its containers reach each other by name), removed whatever happens."""
    subprocess.run(["podman", "network", "create", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["podman", "network", "rm", "-f", name], check=False, capture_output=True)


def snapshot_diff(before, after):
    """Paths added, removed or changed between two snapshots."""
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def run_playbook(playbook, inventory, extra_env=None, check=False, timeout=900, extra_args=()):
    """Run a playbook with the json callback; returns (rc, parsed json output)."""
    env = dict(os.environ)
    env.update({
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CONNECTION_PLUGINS": str(CONNECTION_PLUGINS),
        "PATH": "%s:%s" % (VENV_BIN, env.get("PATH", "")),
    })
    env.update(extra_env or {})
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", inventory, playbook]
    if check:
        cmd.append("--check")
    cmd.extend(extra_args)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=timeout)
    # Progress lines of long waits (display.display) come before the callback's JSON document.
    start = 0 if proc.stdout.startswith("{") else proc.stdout.find("\n{") + 1
    try:
        data = json.loads(proc.stdout[start:])
    except json.JSONDecodeError:
        raise AssertionError("ansible-playbook printed no JSON (rc %s):\n%s\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    return proc.returncode, data


def task_results(data, host):
    """Every task's result for host, in order, as (task name, result dict)."""
    out = []
    for play in data["plays"]:
        for task in play["tasks"]:
            res = task["hosts"].get(host)
            if res is not None:
                out.append((task["task"]["name"], res))
    return out


def run_task(container, task, check=False, extra_env=None):
    """Run one task (a dict) on the container; returns its result dict."""
    play = [{"hosts": "all", "gather_facts": False, "tasks": [dict(task, name="task under test")]}]
    with tempfile.TemporaryDirectory() as tmp:
        playbook = Path(tmp) / "play.yml"
        playbook.write_text(yaml.safe_dump(play))
        inventory = Path(tmp) / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {container.name: dict(CONTAINER_HOST)}}}))
        dummy, data = run_playbook(str(playbook), str(inventory), extra_env=extra_env, check=check)
    results = [r for name, r in task_results(data, container.name) if name == "task under test"]
    assert results, "the task did not run: %s" % json.dumps(data)[-2000:]
    return results[0]


def wheelhouse(requirement):
    """REQUIREMENT ("name==version") and its dependencies as wheels (pip's own configuration decides where from):
    the containers have no package index, so the roles install from a copy of this directory."""
    directory = ROOT / ".cache" / "wheelhouse" / requirement.replace("==", "-")
    directory.mkdir(parents=True, exist_ok=True)
    # one pip at a time per wheelhouse: two test files (on two workers) may ask for the same one at once
    with open(str(directory) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run([str(VENV_BIN / "pip"), "download", "--disable-pip-version-check", "-q",
                               "--only-binary=:all:", "-d", str(directory), requirement],
                              capture_output=True, text=True, timeout=900, check=False)
    if done.returncode:
        raise RuntimeError("pip download %s failed: %s" % (requirement, done.stderr[-3000:]))
    return directory


# How the tests' playbooks reach a container: tests/ansible_plugins/connection/podman_nsenter.py (on
# CONNECTION_PLUGINS) enters it in milliseconds where `podman exec` takes 0.2 s.
CONTAINER_HOST = {"ansible_connection": "podman_nsenter", "ansible_python_interpreter": "/usr/bin/python3"}


# A simulated start of about 2 s instead of the demo's 7 s (weights 4 s, graphs 2 s, warm-up 1 s): tests start the
# service dozens of times, and those that need a long start ask for it themselves.
QUICK_START = {"SGLANG_SIM_LOAD_SECONDS": 1, "SGLANG_SIM_GRAPH_SECONDS": 0.5, "SGLANG_SIM_WARMUP_SECONDS": 0.5}


def demo_inventory(container, directory, *replicas, routers=(), router_vars=None, quick_start=True, guard=False,
                   environment=None):
    """Write an inventory in `directory`: `container` (and more `replicas`) in group sglang_servers with the demo's
    group_vars (with QUICK_START's start-up unless quick_start is false, and `environment` on top; the replica guard
    only with `guard`: its canaries would add requests to what the other tests count, and the demo and test_guard run
    it), and `routers` in group sglang_routers with `router_vars`."""
    directory = Path(directory)
    shutil.copytree(ROOT / "inventories" / "demo" / "group_vars", directory / "group_vars")
    servers = directory / "group_vars" / "sglang_servers.yml"
    settings = yaml.safe_load(servers.read_text())
    if quick_start or environment:
        settings["sglang_service_environment"] = dict(QUICK_START if quick_start else {}, **(environment or {}))
    settings["sglang_service_guard"] = bool(guard)
    servers.write_text(yaml.safe_dump(settings, sort_keys=False))
    groups = {"sglang_servers": {"hosts": {box.name: dict(CONTAINER_HOST) for box in (container,) + replicas}}}
    if routers:
        groups["sglang_routers"] = {"hosts": {box.name: dict(CONTAINER_HOST) for box in routers},
                                    "vars": dict(router_vars or {})}
    (directory / "hosts.yml").write_text(yaml.safe_dump(groups))
    return str(directory)


def key_of(inventory):
    """The API key demo_inventory's deploy generated for INVENTORY (kept beside it, in .secrets/)."""
    return (Path(inventory) / ".secrets" / "api_key").read_text().strip()


def task_started(artifacts, task, timeout=600, running=None, output=None):
    """Return once the ansible-runner events under ARTIFACTS show TASK started (runner_on_start). With RUNNING (the
    run's Popen), a run that ends first fails at once, with what OUTPUT() returns (its last words)."""
    def started():
        if running is not None and running.poll() is not None:
            raise AssertionError("the run ended (exit %s) before task %r started:\n%s"
                                 % (running.returncode, task, output() if output else ""))
        return any("runner_on_start" in text and task in text for text in event_texts(artifacts))
    wait_until(started, "task %r started" % task, timeout)


def task_ok_on(artifacts, task, host, timeout=600):
    """Return once the ansible-runner events under ARTIFACTS show a task whose name starts with TASK done (runner_on_ok)
    on HOST."""
    def done():
        for text in event_texts(artifacts):
            try:
                event = json.loads(text)
            except ValueError:  # half-written meanwhile
                continue
            data = event.get("event_data", {})
            if event.get("event") == "runner_on_ok" and data.get("host") == host and \
                    data.get("task", "").startswith(task):
                return True
        return False
    wait_until(done, "task %r done on %s" % (task, host), timeout)


def play_batches(artifacts, play):
    """The hosts of each batch of the play whose name contains PLAY, in order, from a finished run's events:
    Ansible starts a play again for every batch of its serial."""
    events = sorted((json.loads(text) for text in event_texts(artifacts)), key=lambda event: event["counter"])
    batches, current = [], None
    for event in events:
        data = event.get("event_data", {})
        if event["event"] == "playbook_on_play_start":
            current = [] if play in data.get("play", "") else None
            if current is not None:
                batches.append(current)
        elif current is not None and event["event"].startswith("runner_on_") and data.get("host") not in current:
            current.append(data.get("host"))
    return batches


def event_texts(artifacts):
    """The text of each event file ansible-runner wrote under ARTIFACTS so far."""
    for path in artifacts.glob("artifacts/*/job_events/*.json"):
        try:
            yield path.read_text()
        except FileNotFoundError:  # ansible-runner renamed a -partial.json meanwhile
            continue


def wait_until(condition, what, timeout=600):
    """Poll CONDITION every 0.5 s until it holds; fail naming WHAT after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("never happened: %s" % what)
        time.sleep(0.5)
