"""Where `make test`'s time goes: per lane, per pytest file (set-up and teardown included) and per Molecule step.

scripts/test.sh records its run under .cache/test-times/ (or $K26_TEST_TIMES):
  lanes.tsv             one line per lane: name, start and end (epoch seconds), exit status
  pytest.xml            pytest's JUnit XML; a test case's time is set-up + call + teardown, so a module
                        fixture's first deploy is counted in its file (under --dist loadfile it hides in the
                        first test's set-up)
  molecule-NAME.log     Molecule's output, every line prefixed with the epoch second it was printed

Usage: .venv/bin/python bench/suite_times.py [DIR]     (prints tables; no figure is asserted anywhere)
"""

import collections
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP_LINE = re.compile(r"^(\d+) .*?\b([\w-]+) \S+ ([\w-]+): Executing")


def lanes(directory):
    """[(lane, seconds after the first one started, seconds, exit status)] in the order they started (lanes may run
    side by side)."""
    path = directory / "lanes.tsv"
    if not path.exists():
        return []
    rows = [line.split("\t") for line in path.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda row: int(row[1]))
    first = int(rows[0][1]) if rows else 0
    return [(name, int(start) - first, int(end) - int(start), status) for name, start, end, status in rows]


def pytest_files(directory):
    """{test file: (tests, seconds)} from pytest's JUnit XML."""
    path = directory / "pytest.xml"
    if not path.exists():
        return {}
    totals = collections.defaultdict(lambda: [0, 0.0])
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        name = "/".join(module[:-1] if module[-1][:1].isupper() else module) + ".py"
        totals[name][0] += 1
        totals[name][1] += float(case.get("time") or 0)
    return {name: tuple(value) for name, value in totals.items()}


def molecule_steps(log):
    """[(step, seconds)] of one scenario's timestamped log: each step lasts until the next one starts
    (the last until the log's last line)."""
    starts, last = [], None
    for line in ANSI.sub("", log.read_text(errors="replace")).splitlines():
        stamp = line.split(" ", 1)[0]
        if stamp.isdigit():
            last = int(stamp)
        match = STEP_LINE.match(line)
        if match:
            starts.append((match.group(3), int(match.group(1))))
    ends = [start for dummy, start in starts[1:]] + [last]
    return [(step, end - start) for (step, start), end in zip(starts, ends)]


def table(title, rows, total=None):
    print("\n%s" % title)
    for row in rows:
        print("  %-58s %s" % (row[0], "  ".join(str(cell) for cell in row[1:])))
    if total is not None:
        print("  %-58s %s" % ("total", total))


def main(argv):
    directory = Path(argv[1]) if len(argv) > 1 else ROOT / ".cache" / "test-times"
    if not directory.is_dir():
        sys.exit("no timings in %s: run make test first" % directory)
    lane_rows = lanes(directory)
    table("lanes (wall seconds, from when, exit status)",
          [(name, "%6d s" % secs, "from +%5d s" % at, "rc=%s" % rc) for name, at, secs, rc in lane_rows])
    files = sorted(pytest_files(directory).items(), key=lambda item: -item[1][1])
    table("pytest files (summed test time incl. set-up, slowest first)",
          [(name, "%7.1f s" % secs, "%4d tests" % count) for name, (count, secs) in files],
          total="%7.1f s" % sum(secs for dummy, secs in (value for dummy, value in files)))
    for log in sorted(directory.glob("molecule-*.log")):
        steps = molecule_steps(log)
        table("molecule %s (seconds per step)" % log.stem[len("molecule-"):],
              [(step, "%6d s" % secs) for step, secs in steps], total="%6d s" % sum(s for dummy, s in steps))


if __name__ == "__main__":
    main(sys.argv)
