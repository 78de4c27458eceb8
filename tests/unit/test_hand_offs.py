"""docs/hand-offs.md lists every value that crosses a play or role boundary, with the code's own writers and
readers (scripts/hand_offs.py scans them): a fact one role starts to hand another without the list saying so fails."""
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("hand_offs", ROOT / "scripts" / "hand_offs.py")
hand_offs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(hand_offs)
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", re.M)


def documented():
    text = (ROOT / "docs" / "hand-offs.md").read_text()
    return {name: {"writers": sorted(w.strip() for w in writers.split(",")),
                   "readers": sorted(r.strip() for r in readers.split(",")), "stale": stale.strip()}
            for name, writers, readers, stale in ROW.findall(text)}


def test_the_list_is_what_the_code_hands_on():
    listed = {name: {"writers": row["writers"], "readers": row["readers"]} for name, row in documented().items()}
    assert listed == hand_offs.scan(ROOT)


def test_each_says_when_it_is_stale():
    assert all(len(row["stale"]) > 10 for row in documented().values())


def test_a_fact_read_in_another_role_is_found(tmp_path):
    for path, text in {
            "roles/a/tasks/main.yml": "- ansible.builtin.set_fact:\n    a_out: 1\n    __a_own: 2\n",
            "roles/b/tasks/main.yml": "- ansible.builtin.debug:\n    msg: '{{ a_out }} {{ __a_own }}'\n"
                                      "# a_never is only named in a comment\n",
            "roles/b/templates/x.j2": "{{ a_reg.rc }}\n",
            "playbooks/p.yml": "- hosts: all\n  tasks:\n    - ansible.builtin.command: 'true'\n"
                               "      register: a_reg\n    - ansible.builtin.set_fact:\n        a_never: 1\n",
            "deploy_k26.yml": "- ansible.builtin.import_playbook: playbooks/p.yml\n"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert hand_offs.scan(tmp_path) == {"a_out": {"writers": ["role a"], "readers": ["role b"]},
                                        "a_reg": {"writers": ["playbooks/p.yml"], "readers": ["role b"]}}
