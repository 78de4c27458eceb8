# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The base of the action plugins that run their module in steps and report progress between the steps."""

from __future__ import annotations

from ansible.plugins.action import ActionBase


class ProgressAction(ActionBase):
    """Check mode runs the module once (without CHECK_MODE_DROPPED arguments); otherwise run_in_steps does the work
    and returns the task's result."""

    TRANSFERS_FILES = False
    CHECK_MODE_DROPPED = ()

    def run(self, tmp=None, task_vars=None):
        result = super(ProgressAction, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect

        args = dict(self._task.args)
        if self._task.check_mode:
            for name in self.CHECK_MODE_DROPPED:
                args.pop(name, None)
            result.update(self._execute_module(module_args=args, task_vars=task_vars))
            return result
        result.update(self.run_in_steps(args, task_vars or {}))
        return result

    def run_in_steps(self, args, task_vars):
        raise NotImplementedError
