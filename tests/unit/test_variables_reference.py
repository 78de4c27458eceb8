"""docs/variables.md is what scripts/variables_reference.py writes from the roles' meta/argument_specs.yml: a variable
added, renamed or redescribed in a role's argument specs without regenerating the reference fails here."""
import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("variables_reference", ROOT / "scripts" / "variables_reference.py")
variables_reference = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(variables_reference)


def test_the_checked_in_reference_is_what_the_argument_specs_give():
    assert (ROOT / "docs" / "variables.md").read_text() == variables_reference.render(ROOT), (
        "docs/variables.md is stale: run .venv/bin/python scripts/variables_reference.py")


def test_every_option_of_every_entry_point_has_its_row():
    text = variables_reference.render(ROOT)
    for path in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            for option in entry.get("options") or {}:
                assert "\n| `%s` |" % option in text, option


def test_ansibles_markup_becomes_markdown():
    assert variables_reference.markdown(["C(url) and V(auto)", "I(may) be B(bold) | piped"]) == (
        "`url` and `auto` *may* be **bold** \\| piped")
