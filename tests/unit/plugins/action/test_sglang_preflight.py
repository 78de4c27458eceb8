"""The sglang_preflight action plugin's own logic: the inventory's severity overrides on top of the task's (a play's
defaults, such as deploy's), so a rule the operator lowered or raised reads the same in every command; a value that
is not a mapping is bad input, refused before the module runs; and the last tune report, handed only to the hosts
it measured (K26-TUNED's own tests: tests/unit/plugins/module_utils/test_sglang_tune_evidence.py)."""
import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.k26.deploy.plugins.action.sglang_preflight import combined_overrides, tune_report_for
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


# a tune report's shape, as much as tune_report_for reads (the hosts it measured)
TUNE_REPORT = {"winner": "tp8pp1", "hosts": ["gpu-1"], "rows": []}


def test_the_action_plugin_hands_the_report_only_to_the_hosts_it_measured():
    assert tune_report_for(TUNE_REPORT, "gpu-1") == TUNE_REPORT
    assert tune_report_for(TUNE_REPORT, "gpu-2") is None and tune_report_for(None, "gpu-1") is None
    with pytest.raises(AnsibleActionFail, match="k26_preflight_tune_report must be"):
        tune_report_for("tp8pp1", "gpu-1")
