"""The Makefile's targets are honest: each one the README lists runs something (a phony name with no recipe would
print "Nothing to be done" and pass), and each part of the suite runs the same scripts/part.sh as `make test`."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()
PHONY = re.search(r"^\.PHONY:(.*)$", MAKEFILE, re.M).group(1).split()
PARTS = ("lint", "sanity", "newest", "collection", "unit", "integration", "molecule", "fleet")


def dry_run(target):
    """The commands `make TARGET` would run, without running them (nor its prerequisites' commands' effects)."""
    return subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("target", PHONY)
def test_every_target_runs_a_command(target):
    proc = dry_run(target)
    assert proc.returncode == 0, proc.stderr
    assert "Nothing to be done" not in proc.stdout + proc.stderr
    assert proc.stdout.strip(), "make %s runs nothing" % target


@pytest.mark.parametrize("part", PARTS)
def test_each_part_runs_the_same_script_as_make_test(part):
    assert part in PHONY
    assert "scripts/part.sh %s" % part in dry_run(part).stdout
    usage = subprocess.run([str(ROOT / "scripts" / "part.sh")], capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and part in usage.stderr


def test_make_test_runs_its_parts_through_part_sh():
    script = (ROOT / "scripts" / "test.sh").read_text()
    for part in ("lint", "sanity", "collection", "demo", "pytest", "molecule"):
        assert "scripts/part.sh %s" % part in script


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (rootdir-relative "prepend" mode, no __init__.py): two files of
    the same name in unit/ and integration/ stop collection with "import file mismatch" when both are collected.
    tests/unit/plugins/ is ansible-test's, which imports each file by its collection path (and pytest leaves it)."""
    plugins = ROOT / "tests" / "unit" / "plugins"
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py") if plugins not in path.parents]
    assert sorted(name for name in set(names) if names.count(name) > 1) == []
