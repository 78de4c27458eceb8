"""The values that cross a play or role boundary (issue 52): a fact set (set_fact) or registered in one role or
playbook and read in another. docs/hand-offs.md lists each with who writes it, who reads it and when it is stale;
tests/unit/test_hand_offs.py holds that list to what this scan finds in the code.

    .venv/bin/python scripts/hand_offs.py     # print what the code hands on: name, writers, readers

What is scanned: the writers in every task file of every role (tasks/ and handlers/), the playbooks under playbooks/
and deploy_k26.yml, parsed with PyYAML; the readers in those and in the roles' defaults, vars and templates: a value
is read where its name appears in a file outside its writers (comment lines left out). Names that begin with ``__``
are a role's own and never cross.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from role_shape import facts_set  # noqa: E402  (the same reading of what a task list sets)

ROOT = Path(__file__).resolve().parents[1]
WRITING = ("roles/*/tasks/**/*.yml", "roles/*/handlers/*.yml", "playbooks/*.yml")
PLAY_TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers")
COMMENT_LINE = re.compile(r"^\s*#.*$", re.M)
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def owner(path: Path, root: Path = ROOT) -> str:
    """Who a file belongs to: ``role NAME`` or ``playbooks/FILE``."""
    relative = path.relative_to(root)
    return "role %s" % relative.parts[1] if relative.parts[0] == "roles" else relative.as_posix()


def files(root: Path = ROOT) -> list[Path]:
    """The files that may write a value: the roles' task and handler files, and the playbooks."""
    return sorted([path for pattern in WRITING for path in root.glob(pattern)] + [root / "deploy_k26.yml"])


def reading_files(root: Path = ROOT) -> list[Path]:
    """The files that may read a value: the writers' and the roles' defaults, vars and templates."""
    more = [path for pattern in ("roles/*/defaults/*.yml", "roles/*/vars/*.yml", "roles/*/templates/**/*")
            for path in root.glob(pattern) if path.is_file()]
    return sorted(set(files(root)) | set(more))


def written(path: Path, root: Path = ROOT) -> set[str]:
    """The names a role's task file or a playbook's plays set (register, set_fact)."""
    document = yaml.load(path.read_text(), Loader=LOADER) or []
    if path.relative_to(root).parts[0] == "roles":
        return facts_set(document)
    return set().union(*(facts_set(play.get(key)) for play in document if isinstance(play, dict)
                         for key in PLAY_TASK_LISTS))


def scan(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """name -> {"writers": [...], "readers": [...]} for every public name read outside the files that write it."""
    writers: dict[str, set[str]] = {}
    texts: dict[str, str] = {}
    for path in files(root):
        for name in written(path, root):
            if not name.startswith("__"):
                writers.setdefault(name, set()).add(owner(path, root))
    for path in reading_files(root):
        who = owner(path, root)
        texts[who] = texts.get(who, "") + COMMENT_LINE.sub("", path.read_text()) + "\n"
    crossing = {}
    for name, by in writers.items():
        pattern = re.compile(r"\b%s\b" % re.escape(name))
        readers = sorted(who for who, text in texts.items() if who not in by and pattern.search(text))
        if readers:
            crossing[name] = {"writers": sorted(by), "readers": readers}
    return dict(sorted(crossing.items()))


def main() -> int:
    for name, ends in scan().items():
        print("%-36s written by %s; read by %s" % (name, ", ".join(ends["writers"]), ", ".join(ends["readers"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
