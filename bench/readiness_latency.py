"""How long after an event does each way of waiting notice it?

In one run, against the same units in one systemd container, three waiters watch the same start of the service
side by side:
  - sglang_ready with its defaults (through ansible-playbook and the podman connection),
  - the seed's bash loop (15 s period: `systemctl is-active`/`is-failed`, then `curl /v1/models`),
  - ansible.builtin.uri with until/retries/delay: 15 on /v1/models.
Two targets, reported side by side:
  - the simulator: a process crash while loading (Restart=no), readiness (the "ready to roll" line), and a crash
    loop (Restart=on-failure); and a plain unit whose shell prints a line, a traceback 6 s later, and exits;
  - the real SGLang 0.5.23 on the CPU (installed by the sglang role from the wheelhouse of
    scripts/setup_sglang_wheelhouse.sh, serving the tiny model of scripts/make_tiny_model.py): readiness, and a
    crash while loading (the same model with a broken weight file).
The event's time comes from journald (the line that marks it); a waiter's noticing time is when it returned. Each
event comes after the waiters have started (ansible-playbook takes 2-3 s to start three waiters on two cores): a
trial whose sglang_ready never saw the unit loading measured its start-up instead, and is counted as missed.
Prints per-waiter medians and ratios against sglang_ready.

Usage: .venv/bin/python bench/readiness_latency.py [--trials 3] [--targets simulator,real]
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import namedtuple
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests"))

import yaml  # noqa: E402

from harness import CONTAINER_HOST, SIM_IN_CONTAINER, SystemdContainer, run_playbook, task_results  # noqa: E402
from sglang_venv import SGLANG_PYTHON  # noqa: E402

PORT = 32000
UNIT = "bench-sglang"
SGLANG_VERSION = yaml.safe_load((ROOT / "roles" / "sglang" / "defaults" / "main.yml").read_text())["sglang_version"]
WHEELHOUSE = ROOT / ".cache" / ("sglang-wheelhouse-%s" % SGLANG_VERSION)
TINY_MODEL = ROOT / ".cache" / "tiny-model"
CPU_PROFILE = ROOT / "roles" / "sglang_service" / "vars" / "profiles" / "cpu.yml"
READY_LINE = "The server is fired up and ready to roll!"
EXITED_LINE = "Main process exited"
PLAIN_CRASH = ("/bin/sh -c 'echo loading weights; sleep 6; echo \"Traceback (most recent call last):\" >&2; "
               "echo \"RuntimeError: the plain unit died\" >&2; exit 1'")

SEED_LOOP = r"""
for i in $(seq 1 90); do
  if systemctl is-failed --quiet {unit}; then echo FAILED; journalctl -u {unit} -n 30 --no-pager | grep -iE 'error|exception' | tail -5; exit 1; fi
  if systemctl is-active --quiet {unit} && curl -s http://127.0.0.1:{port}/v1/models | grep -q '"id"'; then echo READY; exit 0; fi
  sleep 15
done
exit 2
"""

# One start of the unit: what it runs, its environment and config, Restart=, and the journal text marking the event.
Event = namedtuple("Event", "exec_start environment config restart marker")


def simulator_events():
    """The simulator crashes at 3/8 of its load: 16 s of load put the crash 6 s after the start."""
    config = {"model-path": "moonshotai/Kimi-K2.6", "served-model-name": "kimi-k2.6", "port": PORT}
    start = "/usr/bin/python3 " + SIM_IN_CONTAINER

    def env(load, failure=None):
        values = {"SGLANG_SIM_LOAD_SECONDS": str(load), "SGLANG_SIM_GRAPH_SECONDS": "0.5",
                  "SGLANG_SIM_WARMUP_SECONDS": "0.5", "SGLANG_SIM_HEALTH_GENERATE_SECONDS": "1"}
        if failure:
            values["SGLANG_SIM_FAILURE"] = failure
        return values

    return {
        "crash": Event(start, env(16, "crash_loading"), config, "no", EXITED_LINE),
        "ready": Event(start, env(6), config, "no", READY_LINE),
        "crash_loop": Event(start, env(16, "crash_loading"), config, "on-failure", EXITED_LINE),
        # not the simulator: a plain unit that prints a loading line, a traceback on stderr 6 s later, and exits 1
        # (issue 49: a user's report of 2.6 s from the exit to sglang_ready's verdict)
        "crash_plain": Event(PLAIN_CRASH, {}, None, "no", EXITED_LINE),
    }


def real_events(launch_command):
    """The real server on the CPU profile's options; the crash: a weight file that is not safetensors."""
    options = yaml.safe_load(CPU_PROFILE.read_text())["__sglang_service_profile_options"]
    start = " ".join(shlex.quote(part) for part in launch_command)
    env = {"HF_HUB_OFFLINE": "1"}

    def config(model):
        return dict(options, **{"model-path": model, "served-model-name": "tiny-gpt2", "port": PORT,
                                "host": "127.0.0.1"})

    return {
        "crash": Event(start, env, config("/srv/models/tiny-gpt2-broken"), "no", EXITED_LINE),
        "ready": Event(start, env, config("/srv/models/tiny-gpt2"), "no", READY_LINE),
    }


def start_unit(box, event):
    box.systemctl("stop", UNIT, check=False)
    box.write_unit(UNIT, event.exec_start, environment=event.environment, config=event.config,
                   extra_service="Restart=%s\nRestartSec=2\nKillMode=mixed\nTimeoutStopSec=30" % event.restart)
    box.systemctl("reset-failed", UNIT, check=False)
    since = box.exec("date +%s.%N").stdout.strip()
    box.systemctl("start", UNIT)
    return float(since)


def event_time(box, marker, since):
    """Wall-clock time of the first journal line containing marker after `since`."""
    out = box.exec("journalctl -o json --no-pager --since @%d _SYSTEMD_UNIT=%s.service + UNIT=%s.service"
                   % (int(since) - 1, UNIT, UNIT), check=False).stdout
    for line in out.splitlines():
        entry = json.loads(line)
        message = entry.get("MESSAGE")
        if isinstance(message, list):
            message = bytes(message).decode("utf-8", "replace")
        if message and marker in message and int(entry["__REALTIME_TIMESTAMP"]) / 1e6 >= since:
            return int(entry["__REALTIME_TIMESTAMP"]) / 1e6
    return None


def waiter_sglang_ready(box, cap, playbook_dir):
    task = {"k26.deploy.sglang_ready": {"unit": UNIT + ".service", "url": "http://127.0.0.1:%d" % PORT, "timeout": cap},
            "ignore_errors": True}
    return _play(box, task, playbook_dir, "sglang_ready")


def waiter_uri(box, cap, playbook_dir):
    task = {"ansible.builtin.uri": {"url": "http://127.0.0.1:%d/v1/models" % PORT, "status_code": 200},
            "register": "r", "until": "r.status == 200", "retries": max(1, cap // 15), "delay": 15}
    return _play(box, task, playbook_dir, "uri")


def _play(box, task, playbook_dir, label):
    """(when ansible-playbook returned, the task's result)"""
    play = [{"hosts": "all", "gather_facts": False, "tasks": [dict(task, name=label)]}]
    path = Path(playbook_dir) / ("%s.yml" % label)
    path.write_text(yaml.safe_dump(play))
    dummy, data = run_playbook(str(path), str(Path(playbook_dir) / "hosts.yml"))
    returned = time.time()
    results = [result for name, result in task_results(data, box.name) if name == label]
    return returned, results[0] if results else {}


def waiter_seed_loop(box, cap, playbook_dir):
    try:
        subprocess.run(["podman", "exec", box.name, "bash", "-c", SEED_LOOP.format(unit=UNIT, port=PORT)],
                       check=False, capture_output=True, timeout=cap)
    except subprocess.TimeoutExpired:
        pass
    return time.time(), {}


WAITERS = {"sglang_ready": waiter_sglang_ready, "seed bash loop (15 s)": waiter_seed_loop,
           "uri until/delay 15": waiter_uri}


def trial(box, event, cap, playbook_dir):
    """{waiter: seconds from the event to its return, or None where it missed it}, the event's seconds after the
    start, and NRestarts at the end."""
    since = start_unit(box, event)
    noticed = {}

    def run(name, fn):
        noticed[name] = fn(box, cap, playbook_dir)

    threads = [threading.Thread(target=run, args=item) for item in WAITERS.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    at = event_time(box, event.marker, since)
    restarts = box.exec("systemctl show %s -p NRestarts --value" % UNIT).stdout.strip()
    box.systemctl("stop", UNIT, check=False)
    if at is None:
        raise RuntimeError("%r not found in the journal of %s" % (event.marker, UNIT))
    if "loading" not in (noticed["sglang_ready"][1].get("timeline") or {}):
        print("  (a trial's sglang_ready started after the event: counted as missed)")
        noticed["sglang_ready"] = (float("inf"), {})
    # A waiter that returned at its cap (or later) did not notice the event at all.
    delays = {name: (t - at if t - since < cap - 0.5 else None) for name, (t, dummy) in noticed.items()}
    return delays, at - since, restarts


def cell(values, base):
    """'0.45 s', '12.8 s  x28', or '> cap (missed 2/3)'."""
    seen = [v for v in values if v is not None]
    if len(seen) < len(values):
        return "missed %d/%d" % (len(values) - len(seen), len(values))
    text = "%.2f s" % statistics.median(seen)
    if base is not None and values is not base:
        text += "  x%.0f" % (statistics.median(seen) / max(statistics.median(base), 1e-3))
    return text


def measure(box, events, trials, cap, hosts_dir):
    """{event: {waiter: [delays]}} and notes: when each event came, the crash loop's restarts."""
    delays, notes = {}, {}
    for name, event in events.items():
        delays[name] = {waiter: [] for waiter in WAITERS}
        after = []
        for dummy in range(trials):
            result, at, restarts = trial(box, event, cap, hosts_dir)
            after.append(at)
            for waiter, delay in result.items():
                delays[name][waiter].append(delay)
        notes[name] = "the event %.1f s after the start (median)" % statistics.median(after)
        if event.restart != "no":
            notes[name] += "; NRestarts at the end of the last trial: %s" % restarts
    return delays, notes


def prepare_real_sglang(box, hosts_dir):
    """The wheelhouse and the tiny model (cached under .cache), SGLang installed by the sglang role, the models on
    the container; returns the launch command the role hands to sglang_service."""
    subprocess.run([str(ROOT / "scripts" / "setup_sglang_wheelhouse.sh")], check=True)
    if not (TINY_MODEL / "model.safetensors").exists():
        subprocess.run([str(ROOT / "scripts" / "setup_sglang_cpu.sh")], check=True)
        subprocess.run([str(SGLANG_PYTHON), str(ROOT / "scripts" / "make_tiny_model.py"), str(TINY_MODEL)], check=True)
    play = [{"hosts": "all", "gather_facts": True, "gather_subset": ["min"],
             "roles": [{"role": "k26.deploy.sglang", "vars": {
                 "sglang_install_mode": "pip", "sglang_pip_wheelhouse": str(WHEELHOUSE),
                 "sglang_system_packages_debian": ["python3-venv"]}}],
             "tasks": [{"name": "install", "ansible.builtin.debug": {"var": "sglang_install"}}]}]
    path = Path(hosts_dir) / "install.yml"
    path.write_text(yaml.safe_dump(play))
    started = time.time()
    rc, data = run_playbook(str(path), str(Path(hosts_dir) / "install-hosts.yml"), timeout=1800)
    results = [result for name, result in task_results(data, box.name) if name == "install"]
    if rc or not results:
        raise RuntimeError("installing SGLang failed (rc %s): %s" % (rc, json.dumps(data)[-3000:]))
    print("real SGLang %s installed by the sglang role in %.0f s" % (SGLANG_VERSION, time.time() - started))
    box.exec("mkdir -p /srv/models")
    for copy in ("tiny-gpt2", "tiny-gpt2-broken"):
        subprocess.run(["podman", "cp", str(TINY_MODEL), "%s:/srv/models/%s" % (box.name, copy)], check=True)
    box.put("/srv/models/tiny-gpt2-broken/model.safetensors", "not a safetensors file\n")
    return results[0]["sglang_install"]["launch_command"]


def write_hosts(directory, box):
    # the tests' connection for the install (it streams the 4 GB archive); the waiters use podman exec, as before
    (Path(directory) / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {box.name: {
        "ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3"}}}}))
    (Path(directory) / "install-hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {box.name: CONTAINER_HOST}}}))


TARGETS = {"simulator": "the simulator", "real": "real SGLang %s (CPU)" % SGLANG_VERSION}


def run_target(target, trials, caps):
    box = SystemdContainer("k26-bench-%s-%d" % (target, os.getpid()))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            write_hosts(tmp, box)
            if target == "simulator":
                box.install_simulator()
                events = simulator_events()
            else:
                events = real_events(prepare_real_sglang(box, tmp))
            return measure(box, events, trials, caps[target], tmp)
    finally:
        box.remove()


def report(measured, trials, caps):
    targets = list(measured)
    print()
    print("median delay from the event to the waiter's return (%d trials; x: times sglang_ready's; missed: not "
          "noticed within the cap, %s)" % (trials, ", ".join("%s %d s" % (t, caps[t]) for t in targets)))
    print("%-11s %-24s" % ("event", "waiter") + "".join("%-26s" % TARGETS[t] for t in targets))
    events = []
    for target in targets:
        events += [name for name in measured[target][0] if name not in events]
    for event in events:
        for waiter in WAITERS:
            row = "%-11s %-24s" % (event, waiter)
            for target in targets:
                delays = measured[target][0].get(event)
                row += "%-26s" % (cell(delays[waiter], delays["sglang_ready"]) if delays else "-")
            print(row)
    for target in targets:
        for event, note in measured[target][1].items():
            print("%s, %s: %s" % (TARGETS[target], event, note))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--targets", default="simulator,real", help="simulator, real, or both (comma-separated)")
    parser.add_argument("--cap", type=int, default=45, help="seconds each waiter may wait per trial, simulator")
    parser.add_argument("--real-cap", type=int, default=90, help="the same for the real server (ready in 25-60 s)")
    args = parser.parse_args()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown or not targets:
        parser.error("--targets: choose from %s" % ", ".join(TARGETS))
    caps = {"simulator": args.cap, "real": args.real_cap}
    measured = {target: run_target(target, args.trials, caps) for target in targets}
    report(measured, args.trials, caps)


if __name__ == "__main__":
    main()
