"""The one mark of bad input: k26_bad_input: true in a failed task's result (plugins/plugin_utils/k26_bad_input.py),
never the file a task came from (src/k26deploy/results.py reads only the mark)."""

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleActionFail, AnsibleFilterError

from ansible_collections.k26.deploy.plugins.filter.sglang_instance import instance_plan
from ansible_collections.k26.deploy.plugins.filter.sglang_options import layout_for
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BAD_INPUT_KEY, BadInputError
from k26deploy import results

ROOT = Path(__file__).resolve().parents[2]


def test_the_key_is_the_one_results_reads():
    assert BAD_INPUT_KEY == results.BAD_INPUT_KEY == "k26_bad_input"


def test_a_refusing_filter_fails_its_task_with_the_mark():
    """AnsibleActionFail's result contribution is what Ansible puts into the failed task's result."""
    error = BadInputError("nope")
    assert isinstance(error, AnsibleFilterError) and isinstance(error, AnsibleActionFail)
    assert dict(error.result_contribution) == {BAD_INPUT_KEY: True}
    assert error.message == "nope"


def test_the_input_filters_refuse_with_the_mark():
    with pytest.raises(BadInputError, match="whole numbers or 'auto'"):
        layout_for({}, 8, 1, "eight", "auto")
    with pytest.raises(BadInputError):
        instance_plan("a", "inst", ["a", "b"], explicit_ranks={"a": 0, "b": 0})


def test_no_role_or_playbook_says_bad_input_through_a_file_name():
    """The tasks mark bad input themselves: no code may go back to matching the task's path."""
    text = (ROOT / "src" / "k26deploy" / "results.py").read_text()
    assert "task_path" not in text.split("def is_bad_input_failure", 1)[1].split("\ndef ", 1)[0]


def test_the_input_checks_run_as_input_check():
    """The checks of the input, wherever they lie, are k26.deploy.input_check (ansible.builtin.assert marks nothing)."""
    preflight = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    names = [task["name"] for play in preflight for task in play.get("tasks", []) if "k26.deploy.input_check" in task]
    assert names == ["Refuse credentials where they would reach a command line or an environment",
                     "Stop on preflight errors"]
