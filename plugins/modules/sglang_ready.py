#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wait until an SGLang server under systemd is ready, and fail fast with its logs when it cannot be."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Wait until an SGLang server run by systemd is ready, failing fast with its logs
description:
  - Watches a systemd unit that runs an SGLang server and its HTTP API until the server is ready to serve,
    polling both every O(interval) seconds.
  - Ready means the unit is active, C(/v1/models) lists the expected model and, with O(require_warmup), the
    warm-up generation has succeeded (C(/ready) answers 200; on SGLang versions without C(/ready) C(/health_generate)
    answers 200).
  - A closed HTTP port while the unit is active or activating is the normal state of a server that loads its
    weights, not a failure.
  - Fails at once, without waiting for O(timeout), when the unit failed, is or went inactive, does not exist,
    restarts more than O(max_restarts) times, when the API rejects O(api_key), when C(/v1/models) keeps listing
    other models than O(model), or when the warm-up does not finish within O(warmup_timeout).
  - Every result carries the unit state seen, a journal excerpt scoped to the invocations of the unit seen during
    the wait (error lines and tracebacks first, then the last O(journal_lines) lines) and a one-line message.
  - The action plugin of the same name runs the module in slices of O(progress_interval) seconds and prints a
    progress line after each slice.
  - The module never changes anything; it always reports C(changed=false).
version_added: "1.0.0"
options:
  unit:
    description:
      - Name of the systemd unit that runs the SGLang server, for example C(sglang.service).
    type: str
    required: true
  url:
    description:
      - Base URL of the SGLang HTTP server.
    type: str
    default: http://127.0.0.1:30000
  model:
    description:
      - Model id that C(/v1/models) must list (SGLang's C(--served-model-name), else its C(--model-path)).
      - When not set, any listed model is accepted.
    type: str
  require_warmup:
    description:
      - Also require the warm-up generation to have succeeded, seen through C(/ready) or, where the server
        answers 404 there, through C(/health_generate).
    type: bool
    default: true
  warmup_probe:
    description:
      - How O(require_warmup) sees the warm-up. V(auto) asks C(/ready) and, where the server answers 404 there,
        C(/health_generate). V(ready) and V(health_generate) ask only that endpoint.
      - V(readiness) asks C(/readiness) of SGLang's router (C(smg)), which answers 200 once it has healthy workers.
    type: str
    choices: [auto, ready, health_generate, readiness]
    default: auto
  api_key:
    description:
      - "API key of the server (SGLang's C(--api-key)), sent as C(Authorization: Bearer <key>)."
      - An answer 401 or 403 fails the wait at once with reason C(auth_failed).
    type: str
  timeout:
    description:
      - Maximum number of seconds to wait for readiness.
    type: int
    default: 3600
  interval:
    description:
      - Seconds between two observations of the unit and the HTTP API.
    type: float
    default: 0.25
  max_restarts:
    description:
      - Number of restarts of the unit by systemd tolerated during the wait.
      - A restart counts as soon as the process died and systemd scheduled its restart (sub-state C(auto-restart)).
    type: int
    default: 0
  journal_lines:
    description:
      - Number of last journal lines put into RV(journal_excerpt), after the error lines.
    type: int
    default: 30
  validate_certs:
    description:
      - Whether to validate the server's TLS certificate when O(url) uses https.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of CA certificates to validate the server's certificate with.
    type: path
  startup_grace:
    description:
      - Seconds an inactive (not failed) or not yet existing unit with a queued start job (systemd's C(Job)
        property) may stay so before the wait fails. Without a queued job such a unit fails the wait at once.
    type: float
    default: 10
  model_mismatch_grace:
    description:
      - Seconds C(/v1/models) may answer without O(model) before the wait fails with reason C(model_mismatch).
    type: float
    default: 15
  warmup_timeout:
    description:
      - Seconds the warm-up may take after C(/v1/models) first answered before the wait fails with reason
        C(warmup_failed).
    type: int
    default: 900
  worker:
    description:
      - The unit runs a node of a multi-node instance with C(--node-rank) 1 or more. Such a node serves no API,
        only a dummy health server that answers 200 once the node joined the others and loaded its part of the
        model; ready means the unit is active and its C(/health) answers 200. O(model) and O(require_warmup)
        do not apply, for the readiness of the instance is that of rank 0.
    type: bool
    default: false
  previous_invocation:
    description:
      - The InvocationID the unit had before this run started or restarted it (empty when it was not running).
        A current invocation other than this one is a start this run caused, and its start-up timeline
        (RV(startup)) is read from its journal. Without it the timeline is read only when the wait saw the start
        itself (the server was not ready at the first look).
    type: str
  invocations:
    description:
      - InvocationIDs of earlier runs of the unit whose journal lines belong in RV(journal_excerpt), for example
        the one a previous wait saw (C(InvocationID) in RV(unit_state)) when the unit may have died since.
    type: list
    elements: str
    default: []
  progress_interval:
    description:
      - Length in seconds of one slice of the wait when the action plugin runs the module; the action plugin
        prints a progress line after each slice that ended without a decision.
    type: int
    default: 30
  resume:
    description:
      - Internal state that the action plugin passes from one slice of the wait to the next. Do not set it.
      - When set (even empty), the module returns after O(progress_interval) seconds without a decision.
    type: dict
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details:
      - In check mode the module looks once and reports the current state without waiting.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
notes:
  - Needs systemd (C(systemctl), C(journalctl)) on the target. Reading the journal of a system unit needs root
    or membership in the C(systemd-journal) group.
  - HTTP requests go to O(url) only; no proxy is used for loopback addresses.
seealso:
  - module: ansible.builtin.systemd_service
  - module: ansible.builtin.uri
author:
  - k26deploy maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Wait for Kimi K2.6 to be ready, failing fast on a crash
  k26.deploy.sglang_ready:
    unit: sglang.service
    url: http://127.0.0.1:30000
    model: moonshotai/Kimi-K2.6
    api_key: "{{ sglang_api_key }}"
    timeout: 3600
  register: sglang_readiness

- name: Show how long each start-up phase took
  ansible.builtin.debug:
    var: sglang_readiness.timeline

- name: Tolerate two restarts and skip the warm-up check
  k26.deploy.sglang_ready:
    unit: sglang.service
    max_restarts: 2
    require_warmup: false
    timeout: 600

- name: Wait for a node of rank 1 of a multi-node instance (its dummy /health; rank 0 serves the API)
  k26.deploy.sglang_ready:
    unit: sglang.service
    worker: true
    timeout: 3600

- name: Look at the current state only (check mode never waits)
  k26.deploy.sglang_ready:
    unit: sglang.service
  check_mode: true
  register: sglang_now
"""

RETURN = r"""
ready:
  description: Whether the server is ready.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds since the wait began (across all slices).
  returned: always
  type: float
  sample: 95.3
reason:
  description:
    - Why the wait ended. One of V(ready), V(unit_failed), V(crash_loop), V(unit_inactive), V(unit_missing),
      V(auth_failed), V(model_mismatch), V(warmup_failed), V(timeout), V(check_mode).
    - Every reason but V(ready) fails the task, except in check mode, which reports without failing. In check mode
      the reason is the verdict of one observation (for example V(unit_failed) or V(ready)), or V(check_mode)
      when one observation cannot decide (a server still loading).
  returned: when the wait ended
  type: str
  sample: unit_failed
msg:
  description: One line a human can act on.
  returned: when the wait ended
  type: str
  sample: "sglang.service failed after 12.3s while loading: torch.OutOfMemoryError: CUDA out of memory. (exit status 1); see journal_excerpt"
phase:
  description:
    - Last phase seen; one of V(starting), V(loading), V(restarting), V(http_up), V(warming), V(ready).
  returned: always
  type: str
  sample: loading
model_ids:
  description: Model ids that C(/v1/models) listed last.
  returned: always
  type: list
  elements: str
  sample: ["moonshotai/Kimi-K2.6"]
restarts:
  description: Restarts of the unit by systemd during the wait, a pending restart (sub-state C(auto-restart)) included.
  returned: always
  type: int
  sample: 0
unit_state:
  description: Properties of the unit from C(systemctl show) at the last observation.
  returned: when the wait ended
  type: dict
  sample:
    ActiveState: failed
    SubState: failed
    Result: exit-code
    ExecMainStatus: "1"
    ExecMainCode: "1"
    NRestarts: "0"
    MainPID: "0"
    InvocationID: 0c1f6f6a2b8e4f0e9c4e8a3c2f1d0b9a
    LoadState: loaded
    ActiveEnterTimestamp: Sun 2026-11-29 10:00:00 UTC
    InactiveEnterTimestamp: Sun 2026-11-29 10:00:12 UTC
    StateChangeTimestamp: Sun 2026-11-29 10:00:12 UTC
journal_excerpt:
  description:
    - Journal lines of the invocations of the unit seen during the wait (older runs excluded); error lines and
      whole tracebacks first, then the last O(journal_lines) lines, without repetitions.
    - Then the kernel's NVIDIA events (Xid, SXid) since the unit's process started, each with its meaning and
      NVIDIA's immediate action (for example C(kernel - Xid 79, GPU has fallen off the bus, NVIDIA RESTART_BM)),
      where the kernel log can be read (C(/dev/kmsg) record by record, else C(dmesg)).
    - Empty when the server is ready.
  returned: when the wait ended
  type: list
  elements: str
  sample: ["Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory."]
last_log_line:
  description: The newest journal line of the unit's invocations seen during the wait.
  returned: always
  type: str
  sample: "The server is fired up and ready to roll!"
timeline:
  description:
    - Seconds since the wait began at which each phase was first reached; only phases reached are present.
    - Keys are V(loading), V(http_up), V(warm) and V(ready).
  returned: always
  type: dict
  sample: {"loading": 0.2, "http_up": 88.1, "warm": 94.9, "ready": 94.9}
startup:
  description:
    - The start-up of the current invocation, read from its journal (SGLang 0.5.23's own lines), when this run
      caused it (see O(previous_invocation)); empty otherwise.
    - C(phases) holds the seconds from the start of the unit's main process to the end of each phase reached,
      V(weights_loaded) (C(Load weight end)), V(kv_cache_allocated) (C(Memory pool end)), V(graphs_captured) (the
      last C(Capture ... graph end)), V(warmed_up) (C(The server is fired up and ready to roll!)) and V(ready) (the
      first poll that found it ready); a phase not reached, or without its line (no CUDA graphs), is left out.
      With several ranks a phase ends at the last rank's line.
  returned: when the wait ended
  type: dict
  sample: {"invocation": "0c1f6f6a2b8e4f0e9c4e8a3c2f1d0b9a", "phases": {"weights_loaded": 61.2,
           "kv_cache_allocated": 64.0, "graphs_captured": 88.9, "warmed_up": 94.1, "ready": 94.4}}
restarted_since:
  description:
    - With O(invocations), whether the unit now runs another invocation than those (it stopped or died since);
      then RV(journal_excerpt) is filled even when the new invocation is ready.
  returned: when the wait ended
  type: bool
  sample: false
warmup_probe:
  description:
    - The warm-up probe used, V(ready) (C(/ready)), V(health_generate) (C(/health_generate)) or V(readiness)
      (C(/readiness)); null when none was used.
  returned: always
  type: str
  sample: ready
done:
  description: Internal, between the module and its action plugin. False when a slice ended without a decision.
  returned: when O(resume) is set and the slice ended without a decision
  type: bool
  sample: false
resume:
  description: Internal, between the module and its action plugin. State to pass to the next slice.
  returned: when O(resume) is set and the slice ended without a decision
  type: dict
  sample: {}
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import (
    UNIT_PROPERTIES, advance, build_msg, journal_excerpt, key_error_line, last_line,
    new_state, settings_from_params,
)
from ansible_collections.k26.deploy.plugins.module_utils.sglang_probe import SglangProbe
from ansible_collections.k26.deploy.plugins.module_utils import nvidia_health, sglang_startup

# Journal entries looked at for an excerpt: enough for a long start-up's tail and its traceback.
JOURNAL_SCAN_ENTRIES = 5000
# Journal entries looked at for the newest useful line (probe access-log lines are skipped).
JOURNAL_LAST_ENTRIES = 50
# Journal entries of one start read for its timeline: a start-up of 8 ranks logs a few thousand.
JOURNAL_START_ENTRIES = 50000

ARGUMENT_SPEC = dict(
    unit=dict(type='str', required=True),
    url=dict(type='str', default='http://127.0.0.1:30000'),
    model=dict(type='str'),
    require_warmup=dict(type='bool', default=True),
    warmup_probe=dict(type='str', default='auto', choices=['auto', 'ready', 'health_generate', 'readiness']),
    api_key=dict(type='str', no_log=True),
    timeout=dict(type='int', default=3600),
    interval=dict(type='float', default=0.25),
    max_restarts=dict(type='int', default=0),
    journal_lines=dict(type='int', default=30),
    validate_certs=dict(type='bool', default=True),
    ca_path=dict(type='path'),
    startup_grace=dict(type='float', default=10),
    model_mismatch_grace=dict(type='float', default=15),
    warmup_timeout=dict(type='int', default=900),
    worker=dict(type='bool', default=False),
    invocations=dict(type='list', elements='str', default=[]),
    previous_invocation=dict(type='str'),
    progress_interval=dict(type='int', default=30),
    resume=dict(type='dict'),
)


def check_params(module):
    """Reject values that make no sense before looking at anything."""
    params = module.params
    for name in ('timeout', 'max_restarts', 'journal_lines', 'startup_grace', 'model_mismatch_grace',
                 'warmup_timeout'):
        if params[name] < 0:
            module.fail_json(msg='%s must not be negative, got %s' % (name, params[name]))
    for name in ('interval', 'progress_interval'):
        if params[name] <= 0:
            module.fail_json(msg='%s must be positive, got %s' % (name, params[name]))


def initial_state(resume, invocations=(), clock=time.time, mono=time.monotonic):
    """The carried state: the one the previous slice returned, or a new one that knows ``invocations``."""
    if resume and 'started_mono' in resume:
        return resume
    state = new_state(clock(), mono())
    state['invocation_ids'] = [inv for inv in invocations if inv]
    return state


def elapsed_since(state, mono=time.monotonic):
    return max(0.0, mono() - state['started_mono'])


def slice_deadline(state, settings, progress_interval, mono=time.monotonic):
    """Monotonic end of this slice; None (run to the decision) when the timeout is less than
    half a slice further away, so that the last slice does not start just before the timeout."""
    now = mono()
    end_elapsed = (now - state['started_mono']) + progress_interval
    if settings.timeout - end_elapsed < progress_interval / 2.0:
        return None
    return now + progress_interval


def watch(probe, state, settings, interval, slice_end=None, once=False, mono=time.monotonic, sleep=time.sleep):
    """Observe every ``interval`` seconds until a decision, the end of the slice, or once.

    Returns (decision, last observation).
    """
    while True:
        started = mono()
        obs = probe.observe(state, settings, started - state['started_mono'])
        decision = advance(state, obs, settings)
        now = mono()
        if decision.done or once or (slice_end is not None and now >= slice_end):
            return decision, obs
        pause = interval - (now - started)
        pause = min(pause, settings.timeout - (now - state['started_mono']))
        if slice_end is not None:
            pause = min(pause, slice_end - now)
        if pause > 0:
            sleep(pause)


def unit_state_of(obs):
    props = obs.get('unit') or {}
    return dict((key, props[key]) for key in UNIT_PROPERTIES if key in props)


def base_result(state, elapsed):
    return dict(
        changed=False,
        elapsed=round(elapsed, 3),
        phase=state['phase'],
        model_ids=list(state['model_ids']),
        restarts=state['restarts'],
        timeline=dict(state['timeline']),
        warmup_probe=state['warmup_probe'],
    )


def restarted_since(state, invocations):
    """Whether the unit now runs another invocation than the given ones (it stopped or died since)."""
    known = [inv for inv in invocations or () if inv]
    return bool(known) and bool(state['current_invocation']) and state['current_invocation'] not in known


def caused_start(state, previous_invocation):
    """Whether the current invocation is a start this run caused (see the option previous_invocation)."""
    current = state['current_invocation']
    if not current:
        return False
    if previous_invocation is not None:
        return current != previous_invocation
    return any(phase in state['timeline'] for phase in ('loading', 'http_up'))


def startup_of(probe, state, props, previous_invocation):
    """The start-up timeline of the current invocation, {} when this run did not cause it."""
    start_us = props.get('ExecMainStartTimestampMonotonic', '')
    if not (caused_start(state, previous_invocation) and start_us.isdigit() and int(start_us) > 0):
        return {}
    ready_at = state['timeline'].get('ready')
    ready_us = None if ready_at is None else int((state['started_mono'] + ready_at) * 1e6)
    probe.sync_journal()
    entries = sglang_startup.journal_entries(probe.start_journal(state['current_invocation'], JOURNAL_START_ENTRIES))
    return {'invocation': state['current_invocation'],
            'phases': sglang_startup.timeline(entries, int(start_us), ready_us)}


def process_ended(obs):
    """Whether the unit's main process has exited (its output may still be on its way to the journal)."""
    props = obs.get('unit') or {}
    return bool(props) and props.get('MainPID', '0') in ('', '0')


def kernel_excerpt(probe, started_us):
    """The GPUs' kernel events (Xid 79: the GPU fell off the bus ...) since the unit's process started (monotonic
    microseconds), with their meaning: beside a CUDA error in the journal they are the whole diagnosis."""
    return nvidia_health.excerpt_lines(probe.kernel_events_since(started_us))


def final_result(probe, state, settings, decision, obs, journal_lines, check_mode, invocations=(),
                 previous_invocation=None):
    """The complete result of an ended wait (journal read here, after the decision)."""
    reason = decision.reason
    ready = reason == 'ready'
    restarted = restarted_since(state, invocations)
    if check_mode and not decision.done:
        reason = 'check_mode'
    if ready and not restarted:
        lines = probe.journal_lines(state['invocation_ids'], JOURNAL_LAST_ENTRIES)
        excerpt = []
    else:
        started_us = (obs.get('unit') or {}).get('ExecMainStartTimestampMonotonic', '')
        if not check_mode:
            probe.sync_journal(ended=process_ended(obs), since_us=started_us)
        entries = JOURNAL_SCAN_ENTRIES if state['invocation_ids'] else journal_lines
        lines = probe.journal_lines(state['invocation_ids'], max(entries, journal_lines), streams=True,
                                    since_us=started_us)
        excerpt = journal_excerpt(lines, tail=journal_lines) + kernel_excerpt(probe, started_us)
    elapsed = elapsed_since(state)
    result = base_result(state, elapsed)
    result.update(
        ready=ready,
        reason=reason,
        unit_state=unit_state_of(obs),
        journal_excerpt=excerpt,
        last_log_line=last_line(lines),
        restarted_since=restarted,
        # a look in check mode (status, logs) caused no start: its poll is not when the server became ready
        startup={} if check_mode else startup_of(probe, state, obs.get('unit') or {}, previous_invocation),
    )
    result['msg'] = build_msg(reason, state, settings, obs.get('unit') or {}, elapsed,
                              key_line=key_error_line(lines) if not ready else '',
                              last_log=result['last_log_line'])
    return result


def slice_result(probe, state):
    """The result of a slice that ended without a decision: progress plus the state to resume from."""
    lines = probe.journal_lines(state['invocation_ids'], JOURNAL_LAST_ENTRIES)
    result = base_result(state, elapsed_since(state))
    result.update(done=False, ready=False, last_log_line=last_line(lines), resume=state)
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    check_params(module)
    params = module.params
    settings = settings_from_params(params)
    probe = SglangProbe(module, params['unit'], params['url'], api_key=params['api_key'],
                        validate_certs=params['validate_certs'], ca_path=params['ca_path'])
    if not probe.systemctl:
        module.fail_json(msg='systemctl not found on the target: sglang_ready needs systemd', ready=False)

    sliced = params['resume'] is not None and not module.check_mode
    state = initial_state(params['resume'] if sliced else None, params['invocations'])
    slice_end = slice_deadline(state, settings, params['progress_interval']) if sliced else None
    decision, obs = watch(probe, state, settings, params['interval'], slice_end=slice_end,
                          once=module.check_mode)

    if not decision.done and not module.check_mode:
        module.exit_json(**slice_result(probe, state))
    result = final_result(probe, state, settings, decision, obs, params['journal_lines'], module.check_mode,
                          params['invocations'], params['previous_invocation'])
    if result['reason'] == 'ready' or module.check_mode:
        module.exit_json(**result)
    module.fail_json(**result)


if __name__ == '__main__':
    main()
