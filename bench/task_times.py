"""Where a run's time goes, task by task: the Ansible tasks that took longest, summed over every run found.

Reads ansible-runner's artifacts (job_events/*.json under each private data directory, e.g. pytest's --basetemp
tree or `k26deploy --artifacts-dir`): each task's time is from its runner_on_start to its result, per host.

Usage: .venv/bin/python bench/task_times.py [--top N] DIR...     (prints a table; no figure is asserted anywhere)
"""

import argparse
import collections
import json
import sys
from datetime import datetime
from pathlib import Path

RESULTS = ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")


def events(directory):
    """Every runner event under `directory`, as (run directory, event data)."""
    for path in Path(directory).rglob("job_events/*.json"):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        yield path.parent, event


def stamp(event):
    return datetime.fromisoformat(event["created"]).timestamp()


def task_seconds(directories):
    """{task name: [seconds per host and run]} from the start and result events of each task on each host."""
    started, totals = {}, collections.defaultdict(list)
    ordered = sorted((event for directory in directories for event in events(directory)),
                     key=lambda pair: (str(pair[0]), pair[1].get("counter", 0)))
    for run, event in ordered:
        data = event.get("event_data") or {}
        key = (run, data.get("task_uuid"), data.get("host"))
        if event.get("event") == "runner_on_start":
            started[key] = stamp(event)
        elif event.get("event") in RESULTS and key in started:
            totals[data.get("task") or "?"].append(stamp(event) - started.pop(key))
    return totals


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("directories", nargs="+")
    args = parser.parse_args(argv)
    totals = task_seconds(args.directories)
    if not totals:
        sys.exit("no runner events under %s" % ", ".join(args.directories))
    print("%9s %7s %7s  %s" % ("seconds", "times", "max", "task"))
    for name, seconds in sorted(totals.items(), key=lambda item: -sum(item[1]))[:args.top]:
        print("%9.1f %7d %7.1f  %s" % (sum(seconds), len(seconds), max(seconds), name[:100]))
    print("%9.1f %7d          every task" % (sum(map(sum, totals.values())), sum(map(len, totals.values()))))


if __name__ == "__main__":
    main(sys.argv[1:])
