#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module paths_info: several paths looked at in one module run, never through a link."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: paths_info
short_description: Look at several paths at once, without following links
description:
  - Says of each path what M(ansible.builtin.stat) with O(ansible.builtin.stat#module:follow=false) says of its kind,
    owner, group and mode, in one module run instead of one per path.
  - A role that makes the same directories on every run looks at them once with this module, and runs
    M(ansible.builtin.file) only for a directory that is not yet as it would leave it (the filter
    P(k26.deploy.k26_dir_in_place#filter)), such as a link, a file, or another owner, group or mode.
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  paths:
    description: The paths to look at (absolute; used as given, without expanding C(~) or variables).
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - k26.deploy.digest_key
  - k26.deploy.attributes
  - k26.deploy.attributes.changes_nothing
"""

EXAMPLES = r"""
- name: Look at the directories once
  k26.deploy.paths_info:
    paths: [/etc/tool, /var/lib/tool]
  register: tool_paths

- name: Create each directory that is not yet root's 0755 (a link in its place is refused, never followed)
  ansible.builtin.file:
    path: "{{ item }}"
    state: directory
    owner: root
    group: root
    mode: "0755"
    follow: false
  loop: [/etc/tool, /var/lib/tool]
  when: not (tool_paths.paths[item] | k26.deploy.k26_dir_in_place('root', 'root', '0755'))
"""

RETURN = r"""
paths:
  description:
    - Each path as given, with C(exists); for one that exists also C(isdir), C(isreg), C(islnk) (of the path itself,
      not of a link's target), C(uid), C(gid), C(owner) and C(group) (names; empty for an id without one) and C(mode),
      and for a regular file looked at with O(digest_key) its C(digest).
  returned: success
  type: dict
  sample: {"/etc/tool": {"exists": true, "path": "/etc/tool", "isdir": true, "isreg": false, "islnk": false, "uid": 0,
           "gid": 0, "owner": "root", "group": "root", "mode": "0755"}, "/var/lib/tool": {"exists": false,
           "path": "/var/lib/tool"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.k26_paths import file_digest, lstat_info


ARGUMENT_SPEC = dict(
    paths=dict(type='list', elements='str', required=True),
    digest_key=dict(type='str', default='', no_log=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    looked = {}
    for path in module.params['paths']:
        if not path.startswith('/'):
            module.fail_json(msg='paths must be absolute, got %r' % (path,))
        try:
            looked[path] = lstat_info(path)
            if module.params['digest_key'] and looked[path].get('isreg'):
                looked[path]['digest'] = file_digest(path, module.params['digest_key'])
        except OSError as exc:
            module.fail_json(msg='cannot look at %s: %s' % (path, exc))
    module.exit_json(changed=False, paths=looked)


if __name__ == '__main__':
    main()
