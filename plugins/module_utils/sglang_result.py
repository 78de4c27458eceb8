# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one shape of a host's result: what the playbooks publish per host (the facts sglang_service_result and
sglang_router_result, and ansible-runner's artifact_data ``k26_hosts.<host>``) and what ``k26deploy.results``
reads back into ``HostResult``.

Each publisher gives the fields it knows (preflight only ``findings`` and ``simulator``; a router has ``workers``,
a replica ``layout``); every field it gives must be one of these, of this type or None. set_stats merges the
entries of one host across the plays of a run, so a field a play does not know is left out, not set to None.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

_NUMBER = (int, float)

#: name -> (accepted types, meaning). The order is the order a summary shows them in.
FIELDS = {
    'ready': (bool, 'the server answered /v1/models with the model and warmed up (a router: its replicas)'),
    'endpoint': (str, 'the base URL the server answers on'),
    'model_id': (str, 'the served model name'),
    'unit': (str, 'the systemd unit'),
    'reason': (str, "why it is not ready (sglang_ready's reasons, benchmark_gate, gpu_health, error); None when ready"),
    'msg': (str, 'one line for the operator'),
    'phase': (str, 'the last readiness phase seen (loading, http_up, ready ...)'),
    'model_ids': (list, 'the model ids /v1/models listed'),
    'restarts': (int, "the unit's restarts during the wait"),
    'timeline': (dict, 'seconds from the start of the wait to each phase'),
    'unit_state': (dict, "systemd's properties of the unit (ActiveState, SubState, NRestarts, InvocationID ...)"),
    'last_log_line': (str, 'the latest journal line of the unit'),
    'journal_excerpt': (list, "the journal lines that explain the state (the logs command: the run's journal)"),
    'time_to_ready': (_NUMBER, 'seconds the readiness wait took'),
    'restarted': (bool, 'this run restarted the service'),
    'rolled_back': (bool, 'a failed change was rolled back and the restored configuration serves'),
    'rollback_outcome': (str, "what the rollback did, in words ('' when none was needed)"),
    'left_out': (str, "why this replica was left out of its routers and not restarted (its GPUs' health); '' when "
                      'it was not'),
    'simulator': (bool, 'the server is the SGLang simulator, not SGLang'),
    'node_rank': (int, 'the rank of this node in its multi-node instance (0 serves the API)'),
    'instance': (str, "the multi-node instance's inventory group ('' for a single-node server)"),
    'node': (str, 'a failed instance: the node whose failure speaks for it'),
    'layout': (dict, 'the tensor and pipeline parallel sizes served and why (sglang_service_layout)'),
    'startup': (dict, 'the start this run caused: seconds to each phase (weights_loaded ... ready), the last good '
                      'start and the findings of a slower one'),
    'precompile': (dict, "the DeepGEMM precompile this run ran before its start: seconds, key, unit, reason, record"),
    'model': (dict, "the model's files on the host (the sglang_model role's sglang_model_state): source, staged, ready, "
                    'files, shards, total_bytes, digest, msg, prewarm'),
    'benchmark': (dict, "the benchmark sweep: levels, diagnosis, changes against the baseline, gate, files"),
    'findings': (list, 'preflight findings (deploy, preflight) or those of the running configuration (status)'),
    'workers': (list, 'a router: the replicas it routes to as it lists them (url, status, is_healthy)'),
    'guard': (dict, "the replica guard's word (sglang_guard_info): installed, verdict, why, held, canary_seconds, "
                    'incidents by verdict, last_incidents'),
}


class ResultError(ValueError):
    """A publisher gave a field the schema does not know, or a value of the wrong type."""


def check(fields):
    """``fields`` as a host result, or ResultError naming every field that is unknown or of the wrong type."""
    problems = []
    for name, value in fields.items():
        if name not in FIELDS:
            problems.append('%s is not a field of a host result' % name)
        elif value is not None and not _is_a(value, FIELDS[name][0]):
            problems.append('%s is %s, not %s' % (name, type(value).__name__, _type_name(FIELDS[name][0])))
    if problems:
        raise ResultError('a host result does not fit its schema: %s' % '; '.join(problems))
    return dict(fields)


def _is_a(value, types):
    if isinstance(value, bool) and types is not bool and bool not in (types if isinstance(types, tuple) else ()):
        return False
    return isinstance(value, types)


def _type_name(types):
    return ' or '.join(t.__name__ for t in types) if isinstance(types, tuple) else types.__name__
