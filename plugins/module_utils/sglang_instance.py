# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Multi-node model instances: the nodes of one inventory group serve one model together (SGLang's --nnodes,
--node-rank, --dist-init-addr). Pure functions, shared by the filters of the sglang_service role.

- ``plan``: where one host stands in its instance (rank, nnodes, rank 0's address), or why it cannot;
- ``stopped_after_join``: a node of rank >= 1 that was ready, looked at again, and is gone;
- ``failure``: the one failure that speaks for an instance whose nodes did not all come up.
"""
from __future__ import annotations


class InstanceError(ValueError):
    """An instance that cannot start as the inventory describes it."""


def _ranks(group, hosts, explicit):
    """{host: rank}: explicit ranks where given, else the host's position in the group."""
    ranks = {}
    for position, host in enumerate(hosts):
        value = explicit.get(host)
        ranks[host] = position if value is None or value == '' else int(value)
    nnodes = len(hosts)
    wrong = sorted('%s=%s' % (host, rank) for host, rank in ranks.items() if not 0 <= rank < nnodes)
    if wrong:
        raise InstanceError('instance %s has %d node(s), so node ranks go from 0 to %d: %s'
                            % (group, nnodes, nnodes - 1, ', '.join(wrong)))
    if len(set(ranks.values())) != nnodes:
        taken = {}
        for host, rank in sorted(ranks.items()):
            taken.setdefault(rank, []).append(host)
        twice = '; '.join('rank %d: %s' % (rank, ', '.join(names)) for rank, names in sorted(taken.items())
                          if len(names) > 1)
        raise InstanceError('instance %s gives one node rank to several hosts (%s): set sglang_service_node_rank '
                            'on each host, or on none' % (group, twice))
    return ranks


def plan(host, group, hosts, explicit_ranks=None, addresses=None, port=20000, dist_init_addr='', play_hosts=None):
    """Where ``host`` stands in the instance of inventory group ``group`` (its ``hosts`` in inventory order).

    ``explicit_ranks`` and ``addresses`` map hosts to their sglang_service_node_rank and reachable address (None or
    empty where not set); ``dist_init_addr`` overrides rank 0's address and ``port``. Returns a dict: group, hosts
    (rank order), nnodes, node_rank, dist_init_addr. Raises InstanceError with what to fix."""
    hosts = list(hosts or [])
    if not hosts:
        raise InstanceError('sglang_service_instance_group is %r, but the inventory has no such group with hosts'
                            % group)
    if host not in hosts:
        raise InstanceError('%s names instance group %s but is not one of its hosts (%s)'
                            % (host, group, ', '.join(hosts)))
    if play_hosts is not None:
        missing = [name for name in hosts if name not in play_hosts]
        if missing:
            raise InstanceError('the nodes of instance %s start and roll back together, but %s %s not in this run: '
                                'run with all of %s (check --limit and k26_target_hosts)'
                                % (group, ', '.join(missing), 'is' if len(missing) == 1 else 'are', ', '.join(hosts)))
    ranks = _ranks(group, hosts, explicit_ranks or {})
    ordered = sorted(hosts, key=ranks.get)
    rank0 = ordered[0]
    if not dist_init_addr:
        address = (addresses or {}).get(rank0) or ''
        if not address:
            raise InstanceError('no address known for %s, rank 0 of instance %s: set sglang_service_node_address '
                                'for it (or sglang_service_dist_init_addr), or gather its facts' % (rank0, group))
        dist_init_addr = '%s:%d' % ('[%s]' % address if ':' in address else address, int(port))
    return {'group': group, 'hosts': ordered, 'nnodes': len(hosts), 'node_rank': ranks[host],
            'dist_init_addr': dist_init_addr}


def stopped_after_join(unit, now):
    """The wait of a node of rank >= 1 that was ready but, looked at again (``now``, a sglang_ready result), has
    stopped or restarted since: rank 0 cannot serve without it."""
    state = now.get('unit_state') or {}
    wait = dict(now)
    wait.update(ready=False, reason='unit_failed',
                msg='%s stopped after it had joined the instance (now %s/%s, NRestarts %s); see journal_excerpt' % (
                    unit, state.get('ActiveState', '?'), state.get('SubState', '?'), state.get('NRestarts', '?')))
    return wait


def failure(nodes):
    """The failure that speaks for an instance, or None when every node came up.

    ``nodes``: dicts host, node_rank, wait (a sglang_ready result). A node of rank >= 1 that failed is the cause
    when there is one (rank 0 ends itself when a peer dies); else rank 0's own failure. The result is that node's
    wait with a message that names the node."""
    failed = [node for node in nodes if not (node.get('wait') or {}).get('ready')]
    if not failed:
        return None
    cause = sorted(failed, key=lambda node: (int(node['node_rank']) == 0, int(node['node_rank'])))[0]
    wait = dict(cause.get('wait') or {})
    others = [node['host'] for node in failed if node is not cause]
    wait.update(
        ready=False,
        reason=wait.get('reason') or 'error',
        node=cause['host'],
        node_rank=int(cause['node_rank']),
        msg='node %s (rank %d) of the instance did not come up: %s%s' % (
            cause['host'], int(cause['node_rank']), wait.get('msg') or 'no readiness result',
            ' (also failed: %s)' % ', '.join(others) if others else ''),
    )
    return wait
