# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the sglang_router_worker module decides, apart from its I/O: a replica's entries in the router's
``GET /workers`` answer (smg), and the requests a replica still has, from its Prometheus ``/metrics``."""

from __future__ import annotations

import math

from ansible_collections.k26.deploy.plugins.module_utils.prometheus_text import samples

# SGLang's gauges of requests being decoded and waiting to be scheduled (--enable-metrics), in either spelling
# (prometheus_client writes sglang_ on OpenMetrics' sample lines).
BUSY_METRICS = ('sglang:num_running_reqs', 'sglang:num_queue_reqs')


def same_url(first, second):
    return str(first).rstrip('/') == str(second).rstrip('/')


def worker_entries(body):
    """The workers of smg's ``GET /workers`` answer (``{"workers": [...]}``); None when the body is not one."""
    if not isinstance(body, dict) or not isinstance(body.get('workers'), list):
        return None
    return [entry for entry in body['workers'] if isinstance(entry, dict) and 'url' in entry]


def entries_for(entries, url):
    """The router's entries for the replica at ``url`` (a removal in progress keeps one, status draining)."""
    return [entry for entry in entries if same_url(entry['url'], url)]


def join_state(entries, url):
    """present: the router routes to ``url`` (listed, healthy, ready); pending: listed but not routable yet;
    absent: not listed."""
    found = entries_for(entries, url)
    if not found:
        return 'absent'
    if any(entry.get('is_healthy') and entry.get('status', 'ready') == 'ready' for entry in found):
        return 'present'
    return 'pending'


def healthy_count(entries):
    """Entries the router routes to (healthy and ready)."""
    return sum(1 for entry in entries if entry.get('is_healthy') and entry.get('status', 'ready') == 'ready')


def summary(entries):
    """What the router says of each entry, short enough for a message."""
    return [{'id': entry.get('id'), 'url': entry.get('url'), 'status': entry.get('status'),
             'is_healthy': entry.get('is_healthy')} for entry in entries]


def busy_requests(metrics_text):
    """Running plus queued requests of a replica, summed over its samples (its schedulers); with priority scheduling,
    SGLang's breakdown by priority beside each total (priority="N") is not counted again. None when the text has
    neither gauge, or one of them is no number (NaN, Inf)."""
    total, seen = 0.0, False
    for name, labels, value in samples(metrics_text):
        if name.startswith('sglang_'):
            name = 'sglang:' + name[len('sglang_'):]
        if name not in BUSY_METRICS or labels.get('priority'):
            continue
        if not math.isfinite(value):
            return None
        total += value
        seen = True
    return int(total) if seen else None
