"""Print the shape of a role's tasks (issue 38): how many task files, which of them are entry points, how deep the
includes nest, which private names the files share and which values one file hands another without saying so.

    python scripts/role_shape.py [roles/sglang_service] [--json]

What is counted (task files parsed with PyYAML; comments are read only for the "In:" lists):

* task files: every .yml under tasks/; entry points: the names in meta/argument_specs.yml; steps: the others;
* include/import lines: tasks that include or import tasks or a role; depth: the longest chain of task-file
  includes from an entry point (main -> a -> b is 2);
* private names: distinct ``__<role>_*`` names in the task files' YAML (keys and strings);
* handed silently: a private name a file reads that another task file sets (register, set_fact, vars, loop_var),
  that the file does not set itself and that its header's "In:" comment does not name;
* rescue blocks.

The same functions back tests/unit/test_role_shape.py.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

INCLUDE_ACTIONS = {f"{prefix}{verb}_{what}" for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                   for verb in ("include", "import") for what in ("tasks", "role")}
TASK_FILE_ACTIONS = {a for a in INCLUDE_ACTIONS if a.endswith("_tasks")}
SET_FACT_ACTIONS = {"set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact"}
INCLUDE_VARS_ACTIONS = {"include_vars", "ansible.builtin.include_vars", "ansible.legacy.include_vars"}
BLOCK_KEYS = ("block", "rescue", "always")
#: the "In:" part of a file's header comment: "In:" or "In (optional):" up to "Out:" or the header's end
IN_SECTION = re.compile(r"\bIn(?: \([^)]*\))?:(.*?)(?=\bOut(?: \([^)]*\))?:|\Z)", re.S)


def private_pattern(role: str) -> re.Pattern:
    return re.compile(r"\b__%s_\w+" % re.escape(role))


def task_files(role_dir: Path) -> list[Path]:
    return sorted((role_dir / "tasks").rglob("*.yml"))


def entry_points(role_dir: Path) -> list[str]:
    specs = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return sorted(specs)


def _tasks(items):
    """Every task of a task list, blocks opened (the block task itself too)."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in BLOCK_KEYS:
            yield from _tasks(task.get(key))


def _strings(node):
    """Every key and string of a YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def header(text: str) -> str:
    """The comment lines at the top of a task file (after ---)."""
    lines = []
    for line in text.splitlines():
        if line.strip() == "---" and not lines:
            continue
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def in_names(text: str, role: str) -> set[str]:
    """The private names a file's header says it reads ("In:")."""
    return {name for section in IN_SECTION.findall(header(text)) for name in private_pattern(role).findall(section)}


def includes(path: Path) -> list[tuple[str, str | None]]:
    """(action, the task file it names or None) for each include/import task of a task file."""
    found = []
    for task in _tasks(yaml.safe_load(path.read_text())):
        for action in INCLUDE_ACTIONS & set(task):
            arg = task[action]
            target = arg.get("file") if isinstance(arg, dict) else arg
            found.append((action, target if action in TASK_FILE_ACTIONS else None))
    return found


def facts_set(tasks) -> set[str]:
    """The names a task list sets as the host's facts (blocks opened): register targets and set_fact keys."""
    found = set()
    for task in _tasks(tasks):
        if isinstance(task.get("register"), str):
            found.add(task["register"])
        for action in SET_FACT_ACTIONS & set(task):
            if isinstance(task[action], dict):
                found.update(name for name in task[action] if name != "cacheable")
    return found


def names_set(path: Path, role: str) -> set[str]:
    """Private names a task file sets: register, set_fact keys, vars keys (task, block, include), loop_var, the
    name include_vars puts a file's variables under."""
    pattern = private_pattern(role)
    tasks = yaml.safe_load(path.read_text())
    found = facts_set(tasks)
    for task in _tasks(tasks):
        if isinstance(task.get("vars"), dict):
            found.update(task["vars"])
        for action in INCLUDE_VARS_ACTIONS & set(task):
            if isinstance(task[action], dict) and task[action].get("name"):
                found.add(task[action]["name"])
        loop_var = (task.get("loop_control") or {}).get("loop_var")
        if loop_var:
            found.add(loop_var)
    return {name for name in found if pattern.fullmatch(str(name))}


def names_read(path: Path, role: str) -> set[str]:
    """Private names that occur in a task file's YAML (keys and strings), comments left out."""
    pattern = private_pattern(role)
    return {name for text in _strings(yaml.safe_load(path.read_text())) for name in pattern.findall(text)}


def silent_handovers(role_dir: Path, role: str) -> dict[str, list[str]]:
    """{task file: names it reads, that another task file sets, not set by itself and not in its "In:"}."""
    files = task_files(role_dir)
    sets = {path: names_set(path, role) for path in files}
    handed = set().union(*sets.values()) if sets else set()
    out = {}
    for path in files:
        missing = sorted((names_read(path, role) & handed) - sets[path] - in_names(path.read_text(), role))
        missing = [name for name in missing if any(name in sets[other] for other in files if other != path)]
        if missing:
            out[str(path.relative_to(role_dir / "tasks"))] = missing
    return out


def depth(role_dir: Path) -> tuple[int, list[str]]:
    """The longest chain of task-file includes from an entry point, and that chain."""
    tasks_dir = role_dir / "tasks"

    def resolve(target: str, here: Path) -> Path | None:
        for base in (here.parent, tasks_dir):
            candidate = base / target
            if candidate.is_file():
                return candidate
        return None

    def longest(path: Path, seen: tuple[Path, ...]) -> list[Path]:
        best = [path]
        for dummy, target in includes(path):
            child = resolve(target, path) if target and "{{" not in target else None
            if child and child not in seen:
                chain = [path] + longest(child, seen + (child,))
                if len(chain) > len(best):
                    best = chain
        return best

    chains = [longest(tasks_dir / f"{name}.yml", (tasks_dir / f"{name}.yml",))
              for name in entry_points(role_dir) if (tasks_dir / f"{name}.yml").is_file()]
    chain = max(chains, key=len) if chains else []
    return max(len(chain) - 1, 0), [str(p.relative_to(tasks_dir))[:-4] for p in chain]


def shape(role_dir: Path) -> dict:
    role = role_dir.name
    files = task_files(role_dir)
    entries = entry_points(role_dir)
    silent = silent_handovers(role_dir, role)
    nest, chain = depth(role_dir)
    rescues = sum(1 for path in files for task in _tasks(yaml.safe_load(path.read_text())) if "rescue" in task)
    private = set()
    for path in files:
        private |= names_read(path, role)
    return {
        "role": role,
        "task_files": len(files),
        "entry_points": len(entries),
        "entry_points_outside_tasks_top": sorted(set(entries) - {p.stem for p in (role_dir / "tasks").glob("*.yml")}),
        "steps": sorted({p.stem for p in (role_dir / "tasks").rglob("*.yml")} - set(entries)),
        "include_import_lines": sum(len(includes(path)) for path in files),
        "max_depth": nest,
        "deepest_chain": " -> ".join(chain),
        "private_names": len(private),
        "handed_silently": {"names": len(set().union(*silent.values())) if silent else 0,
                            "file_name_pairs": sum(len(v) for v in silent.values()), "by_file": silent},
        "rescue_blocks": rescues,
    }


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    role_dir = Path(args[0] if args else Path(__file__).resolve().parents[1] / "roles" / "sglang_service")
    result = shape(role_dir)
    if "--json" in argv:
        print(json.dumps(result, indent=2))
        return 0
    for key, value in result.items():
        if key == "handed_silently":
            print(f"handed_silently: {value['names']} names, {value['file_name_pairs']} (file, name) pairs")
            for name, missing in value["by_file"].items():
                print(f"  {name}: {', '.join(missing)}")
        else:
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
