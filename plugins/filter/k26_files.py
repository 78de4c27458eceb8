# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter for the roles that install program files they ship (the launcher, the simulator, the guard): which files
on the host are already as a deploy would write them, from one ansible.builtin.find instead of a copy per file."""

from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def files_in_place(found, mode='0644'):
    """FOUND (ansible.builtin.find's files, with get_checksum) -> [[path, sha1], ...] of those that are root's
    (owner and group) with MODE: a file whose [path, sha1 of the wanted content] is not among them must be copied."""
    if not isinstance(found, list) or not all(isinstance(item, dict) for item in found):
        raise BadInputError("k26_files_in_place: the input must be ansible.builtin.find's files (a list of mappings)")
    return [[item.get('path'), item.get('checksum')] for item in found
            if item.get('uid') == 0 and item.get('gid') == 0 and item.get('mode') == mode and item.get('checksum')]


class FilterModule:
    def filters(self):
        return {"k26_files_in_place": files_in_place}
