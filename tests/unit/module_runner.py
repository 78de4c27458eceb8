"""Run a module's main() in-process, the way ansible-core's own unit tests do, and return its result; read its
documentation and hold it to its argument spec."""

import json

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args


def run_module(module, args, capsys):
    """(exit code, result dict) of `module.main()` with `args` as the task's arguments."""
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            module.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def doc(module, name):
    """The module's DOCUMENTATION, EXAMPLES or RETURN, parsed."""
    return yaml.safe_load(getattr(module, name))


def assert_documented_as_specified(module):
    """Every option of the module's ARGUMENT_SPEC documented with its type, default, choices and requiredness, and
    none documented that it does not take."""
    options = doc(module, "DOCUMENTATION")["options"]
    assert set(options) == set(module.ARGUMENT_SPEC)
    for name, spec in module.ARGUMENT_SPEC.items():
        assert options[name]["type"] == spec["type"], name
        assert options[name].get("default") == spec.get("default"), name
        assert options[name].get("choices") == spec.get("choices"), name
        assert bool(options[name].get("required")) == bool(spec.get("required")), name
