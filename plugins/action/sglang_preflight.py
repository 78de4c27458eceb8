# -*- coding: utf-8 -*-
"""Action plugin for sglang_preflight: the one place where the inventory's severity overrides apply.

Every command that evaluates the rules (deploy, preflight, status) calls the module; this plugin puts the
inventory's ``k26_preflight_severity_overrides`` on top of the task's own ``severity_overrides`` (a play's defaults,
such as deploy's), so a rule the operator lowered or raised reads the same in every command.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.collections import is_string
from ansible.plugins.action import ActionBase

#: the inventory variable of rule id -> severity (documented in playbooks/vars/play_variables.yml)
OVERRIDES_VARIABLE = 'k26_preflight_severity_overrides'


def combined_overrides(task_overrides, inventory_overrides):
    """The task's overrides with the inventory's on top; a value that is not a mapping is refused."""
    for name, value in (('severity_overrides', task_overrides), (OVERRIDES_VARIABLE, inventory_overrides)):
        if value is not None and (is_string(value) or not hasattr(value, 'items')):
            raise AnsibleActionFail('%s must be a mapping of rule id to severity, got %r' % (name, value))
    combined = dict(task_overrides or {})
    combined.update(inventory_overrides or {})
    return combined


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        inventory = task_vars.get(OVERRIDES_VARIABLE)
        if inventory is not None:
            inventory = self._templar.template(inventory)
        args = dict(self._task.args)
        args['severity_overrides'] = combined_overrides(args.get('severity_overrides'), inventory)
        result.update(self._execute_module(module_args=args, task_vars=task_vars))
        return result
