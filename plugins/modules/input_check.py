#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module input_check: ansible.builtin.assert for the input checks (the action plugin does the work)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: input_check
short_description: Check the input, and say that the input is wrong when a check fails
description:
  - M(ansible.builtin.assert) with the same options and result, for the checks that refuse bad input before anything
    on the host changes (the roles' variable checks, C(playbooks/preflight.yml)).
  - A failed check also returns RV(k26_bad_input=true), the one mark that makes k26deploy exit with code 2 (bad
    input) wherever the task's file lies.
version_added: "0.1.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  that:
    description:
      - Expressions of the form that C(when) takes; all must be true.
    type: list
    elements: str
    required: true
  fail_msg:
    description:
      - The message of a failed check.
    type: str
    aliases: [msg]
  success_msg:
    description:
      - The message when every expression is true.
    type: str
  quiet:
    description:
      - Leave out the verbose output.
    type: bool
    default: false
extends_documentation_fragment:
  - k26.deploy.attributes
  - k26.deploy.attributes.changes_nothing
notes:
  - Runs on the controller (action plugin); the module file holds only the documentation.
seealso:
  - module: ansible.builtin.assert
"""

EXAMPLES = r"""
- name: Refuse a port out of range
  k26.deploy.input_check:
    that: sglang_service_port | int is within(1, 65535)
    fail_msg: "sglang_service_port {{ sglang_service_port }} is out of range: choose 1-65535"
    quiet: true
"""

RETURN = r"""
k26_bad_input:
  description: Set when a check failed; k26deploy reads it as bad input (exit code 2).
  returned: failure
  type: bool
  sample: true
evaluated_to:
  description: What the failed expression evaluated to.
  returned: failure
  type: bool
  sample: false
assertion:
  description: The expression that failed.
  returned: failure
  type: str
  sample: "sglang_service_port | int < 65536"
"""
