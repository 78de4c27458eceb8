#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_router_worker: take an SGLang replica out of SGLang's router and drain it, or put it back."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_router_worker
short_description: Take an SGLang replica out of SGLang's router (smg) and drain it, or put it back
description:
  - With O(state=absent), asks the router to remove the replica (C(DELETE /workers/ID)), waits until the router no
    longer lists it (smg lets requests already sent to it finish), then waits until the replica's own C(/metrics)
    count no running and no queued requests (C(sglang:num_running_reqs), C(sglang:num_queue_reqs)), for at most
    O(drain_timeout) seconds.
  - With O(state=present), asks the router to add the replica (C(POST /workers) with its URL and the API key) and
    waits until the router lists it as healthy and ready, so that it routes requests to it.
version_added: "0.2.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  worker_url:
    description:
      - The replica's URL as the router knows it (the router's C(--worker-urls) entry), for example
        C(http://10.0.0.11:30000).
    type: str
    required: true
  state:
    description:
      - V(absent) takes the replica out and drains it; V(present) puts it back and waits until it is routable.
    type: str
    choices: [absent, present]
    default: present
  drain_timeout:
    description:
      - With O(state=absent), seconds to wait for the replica's running and queued requests to finish. When they
        have not, the module returns with a warning naming how many are left (the grace period is over).
      - V(0) does not wait.
    type: int
    default: 600
  timeout:
    description:
      - Seconds to wait for the router to remove or add the replica.
    type: int
    default: 120
extends_documentation_fragment:
  - k26.deploy.sglang_router
  - k26.deploy.attributes
attributes:
  check_mode:
    description: Reads the router's view and reports whether it would change it.
notes:
  - A replica without C(--enable-metrics) serves no C(/metrics); the module then waits for nothing more than the
    router's removal and says so in a warning.
"""

EXAMPLES = r"""
- name: Take the replica out of the router and let its requests finish
  k26.deploy.sglang_router_worker:
    router_url: http://127.0.0.1:30080
    worker_url: http://10.0.0.11:30000
    api_key: "{{ sglang_service_api_key }}"
    state: absent
  delegate_to: router1

- name: Put the replica back once it is ready again
  k26.deploy.sglang_router_worker:
    router_url: http://127.0.0.1:30080
    worker_url: http://10.0.0.11:30000
    api_key: "{{ sglang_service_api_key }}"
    state: present
  delegate_to: router1
"""

RETURN = r"""
worker_url:
  description: The replica's URL.
  returned: always
  type: str
state:
  description: The replica as the router lists it at the end, V(present), V(pending) or V(absent).
  returned: always
  type: str
entries:
  description: The router's entries for the replica at the end (id, url, status, is_healthy).
  returned: always
  type: list
  elements: dict
busy_requests:
  description: With O(state=absent), the replica's running plus queued requests when the module returned; null
    when the replica serves no C(/metrics) or was not drained.
  returned: always
  type: int
elapsed:
  description: Seconds the module waited.
  returned: always
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import describe_http
from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_client import ROUTER_ARGUMENT_SPEC, RouterClient, refusal_hint
from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_workers import entries_for, join_state, summary

POLL_SECONDS = 0.5


class Router(object):
    """One replica at one router: its entries, waits on them, and the module's answers."""

    def __init__(self, module):
        params = module.params
        self.module = module
        self.client = RouterClient(params)
        self.worker_url = params['worker_url'].rstrip('/')
        self.started = time.monotonic()

    def elapsed(self):
        return round(time.monotonic() - self.started, 2)

    def call(self, method, path, body=None):
        return self.client.call(method, path, body)

    def entries(self):
        entries, why = self.client.workers()
        if entries is None:
            self.fail(why)
        return entries

    def wait_for(self, wanted, timeout):
        """Poll the router's list until the replica's state is ``wanted``; the entries seen last."""
        deadline = time.monotonic() + timeout
        while True:
            entries = self.entries()
            if join_state(entries, self.worker_url) == wanted:
                return entries
            if time.monotonic() >= deadline:
                self.fail('the router still lists %s as %s after %ds (wanted %s)'
                          % (self.worker_url, join_state(entries, self.worker_url), timeout, wanted), entries)
            time.sleep(POLL_SECONDS)

    def busy(self):
        return self.client.busy_requests(self.worker_url)

    def fail(self, msg, entries=()):
        self.module.fail_json(msg=msg, worker_url=self.worker_url, entries=summary(entries),
                              state=join_state(entries, self.worker_url), busy_requests=None, elapsed=self.elapsed())

    def done(self, changed, entries, busy=None, warnings=()):
        for warning in warnings:
            self.module.warn(warning)
        self.module.exit_json(changed=changed, worker_url=self.worker_url, entries=summary(entries),
                              state=join_state(entries, self.worker_url), busy_requests=busy, elapsed=self.elapsed())


def leave(router, params):
    entries = router.entries()
    found = entries_for(entries, router.worker_url)
    if not found or router.module.check_mode:
        router.done(bool(found), entries)
    for entry in found:
        answer = router.call('DELETE', '/workers/%s' % entry.get('id'))
        if answer['kind'] != 'ok' and answer.get('status') != 404:
            router.fail('the router did not remove %s (DELETE /workers/%s: %s%s)'
                        % (router.worker_url, entry.get('id'), describe_http(answer), refusal_hint(answer)), entries)
    entries = router.wait_for('absent', params['timeout'])
    router.done(True, entries, *drain(router, params['drain_timeout']))


def drain(router, timeout):
    """Wait until the replica has no running or queued request: (requests left, warnings)."""
    deadline = time.monotonic() + timeout
    busy = router.busy()
    while busy and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        busy = router.busy()
    if busy is None:
        return None, ['%s serves no /metrics (SGLang without --enable-metrics): did not wait for its running '
                      'requests' % router.worker_url]
    if busy:
        return busy, ['%s still had %d running or queued requests after %ds' % (router.worker_url, busy, timeout)]
    return busy, []


def join(router, params):
    entries = router.entries()
    state = join_state(entries, router.worker_url)
    if state == 'present' or router.module.check_mode:
        router.done(state != 'present', entries)
    if state == 'absent':
        body = {'url': router.worker_url}
        if params['api_key']:
            body['api_key'] = params['api_key']
        answer = router.call('POST', '/workers', body)
        # 409: an addition of this URL is already under way; wait for it like for ours.
        if answer['kind'] != 'ok' and answer.get('status') != 409:
            router.fail('the router did not accept %s (POST /workers: %s%s)'
                        % (router.worker_url, describe_http(answer), refusal_hint(answer)), entries)
    router.done(True, router.wait_for('present', params['timeout']))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            ROUTER_ARGUMENT_SPEC,
            worker_url=dict(type='str', required=True),
            state=dict(type='str', choices=['absent', 'present'], default='present'),
            drain_timeout=dict(type='int', default=600),
            timeout=dict(type='int', default=120),
        ),
        supports_check_mode=True,
    )
    router = Router(module)
    if module.params['state'] == 'absent':
        leave(router, module.params)
    join(router, module.params)


if __name__ == '__main__':
    main()
