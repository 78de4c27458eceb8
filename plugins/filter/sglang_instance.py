# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for multi-node model instances (plugins/module_utils/sglang_instance.py holds the logic)."""

from ansible_collections.k26.deploy.plugins.module_utils import sglang_instance, sglang_outcome
from ansible_collections.k26.deploy.plugins.module_utils.k26_preflight_rules import instance_findings, with_findings
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def instance_plan(host, group, hosts, explicit_ranks=None, addresses=None, port=20000, dist_init_addr='',
                  play_hosts=None):
    try:
        return sglang_instance.plan(host, group, hosts, explicit_ranks, addresses, port, dist_init_addr, play_hosts)
    except sglang_instance.InstanceError as exc:
        raise BadInputError(str(exc))


def instance_address(host_vars):
    """The address the other nodes reach a host at: its sglang_service_node_address, else the address of its
    default IPv4 route from its facts; '' when neither is known."""
    facts = host_vars.get("ansible_facts") or {}
    return host_vars.get("sglang_service_node_address") or (facts.get("default_ipv4") or {}).get("address") or ""


def instance_failure(nodes_vars):
    """The failure that speaks for an instance (see sglang_instance.failure), from its nodes' host variables: each
    with sglang_service_instance and the outcome of its deploy, sglang_service_outcome; None when every node came up."""
    return sglang_instance.failure([
        {"host": node["inventory_hostname"], "node_rank": node["sglang_service_instance"]["node_rank"],
         "wait": sglang_outcome.current(node.get("sglang_service_outcome"))} for node in nodes_vars])


def preflight_with_instance(result, group, nodes):
    """The preflight result with the instance's cross-node findings added."""
    return with_findings(result, instance_findings(group, nodes))


class FilterModule:
    def filters(self):
        return {
            "sglang_instance_plan": instance_plan,
            "sglang_instance_address": instance_address,
            "sglang_instance_failure": instance_failure,
            "sglang_instance_stopped_after_join": sglang_instance.stopped_after_join,
            "sglang_preflight_with_instance": preflight_with_instance,
        }
