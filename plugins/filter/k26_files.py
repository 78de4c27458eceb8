# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the roles that make the same files and directories on every run (the launcher, the simulator, the
guard, the service's directories): which are already on the host as a deploy would leave them, from one look instead
of a module run per file or directory."""

from ansible_collections.k26.deploy.plugins.module_utils.k26_paths import (
    dir_in_place as _dir_in_place, file_in_place as _file_in_place, text_digest)
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def files_in_place(found, mode='0644'):
    """FOUND (ansible.builtin.find's files, with get_checksum) -> [[path, sha1], ...] of those that are root's
    (owner and group) with MODE: a file whose [path, sha1 of the wanted content] is not among them must be copied."""
    if not isinstance(found, list) or not all(isinstance(item, dict) for item in found):
        raise BadInputError("k26_files_in_place: the input must be ansible.builtin.find's files (a list of mappings)")
    return [[item.get('path'), item.get('checksum')] for item in found
            if item.get('uid') == 0 and item.get('gid') == 0 and item.get('mode') == mode and item.get('checksum')]


def dir_in_place(info, owner, group, mode):
    """INFO (one path of k26.deploy.paths_info's result) -> whether it is a directory, not a link, with OWNER, GROUP
    and MODE: ansible.builtin.file need not run for it."""
    if not isinstance(info, dict):
        raise BadInputError("k26_dir_in_place: the input must be one path of k26.deploy.paths_info's result (a mapping)")
    return _dir_in_place(info, owner, group, mode)


def file_in_place(info, content, digest_key, owner, group, mode):
    """INFO (one path of k26.deploy.paths_info's or sglang_rollback_store's live_files, looked at with DIGEST_KEY) ->
    whether it is a regular file with OWNER, GROUP, MODE and CONTENT: the task that writes it need not run."""
    if not isinstance(info, dict):
        raise BadInputError("k26_file_in_place: the input must be one path of k26.deploy.paths_info's result (a mapping)")
    return _file_in_place(info, text_digest(content, digest_key) if digest_key else '', owner, group, mode)


class FilterModule:
    def filters(self):
        return {"k26_files_in_place": files_in_place, "k26_dir_in_place": dir_in_place,
                "k26_file_in_place": file_in_place}
