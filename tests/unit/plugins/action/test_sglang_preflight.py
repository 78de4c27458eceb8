"""The sglang_preflight action plugin's own logic: the inventory's severity overrides on top of the task's (a play's
defaults, such as deploy's), so a rule the operator lowered or raised reads the same in every command; a value that
is not a mapping is bad input, refused before the module runs."""
import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.k26.deploy.plugins.action.sglang_preflight import combined_overrides
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BAD_INPUT_KEY


def test_the_inventorys_overrides_win_over_the_tasks():
    task = {"K26-PP-ASYNC-DEPTH": "off", "K26-METRICS-OPEN": "info"}
    inventory = {"K26-METRICS-OPEN": "error", "K26-KV-CACHE": "info"}
    assert combined_overrides(task, inventory) == {"K26-PP-ASYNC-DEPTH": "off", "K26-METRICS-OPEN": "error",
                                                   "K26-KV-CACHE": "info"}
    assert task == {"K26-PP-ASYNC-DEPTH": "off", "K26-METRICS-OPEN": "info"}  # the task's own is left as it was


@pytest.mark.parametrize("task, inventory, expected", [
    (None, None, {}), ({"K26-X": "off"}, None, {"K26-X": "off"}), (None, {"K26-X": "info"}, {"K26-X": "info"}),
])
def test_either_may_be_absent(task, inventory, expected):
    assert combined_overrides(task, inventory) == expected


@pytest.mark.parametrize("task, inventory, named", [
    ("K26-X=off", None, "severity_overrides"),
    (None, ["K26-X", "off"], "k26_preflight_severity_overrides"),
    (None, "K26-X: off", "k26_preflight_severity_overrides"),
])
def test_a_value_that_is_not_a_mapping_is_bad_input_naming_the_variable(task, inventory, named):
    with pytest.raises(AnsibleActionFail) as raised:
        combined_overrides(task, inventory)
    assert str(raised.value).startswith(named + " must be a mapping of rule id to severity")
    assert raised.value.result[BAD_INPUT_KEY] is True
