#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module host_info: a host's accounts, groups and usable processors, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_info
short_description: Read a host's accounts, groups and usable processors at once
description:
  - Reads the host's accounts and groups as C(getent passwd) and C(getent group) list them (through the name service,
    so LDAP or SSSD accounts count), and the number of processors this process may run on, as C(nproc) says.
  - One module run where M(ansible.builtin.getent) takes one per database and C(nproc) one more.
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options: {}
extends_documentation_fragment:
  - k26.deploy.attributes
  - k26.deploy.attributes.changes_nothing
"""

EXAMPLES = r"""
- name: Read the host's accounts, groups and processors
  k26.deploy.host_info:
  register: host

- name: Create the account only where it is missing
  ansible.builtin.user:
    name: tool
    system: true
  when: "'tool' not in host.accounts.passwd"
"""

RETURN = r"""
accounts:
  description:
    - C(passwd) and C(group), each a dict from name to the entry's other fields, in the shape the facts of
      M(ansible.builtin.getent) have (strings; a group's members joined by commas).
  returned: success
  type: dict
  sample: {"passwd": {"root": ["x", "0", "0", "root", "/root", "/bin/bash"]}, "group": {"video": ["x", "44", "sglang"]}}
processors:
  description: How many processors this process may run on (its CPU affinity, as C(nproc) counts them).
  returned: success
  type: int
  sample: 64
"""

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule


def passwd_entries():
    return {entry.pw_name: [entry.pw_passwd, str(entry.pw_uid), str(entry.pw_gid), entry.pw_gecos,
                            entry.pw_dir, entry.pw_shell] for entry in pwd.getpwall()}


def group_entries():
    return {entry.gr_name: [entry.gr_passwd, str(entry.gr_gid), ','.join(entry.gr_mem)]
            for entry in grp.getgrall()}


def processors():
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, accounts={'passwd': passwd_entries(), 'group': group_entries()},
                     processors=processors())


if __name__ == '__main__':
    main()
