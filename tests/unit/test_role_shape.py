"""The shape of the sglang_service role's tasks (issues 38 and 52; scripts/role_shape.py measures it): tasks/ is flat,
the entry points that meta/argument_specs.yml names beside the named steps they include, two levels deep at most, and
a failure's meaning is the block it failed in."""

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "sglang_service"

_spec = importlib.util.spec_from_file_location("role_shape", ROOT / "scripts" / "role_shape.py")
role_shape = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(role_shape)


def test_tasks_is_flat_and_holds_every_entry_point():
    assert [path.name for path in (ROLE / "tasks").iterdir() if path.is_dir()] == []
    top = {path.stem for path in (ROLE / "tasks").glob("*.yml")}
    assert set(role_shape.entry_points(ROLE)) <= top


def test_every_step_is_included_and_every_include_names_a_file():
    """A step no entry point reaches is dead; an include of a file that is not there fails only when it runs."""
    included = set()
    for path in role_shape.task_files(ROLE) + [ROLE / "handlers" / "main.yml"]:
        for action, target in role_shape.includes(path):
            if target is None:
                continue
            assert "/" not in target, "%s: %s %s: a step is named by its file's name" % (
                path.relative_to(ROLE), action, target)
            assert (ROLE / "tasks" / target).is_file(), "%s: %s %s: no such file under tasks/" % (
                path.relative_to(ROLE), action, target)
            included.add(Path(target).stem)
    steps = {path.stem for path in (ROLE / "tasks").glob("*.yml")} - set(role_shape.entry_points(ROLE))
    assert steps <= included, "steps nothing includes: %s" % sorted(steps - included)


def _role_constants():
    """Private names the role's vars/ (profiles too) and defaults define and no task file sets: the role's own
    values, the same in every file, not handed from one file to another."""
    defined = set()
    for path in sorted((ROLE / "vars").rglob("*.yml")) + [ROLE / "defaults" / "main.yml"]:
        defined |= {name for name in (yaml.safe_load(path.read_text()) or {}) if name.startswith("__sglang_service_")}
    set_by_tasks = set().union(*(role_shape.names_set(path, ROLE.name) for path in role_shape.task_files(ROLE)))
    return defined - set_by_tasks


@pytest.mark.parametrize("path", sorted((ROLE / "tasks").rglob("*.yml")), ids=lambda p: str(p.relative_to(ROLE)))
def test_in_lists_exactly_the_values_a_file_reads_and_does_not_set(path):
    """A task file's header "In:" names every __sglang_service_* value it reads that it does not set itself
    (register, set_fact, vars) and that is not one of the role's own vars, and nothing else."""
    text = path.read_text()
    reads = role_shape.names_read(path, ROLE.name) - role_shape.names_set(path, ROLE.name) - _role_constants()
    listed = role_shape.in_names(text, ROLE.name)
    assert sorted(listed - reads) == [], "the In: list names values the file does not read"
    assert sorted(reads - listed) == [], "values the file reads without its In: list saying so"


def test_no_value_is_handed_silently():
    assert role_shape.silent_handovers(ROLE, ROLE.name) == {}


def test_includes_nest_two_levels_at_most():
    nest, chain = role_shape.depth(ROLE)
    assert nest <= 2, " -> ".join(chain)


def _rescued_blocks(path):
    """(the files a block includes, the files its rescue includes, the transitions its rescue applies) for each block
    of ``path`` that has a rescue."""
    def targets(tasks):
        return [str(task[key]["name"] if key.endswith("_role") else task[key]) for task in tasks
                for key in ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks",
                            "ansible.builtin.include_role") if key in task]
    found = []
    document = yaml.safe_load(path.read_text())
    tasks = [task for play in document for task in play.get("tasks", [])] if "/playbooks/" in str(path) else document
    for task in role_shape._tasks(tasks):
        if "rescue" in task:
            transitions = [word for rescue in task["rescue"] for word in ("rescued", "sweep_failed")
                           if "sglang_outcome('%s'" % word in str(rescue)]
            found.append((targets(task["block"]), targets(task["rescue"]), transitions))
    return found


def test_a_failed_start_or_gate_is_rolled_back_by_the_block_it_failed_in():
    """Issue 52: the failure's meaning is the block: main.yml's one block holds start.yml and gate.yml, and its rescue
    rolls back (rollback.yml) and gives back what the change took (failed_change.yml)."""
    assert _rescued_blocks(ROLE / "tasks" / "main.yml") == [
        (["start.yml", "gate.yml"], ["rollback.yml", "failed_change.yml"], ["rescued"])]


def test_a_sweep_that_could_not_run_is_reported_not_rolled_back():
    """One home for it: the entry point benchmark.yml, which the deploy's gate.yml and playbooks/benchmark.yml both
    include (neither has a rescue of its own)."""
    assert _rescued_blocks(ROLE / "tasks" / "benchmark.yml") == [(["k26.deploy.sglang_benchmark"], [], ["sweep_failed"])]
    assert not _rescued_blocks(ROOT / "playbooks" / "benchmark.yml")


def test_no_other_file_has_a_rescue():
    rescued = sorted(path.name for path in role_shape.task_files(ROLE) if _rescued_blocks(path))
    assert rescued == ["benchmark.yml", "main.yml"]


@pytest.mark.parametrize("name", ["__sglang_service_unit_before", "__sglang_service_retiring",
                                  "__sglang_service_left_routers"])
def test_the_runs_own_state_passes_through_the_outcome(name):
    """What a later step needs from an earlier one is in sglang_service_outcome: these names, once handed from file
    to file, are read only in the file that sets them (or nowhere)."""
    readers = {str(path.relative_to(ROLE / "tasks")) for path in role_shape.task_files(ROLE)
               if name in role_shape.names_read(path, ROLE.name)}
    setters = {str(path.relative_to(ROLE / "tasks")) for path in role_shape.task_files(ROLE)
               if name in role_shape.names_set(path, ROLE.name)}
    assert readers <= setters and len(setters) <= 1, (readers, setters)
