"""Fleet deploys with SGLang's router (smg) in front: the first deploy of 1, 4 and 8 replicas (goal: 8 within 2x
the time of one), and a rolling change across 4 replicas under a steady stream of requests through the router
(requests sent and failed during the roll).

Each size gets fresh replica containers (real systemd, the simulator) and a router container on a podman network
of their own. The change: an environment variable of the service that makes each replica load for 3 s.

Usage: .venv/bin/python bench/fleet_time.py [--sizes 1 4 8] [--roll 4] [--streams 4]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "src"))

import k26deploy  # noqa: E402
from fleet import RequestStream, fleet_containers  # noqa: E402
from harness import key_of  # noqa: E402

CHANGE = {"sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 3}}


def timed_deploy(inventory, extra_vars=None):
    start = time.monotonic()
    result = k26deploy.deploy(inventory=inventory, extra_vars=extra_vars or {})
    elapsed = time.monotonic() - start
    if result.exit_code != 0:
        raise SystemExit("deploy failed (exit %d): %s" % (result.exit_code, result.to_json()))
    return elapsed, result


def first_deploy(size):
    with tempfile.TemporaryDirectory() as tmp:
        with fleet_containers("k26-bench", size, tmp, quick_start=False) as (replicas, router, inventory):
            elapsed, result = timed_deploy(inventory)
            front = result.hosts[router.name]
            healthy = sum(1 for worker in front.workers or [] if worker.get("is_healthy"))
            print("first deploy of %d replica(s) + router: %.1f s (router routes to %d healthy)"
                  % (size, elapsed, healthy), flush=True)
            return elapsed


def rolling_change(size, streams):
    with tempfile.TemporaryDirectory() as tmp:
        with fleet_containers("k26-bench", size, tmp, quick_start=False) as (replicas, router, inventory):
            timed_deploy(inventory)
            with RequestStream(router, key_of(inventory), parallel=streams) as stream:
                elapsed, result = timed_deploy(inventory, CHANGE)
            restarted = sum(1 for box in replicas if result.hosts[box.name].restarted)
            print("rolling change across %d replicas: %.1f s, %d restarted one at a time; requests through the "
                  "router during the roll: %d sent, %d failed (%s)"
                  % (size, elapsed, restarted, stream.sent, stream.failed, dict(stream.codes)), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8], help="fleet sizes for the first deploy")
    parser.add_argument("--roll", type=int, default=4, help="replicas of the rolling change (0: skip it)")
    parser.add_argument("--streams", type=int, default=4, help="concurrent request streams during the roll")
    args = parser.parse_args()
    times = {size: first_deploy(size) for size in args.sizes}
    smallest = min(times)
    for size in sorted(times):
        ratio = times[size] / times[smallest]
        print("  %d replica(s): %.1f s, x%.2f the time of %d" % (size, times[size], ratio, smallest))
    if args.roll:
        rolling_change(args.roll, args.streams)


if __name__ == "__main__":
    main()
