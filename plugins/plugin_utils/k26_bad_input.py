# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one marker of bad input: a failed task whose result carries ``k26_bad_input: true``.

k26deploy (src/k26deploy/results.py) turns such a failure, and only such a failure (besides Ansible's own
``validate_argument_spec``), into exit code 2: which task file the task came from does not matter. Three kinds of
task carry it:

* the input checks, ``k26.deploy.input_check`` (``ansible.builtin.assert`` that marks its failure);
* the modules that judge the input, ``k26.deploy.sglang_preflight`` and ``k26.deploy.sglang_args_check``;
* a task whose templating a filter of the collection refused because of the input: the filter raises
  ``BadInputError``, whose result contribution Ansible puts into the failed task's result.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleFilterError

#: the key of a failed task's result that says "the input is wrong, nothing was changed"
BAD_INPUT_KEY = 'k26_bad_input'


class BadInputError(AnsibleFilterError, AnsibleActionFail):
    """A filter's refusal of the input: fails the task like AnsibleFilterError, with ``k26_bad_input: true`` in
    its result (an AnsibleActionFail contributes its result to the failed task's). It contributes only the mark:
    the task's ``msg`` stays the one Ansible writes for a failed filter."""

    @property
    def result_contribution(self):
        return {BAD_INPUT_KEY: True}
