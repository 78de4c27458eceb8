# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for sglang_preflight: the one place where the inventory's severity overrides and the last tune
report apply.

Every command that evaluates the rules (deploy, preflight, status) calls the module; this plugin puts the
inventory's ``k26_preflight_severity_overrides`` on top of the task's own ``severity_overrides`` (a play's defaults,
such as deploy's), so a rule the operator lowered or raised reads the same in every command. It also hands the
module ``k26_preflight_tune_report`` (the last ``k26deploy tune`` report, which the CLI passes) on the hosts that
report measured. The report is data: its text is never templated (a row's ``{{`` stays text).
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.collections import is_string
from ansible.plugins.action import ActionBase
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BAD_INPUT_KEY

#: the inventory variable of rule id -> severity (documented in playbooks/vars/play_variables.yml)
OVERRIDES_VARIABLE = 'k26_preflight_severity_overrides'
#: the variable of the last tune report (documented in playbooks/vars/play_variables.yml)
TUNE_REPORT_VARIABLE = 'k26_preflight_tune_report'


def combined_overrides(task_overrides, inventory_overrides):
    """The task's overrides with the inventory's on top; a value that is not a mapping is refused."""
    for name, value in (('severity_overrides', task_overrides), (OVERRIDES_VARIABLE, inventory_overrides)):
        if value is not None and (is_string(value) or not hasattr(value, 'items')):
            raise AnsibleActionFail('%s must be a mapping of rule id to severity, got %r' % (name, value),
                                    result={BAD_INPUT_KEY: True})
    combined = dict(task_overrides or {})
    combined.update(inventory_overrides or {})
    return combined


def tune_report_for(report, host):
    """The report when it measured HOST (its ``hosts``), else None; a value that is not a mapping is refused."""
    if report is None:
        return None
    if is_string(report) or not hasattr(report, 'get'):
        raise AnsibleActionFail('%s must be a k26deploy tune report (a mapping), got %r' % (TUNE_REPORT_VARIABLE, report),
                                result={BAD_INPUT_KEY: True})
    return dict(report) if host in (report.get('hosts') or []) else None


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
        if args.get('tune_report') is None:
            report = task_vars.get(TUNE_REPORT_VARIABLE)
            if is_string(report):
                # an expression that names the report (an inventory's): templated once, its result is data
                report = self._templar.template(report)
            # the report is data: a {{ in its text stays text (wrap_var takes away the trust that the extra-vars
            # file, which ansible-playbook reads as templates, gave it)
            report = tune_report_for(wrap_var(report), task_vars.get('inventory_hostname'))
            if report is not None:
                args['tune_report'] = report
        result.update(self._execute_module(module_args=args, task_vars=task_vars))
        return result
