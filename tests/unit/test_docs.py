"""The documentation says each thing once and shows only what a user may use."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "plugins" / "modules").glob("*.py")), ids=lambda p: p.stem)
def test_modules_take_the_shared_attributes_from_the_fragment(path):
    """Every module but sglang_ready runs fully in check mode with nothing to show in diff mode: the fragment
    k26.deploy.attributes says so once; a module writes only what check mode does for it."""
    text = path.read_text()
    doc = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    own = doc.get("attributes") or {}
    if path.stem == "sglang_ready":
        assert "k26.deploy.attributes" not in doc.get("extends_documentation_fragment", [])
        return
    assert "k26.deploy.attributes" in doc["extends_documentation_fragment"]
    assert "diff_mode" not in own and "support" not in own.get("check_mode", {})


@pytest.mark.parametrize("path", sorted((ROOT / "plugins" / "filter").glob("*.yml")), ids=lambda p: p.stem)
def test_filter_examples_use_public_variables_only(path):
    examples = yaml.safe_load(path.read_text()).get("EXAMPLES") or ""
    assert not re.findall(r"\b__\w+", examples), "%s's EXAMPLES show private variables" % path.name


def layout_rows():
    """{first cell: what} of the table of docs/layout.md."""
    rows = {}
    for line in (ROOT / "docs" / "layout.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and cells[1] and not set(cells[1]) <= {"-", " "}:
            rows[cells[0]] = cells[1]
    return rows


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "plugins" / "modules").glob("*.py"))
                         + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "playbooks").glob("*.yml")))
def test_the_layout_has_a_line_for_each_module_and_playbook(path):
    rows = layout_rows()
    assert "`%s`" % path in rows, "docs/layout.md has no line for %s" % path
    assert len(rows["`%s`" % path]) > 10, "say what %s does" % path


def test_the_layout_names_nothing_that_is_not_there():
    for cell in layout_rows():
        for path in re.findall(r"`([^`]+)`", cell):
            assert (ROOT / path).exists(), "docs/layout.md names %s, which is not there" % path
