# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter for the service account and directories (plugins/module_utils/sglang_host_inputs.py holds the rules)."""

from ansible_collections.k26.deploy.plugins.module_utils import sglang_host_inputs, sglang_rollback_store
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def host_input_problems(getent, user, group, home, directories, root_only, existing_ok=False, missing=()):
    """getent: {'passwd': getent_passwd, 'group': getent_group} facts -> every reason the account or directories
    may not be used ([] when none); root_only: the directory of root's rollback store; missing: the extra writable
    paths that do not exist on the host."""
    try:
        return sglang_host_inputs.problems(user, group, home, directories, getent.get('passwd') or {},
                                           getent.get('group') or {}, root_only, bool(existing_ok),
                                           list(missing or []))
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise BadInputError('sglang_host_input_problems: %s' % exc)


def account_in_place(getent, user, group, home, shell, supplementary):
    """getent: {'passwd': getent_passwd, 'group': getent_group} facts -> whether the service account is already as
    the role's group and user tasks would leave it (they need not run)."""
    try:
        return sglang_host_inputs.account_in_place(user, group, home, shell, list(supplementary),
                                                   getent.get('passwd') or {}, getent.get('group') or {})
    except (AttributeError, IndexError, TypeError) as exc:
        raise BadInputError('sglang_account_in_place: %s' % exc)


def writable_overlaps(path, name, writable):
    """PATH (the variable NAME), a directory root writes into -> why it may not overlap the directories the service
    account can write (WRITABLE: {variable: directory or list}); [] when it overlaps none."""
    if not isinstance(writable, dict):
        raise BadInputError('sglang_writable_overlaps: the writable directories must be a mapping')
    return sglang_rollback_store.writable_overlaps(name, path, writable)


class FilterModule:
    def filters(self):
        return {"sglang_host_input_problems": host_input_problems, "sglang_writable_overlaps": writable_overlaps,
                "sglang_account_in_place": account_in_place}
