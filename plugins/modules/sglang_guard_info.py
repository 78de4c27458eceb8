#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_guard_info: what a replica's guard says about it, and its last incidents."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_guard_info
short_description: What the replica guard of an SGLang service says about it, and its last incidents
description:
  - Reads the state and the incident records the guard of an SGLang service keeps (the sglang_service role's
    C(<name>-guard.service), its program C(replica_guard.py)) under O(state_dir). Changes nothing.
  - The guard's verdicts are C(healthy), C(starting), C(stopped), C(hung), C(gpu_fault) and C(crash_loop); an
    incident records a verdict the guard acted on (or would have, with acting off), why, and its evidence.
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  state_dir:
    description: The guard's state directory (the sglang_service role's C(/var/lib/k26deploy/guard/<name>)).
    type: path
    required: true
  last:
    description: How many of the newest incident records to return.
    type: int
    default: 5
  evidence:
    description: Return each record's evidence too (the invocation's journal lines, the kernel lines, the GPUs).
    type: bool
    default: false
extends_documentation_fragment:
  - k26.deploy.attributes
  - k26.deploy.attributes.changes_nothing
"""

EXAMPLES = r"""
- name: Read what the guard says
  k26.deploy.sglang_guard_info:
    state_dir: /var/lib/k26deploy/guard/sglang
  register: guard

- name: The last 20 incidents with their evidence
  k26.deploy.sglang_guard_info:
    state_dir: /var/lib/k26deploy/guard/sglang
    last: 20
    evidence: true
"""

RETURN = r"""
guard:
  description: The guard's word on the service.
  returned: always
  type: dict
  contains:
    installed:
      description: Whether a guard ever ran for the service (its state file exists).
      type: bool
    verdict:
      description: The newest verdict.
      type: str
      sample: healthy
    why:
      description: Why, in words.
      type: str
    time:
      description: When the guard last looked (seconds since the epoch).
      type: float
    held:
      description: The verdict the guard holds the service stopped for ('' when it does not).
      type: str
    canary_seconds:
      description: The latency of the last canary that answered.
      type: float
    incidents:
      description: How many incidents of each verdict the guard recorded.
      type: dict
      sample: {"hung": 1}
    last_incidents:
      description: The newest incident records, oldest first.
      type: list
      elements: dict
      sample: [{"time": 1796560831.2, "verdict": "hung", "action": "restart", "acted": true,
                "why": "3 canaries missed in a row ...", "recovered_after_seconds": 15.0}]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_guard import summary


def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return ''


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state_dir=dict(type='path', required=True),
            last=dict(type='int', default=5),
            evidence=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    state_dir = module.params['state_dir']
    incident_dir = os.path.join(state_dir, 'incidents')
    try:
        names = sorted(name for name in os.listdir(incident_dir) if name.endswith('.json'))
    except OSError:
        names = []
    last = max(0, module.params['last'])
    texts = [read(os.path.join(incident_dir, name)) for name in names[-last:]] if last else []
    module.exit_json(changed=False, guard=summary(read(os.path.join(state_dir, 'state.json')), texts, last=last,
                                                  evidence=module.params['evidence']))


if __name__ == '__main__':
    main()
