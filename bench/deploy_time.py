"""Wall time of deploy_k26.yml: the first converge of a fresh container vs an idempotent re-run.

Uses the demo inventory's settings (simulator mode) against a fresh container of its own, and prints both
times, the ratio, and whether the re-run changed anything or restarted the service. The tests' connection by
default; --demo-connection reaches the container as the demo does (containers.podman.podman: `podman exec` a few
times a task, no pipelining), with the demo's replica guard on, as `k26deploy deploy -i inventories/demo` runs.

Usage: .venv/bin/python bench/deploy_time.py [--runs 2] [--demo-connection]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import yaml  # noqa: E402
from harness import SystemdContainer, demo_inventory, run_playbook  # noqa: E402

DEMO_HOST = yaml.safe_load((ROOT / "inventories" / "demo" / "hosts.yml").read_text())["sglang_servers"]["hosts"]["k26-demo"]


def deploy(inventory):
    start = time.monotonic()
    rc, data = run_playbook(str(ROOT / "deploy_k26.yml"), inventory)
    elapsed = time.monotonic() - start
    if rc != 0:
        raise SystemExit("deploy failed (rc %d): %s" % (rc, data.get("stats")))
    results = [(task["task"]["name"], res) for play in data["plays"] for task in play["tasks"]
               for res in task["hosts"].values()]
    changed = [name for name, res in results if res.get("changed")]
    ran = sum(1 for dummy, res in results if not res.get("skipped"))
    return elapsed, changed, ran


def invocation(box):
    return box.exec("systemctl show sglang.service -p InvocationID --value").stdout.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="fresh containers to deploy (first + re-run each)")
    parser.add_argument("--demo-connection", action="store_true",
                        help="reach the container as inventories/demo does, with its guard on")
    args = parser.parse_args()
    firsts, reruns = [], []
    for n in range(args.runs):
        box = SystemdContainer("k26-bench-deploy-%d-%d" % (os.getpid(), n))
        try:
            with tempfile.TemporaryDirectory() as tmp:
                demo_inventory(box, tmp, quick_start=False, guard=args.demo_connection)
                if args.demo_connection:
                    hosts = Path(tmp) / "hosts.yml"
                    inventory = yaml.safe_load(hosts.read_text())
                    inventory["sglang_servers"]["hosts"][box.name] = dict(DEMO_HOST)
                    hosts.write_text(yaml.safe_dump(inventory))
                first, changed_first, ran_first = deploy(tmp)
                before = invocation(box)
                rerun, changed_rerun, ran_rerun = deploy(tmp)
                restarted = invocation(box) != before
        finally:
            box.remove()
        firsts.append(first)
        reruns.append(rerun)
        said = (": " + ", ".join(changed_rerun)) if changed_rerun else ""
        print("run %d: first converge %.1f s (%d tasks ran, %d changed), re-run %.1f s (%d tasks ran, %d changed%s, "
              "service %s)" % (n + 1, first, ran_first, len(changed_first), rerun, ran_rerun, len(changed_rerun), said,
                               "RESTARTED" if restarted else "not restarted"))
    first, rerun = statistics.median(firsts), statistics.median(reruns)
    print("median: first converge %.1f s, idempotent re-run %.1f s, ratio re-run/first %.2f" % (first, rerun, rerun / first))


if __name__ == "__main__":
    main()
