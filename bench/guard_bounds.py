"""Keep it serving: how long a replica whose scheduler hangs keeps its place in the routing, and how long until it
serves again, with this package's settings against the earlier ones, in the same run.

Two replicas (the simulator, real systemd) and the real router (smg) on a podman network of their own. A hang is the
simulator's hang file: HTTP answers, no token is made, as with a stopped scheduler. For each setting, a few trials:
  - out:    from the hang to the router listing the replica unhealthy (no new request reaches it), sampled every
            0.25 s from inside the router's container;
  - served: from the hang to the router listing it healthy again (the replica guard restarted it).
Settings:
  - now:     smg checks /health_generate every 3 s (timeout 5 s, out after 3), the guard on (its defaults);
  - earlier: smg checked /ready every 10 s, no guard: /ready answers 200 over a hung scheduler, so only SGLang's
             own watchdog (--watchdog-timeout, 300 s: it fires 300-450 s into a hang) ends it; the simulator has no
             watchdog, so a trial stops at --cap and prints "> cap".
Not measured here: the bound from a fatal Xid (no kernel log can be written from a container; the GPU proof writes
one on a GPU host).

Usage: .venv/bin/python bench/guard_bounds.py [--trials 3] [--cap 120]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "src"))

import k26deploy  # noqa: E402
from fleet import fleet_containers, router_workers  # noqa: E402

HANG_FILE = "/var/lib/sglang/hang"
SETTINGS = {
    "now": {"sglang_service_guard": True},
    "earlier": {"sglang_service_guard": False, "sglang_router_health_check_endpoint": "/ready",
                "sglang_router_health_check_interval": 10},
}


def healthy(router, url):
    try:
        return router_workers(router).get(url)
    except Exception:  # pylint: disable=broad-except
        # an unanswered sample: asked again
        return None


def until(condition, cap):
    """Seconds until condition() holds, polled every 0.25 s; None past cap."""
    started = time.monotonic()
    while time.monotonic() - started < cap:
        if condition():
            return time.monotonic() - started
        time.sleep(0.25)
    return None


def trial(replica, router, cap):
    """(seconds to out of the routing, seconds to serving again), each None past the cap. The hang ends with the
    process that hung: once the service restarted, the hang file goes."""
    url = "http://%s:30000" % replica.name
    if until(lambda: healthy(router, url) is True, 120) is None:
        raise SystemExit("the replica is not healthy in the router before the trial")
    before = replica.invocation()
    started = time.monotonic()
    replica.exec("touch %s" % HANG_FILE)
    served = None
    try:
        out = until(lambda: healthy(router, url) is False, cap)
        left = cap - (time.monotonic() - started)
        if out is not None and until(lambda: replica.invocation() not in (before, ""), max(left, 1)) is not None:
            replica.exec("rm -f %s" % HANG_FILE)
            left = cap - (time.monotonic() - started)
            if until(lambda: healthy(router, url) is True, max(left, 1)) is not None:
                served = time.monotonic() - started
    finally:
        replica.exec("rm -f %s" % HANG_FILE)
    return out, served


def cell(values, cap):
    seen = [value for value in values if value is not None]
    if len(seen) < len(values):
        return "> %d s (%d/%d trials)" % (cap, len(values) - len(seen), len(values))
    return "%.1f s (%.1f-%.1f)" % (statistics.median(seen), min(seen), max(seen))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--cap", type=int, default=120, help="seconds a trial waits at most")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        with fleet_containers("k26-guard-bench", 2, tmp, environment={"SGLANG_SIM_HANG_FILE": HANG_FILE},
                              router_vars={}) as (replicas, router, inventory):
            for name, extra_vars in SETTINGS.items():
                deployed = k26deploy.deploy(inventory=inventory, extra_vars=extra_vars)
                if deployed.exit_code != 0:
                    raise SystemExit("deploy (%s) failed: %s" % (name, deployed.to_json()))
                runs = [trial(replicas[0], router, args.cap) for dummy in range(args.trials)]
                results[name] = runs
                outs = [None if out is None else round(out, 1) for out, dummy in runs]
                served = [None if again is None else round(again, 1) for dummy, again in runs]
                print("%-8s out %s, serving again %s" % (name, outs, served), flush=True)
    print("\nA replica whose scheduler hangs (%d trials each; goals: out within 30 s, serving again within 90 s)"
          % args.trials)
    print("%-10s %-28s %-28s" % ("setting", "out of the routing", "serving again"))
    for name, runs in results.items():
        print("%-10s %-28s %-28s" % (name, cell([o for o, s in runs], args.cap), cell([s for o, s in runs], args.cap)))
    now = [o for o, s in results["now"] if o is not None]
    if now:
        print("earlier, out of the routing: only SGLang's watchdog, 300-450 s into the hang: x%.0f to x%.0f the time "
              "of now's %.1f s" % (300 / statistics.median(now), 450 / statistics.median(now), statistics.median(now)))


if __name__ == "__main__":
    main()
