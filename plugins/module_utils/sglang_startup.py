# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A start of an SGLang server, read from its journal: when each phase of the start-up ended, and whether a start
was slower than the last good one. Pure logic, no I/O.

The phases end on lines SGLang 0.5.23 logs (model_runner.py, kv_cache_configurator.py, cuda_graph_setup.py,
http_server.py); a phase whose line is absent (no graphs on a CPU, graphs turned off) is left out. Times are seconds
since the unit's main process started (systemd's ExecMainStartTimestampMonotonic, the journal's
__MONOTONIC_TIMESTAMP: the same clock). With several ranks a phase ends at its last rank's line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import decode_message

#: (phase, the line that ends it, what the phase does, in words), in the order a start goes through them
PHASES = (
    ('weights_loaded', re.compile(r'Load weight end\.'), 'loading the weights'),
    ('kv_cache_allocated', re.compile(r'Memory pool end\.'), 'allocating the KV cache'),
    ('graphs_captured', re.compile(r'Capture .*graph end\.'), 'capturing the CUDA graphs'),
    ('warmed_up', re.compile(r'The server is fired up and ready to roll!'), 'the warm-up'),
)
#: sglang_ready's own last phase: /v1/models lists the model and the warm-up passed (seen by its poll)
READY = 'ready'
PHASE_NAMES = tuple(phase[0] for phase in PHASES) + (READY,)
PHASE_WORDS = dict((name, words) for name, dummy, words in PHASES)
PHASE_WORDS[READY] = 'the readiness check'

FINDING_ID = 'K26-START-SLOWER'
#: a phase that took less than this at the last good start is no base for a ratio (a poll's few milliseconds)
MIN_BASE_SECONDS = 1.0


def journal_entries(text):
    """``journalctl -o json`` output -> [(monotonic microseconds, message line)], broken lines skipped."""
    entries = []
    for raw in (text or '').splitlines():
        try:
            entry = json.loads(raw)
            stamp = int(entry['__MONOTONIC_TIMESTAMP'])
        except (ValueError, TypeError, KeyError):
            continue
        entries.append((stamp, decode_message(entry.get('MESSAGE'))))
    return entries


def phase_ends(entries, start_us):
    """{phase: seconds since ``start_us``} for each phase whose line the journal has; lines after the warm-up
    (a later weight update, say) do not move a phase."""
    ends = {}
    warmed_up = None
    for stamp, message in entries:
        for name, pattern, dummy in PHASES:
            if pattern.search(message) and (warmed_up is None or stamp <= warmed_up):
                ends[name] = stamp
                if name == 'warmed_up' and warmed_up is None:
                    warmed_up = stamp
    return dict((name, round((stamp - start_us) / 1e6, 3)) for name, stamp in ends.items() if stamp >= start_us)


def timeline(entries, start_us, ready_us=None):
    """The start-up timeline: ``phase_ends`` plus ``ready`` when sglang_ready saw it ready at ``ready_us``."""
    ends = phase_ends(entries, start_us)
    if ready_us is not None and ready_us >= start_us:
        # SGLang answers /health before its "fired up" line reaches the journal: a poll can see it ready a few ms
        # before that line's timestamp. Ready is never before the phases it follows.
        ends[READY] = max([round((ready_us - start_us) / 1e6, 3)] + list(ends.values()))
    return dict((name, ends[name]) for name in PHASE_NAMES if name in ends)


def durations(phases):
    """How long each phase reached took: from the end of the phase before it (the start for the first)."""
    spans, previous = {}, 0.0
    for name in PHASE_NAMES:
        if name in phases:
            spans[name] = round(max(phases[name] - previous, 0.0), 3)
            previous = phases[name]
    return spans


def slower_phases(phases, last_good, ratio, min_seconds):
    """The phases of ``phases`` that took more than ``ratio`` times as long as in ``last_good`` (another start's
    phases) and at least ``min_seconds`` longer: [(phase, seconds now, seconds then)]."""
    now, then = durations(phases), durations(last_good or {})
    slower = []
    for name in PHASE_NAMES:
        if name in now and name in then and now[name] > then[name] * ratio and now[name] - then[name] >= min_seconds:
            slower.append((name, now[name], then[name]))
    return slower


def slower_findings(phases, last_good, ratio, min_seconds, caches=''):
    """preflight-shaped findings (id, severity, title, message, fix, evidence) for each phase of ``phases`` slower
    than in ``last_good`` (a record, see record_of). ``caches`` names this start's compile caches (the release
    directory, sglang-VERSION-ARCH): when the last good start had others, the message says they were new."""
    findings = []
    last_good = last_good or {}
    new_caches = _new_caches(caches, last_good.get('caches') or '')
    for name, now, then in slower_phases(phases, last_good.get('phases'), ratio, min_seconds):
        findings.append({
            'id': FINDING_ID,
            'severity': 'warning',
            'title': 'this start was slower than the last good one in %s' % PHASE_WORDS[name],
            'message': '%s took %.1fs, %s (%s).%s' % (
                PHASE_WORDS[name], now, _compared(now, then), last_good.get('at') or '?', new_caches),
            'fix': _FIXES[name],
            'evidence': {'phase': name, 'seconds': now, 'last_good_seconds': then,
                         'last_good_invocation': last_good.get('invocation', ''), 'caches': caches,
                         'last_good_caches': last_good.get('caches') or ''},
        })
    return findings


def _compared(now, then):
    if then < MIN_BASE_SECONDS:
        return 'where the last good start took under %.0fs' % MIN_BASE_SECONDS
    return '%.1fx the %.1fs of the last good start' % (now / then, then)


def _new_caches(caches, last_good_caches):
    if not caches or not last_good_caches or caches == last_good_caches:
        return ''
    return (' Its compile caches were new (%s; the last good start used %s): a new SGLang or GPU compiles its '
            'kernels once, and the next start of the same finds them.' % (caches, last_good_caches))


_FIXES = {
    'weights_loaded': 'where the shards came from disk, pre-warm them into the page cache (sglang_model_prewarm) and '
                      'load with threads (sglang_service_load_threads); check the disk and that no other job reads it',
    'kv_cache_allocated': 'look at the GPUs: memory held by another process makes SGLang size the pool again',
    'graphs_captured': "the kernels' JIT caches were cold (a new SGLang, GPU or configuration): keep "
                       'sglang_service_cache_dir across restarts and precompile DeepGEMM before the restart',
    'warmed_up': 'a first request compiles kernels the graphs did not cover; see the journal of this start',
    'ready': 'the server was up before the poll saw it: look at the network between this host and the endpoint',
}


def record_of(host, startup, at, ready, caches=''):
    """The stored form of a start: what the record keeps per host (``caches``: its compile caches' directory)."""
    return {'host': host, 'invocation': startup.get('invocation', ''), 'at': at, 'ready': bool(ready),
            'phases': dict(startup.get('phases') or {}), 'caches': caches}


def last_good(records, invocation):
    """The newest record of a start that reached ready, other than ``invocation``'s."""
    for record in reversed(records or []):
        if record.get('ready') and record.get('invocation') != invocation and record.get('phases'):
            return record
    return None


def add_record(records, record, keep):
    """``records`` with ``record`` replacing the one of the same invocation, the newest ``keep`` only."""
    kept = [r for r in records or [] if r.get('invocation') != record['invocation']]
    kept.append(record)
    return kept[-keep:] if keep > 0 else kept
