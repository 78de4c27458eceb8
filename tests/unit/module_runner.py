"""Run a module's main() in-process, the way ansible-core's own unit tests do, and return its result."""

import json

import pytest
from ansible.module_utils.testing import patch_module_args


def run_module(module, args, capsys):
    """(exit code, result dict) of `module.main()` with `args` as the task's arguments."""
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            module.main()
    return exc.value.code, json.loads(capsys.readouterr().out)
