"""How long after an event does each way of waiting notice it?

In one run, against the same simulator units in one systemd container, three waiters watch the same
start of the service side by side:
  - sglang_ready with its defaults (through ansible-playbook and the podman connection),
  - the seed's bash loop (15 s period: `systemctl is-active`/`is-failed`, then `curl /v1/models`),
  - ansible.builtin.uri with until/retries/delay: 15 on /v1/models.
Events: a process crash while loading (Restart=no), readiness (the "ready to roll" line), and a crash loop
(Restart=on-failure). The event's time comes from journald (the line that marks it); a waiter's noticing
time is when it returned. Prints per-waiter medians and ratios against sglang_ready.

Usage: .venv/bin/python bench/readiness_latency.py [--trials 3] [--cap 45]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import yaml  # noqa: E402

from harness import SIM_IN_CONTAINER, SystemdContainer, run_playbook  # noqa: E402

LOAD_SECONDS = 6
PORT = 32000
UNIT = "bench-sim"

SEED_LOOP = r"""
for i in $(seq 1 90); do
  if systemctl is-failed --quiet {unit}; then echo FAILED; journalctl -u {unit} -n 30 --no-pager | grep -iE 'error|exception' | tail -5; exit 1; fi
  if systemctl is-active --quiet {unit} && curl -s http://127.0.0.1:{port}/v1/models | grep -q '"id"'; then echo READY; exit 0; fi
  sleep 15
done
exit 2
"""

EVENTS = {
    # name: (simulator failure mode, Restart=, journal text that marks the event)
    "crash": ("crash_loading", "no", "Main process exited"),
    "ready": (None, "no", "The server is fired up and ready to roll!"),
    "crash_loop": ("crash_loading", "on-failure", "Main process exited"),
}


def start_unit(box, failure, restart):
    env = {"SGLANG_SIM_LOAD_SECONDS": str(LOAD_SECONDS), "SGLANG_SIM_GRAPH_SECONDS": "0.5",
           "SGLANG_SIM_WARMUP_SECONDS": "0.5", "SGLANG_SIM_HEALTH_GENERATE_SECONDS": "1"}
    if failure:
        env["SGLANG_SIM_FAILURE"] = failure
    config = {"model-path": "moonshotai/Kimi-K2.6", "served-model-name": "kimi-k2.6", "port": PORT}
    box.systemctl("stop", UNIT, check=False)
    box.write_unit(UNIT, "/usr/bin/python3 " + SIM_IN_CONTAINER, environment=env, config=config,
                   extra_service="Restart=%s\nRestartSec=2" % restart)
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
    task = {"k26.deploy.sglang_ready": {"unit": UNIT + ".service", "url": "http://127.0.0.1:%d" % PORT, "timeout": cap}}
    return _play(box, task, playbook_dir, "sglang_ready")


def waiter_uri(box, cap, playbook_dir):
    task = {"ansible.builtin.uri": {"url": "http://127.0.0.1:%d/v1/models" % PORT, "status_code": 200},
            "register": "r", "until": "r.status == 200", "retries": max(1, cap // 15), "delay": 15}
    return _play(box, task, playbook_dir, "uri")


def _play(box, task, playbook_dir, label):
    play = [{"hosts": "all", "gather_facts": False, "tasks": [dict(task, name=label)]}]
    path = Path(playbook_dir) / ("%s.yml" % label)
    path.write_text(yaml.safe_dump(play))
    run_playbook(str(path), str(Path(playbook_dir) / "hosts.yml"))
    return time.time()


def waiter_seed_loop(box, cap, playbook_dir):
    try:
        subprocess.run(["podman", "exec", box.name, "bash", "-c", SEED_LOOP.format(unit=UNIT, port=PORT)],
                       check=False, capture_output=True, timeout=cap)
    except subprocess.TimeoutExpired:
        pass
    return time.time()


WAITERS = {"sglang_ready": waiter_sglang_ready, "seed bash loop (15 s)": waiter_seed_loop,
           "uri until/delay 15": waiter_uri}


def trial(box, event, cap, playbook_dir):
    failure, restart, marker = EVENTS[event]
    since = start_unit(box, failure, restart)
    noticed = {}

    def run(name, fn):
        noticed[name] = fn(box, cap, playbook_dir)

    threads = [threading.Thread(target=run, args=item) for item in WAITERS.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    at = event_time(box, marker, since)
    restarts = box.exec("systemctl show %s -p NRestarts --value" % UNIT).stdout.strip()
    box.systemctl("stop", UNIT, check=False)
    if at is None:
        raise RuntimeError("event %s not found in the journal" % event)
    # A waiter that returned at its cap (or later) did not notice the event at all.
    return {name: (t - at if t - since < cap - 0.5 else None) for name, t in noticed.items()}, restarts


def fmt(values, cap):
    seen = [v for v in values if v is not None]
    if len(seen) < len(values):
        return "> %.0f s (missed %d/%d)" % (cap - LOAD_SECONDS, len(values) - len(seen), len(values))
    return "%.2f s" % statistics.median(seen)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--cap", type=int, default=45, help="seconds each waiter may wait per trial")
    args = parser.parse_args()
    box = SystemdContainer("k26-bench-%d" % os.getpid())
    try:
        box.install_simulator()
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {box.name: {
                "ansible_connection": "containers.podman.podman", "ansible_python_interpreter": "/usr/bin/python3"}}}}))
            print("event        waiter                     median delay   (%d trials, cap %d s)" % (args.trials, args.cap))
            for event in EVENTS:
                delays = {name: [] for name in WAITERS}
                for dummy in range(args.trials):
                    result, restarts = trial(box, event, args.cap, tmp)
                    for name, d in result.items():
                        delays[name].append(d)
                base = [d for d in delays["sglang_ready"] if d is not None]
                for name, values in delays.items():
                    seen = [v for v in values if v is not None]
                    ratio = ""
                    if base and seen and name != "sglang_ready":
                        ratio = "  x%.1f slower" % (statistics.median(seen) / max(statistics.median(base), 1e-3))
                    elif base and not seen:
                        ratio = "  never noticed within the cap"
                    print("%-12s %-26s %-14s%s" % (event, name, fmt(values, args.cap), ratio))
                if event == "crash_loop":
                    print("%-12s %-26s NRestarts when the trial ended: %s" % (event, "", restarts))
    finally:
        box.remove()


if __name__ == "__main__":
    main()
