# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The I/O of the sglang_router_* modules: SGLang's router's (smg) worker API, and a replica's /metrics."""

from __future__ import annotations

from ansible_collections.k26.deploy.plugins.module_utils.sglang_probe import http_request
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import describe_http
from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_workers import busy_requests, worker_entries

AGENT = 'k26deploy-sglang_router'

# The options of plugins/doc_fragments/sglang_router.py.
ROUTER_ARGUMENT_SPEC = dict(
    router_url=dict(type='str', required=True),
    api_key=dict(type='str', no_log=True),
    admin_key_file=dict(type='path'),
    validate_certs=dict(type='bool', default=True),
    ca_path=dict(type='path'),
)


class RouterClient(object):
    """Calls to one router; every answer is an HTTP result dict (sglang_readiness.http_result), never raised."""

    def __init__(self, params):
        """``params``: a module's parameters, ROUTER_ARGUMENT_SPEC's among them."""
        self.base = params['router_url'].rstrip('/')
        self.api_key = params['api_key']
        self.control_key = control_plane_key(params.get('admin_key_file')) or self.api_key
        self.tls = dict(validate_certs=params['validate_certs'], ca_path=params['ca_path'], agent=AGENT)

    def call(self, method, path, body=None):
        """A call to the router's control plane (/workers), with its control-plane key where there is one."""
        return http_request(self.base + path, path=path, method=method, api_key=self.control_key, body=body,
                            **self.tls)

    def workers(self):
        """(the router's worker entries, or None with the reason why not)."""
        answer = self.call('GET', '/workers')
        entries = worker_entries(answer.get('body')) if answer['kind'] == 'ok' else None
        if entries is not None:
            return entries, ''
        return None, 'the router at %s did not list its workers (GET /workers: %s%s)' % (
            self.base, describe_http(answer), refusal_hint(answer))

    def busy_requests(self, worker_url):
        """A replica's running plus queued requests from its /metrics; None without them."""
        answer = http_request(worker_url.rstrip('/') + '/metrics', path='/metrics', text=True, **self.tls)
        return busy_requests(answer.get('body')) if answer['kind'] == 'ok' else None


def control_plane_key(path):
    """The key in the file at path; None without a path or a file there (a router deployed before it had one)."""
    if not path:
        return None
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read().strip() or None
    except FileNotFoundError:
        return None


def refusal_hint(answer):
    if answer.get('status') in (401, 403):
        return ": the router refuses the key (the control-plane key where the router has one, else the replicas' key)"
    return ''
