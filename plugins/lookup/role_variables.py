# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup plugin role_variables: every variable the collection's roles take, from their argument specs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: role_variables
short_description: The variables the collection's roles take, read from each role's meta/argument_specs.yml
description:
  - Lists the options of every entry point of every role of this collection (its own C(roles/*/meta/argument_specs.yml),
    found beside the plugin, wherever the collection is installed), sorted and without repeats.
  - Preflight compares the variables set for a host with these (and the plays' own) to name a typo
    (C(K26-UNKNOWN-VARIABLE)); a role added to the collection is known without a list to keep.
version_added: "0.6.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  _terms:
    description: Roles to read (their names in the collection); none reads them all.
    type: list
    elements: str
    required: false
"""

EXAMPLES = r"""
- name: Every variable a role of k26.deploy takes
  ansible.builtin.debug:
    msg: "{{ lookup('k26.deploy.role_variables') }}"
"""

RETURN = r"""
_value:
  description: The variables' names, sorted.
  type: list
  elements: str
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.lookup import LookupBase

try:
    import yaml
except ImportError:  # ansible-core requires PyYAML; kept for ansible-test's import sanity test
    yaml = None

ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def role_variables(roles_dir, roles=None):
    """The options of every entry point of the roles under ``roles_dir`` (all of them, or those named)."""
    names = set()
    for role in sorted(roles or os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if not os.path.isfile(path):
            if roles:
                raise AnsibleLookupError("the collection has no role %s with argument specs (%s)" % (role, path))
            continue
        with open(path, encoding="utf-8") as handle:
            specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
        for entry in specs.values():
            names.update((entry or {}).get("options") or {})
    return sorted(names)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        roles = [to_text(term) for term in (terms or [])]
        return [role_variables(ROLES_DIR, roles)]
