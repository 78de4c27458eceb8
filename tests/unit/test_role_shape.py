"""The shape of the sglang_service role's tasks (issue 38; scripts/role_shape.py measures it): tasks/ holds the
entry points that meta/argument_specs.yml names and nothing else, the steps they include lie in tasks/steps/."""

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "sglang_service"

_spec = importlib.util.spec_from_file_location("role_shape", ROOT / "scripts" / "role_shape.py")
role_shape = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(role_shape)


def test_tasks_holds_exactly_the_entry_points():
    top = sorted(path.stem for path in (ROLE / "tasks").glob("*.yml"))
    assert top == role_shape.entry_points(ROLE)
    assert [path.name for path in (ROLE / "tasks").iterdir() if path.is_dir()] == ["steps"]


def test_every_step_is_included_and_every_include_names_a_file():
    """A step no entry point reaches is dead; an include of a file that is not there fails only when it runs."""
    included = set()
    for path in role_shape.task_files(ROLE) + [ROLE / "handlers" / "main.yml"]:
        for action, target in role_shape.includes(path):
            if target is None:
                continue
            assert (ROLE / "tasks" / target).is_file(), "%s: %s %s: no such file under tasks/" % (
                path.relative_to(ROLE), action, target)
            included.add(target)
    steps = {str(path.relative_to(ROLE / "tasks")) for path in (ROLE / "tasks" / "steps").glob("*.yml")}
    assert steps <= included, "steps nothing includes: %s" % sorted(steps - included)


@pytest.mark.parametrize("path", sorted((ROLE / "tasks").rglob("*.yml")), ids=lambda p: str(p.relative_to(ROLE)))
def test_includes_name_steps_by_their_path_under_tasks(path):
    """Every include says steps/NAME.yml (or an entry point's NAME.yml): the same text from any file."""
    for dummy, target in role_shape.includes(path):
        if target is not None:
            assert target.startswith("steps/") or Path(target).stem in role_shape.entry_points(ROLE), target


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


def test_includes_nest_three_levels_at_most():
    nest, chain = role_shape.depth(ROLE)
    assert nest <= 3, " -> ".join(chain)


def test_the_role_has_one_failure_path():
    """One rescue (steps/apply.yml's): the precompile, the start, the gate and the benchmark fail into it."""
    rescues = [str(path.relative_to(ROLE / "tasks")) for path in role_shape.task_files(ROLE)
               for task in role_shape._tasks(yaml.safe_load(path.read_text())) if "rescue" in task]
    assert rescues == ["steps/apply.yml"]


@pytest.mark.parametrize("name", ["__sglang_service_invocation_before", "__sglang_service_retiring",
                                  "__sglang_service_left_routers"])
def test_the_runs_own_state_passes_through_the_outcome(name):
    """What a later step needs from an earlier one is in sglang_service_outcome: these names, once handed from file
    to file, are read only in the file that sets them (or nowhere)."""
    readers = {str(path.relative_to(ROLE / "tasks")) for path in role_shape.task_files(ROLE)
               if name in role_shape.names_read(path, ROLE.name)}
    setters = {str(path.relative_to(ROLE / "tasks")) for path in role_shape.task_files(ROLE)
               if name in role_shape.names_set(path, ROLE.name)}
    assert readers <= setters and len(setters) <= 1, (readers, setters)
