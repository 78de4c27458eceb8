# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The replica guard's decisions: pure, no I/O (its program, roles/sglang_service/files/replica_guard.py, observes
and acts; this decides). Standard library only: the program runs it on the host with the system's python3.

One observation a tick: the unit (systemctl show), the canary (a one-token completion through the API key), the
scheduler's progress marker (gauges of its /metrics that move with every batch it runs), and the kernel's new NVIDIA
events on this replica's GPUs.
``decide`` turns it into a verdict and at most one action:

- ``healthy``: the canary answered (or it missed while the scheduler kept running batches: busy, not hung; a long
  prefill in chunks moves the KV cache's usage with each chunk, though no request finishes).
- ``starting`` / ``stopped``: no invocation that answered yet, or no process: never acted on (a long warm-up is
  SGLang's own watchdog's and the deploy's readiness gate's, never the guard's).
- ``hung``: ``hung_after`` canaries missed in a row by an invocation that answered before, the process alive, no
  token made meanwhile -> restart (the process killed, then started: a hung SGLang may never leave on SIGTERM).
- ``gpu_fault``: a kernel Xid on this replica's GPUs. NVIDIA's immediate action decides: RESET_GPU, RESTART_BM (or an
  Xid the catalog does not know) -> hold (stopped, out of the routing, never restarted into the same fault);
  RESTART_APP -> restart; IGNORE -> nothing.
- ``crash_loop``: systemd restarted the crashing process ``crash_loop_restarts`` times within the window, or gave
  up (start limit) -> hold.

Restarts are rate-limited: beyond ``max_restarts`` within ``window_seconds`` a restart becomes a hold, and says so.
A hold lasts until the unit runs an invocation the guard did not stop (an operator's start, a deploy).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

HEALTHY = 'healthy'
STARTING = 'starting'
STOPPED = 'stopped'
HUNG = 'hung'
GPU_FAULT = 'gpu_fault'
CRASH_LOOP = 'crash_loop'
#: every verdict, in the order the metrics and the status show them
VERDICTS = (HEALTHY, STARTING, STOPPED, HUNG, GPU_FAULT, CRASH_LOOP)

RESTART = 'restart'
HOLD = 'hold'

#: the policy's keys and their defaults (the role's sglang_service_guard_* variables set them)
POLICY_DEFAULTS = {
    'interval': 5.0,            # seconds between two ticks
    'canary_timeout': 10.0,     # a canary's deadline
    'hung_after': 3,            # canaries missed in a row
    'act_on_hung': True,
    'act_on_gpu_fault': True,
    'act_on_crash_loop': True,
    'max_restarts': 3,          # restarts by the guard ...
    'window_seconds': 3600.0,   # ... within this many seconds
    'crash_loop_restarts': 3,   # systemd's automatic restarts within window_seconds that make a crash loop
    'may_restart': True,        # false (an instance of several nodes, which start only together): hold instead
}

#: NVIDIA's immediate actions (nvidia_health.XID_CATALOG) and what the guard does about them
HOLD_ACTIONS = ('RESET_GPU', 'RESTART_BM', 'CONTACT_SUPPORT')
RESTART_ACTIONS = ('RESTART_APP',)


def policy_of(values):
    """The policy: POLICY_DEFAULTS with ``values`` on top, each of its default's type; ValueError names a bad one."""
    policy = dict(POLICY_DEFAULTS)
    for name, value in (values or {}).items():
        if name not in POLICY_DEFAULTS:
            raise ValueError('unknown guard policy key %r (known: %s)' % (name, ', '.join(sorted(POLICY_DEFAULTS))))
        kind = type(POLICY_DEFAULTS[name])
        if kind is bool and not isinstance(value, bool):
            raise ValueError('guard policy %s must be true or false, not %r' % (name, value))
        try:
            policy[name] = kind(value)
        except (TypeError, ValueError):
            raise ValueError('guard policy %s must be a number, not %r' % (name, value))
        if kind is not bool and policy[name] <= 0:
            raise ValueError('guard policy %s must be above 0, not %r' % (name, value))
    return policy


def initial_state():
    return {'invocation': '', 'answered': False, 'misses': 0, 'progress': None, 'restarts': [], 'auto_restarts': [],
            'n_restarts': None, 'held': '', 'held_invocation': '', 'verdict': STOPPED, 'recovering': None}


def kernel_message(entry):
    """The text of one ``journalctl -k -o json`` entry as dmesg shows it (what preflight reads): journald takes a
    "NAME: " prefix of a line written to /dev/kmsg by user space (root only) as its syslog identifier, the kernel's
    own lines carry the identifier "kernel". None for an entry without a message."""
    message = entry.get('MESSAGE')
    if isinstance(message, list):  # journald's form of a message that is not UTF-8
        message = bytes(value for value in message if isinstance(value, int) and 0 <= value < 256).decode(
            'utf-8', 'replace')
    if not isinstance(message, str):
        return None
    identifier = entry.get('SYSLOG_IDENTIFIER')
    if isinstance(identifier, str) and identifier and identifier != 'kernel':
        return '%s: %s' % (identifier, message)
    return message


def within(times, now, window):
    return [stamp for stamp in times if now - stamp < window]


def restart_allowed(state, policy, now):
    return len(within(state['restarts'], now, policy['window_seconds'])) < policy['max_restarts']


def gpu_action(events):
    """The guard's action for NVIDIA events on its GPUs: HOLD, RESTART or None, and the events that decide it."""
    holding = [event for event in events if event.get('kind') == 'Xid' and event.get('action') in HOLD_ACTIONS]
    if holding:
        return HOLD, holding
    restarting = [event for event in events if event.get('kind') == 'Xid' and event.get('action') in RESTART_ACTIONS]
    if restarting:
        return RESTART, restarting
    return None, []


def _progressed(state, progress):
    """Whether the scheduler ran a batch since the last tick: its progress marker changed."""
    return progress is not None and state.get('progress') is not None and progress != state['progress']


def _count_auto_restarts(state, unit, now):
    """Record systemd's automatic restarts (NRestarts grew) since the last tick; systemd counts from 0 again after a
    start by hand, and so does the guard."""
    try:
        count = int(unit.get('NRestarts') or 0)
    except ValueError:
        count = 0
    if state['n_restarts'] is not None and count > state['n_restarts']:
        state['auto_restarts'] = state['auto_restarts'] + [now] * (count - state['n_restarts'])
    elif state['n_restarts'] is not None and count < state['n_restarts'] and \
            unit.get('InvocationID') != state['invocation']:
        state['auto_restarts'] = []  # a start by hand (a deploy, an operator) counts systemd's restarts anew
    state['n_restarts'] = count


def _act(state, policy, now, verdict, action, why, invocation):
    """The decision (verdict, action, why) for an acting verdict, a restart beyond the budget (or where the policy
    allows none) held instead."""
    if action == RESTART and not policy['may_restart']:
        action = HOLD
        why = '%s; the nodes of this instance start only together: held instead of restarted' % why
    if action == RESTART and not restart_allowed(state, policy, now):
        action = HOLD
        why = '%s; the guard already restarted it %d times within %d s (max_restarts): held instead' % (
            why, len(within(state['restarts'], now, policy['window_seconds'])), policy['window_seconds'])
    if action == RESTART:
        state['restarts'] = within(state['restarts'], now, policy['window_seconds']) + [now]
        state['recovering'] = {'verdict': verdict, 'since': now}
    elif action == HOLD:
        state['held'] = verdict
        state['held_invocation'] = invocation
        state['recovering'] = None
    state['answered'] = False
    state['misses'] = 0
    state['verdict'] = verdict
    return verdict, action, why


def decide(state, obs, policy, now):
    """One tick: (verdict, action or None, why). Updates ``state`` in place.

    ``obs``: unit (systemctl show's properties: ActiveState, SubState, MainPID, InvocationID, NRestarts, Result),
    canary ({'ok': bool, 'error': str, 'latency': float} or None when not sent), progress (the scheduler's progress
    marker or None), events (nvidia_health events on this replica's GPUs, new since the last tick)."""
    unit = obs.get('unit') or {}
    if not unit.get('ActiveState'):  # systemctl show gave nothing: nothing is known, nothing changes
        return state['verdict'], None, 'systemd did not answer: the state is kept as it was'
    invocation = unit.get('InvocationID') or ''
    running = unit.get('ActiveState') == 'active' and unit.get('MainPID', '0') not in ('', '0')
    _count_auto_restarts(state, unit, now)

    if state['held']:
        if running and invocation and invocation != state['held_invocation']:
            state['held'] = ''  # started again by someone else: their decision
        else:
            state['verdict'] = state['held']
            return state['held'], None, 'held since the guard stopped it (%s): start it again once fixed' % (
                state['held'])

    action, deciding = gpu_action(obs.get('events') or [])
    if action:
        lines = '; '.join(event.get('line', '') for event in deciding)
        if not policy['act_on_gpu_fault']:
            state['verdict'] = GPU_FAULT
            return GPU_FAULT, None, 'kernel: %s (acting is off)' % lines
        if action == RESTART and not running:  # never starts what is not running (a deploy's precompile, a stop)
            state['verdict'] = GPU_FAULT
            return GPU_FAULT, None, 'kernel: %s (the server runs no process: nothing to restart)' % lines
        return _act(state, policy, now, GPU_FAULT, action, 'kernel: %s' % lines, invocation)

    crashes = within(state['auto_restarts'], now, policy['window_seconds'])
    state['auto_restarts'] = crashes
    gave_up = unit.get('ActiveState') == 'failed' and unit.get('Result') == 'start-limit-hit'
    if len(crashes) >= policy['crash_loop_restarts'] or gave_up:
        why = 'systemd restarted the crashing server %d times within %d s%s' % (
            len(crashes), policy['window_seconds'], ' and gave up (start limit)' if gave_up else '')
        state['auto_restarts'] = []  # said once; the crashes after it count anew
        if not policy['act_on_crash_loop'] or gave_up:
            state['verdict'] = CRASH_LOOP
            return CRASH_LOOP, None, why
        return _act(state, policy, now, CRASH_LOOP, HOLD, why, invocation)

    if invocation != state['invocation']:
        state.update(invocation=invocation, answered=False, misses=0, progress=None)
    progress = obs.get('progress')
    progressed = _progressed(state, progress)
    state['progress'] = progress
    if not running:
        state['verdict'] = STARTING if unit.get('ActiveState') == 'activating' else STOPPED
        return state['verdict'], None, 'the server runs no process (%s/%s)' % (
            unit.get('ActiveState', '?'), unit.get('SubState', '?'))

    canary = obs.get('canary')
    if canary and canary.get('ok'):
        state.update(answered=True, misses=0, verdict=HEALTHY)
        return HEALTHY, None, 'the canary answered in %.2f s' % (canary.get('latency') or 0.0)
    if not state['answered']:
        state['verdict'] = STARTING
        return STARTING, None, 'this start has not answered a canary yet (loading or warming up)'
    if progressed:
        state.update(misses=0, verdict=HEALTHY)
        return HEALTHY, None, 'the canary missed (%s) but the scheduler ran batches: busy, not hung' % (
            (canary or {}).get('error', 'not sent'))
    state['misses'] += 1
    why = '%d canaries missed in a row (last: %s) while the process %s lives and its scheduler ran no batch' % (
        state['misses'], (canary or {}).get('error', 'not sent'), unit.get('MainPID'))
    if state['misses'] < policy['hung_after']:
        state['verdict'] = HEALTHY
        return HEALTHY, None, why
    if not policy['act_on_hung']:
        state['verdict'] = HUNG
        return HUNG, None, why + ' (acting is off)'
    return _act(state, policy, now, HUNG, RESTART, why, invocation)


def recovered(state, verdict, now):
    """After a restart: the seconds it took to answer again, once (then forgotten); None before or without one."""
    recovering = state.get('recovering')
    if recovering and verdict == HEALTHY:
        state['recovering'] = None
        return now - recovering['since']
    return None


def metrics_text(service, state, canary_latency, incidents, now):
    """The guard's metrics in Prometheus's text format; ``now``: when the guard last looked (a guard that still
    serves its metrics but no longer looks shows an old time)."""
    lines = ['# HELP k26_guard_verdict The guard verdict of the replica (1 for the current one).',
             '# TYPE k26_guard_verdict gauge']
    for verdict in VERDICTS:
        current = 1 if state['verdict'] == verdict else 0
        lines.append('k26_guard_verdict{service="%s",verdict="%s"} %d' % (service, verdict, current))
    lines += ['# HELP k26_guard_canary_seconds Latency of the last canary that answered.',
              '# TYPE k26_guard_canary_seconds gauge',
              'k26_guard_canary_seconds{service="%s"} %s' % (service, repr(float(canary_latency or 0.0))),
              '# HELP k26_guard_incidents_total Incidents the guard recorded, by verdict.',
              '# TYPE k26_guard_incidents_total counter']
    for verdict in (HUNG, GPU_FAULT, CRASH_LOOP):
        lines.append('k26_guard_incidents_total{service="%s",verdict="%s"} %d' % (
            service, verdict, incidents.get(verdict, 0)))
    lines += ['# HELP k26_guard_last_look_timestamp_seconds When the guard last looked at the replica (Unix time).',
              '# TYPE k26_guard_last_look_timestamp_seconds gauge',
              'k26_guard_last_look_timestamp_seconds{service="%s"} %s' % (service, repr(float(now)))]
    return '\n'.join(lines) + '\n'


#: what a summary keeps of each incident record (its evidence only when asked)
INCIDENT_FIELDS = ('time', 'verdict', 'action', 'acted', 'why', 'invocation', 'action_seconds',
                   'recovered_after_seconds', 'operator')


def summary(state_text, incident_texts, last=5, evidence=False):
    """What the status shows of a guard: its verdict and why, since when, whether it holds the service, the last
    canary's latency, the incidents by verdict and the ``last`` records (oldest first), from the texts of its
    state.json and incidents/*.json (in name order: oldest first). {'installed': False} without a state."""
    try:
        state = json.loads(state_text) if state_text else None
    except ValueError:
        state = None
    if not isinstance(state, dict):
        return {'installed': False}
    records = []
    for text in incident_texts[-last:] if last > 0 else []:
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if isinstance(record, dict):
            kept = {name: record.get(name) for name in INCIDENT_FIELDS}
            if evidence:
                kept['evidence'] = record.get('evidence') or {}
            records.append(kept)
    return {'installed': True, 'verdict': state.get('verdict'), 'why': state.get('why'), 'time': state.get('time'),
            'held': state.get('held') or '', 'canary_seconds': state.get('canary_seconds'),
            'incidents': state.get('incidents') or {}, 'last_incidents': records}
