#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_router_info: the replicas SGLang's router (smg) routes to, as the router sees them."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_router_info
short_description: The replicas SGLang's router (smg) routes to, as the router sees them
description:
  - Asks the router for its workers (C(GET /workers)) and returns each one's URL, status and health, and how many
    are healthy. Changes nothing.
version_added: "0.2.0"
author:
  - k26deploy maintainers (!UNKNOWN)
extends_documentation_fragment:
  - k26.deploy.sglang_router
  - k26.deploy.attributes
  - k26.deploy.attributes.changes_nothing
"""

EXAMPLES = r"""
- name: Ask the router which replicas it routes to
  k26.deploy.sglang_router_info:
    router_url: http://127.0.0.1:30080
    api_key: "{{ sglang_router_api_key }}"
  register: router_info
"""

RETURN = r"""
workers:
  description: The router's workers, in its order.
  returned: success
  type: list
  elements: dict
  sample: [{"id": "01a23229-b481-73ea-b4ef-13abc48579d9", "url": "http://10.0.0.11:30000", "status": "ready",
            "is_healthy": true}]
healthy:
  description: How many workers are healthy and ready.
  returned: success
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_client import ROUTER_ARGUMENT_SPEC, RouterClient
from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_workers import healthy_count, summary


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ROUTER_ARGUMENT_SPEC,
        ),
        supports_check_mode=True,
    )
    params = module.params
    client = RouterClient(params)
    entries, why = client.workers()
    if entries is None:
        module.fail_json(msg=why, workers=[], healthy=0)
    module.exit_json(changed=False, workers=summary(entries), healthy=healthy_count(entries))


if __name__ == '__main__':
    main()
