# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for input_check: ansible.builtin.assert whose failure says that the input is wrong."""

from __future__ import annotations

import importlib

from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BAD_INPUT_KEY

# "assert" is a keyword: the module cannot be named in an import statement
AssertAction = importlib.import_module('ansible.plugins.action.assert').ActionModule


class ActionModule(AssertAction):
    """Runs ansible.builtin.assert (the same arguments, templating and result); a failed check adds
    ``k26_bad_input: true`` to the result."""

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        if result.get('failed'):
            result[BAD_INPUT_KEY] = True
        return result
