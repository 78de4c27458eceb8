"""The lookup role_variables (plugins/lookup/role_variables.py): every role's variables, from every entry point of
its argument specs, found beside the plugin; preflight's list of the variables the collection knows."""
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleLookupError

from ansible_collections.k26.deploy.plugins.lookup import role_variables as lookup

ROLES = Path(__file__).resolve().parents[2] / "roles"


def test_every_option_of_every_entry_point_of_every_role():
    expected = set()
    for path in ROLES.glob("*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            expected |= set(entry.get("options") or {})
    names = lookup.LookupModule().run([])[0]
    assert names == sorted(expected) and len(names) > 200
    # an entry point's own option, and a role that preflight does not run
    assert {"sglang_service_leave_out_why", "sglang_monitoring_package", "sglang_model_draft_path"} <= set(names)
    assert Path(lookup.ROLES_DIR).resolve() == ROLES.resolve()


def test_named_roles_only_and_an_unknown_one_refused():
    assert lookup.LookupModule().run(["sglang_benchmark"])[0] == lookup.role_variables(str(ROLES), ["sglang_benchmark"])
    assert all(name.startswith("sglang_benchmark_") for name in lookup.LookupModule().run(["sglang_benchmark"])[0])
    with pytest.raises(AnsibleLookupError, match="no role sglang_benchmarks"):
        lookup.LookupModule().run(["sglang_benchmarks"])
