"""From a fatal Xid line to the replica out of the router's routing: this package (the guard hears the line as the
journal gets it, stops and kills the service; smg's own health checks of /health_generate find it gone) against the
same deploy without the guard (the engines alone: SGLang's watchdog sees no Xid, and the router keeps a replica
whose health checks still pass), in the same run.

On a GPU host, as root, under systemd (the GPU proof's set-up), with smg's wheels:
    K26_GPU_SCRIPT=bench/xid_bound.py tests/gpu/prove.sh --router .whl/router [--trials 3] [--cap 60]
The line is a synthetic Xid 79 ("fallen off the bus") for the service's GPU, written to /dev/kmsg; the stand-in keeps
serving through it, as a faulted GPU's engine often does until a request touches it. Prints each trial, then the
medians side by side. Issue 49's bound: out of the routing within 10 s.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]

import prove  # noqa: E402  (the GPU proof's inventory, deploy variables, router and waits)


def deploy(args, guard):
    # args.extras_only: the Xids of earlier trials stay in the kernel log, and preflight (which would rightly leave
    # the replica out for them) is told to warn only
    path, extra = prove.router_deployment(args, sglang_service_guard=guard, sglang_service_guard_act_on_gpu_fault=True)
    result = prove.k26deploy.deploy(str(path), extra)
    if result.exit_code != 0:
        raise SystemExit("deploy (guard %s) failed: %s" % (guard, prove.describe(result)))
    if prove.wait(prove.router_all_healthy, 60) is None:
        raise SystemExit("the router did not find the replica healthy: %s" % prove.router_workers())


def trial(cap):
    """Seconds from one Xid line to the replica out of the router (None past ``cap``), and whether it was stopped."""
    started = prove.write_fatal_xid("bench")
    out = prove.wait(prove.router_none_healthy, cap)
    out = None if out is None else time.monotonic() - started
    stopped = prove.unit_prop("ActiveState") in ("inactive", "failed")
    return {"out_of_router_s": None if out is None else round(out, 1), "service_stopped": stopped}


def back_in():
    """The operator's start ends the hold; the router takes the replica back."""
    prove.run(["systemctl", "start", prove.UNIT])
    if prove.wait(prove.router_all_healthy, 120) is None:
        raise SystemExit("the replica did not come back into the router: %s" % prove.router_workers())


def shown(value, cap):
    return "> %d" % cap if value is None else "%.1f" % value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--router", required=True, metavar="WHEELHOUSE", help="smg's wheels (as prove.sh --router)")
    parser.add_argument("--trials", type=int, default=3, help="Xid lines against the guard (default 3)")
    parser.add_argument("--cap", type=int, default=60, help="seconds to wait for the router before giving up (60)")
    parser.add_argument("--pp", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.router, args.extras_only, args.bench = str(Path(args.router).resolve()), True, None
    os.environ.setdefault("ANSIBLE_NOCOLOR", "1")
    prove.prepare(args)
    deploy(args, guard=True)
    guarded = []
    for number in range(args.trials):
        guarded.append(trial(args.cap))
        print("[xid] with the guard, trial %d: %s" % (number + 1, guarded[-1]), flush=True)
        back_in()
    deploy(args, guard=False)
    alone = trial(args.cap)
    print("[xid] without the guard: %s" % alone, flush=True)
    outs = [run["out_of_router_s"] for run in guarded if run["out_of_router_s"] is not None]
    median = statistics.median(outs) if outs else None
    print("\nfatal Xid line -> out of the router's routing, seconds (%d GPU(s), smg, /health_generate every 3 s, out "
          "after 3 failures)" % args.gpus)
    print("  %-40s %12s %12s" % ("", "this package", "engines alone"))
    print("  %-40s %12s %12s" % ("median of %d / 1 trial" % args.trials, shown(median, args.cap),
                                 shown(alone["out_of_router_s"], args.cap)))
    print("  %-40s %12s %12s" % ("service stopped (held, not restarted)", all(r["service_stopped"] for r in guarded),
                                 alone["service_stopped"]))
    if median is not None and alone["out_of_router_s"] is None:
        print("  engines alone / this package: > x%.0f (bound: 10 s)" % (args.cap / median))
    back_in()
    return 0


if __name__ == "__main__":
    sys.exit(main())
