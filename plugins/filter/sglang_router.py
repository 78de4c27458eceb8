# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the sglang_router role: where the router reaches each SGLang replica."""

from urllib.parse import urlsplit

from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import open_endpoint_problem
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def replica_url(replica, endpoint=None):
    """The URL a router reaches one replica at: the scheme and port it serves (``endpoint``, by default its
    published one, which names a loopback address when it binds all of them) at its sglang_router_worker_address,
    else its ansible_host, else its inventory name."""
    name = replica.get("inventory_hostname")
    endpoint = endpoint or (replica.get("sglang_service_result") or {}).get("endpoint")
    if not endpoint:
        raise BadInputError("replica %s has no endpoint: deploy it (or ask its status) in the same run" % name)
    parts = urlsplit(endpoint)
    address = replica.get("sglang_router_worker_address") or replica.get("ansible_host") or name
    host = "[%s]" % address if ":" in address else address
    return "%s://%s:%s" % (parts.scheme, host, parts.port)


def serves_api(replica):
    """Whether a replica (a host's variables) serves SGLang's API: not a node of rank >= 1 of a multi-node instance
    (only rank 0 does; the others answer a dummy /health alone). The rank it published when deployed or checked in
    this run, else the inventory's: sglang_service_node_rank, else its place in sglang_service_instance_group."""
    published = (replica.get("sglang_service_result") or {}).get("node_rank")
    return int(published if published is not None else inventory_rank(replica)) == 0


def inventory_rank(replica):
    rank = replica.get("sglang_service_node_rank")
    if rank is not None:
        return rank
    members = (replica.get("groups") or {}).get(replica.get("sglang_service_instance_group") or "") or []
    name = replica.get("inventory_hostname")
    return members.index(name) if name in members else 0


def worker_urls(replicas):
    """The URLs of the replicas (each a host's variables) that serve the API, in inventory order."""
    return [replica_url(replica) for replica in replicas if serves_api(replica)]


def open_router_problem(host, api_key, allow_open):
    """Why the router may not bind `host` with `api_key` ('' when it may)."""
    return open_endpoint_problem(host, bool(api_key), bool(allow_open), "sglang_router_api_key",
                                 "sglang_router_allow_public_without_key") or ''


class FilterModule:
    def filters(self):
        return {"sglang_router_worker_urls": worker_urls, "sglang_router_worker_url": replica_url,
                "sglang_serves_api": serves_api,
                "sglang_router_open_problem": open_router_problem}
