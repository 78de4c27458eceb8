# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The outcome of one run of the sglang_service role on one host: one record (the public fact
sglang_service_outcome), changed only through the transitions below (the filter k26.deploy.sglang_outcome), and
turned into the host's result (sglang_result's schema) by ``result``.

The record:

* ``wait``: the readiness wait of the configuration this run deployed or observed (a sglang_ready result);
* ``failure``: what failed, once something did: the wait itself, the instance's failure, the benchmark gate or any
  other task (ready false, reason, msg, journal_excerpt ...); a later wait never overwrites it;
* ``rollback``: what the rollback did: ``attempted``, ``ready``, ``msg``, and its own ``wait``;
* ``benchmark``: the benchmark sweep's result; ``benchmark_error``: why the sweep could not run;
* ``restarted``: this run restarted the service (None when not known);
* ``startup``: the start this run caused, as kept on the controller (phases, last good start, findings);
* ``precompile``: the DeepGEMM precompile this run ran before its start (seconds, key, unit);
* the run's own state, what a later step needs from an earlier one: ``invocation_before`` (the unit's InvocationID
  before this run's restart), ``restarts`` (this run's files changed: it restarts the service; the other nodes of a
  multi-node instance read it too), ``retired`` (the services this run retires, as they were: ``name``, ``found``,
  ``was_running``, ``was_enabled``) and ``left_routers`` (the replica is out of its routers);
* ``left_out``: why this run left the replica out of its routers instead of changing it (its GPUs' health).

Every transition returns a new record; the one it is given may be None (a run that has not started one).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.k26.deploy.plugins.module_utils import sglang_result
from ansible_collections.k26.deploy.plugins.module_utils.systemd_unit_values import running


class OutcomeError(ValueError):
    """A transition the record cannot take."""


def start(invocation_before=None, restarts=False):
    """A fresh record for a run whose unit had the InvocationID ``invocation_before`` before it ('' when it had
    none, None when not known), and which restarts the service when ``restarts`` (its files changed)."""
    return {'wait': None, 'failure': None, 'rollback': None, 'benchmark': None, 'benchmark_error': '',
            'restarted': None, 'startup': None, 'precompile': None,
            'invocation_before': invocation_before, 'restarts': bool(restarts), 'retired': [],
            'left_routers': False, 'left_out': ''}


def _next(outcome, **changes):
    record = start()
    record.update(outcome or {})
    record.update(changes)
    return record


def current(outcome):
    """The wait that speaks for the host now: its failure once there is one, else its wait."""
    outcome = outcome or {}
    return outcome.get('failure') or outcome.get('wait') or None


def _clean(wait):
    """A sglang_ready result without the module's arguments and Ansible's own keys."""
    return dict((key, value) for key, value in (wait or {}).items()
                if key not in ('invocation', 'changed', 'failed') and not key.startswith('_ansible'))


def waited(outcome, wait):
    """The readiness wait of the configuration this run deployed."""
    return _next(outcome, wait=dict(_clean(wait), observed=False))


def observed(outcome, wait):
    """One look at the service (status, logs, bench, a rollback with nothing to restore): no time to ready."""
    return _next(outcome, wait=dict(_clean(wait), observed=True))


def failed(outcome, failure):
    """``failure`` (a failed wait, the instance's failure) speaks for the host from now on."""
    failure = _clean(failure)
    failure.update(ready=False, reason=failure.get('reason') or 'error')
    return _next(outcome, failure=failure)


def rescued(outcome, failed_result):
    """A task of the deploy failed (``failed_result``: Ansible's ansible_failed_result). The failure that was
    recorded stays; else the wait speaks when it is the one that failed; else the failed task does."""
    if (outcome or {}).get('failure'):
        return _next(outcome)
    wait = (outcome or {}).get('wait')
    if wait and not wait.get('ready'):
        return failed(outcome, wait)
    task = failed_result or {}
    return failed(outcome, {'msg': task.get('msg') or 'a task of the deploy failed',
                            'reason': task.get('reason_code') or 'error',
                            'journal_excerpt': task.get('journal_excerpt') or []})


def benchmarked(outcome, benchmark, error='', gate_fails=True):
    """The benchmark sweep's result (None when it could not run, with ``error`` saying why). With ``gate_fails``, a
    sweep slower than the gate allows is the host's failure."""
    record = _next(outcome, benchmark=benchmark or None, benchmark_error=error or '')
    message = gate_failure(record)
    if gate_fails and message:
        record = failed(record, {'reason': 'benchmark_gate', 'journal_excerpt': [], 'msg': message})
    return record


def sweep_failed(outcome, task_name, failed_result):
    """The benchmark sweep could not run (``task_name`` and ``failed_result``: Ansible's ansible_failed_task.name
    and ansible_failed_result of the sweep's task that failed): reported as benchmark_error, not the host's failure,
    for the service serves."""
    task = failed_result or {}
    error = 'the benchmark could not run (%s): %s %s' % (
        '?' if task_name is None else task_name, task.get('msg', ''),
        ' | '.join(str(line) for line in (task.get('stderr_lines') or [])[-6:]))
    return benchmarked(outcome, None, error)


def gate_failure(outcome):
    """The message of a benchmark gate that failed, '' when it passed or did not run."""
    gate = ((outcome or {}).get('benchmark') or {}).get('gate') or {}
    return 'the benchmark gate failed: %s' % gate.get('msg', '') if gate.get('passed') is False else ''


def rollback_skipped(outcome, store):
    """No rollback: ``store`` (sglang_rollback_store's result) says why."""
    if store.get('untrusted'):
        msg = ("not attempted: the rollback store is not root's alone, so root will not restore from it (%s); check "
               "its files and fix its owner and mode by hand" % store['untrusted'])
    elif not store.get('can_roll_back'):
        msg = 'not attempted: no configuration of this host has reached ready yet'
    else:
        msg = 'not attempted: the live configuration is already the last one that reached ready'
    return _next(outcome, rollback={'attempted': False, 'ready': False, 'msg': msg, 'wait': None})


def rolled_back(outcome, wait):
    """The saved configuration was restored and restarted; ``wait`` is its readiness wait."""
    wait = _clean(wait)
    if wait.get('ready'):
        msg = 'restored the previous configuration; it is serving again after %.1fs' % float(wait.get('elapsed') or 0)
    else:
        msg = 'restored the previous configuration but it did not come up either: %s' % (wait.get('msg') or '')
    return _next(outcome, rollback={'attempted': True, 'ready': bool(wait.get('ready')), 'msg': msg, 'wait': wait})


def _latest_wait(outcome):
    """The last readiness wait of the deploy: the rollback's when one ran, else the deploy's own."""
    rollback = outcome.get('rollback') or {}
    return (rollback.get('wait') if rollback.get('attempted') else None) or outcome.get('wait') or {}


def restarted(outcome, invocation_before=None):
    """The service's InvocationID before the restart (``invocation_before``; by default the one the record started
    with), against the one sglang_ready saw last: a different one means this run restarted it."""
    if invocation_before is None:
        invocation_before = (outcome or {}).get('invocation_before') or ''
    after = (_latest_wait(outcome).get('unit_state') or {}).get('InvocationID', '')
    return _next(outcome, restarted=invocation_before != after)


def retiring(outcome, results):
    """The services this run retires, as they were before it stopped them (``results``: the loop's results of
    ansible.builtin.systemd_service, one per service; a service systemd did not find has no ``status``)."""
    retired = []
    for item in (results or {}).get('results') or []:
        status = item.get('status')
        retired.append({'name': item.get('item'), 'found': status is not None,
                        'was_running': running(status),
                        'was_enabled': (status or {}).get('UnitFileState', '') == 'enabled'})
    return _next(outcome, retired=retired)


def left_routers(outcome, left):
    """The replica left its routers (``left`` true) or is back in them."""
    return _next(outcome, left_routers=bool(left))


def started_up(outcome, startup):
    """The start this run caused, as sglang_startup_record kept it (its phases, the last good start, the findings
    of a slower one); with no start, the host's newest recorded one."""
    return _next(outcome, startup=startup or None)


def precompiled(outcome, precompile):
    """The DeepGEMM precompile this run ran before its start (sglang_deepgemm_precompile's result)."""
    keep = ('seconds', 'key', 'unit', 'reason', 'record')
    return _next(outcome, precompile=dict((name, (precompile or {}).get(name)) for name in keep))


def left_out(outcome, why, routers):
    """The replica was taken out of ``routers`` (the hosts of the routers that serve; none when no router serves
    in front of it) and is not changed: ``why`` (its GPUs' health) is its failure."""
    where = 'left out of its routers (%s) and ' % ', '.join(routers) if routers else ''
    msg = '%snot restarted, so as not to start it again on the same fault: %s' % (where, why)
    return failed(_next(outcome, left_out=msg), {'reason': 'gpu_health', 'journal_excerpt': [], 'msg': msg})


_FROM_WAIT = ('reason', 'phase', 'model_ids', 'restarts', 'timeline', 'unit_state', 'last_log_line',
              'journal_excerpt', 'node')
_WAIT_DEFAULTS = {'model_ids': [], 'restarts': 0, 'timeline': {}, 'unit_state': {}, 'last_log_line': '',
                  'journal_excerpt': []}


def _speaking_wait(outcome):
    """The wait the result reports: the failure; else the rollback's wait when a rollback ran; else the wait."""
    return outcome.get('failure') or _latest_wait(outcome)


def _message(outcome, wait):
    if outcome.get('failure'):
        return outcome['failure'].get('msg') or ''
    return outcome.get('benchmark_error') or gate_failure(outcome) or (outcome.get('rollback') or {}).get('msg') \
        or wait.get('msg') or ''


def _time_to_ready(outcome):
    wait = outcome.get('wait') or {}
    if outcome.get('failure') or wait.get('observed', True) or not wait.get('ready'):
        return None
    return wait.get('elapsed')


def result(outcome, service, extra=None):
    """The host's result (sglang_result's schema) from the record and ``service``: what the role knows of the
    service itself (endpoint, model_id, unit, node_rank, instance, layout, simulator). ``extra`` (fields of the
    schema a caller adds, e.g. status's findings, logs' journal_excerpt) wins."""
    outcome = _next(outcome)
    wait = _speaking_wait(outcome)
    rollback = outcome.get('rollback') or {}
    fields = dict((name, wait.get(name, _WAIT_DEFAULTS.get(name))) for name in _FROM_WAIT)
    fields.update(service)
    fields.update(
        ready=bool(wait.get('ready')) and not outcome.get('failure'),
        msg=_message(outcome, wait),
        time_to_ready=_time_to_ready(outcome),
        restarted=outcome.get('restarted'),
        rolled_back=bool(rollback.get('ready')),
        rollback_outcome=rollback.get('msg') or '',
        benchmark=outcome.get('benchmark'),
        startup=outcome.get('startup') or wait.get('startup') or None,
        precompile=outcome.get('precompile'),
        left_out=outcome.get('left_out') or '',
    )
    fields.update(extra or {})
    return sglang_result.check(fields)


TRANSITIONS = {
    'start': lambda outcome, *args, **kwargs: start(*args, **kwargs),
    'waited': waited,
    'observed': observed,
    'failed': failed,
    'rescued': rescued,
    'benchmarked': benchmarked,
    'rollback_skipped': rollback_skipped,
    'rolled_back': rolled_back,
    'restarted': restarted,
    'started_up': started_up,
    'precompiled': precompiled,
    'sweep_failed': sweep_failed,
    'retiring': retiring,
    'left_routers': left_routers,
    'left_out': left_out,
}


def transition(outcome, name, *args, **kwargs):
    """Apply the transition ``name`` (one of TRANSITIONS) to ``outcome``."""
    if name not in TRANSITIONS:
        raise OutcomeError('%s is not a transition of an outcome (%s)' % (name, ', '.join(sorted(TRANSITIONS))))
    return TRANSITIONS[name](outcome, *args, **kwargs)
