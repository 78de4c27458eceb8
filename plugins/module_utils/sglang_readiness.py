# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure logic of the sglang_ready module: no I/O, no clock, no Ansible objects.

What lives here:
  * parsing ``systemctl show`` output and classifying a unit's state,
  * the readiness state machine (``advance``): one observation plus the carried
    state in, a decision (keep waiting in a phase, or done with a reason) out,
  * journal handling: decoding ``journalctl -o json`` lines and choosing the
    excerpt (error lines and tracebacks first, then the tail),
  * the one-line human ``msg`` for every reason.

The carried state is a plain JSON-serialisable dict so that the action plugin
can pass it between module runs (slices) unchanged.
"""

from __future__ import annotations

import json
import re
from collections import namedtuple

from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import printable, redact_log_line

# --------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------

REASONS = (
    'ready', 'unit_failed', 'crash_loop', 'unit_inactive', 'unit_missing',
    'auth_failed', 'model_mismatch', 'warmup_failed', 'timeout', 'check_mode',
)

# Phases, in the order a healthy start-up goes through them.
PHASE_STARTING = 'starting'      # unit not (yet) running: queued start job, missing, inactive
PHASE_LOADING = 'loading'        # unit running, HTTP port closed (weights, CUDA graphs)
PHASE_RESTARTING = 'restarting'  # process died, systemd is restarting it (within max_restarts)
PHASE_HTTP_UP = 'http_up'        # /v1/models answers (expected id not listed yet)
PHASE_WARMING = 'warming'        # /v1/models lists the model, warm-up not done yet
PHASE_READY = 'ready'
# The phases that are recorded in the timeline (only when reached).
TIMELINE_PHASES = ('loading', 'http_up', 'warm', 'ready')

UNIT_PROPERTIES = (
    'Id', 'LoadState', 'LoadError', 'ActiveState', 'SubState', 'Result', 'Restart',
    'NRestarts', 'MainPID', 'ExecMainPID', 'ExecMainCode', 'ExecMainStatus',
    'InvocationID', 'ExecMainStartTimestamp', 'ExecMainStartTimestampMonotonic', 'ExecMainExitTimestamp',
    'ActiveEnterTimestamp', 'ActiveExitTimestamp', 'InactiveEnterTimestamp',
    'InactiveExitTimestamp', 'StateChangeTimestamp', 'FragmentPath', 'UnitFileState', 'Job',
)

# Unit classes returned by classify_unit().
U_MISSING = 'missing'            # LoadState not-found / masked, or systemctl could not tell
U_BROKEN = 'broken'              # LoadState bad-setting / error: the unit file cannot start
U_FAILED = 'failed'
U_ACTIVE = 'active'              # active or reloading
U_ACTIVATING = 'activating'      # start-pre, start, start-post ...
U_RESTART_PENDING = 'restart_pending'  # process died; systemd will restart it
U_DEACTIVATING = 'deactivating'  # stopping, and systemd will not restart it
U_INACTIVE = 'inactive'          # inactive/dead or a state we do not know

# SubStates of a service whose process died and whose restart is scheduled but
# not yet counted in NRestarts (systemd increments NRestarts when the restart
# job is queued: at the end of RestartSec; from v254 that state is
# "auto-restart-queued", which is already counted).
PENDING_RESTART_SUBSTATES = ('auto-restart',)

# ExecMainCode values (siginfo si_code of the main process' exit).
CLD_EXITED, CLD_KILLED, CLD_DUMPED = 1, 2, 3

SIGNAL_NAMES = {
    1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 4: 'SIGILL', 6: 'SIGABRT', 7: 'SIGBUS',
    8: 'SIGFPE', 9: 'SIGKILL', 11: 'SIGSEGV', 13: 'SIGPIPE', 15: 'SIGTERM',
}

# Warm-up probes.
PROBE_READY = 'ready'                    # GET /ready  (SGLang > 0.5.18): instant
PROBE_HEALTH_GENERATE = 'health_generate'  # GET /health_generate: >= 1 s per call
PROBE_READINESS = 'readiness'            # GET /readiness: SGLang's router (smg), 200 once it has healthy workers
PROBE_AUTO = 'auto'                      # /ready, and /health_generate where /ready answers 404
WARMUP_PATHS = {PROBE_READY: '/ready', PROBE_HEALTH_GENERATE: '/health_generate', PROBE_READINESS: '/readiness'}
WARMUP_PROBES = (PROBE_AUTO,) + tuple(WARMUP_PATHS)
HEALTH_GENERATE_MIN_PERIOD = 1.0         # seconds between two /health_generate calls

# A progress record (one JSON line the action plugin appends to $K26DEPLOY_PROGRESS_FILE during a long wait;
# k26deploy's live view and results read it).
PROGRESS_RECORD_FIELDS = ('host', 'unit', 'elapsed', 'phase', 'last_log_line', 'restarts', 'time')

# Journal excerpt bounds.
MAX_ERROR_LINES = 60
MAX_LINE_CHARS = 1000
MAX_MSG_DETAIL_CHARS = 200

ERROR_RE = re.compile(r'Error|Exception|CUDA|OOM|out of memory|FAILURE')
TRACEBACK_START = 'Traceback (most recent call last):'
# Access-log lines of health/readiness probes (ours at 4 Hz among them): noise in a tail.
PROBE_ACCESS_RE = re.compile(
    r'"(GET|HEAD) /(v1/models|ready|health_generate|health|model_info|server_info|metrics)\b[^"]*" \d{3}')
# systemd's own lines about the unit: useful in the excerpt, useless as "the error".
SYSTEMD_BOILERPLATE_RE = re.compile(
    r'Main process exited|Failed with result|Scheduled restart job|Start request repeated'
    r'|Failed to start|Control process exited|Unit entered failed state|Consumed .* CPU time')


Settings = namedtuple('Settings', [
    'unit', 'url', 'model', 'require_warmup', 'timeout', 'max_restarts',
    'startup_grace', 'model_mismatch_grace', 'warmup_timeout', 'warmup_probe', 'worker',
], defaults=(PROBE_AUTO, False))

Decision = namedtuple('Decision', ['done', 'reason', 'phase'])


def settings_from_params(params):
    """Build Settings from a module's params dict."""
    settings = dict((name, params.get(name)) for name in Settings._fields)
    settings['warmup_probe'] = settings['warmup_probe'] or PROBE_AUTO
    settings['worker'] = bool(settings['worker'])
    return Settings(**settings)


def falls_back(settings, probe, result):
    """Whether a warm-up result means: this SGLang has no /ready, ask /health_generate instead."""
    return (settings.warmup_probe == PROBE_AUTO and probe == PROBE_READY
            and result.get('kind') == 'http' and result.get('status') == 404)


# --------------------------------------------------------------------------
# systemctl show
# --------------------------------------------------------------------------

def parse_systemctl_show(text):
    """Parse ``systemctl show`` output (KEY=VALUE lines) into a dict of strings.

    Values may contain '='; lines without '=' are ignored.  If a unit's block
    repeats (several units shown), the last value wins.
    """
    props = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        if sep and key.strip():
            props[key.strip()] = value.strip()
    return props


def int_prop(props, name, default=0):
    """An integer property, ``default`` when absent or not a number."""
    try:
        return int(props.get(name, ''))
    except (TypeError, ValueError):
        return default


def would_restart(props):
    """Whether systemd's Restart= policy restarts the service after its current stop."""
    policy = props.get('Restart', 'no')
    result = props.get('Result', 'success')
    if policy == 'always':
        return True
    if policy == 'on-success':
        return result == 'success'
    if policy == 'on-failure':
        return result != 'success'
    if policy == 'on-abnormal':
        return result in ('signal', 'core-dump', 'watchdog', 'timeout')
    if policy == 'on-abort':
        return result in ('signal', 'core-dump')
    if policy == 'on-watchdog':
        return result == 'watchdog'
    return False


def classify_unit(props):
    """Reduce a unit's properties to one of the U_* classes."""
    load = props.get('LoadState', '')
    active = props.get('ActiveState', '')
    sub = props.get('SubState', '')
    if not props or load in ('', 'not-found', 'masked'):
        # A masked or missing unit that is still running keeps its state.
        if active not in ('active', 'activating', 'reloading', 'deactivating'):
            return U_MISSING
    if load in ('bad-setting', 'error') and active in ('inactive', 'failed', ''):
        return U_BROKEN
    if active == 'failed':
        return U_FAILED
    if active in ('active', 'reloading'):
        return U_ACTIVE
    if active == 'activating':
        return U_RESTART_PENDING if sub in PENDING_RESTART_SUBSTATES else U_ACTIVATING
    if active == 'deactivating':
        return U_RESTART_PENDING if would_restart(props) else U_DEACTIVATING
    return U_INACTIVE


def wants_http(unit_class):
    """HTTP is only worth probing while a process may be serving."""
    return unit_class in (U_ACTIVE, U_ACTIVATING)


def describe_unit(props):
    """'failed (failed), result exit-code' style short description."""
    text = '%s (%s)' % (props.get('ActiveState') or 'unknown', props.get('SubState') or 'unknown')
    result = props.get('Result')
    if result and result != 'success':
        text += ', result %s' % result
    return text


def describe_exit(props):
    """The main process' exit in words, or '' when unknown."""
    code = int_prop(props, 'ExecMainCode', 0)
    status = int_prop(props, 'ExecMainStatus', 0)
    result = props.get('Result', '')
    if result == 'oom-kill':
        return 'killed by the kernel OOM killer'
    if code == CLD_EXITED:
        return 'exit status %d' % status
    if code in (CLD_KILLED, CLD_DUMPED):
        name = SIGNAL_NAMES.get(status, 'signal %d' % status)
        return ('killed by %s' % name) if code == CLD_KILLED else ('dumped core on %s' % name)
    return ''


# --------------------------------------------------------------------------
# HTTP observations
# --------------------------------------------------------------------------
# An HTTP result is a dict produced by the probe:
#   {'path': '/v1/models', 'kind': 'ok'|'http'|'refused'|'reset'|'timeout'|'error',
#    'status': int or None, 'body': parsed JSON or None, 'error': str}

def http_result(path, kind, status=None, body=None, error=''):
    """Build an HTTP result dict (used by the probe and by tests)."""
    return {'path': path, 'kind': kind, 'status': status, 'body': body, 'error': error}


def is_auth_failure(result):
    return bool(result) and result.get('kind') == 'http' and result.get('status') in (401, 403)


def describe_http(result):
    """'HTTP 503', 'connection refused' ... for messages."""
    if not result:
        return 'not probed'
    kind = result.get('kind')
    if kind in ('ok', 'http'):
        return 'HTTP %s' % result.get('status')
    if kind == 'refused':
        return 'connection refused'
    if kind == 'reset':
        return 'connection reset'
    if kind == 'timeout':
        return 'timed out'
    return 'error: %s' % (result.get('error') or 'unknown')


def model_ids_from(body):
    """The model ids of an OpenAI ``/v1/models`` body, None if it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get('data'), list):
        return None
    return [str(item['id']) for item in body['data'] if isinstance(item, dict) and 'id' in item]


def models_match(ids, expected):
    """Whether the listed ids satisfy the expectation (any id when none is expected)."""
    if ids is None:
        return False
    if expected:
        return expected in ids
    return len(ids) > 0


# --------------------------------------------------------------------------
# The state machine
# --------------------------------------------------------------------------

def new_state(started_at, started_mono):
    """The carried state at the start of a wait."""
    return {
        'started_at': started_at,      # epoch seconds (for humans and progress records)
        'started_mono': started_mono,  # CLOCK_MONOTONIC (system-wide on Linux): elapsed across slices
        'phase': PHASE_STARTING,
        'timeline': {},
        'nrestarts_base': None,        # NRestarts at the start of the wait
        'nrestarts_last': None,
        'restarts_counted': 0,         # NRestarts increments seen during the wait
        'restarts_extra': 0,           # crashes seen pending whose increment predates the wait
        'pending_restart': None,       # [InvocationID, NRestarts when first seen pending]
        'restarts': 0,                 # what the wait reports (never decreases)
        'invocation_ids': [],
        'current_invocation': None,
        'was_active': False,
        'since': {},                   # first-seen elapsed of conditions with a grace
        'http_up_at': None,            # elapsed when /v1/models first answered, this invocation
        'model_ids': [],
        'models_ok_for': None,         # InvocationID whose /v1/models listed the expected model
        'warmup_probe': None,
        'warmup_last': None,           # describe_http() of the last warm-up probe
        'last_probe_at': None,         # elapsed of the last /health_generate call
        'last_http_error': '',
        'unit_error': '',
    }


def track_invocation(state, props):
    """Remember every InvocationID seen; reset per-process facts when it changes."""
    inv = props.get('InvocationID', '')
    if not inv:
        return
    if inv not in state['invocation_ids']:
        state['invocation_ids'].append(inv)
    if inv != state['current_invocation']:
        if state['current_invocation'] is not None:
            state['http_up_at'] = None
            state['since'].pop('mismatch', None)
            state['last_probe_at'] = None
        state['current_invocation'] = inv


def count_restarts(state, props, unit_class):
    """Crashes since the wait began, each counted once, returned and kept in state['restarts'].

    restarts = NRestarts growth during the wait
             + crashes seen pending (process dead, restart scheduled) whose NRestarts
               increment happened before the wait began (seen when the invocation ends)
             + 1 while the current invocation's restart is pending and not yet in NRestarts.

    systemd increments NRestarts when the restart job is queued, at the end of RestartSec
    (in v252 while the SubState is still auto-restart); a pending restart is remembered
    with the NRestarts value it was first seen with, so that it is not counted twice.
    NRestarts can go down (systemctl reset-failed, a stop then start): a decrease is a new baseline.
    """
    if 'NRestarts' not in props:
        return state['restarts']
    current = int_prop(props, 'NRestarts', 0)
    inv = props.get('InvocationID', '')
    last = state['nrestarts_last']
    if state['nrestarts_base'] is None:
        state['nrestarts_base'] = current
    if last is not None and current > last:
        state['restarts_counted'] += current - last
    state['nrestarts_last'] = current
    pending = state['pending_restart']
    if pending is not None and (unit_class != U_RESTART_PENDING or pending[0] != inv):
        # That crash's pending period is over: if NRestarts never grew past the value it
        # was first seen with, its increment predates the wait (or never came): count it here.
        if current <= pending[1]:
            state['restarts_extra'] += 1
        pending = state['pending_restart'] = None
    if unit_class == U_RESTART_PENDING and pending is None:
        pending = state['pending_restart'] = [inv, current]
    uncounted = 1 if pending is not None and current <= pending[1] else 0
    state['restarts'] = max(state['restarts'],
                            state['restarts_counted'] + state['restarts_extra'] + uncounted)
    return state['restarts']


def _mark(state, phase, elapsed):
    """Record a timeline phase (first time only)."""
    state['timeline'].setdefault(phase, round(elapsed, 3))


def _set_phase(state, phase, elapsed):
    state['phase'] = phase
    if phase in TIMELINE_PHASES:
        _mark(state, phase, elapsed)


def _grace_expired(state, key, elapsed, grace):
    first = state['since'].setdefault(key, elapsed)
    return elapsed - first >= grace


def _wait(state, phase, elapsed):
    _set_phase(state, phase, elapsed)
    return Decision(False, None, phase)


def _done(state, reason):
    return Decision(True, reason, state['phase'])


def advance_unit(state, props, unit_class, elapsed, settings):
    """Decide on the unit's state alone; None when HTTP has to be looked at."""
    restarts = count_restarts(state, props, unit_class)
    if restarts > settings.max_restarts:
        return _done(state, 'crash_loop')
    if unit_class == U_FAILED:
        return _done(state, 'unit_failed')
    if unit_class == U_BROKEN:
        state['unit_error'] = props.get('LoadError', '') or 'LoadState=%s' % props.get('LoadState')
        return _done(state, 'unit_failed')
    if unit_class in (U_MISSING, U_INACTIVE, U_DEACTIVATING):
        if state['was_active']:
            # It ran during this wait and its process is gone (or going) for good.
            return _done(state, 'unit_failed' if props.get('Result', 'success') != 'success' else
                         ('unit_missing' if unit_class == U_MISSING else 'unit_inactive'))
        if unit_class == U_DEACTIVATING and props.get('Result', 'success') != 'success':
            return _done(state, 'unit_failed')
        # Only a queued start job may still bring it up: without one (and systemctl said so) it is final now.
        if 'Job' in props and not props['Job'] and unit_class != U_DEACTIVATING:
            return _done(state, 'unit_missing' if unit_class == U_MISSING else 'unit_inactive')
        if _grace_expired(state, 'not_started', elapsed, settings.startup_grace):
            return _done(state, 'unit_missing' if unit_class == U_MISSING else 'unit_inactive')
        return _wait(state, PHASE_STARTING, elapsed)
    state['since'].pop('not_started', None)
    if unit_class == U_ACTIVE:
        state['was_active'] = True
    if unit_class == U_RESTART_PENDING:
        return _wait(state, PHASE_RESTARTING, elapsed)
    return None


def models_known(state, props):
    """Whether /v1/models already listed the expected model for the running invocation
    (a process does not change its model: no need to ask again)."""
    inv = props.get('InvocationID', '')
    return bool(inv) and state.get('models_ok_for') == inv


def advance_models(state, models, elapsed, settings):
    """Decide on the /v1/models result; None when it lists the expected model."""
    if models is None and state['current_invocation'] and state.get('models_ok_for') == state['current_invocation']:
        return None
    if models is None or models.get('kind') in ('refused', 'reset', 'timeout'):
        # Port closed while the unit runs: still loading.  If HTTP was up in this
        # process, systemd will tell us in a moment what happened.
        return _wait(state, state['phase'] if state['http_up_at'] is not None else PHASE_LOADING, elapsed)
    if is_auth_failure(models):
        state['last_http_error'] = 'HTTP %s from %s' % (models.get('status'), models.get('path'))
        _set_phase(state, PHASE_HTTP_UP, elapsed)
        return _done(state, 'auth_failed')
    ids = model_ids_from(models.get('body')) if models.get('kind') == 'ok' else None
    if ids is None:
        state['last_http_error'] = '%s from %s' % (
            describe_http(models) if models.get('kind') != 'ok' else 'unexpected body', models.get('path'))
        return _wait(state, state['phase'] if state['http_up_at'] is not None else PHASE_LOADING, elapsed)
    state['model_ids'] = ids
    state['last_http_error'] = ''
    if state['http_up_at'] is None:
        state['http_up_at'] = elapsed
    _mark(state, 'http_up', elapsed)
    if not models_match(ids, settings.model):
        state['phase'] = PHASE_HTTP_UP
        if _grace_expired(state, 'mismatch', elapsed, settings.model_mismatch_grace):
            return _done(state, 'model_mismatch')
        return _wait(state, PHASE_HTTP_UP, elapsed)
    state['since'].pop('mismatch', None)
    state['models_ok_for'] = state['current_invocation']
    return None


def advance_warmup(state, warmup, elapsed, settings):
    """Decide on the warm-up probe's result; None when warm."""
    state['phase'] = PHASE_WARMING
    if warmup is not None:
        probe = warmup.get('probe') or warmup_probe_of(state, settings)
        state['warmup_probe'] = probe
        state['warmup_last'] = describe_http(warmup)
        if probe == PROBE_HEALTH_GENERATE:
            state['last_probe_at'] = warmup.get('started', elapsed)
        if falls_back(settings, probe, warmup):
            state['warmup_probe'] = PROBE_HEALTH_GENERATE  # SGLang without /ready
        elif is_auth_failure(warmup):
            state['last_http_error'] = 'HTTP %s from %s' % (warmup.get('status'), warmup.get('path'))
            return _done(state, 'auth_failed')
        elif warmup.get('kind') == 'ok':
            _mark(state, 'warm', elapsed)
            return None
    if elapsed - state['http_up_at'] >= settings.warmup_timeout:
        return _done(state, 'warmup_failed')
    return _wait(state, PHASE_WARMING, elapsed)


def advance_worker_health(state, health, elapsed):
    """A node with --node-rank >= 1 serves no API, only a dummy health server once it joined and loaded: None
    when its /health answers 200."""
    if health is None or health.get('kind') != 'ok':
        if health is not None and health.get('kind') not in ('refused', 'reset', 'timeout'):
            state['last_http_error'] = '%s from %s' % (describe_http(health), health.get('path'))
        return _wait(state, state['phase'] if state['http_up_at'] is not None else PHASE_LOADING, elapsed)
    state['last_http_error'] = ''
    if state['http_up_at'] is None:
        state['http_up_at'] = elapsed
    _mark(state, 'http_up', elapsed)
    return None


def advance(state, obs, settings):
    """One step of the readiness state machine.

    ``obs`` is a dict: ``elapsed`` (seconds since the wait began), ``unit`` (the
    ``systemctl show`` properties), ``models`` and ``warmup`` (HTTP results or
    None when not probed; with ``settings.worker`` only ``health``, the result of
    GET /health).  ``state`` is updated in place.  Returns a Decision.
    """
    elapsed = obs['elapsed']
    props = obs.get('unit') or {}
    unit_class = classify_unit(props)
    track_invocation(state, props)
    decision = advance_unit(state, props, unit_class, elapsed, settings)
    if decision is None and settings.worker:
        decision = advance_worker_health(state, obs.get('health'), elapsed)
    elif decision is None:
        decision = advance_models(state, obs.get('models'), elapsed, settings)
        if decision is None and settings.require_warmup:
            decision = advance_warmup(state, obs.get('warmup'), elapsed, settings)
    if decision is None:
        if unit_class == U_ACTIVE:
            _set_phase(state, PHASE_READY, elapsed)
            return Decision(True, 'ready', PHASE_READY)
        decision = _wait(state, PHASE_WARMING if settings.require_warmup else PHASE_HTTP_UP, elapsed)
    if not decision.done and elapsed >= settings.timeout:
        return _done(state, timeout_reason(state['phase']))
    return decision


def timeout_reason(phase):
    """At the overall timeout, a server whose HTTP is up failed its warm-up."""
    return 'warmup_failed' if phase in (PHASE_HTTP_UP, PHASE_WARMING) else 'timeout'


def warmup_probe_of(state, settings):
    """The warm-up probe in use: the one the settings name, or under auto the one found so far."""
    if settings.warmup_probe != PROBE_AUTO:
        return settings.warmup_probe
    return state['warmup_probe'] or PROBE_READY


def warmup_probe_due(state, settings, elapsed):
    """Which warm-up probe to send now, or None (rate limit of /health_generate)."""
    probe = warmup_probe_of(state, settings)
    if probe == PROBE_HEALTH_GENERATE and state['last_probe_at'] is not None:
        if elapsed - state['last_probe_at'] < HEALTH_GENERATE_MIN_PERIOD:
            return None
    return probe


# --------------------------------------------------------------------------
# Journal
# --------------------------------------------------------------------------

def journal_matches(invocation_ids):
    """journalctl match arguments selecting every given invocation (ORed with '+').

    The service's own output carries _SYSTEMD_INVOCATION_ID; systemd's lines
    about the unit ("Main process exited ...") carry INVOCATION_ID.
    """
    args = []
    for inv in invocation_ids:
        for field in ('_SYSTEMD_INVOCATION_ID', 'INVOCATION_ID'):
            if args:
                args.append('+')
            args.append('%s=%s' % (field, inv))
    return args


def stream_matches(text):
    """journalctl match arguments ORing in the stdout streams (``_STREAM_ID``) of the entries in ``journalctl -o
    json`` output: a line journald read from a stream after the unit stopped carries no invocation id any more."""
    streams = []
    for raw in (text or '').splitlines():
        try:
            stream = json.loads(raw).get('_STREAM_ID')
        except (ValueError, AttributeError):
            continue
        if stream and stream not in streams:
            streams.append(stream)
    args = []
    for stream in streams:
        args += ['+', '_STREAM_ID=%s' % stream]
    return args


def clean_line(text):
    """Strip every terminal escape and control character, trailing white space and secrets; bound the length."""
    text = redact_log_line(printable(text).rstrip())
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS - 3] + '...'
    return text


def decode_message(value):
    """A journal MESSAGE: str, list of byte values (binary data), or None."""
    if value is None:
        return ''
    if isinstance(value, list):
        try:
            return bytes(value).decode('utf-8', 'replace')
        except (TypeError, ValueError):
            return ''
    return str(value)


def parse_journal_json(text):
    """Lines of ``journalctl -o json`` output -> list of message lines.

    A message holding newlines becomes several lines.  Broken JSON lines are skipped.
    """
    lines = []
    for raw in (text or '').splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        for part in decode_message(entry.get('MESSAGE')).splitlines() or ['']:
            lines.append(clean_line(part))
    return lines


def _traceback_end(lines, start):
    """Index after the traceback beginning at ``start``: through the exception line."""
    i = start + 1
    while i < len(lines):
        line = lines[i]
        if line[:1] in (' ', '\t') or not line.strip():
            i += 1
            continue
        # First line at column 0 after the frames: the exception line.
        return i + 1
    return i


def error_lines(lines):
    """Traceback blocks and error-looking lines, in journal order, without duplicates."""
    picked = []
    seen = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        if TRACEBACK_START in line:
            end = _traceback_end(lines, i)
            block = [text for text in lines[i:end] if text.strip()]
            i = end
        elif ERROR_RE.search(line):
            block = [line]
            i += 1
        else:
            i += 1
            continue
        for text in block:
            if text not in seen:
                seen.add(text)
                picked.append(text)
    return picked


def is_noise(line):
    """Access-log lines of health and readiness probes."""
    return bool(PROBE_ACCESS_RE.search(line))


def journal_excerpt(lines, tail=30, max_error_lines=MAX_ERROR_LINES):
    """Error lines first (the most recent ``max_error_lines``), then the last ``tail`` lines.

    Probe access-log lines are left out of the tail; a tail line already shown among
    the error lines is not repeated.
    """
    errors = error_lines(lines)[-max_error_lines:] if max_error_lines > 0 else []
    shown = set(errors)
    useful = [text for text in lines if not is_noise(text)]
    tail_lines = [text for text in (useful[-tail:] if tail > 0 else []) if text not in shown]
    return errors + tail_lines


def key_error_line(lines):
    """The line that best names the failure: the last traceback's exception line,
    else the last error-looking line that is not systemd's boilerplate."""
    last_exc = ''
    i = 0
    while i < len(lines):
        if TRACEBACK_START in lines[i]:
            end = _traceback_end(lines, i)
            if end - 1 > i and end <= len(lines):
                last_exc = lines[end - 1]
            i = end
        else:
            i += 1
    if last_exc:
        return last_exc.strip()
    for line in reversed(lines):
        if ERROR_RE.search(line) and not SYSTEMD_BOILERPLATE_RE.search(line):
            return line.strip()
    return ''


def last_line(lines):
    """The last non-empty line that is not probe noise; '' if none."""
    for line in reversed(lines):
        if line.strip() and not is_noise(line):
            return line
    return ''


# --------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------

def _short(text, limit=MAX_MSG_DETAIL_CHARS):
    text = ' '.join((text or '').split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _detail(key_line, props):
    """': <error> (exit status 1)' for failure messages."""
    parts = ''
    if key_line:
        parts += ': %s' % _short(key_line)
    exit_text = describe_exit(props)
    if exit_text:
        parts += ' (%s)' % exit_text
    return parts


def build_msg(reason, state, settings, props, elapsed, key_line='', last_log=''):
    """The one-line message for a result."""
    unit = settings.unit
    phase = state.get('phase') or PHASE_STARTING
    see = '; see journal_excerpt'
    if reason == 'ready' and settings.worker:
        return '%s ready after %.1fs (a node of rank >= 1: its dummy /health answers, rank 0 serves the API)' % (
            unit, elapsed)
    if reason == 'ready':
        what = 'model %s' % settings.model if settings.model else 'models %s' % ', '.join(state.get('model_ids') or [])
        warm = ', warm-up confirmed by /%s' % state['warmup_probe'] if settings.require_warmup and state.get('warmup_probe') else ''
        return '%s ready after %.1fs (%s%s)' % (unit, elapsed, what, warm)
    if reason == 'check_mode':
        return 'check mode: %s is not ready (phase %s, unit %s); not waiting' % (unit, phase, describe_unit(props))
    if reason == 'unit_failed':
        if state.get('unit_error'):
            return '%s cannot start: %s; check the unit file (systemctl status %s)' % (
                unit, _short(state['unit_error']), unit)
        verb = 'failed' if props.get('ActiveState') == 'failed' else 'stopped (%s)' % describe_unit(props)
        return '%s %s after %.1fs while %s%s%s' % (unit, verb, elapsed, phase, _detail(key_line, props), see)
    if reason == 'crash_loop':
        return ('%s crashed %d time(s) during the wait, more than max_restarts %d (systemd restarts it: now %s, '
                'NRestarts %s) after %.1fs%s%s') % (
            unit, state.get('restarts', 0), settings.max_restarts, describe_unit(props),
            props.get('NRestarts', '?'), elapsed, _detail(key_line, props), see)
    if reason == 'unit_inactive':
        if state.get('was_active'):
            return '%s stopped after having been active (now %s) after %.1fs%s%s' % (
                unit, describe_unit(props), elapsed, _detail(key_line, props), see)
        if 'Job' in props and not props['Job']:
            return '%s is %s and no start job is queued; start it first (systemctl start %s)' % (
                unit, describe_unit(props), unit)
        return ('%s is %s and was not started within startup_grace %gs; start it first '
                '(systemctl start %s)') % (unit, describe_unit(props), settings.startup_grace, unit)
    if reason == 'unit_missing':
        if state.get('unit_error'):
            return 'cannot query %s: %s' % (unit, _short(state['unit_error']))
        return '%s does not exist (LoadState %s); check the unit name or install the unit file' % (
            unit, props.get('LoadState') or 'unknown')
    if reason == 'auth_failed':
        return '%s answered %s after %.1fs: check api_key (SGLang --api-key)' % (
            settings.url.rstrip('/'), state.get('last_http_error') or 'HTTP 401/403', elapsed)
    if reason == 'model_mismatch':
        return '%s/v1/models lists %s but not %r (for %gs, model_mismatch_grace); check model or --served-model-name' % (
            settings.url.rstrip('/'), json.dumps(state.get('model_ids') or []), settings.model,
            settings.model_mismatch_grace)
    if reason == 'warmup_failed':
        up = state.get('http_up_at')
        limit = ('warmup_timeout %ss' % settings.warmup_timeout if elapsed < settings.timeout
                 else 'timeout %ss' % settings.timeout)
        return '%s: HTTP up%s but warm-up not done within %s (/%s: %s) after %.1fs%s%s' % (
            unit, ' at %.1fs' % up if up is not None else '', limit, state.get('warmup_probe') or warmup_probe_of(state, settings),
            state.get('warmup_last') or 'not probed', elapsed, _detail(key_line or last_log, {}), see)
    if reason == 'timeout':
        extra = ''
        if state.get('last_http_error'):
            extra += '; last HTTP error: %s' % state['last_http_error']
        if key_line:
            extra += '; last error line: %s' % _short(key_line)
        elif last_log:
            extra += '; last log line: %s' % _short(last_log)
        return '%s not ready after %.1fs (timeout %ss): still %s, unit %s, restarts %d%s%s' % (
            unit, elapsed, settings.timeout, phase, describe_unit(props), state.get('restarts', 0), extra, see)
    return '%s: %s after %.1fs' % (unit, reason, elapsed)
