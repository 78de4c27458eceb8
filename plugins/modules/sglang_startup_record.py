#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_startup_record: keep a host's SGLang start-up timelines and say when a start was slower."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_startup_record
short_description: Keep the start-up timelines of a host's SGLang server and find the starts slower than the last good one
description:
  - Meant to run on the controller (C(delegate_to) localhost) with the RV(k26.deploy.sglang_ready#module:startup) of
    M(k26.deploy.sglang_ready).
  - Keeps the host's last O(keep) starts in C(HOST.json) in O(results_dir) (one entry per InvocationID, so a start seen
    again, by a run that changed nothing, is not counted twice).
  - The newest earlier start of the host that reached ready is the last good one; a phase of this start that took
    more than O(slower_ratio) times as long as there, and at least O(slower_min_seconds) longer, is a finding
    C(K26-START-SLOWER) that names the phase (a warning, for the server serves, but a restart costs more than it did).
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  host:
    description: The host whose start this is (names the file).
    type: str
    required: true
  startup:
    description:
      - The start (C(invocation) and C(phases)) from M(k26.deploy.sglang_ready)'s RV(k26.deploy.sglang_ready#module:startup).
      - Empty (no start this run caused) reads the record without adding to it.
    type: dict
    required: true
  invocation:
    description:
      - With an empty O(startup), the InvocationID running now (what C(k26deploy status) sees). The start reported is
        that invocation's, as the deploy that caused it recorded it; a start no deploy recorded (started by hand, or by
        systemd after a crash) is reported as not observed (C(observed) false), never timed from this look.
      - Without it, the host's newest recorded start.
    type: str
    default: ''
  ready:
    description: Whether this start reached ready (only such a start is a later start's last good one).
    type: bool
    required: true
  results_dir:
    description: Directory on the controller for the records (created).
    type: path
    required: true
  slower_ratio:
    description: A phase that took more than this many times as long as at the last good start is slower.
    type: float
    default: 1.5
  slower_min_seconds:
    description: A slower phase must also have taken at least this many seconds more to be a finding.
    type: float
    default: 30
  caches:
    description:
      - The directory of this start's compile caches (C(sglang-VERSION-ARCH)); a slower start whose last good start
        had other caches says that its caches were new.
    type: str
    default: ''
  keep:
    description: Starts kept per host.
    type: int
    default: 50
attributes:
  check_mode:
    description: Compares, writes nothing.
extends_documentation_fragment:
  - k26.deploy.attributes
"""

EXAMPLES = r"""
- name: Keep this start and compare it with the last good one of this host
  k26.deploy.sglang_startup_record:
    host: "{{ inventory_hostname }}"
    startup: "{{ wait.startup }}"
    ready: "{{ wait.ready }}"
    results_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.local/share/k26deploy/startups"
  delegate_to: localhost
  register: startup
"""

RETURN = r"""
startup:
  description:
    - This start (C(invocation), C(phases), the seconds from the process start to each phase's end, C(durations), how
      long each phase took) with C(last_good) (the record it was compared with, or null) and C(findings).
    - Without a start, the recorded start of O(invocation) (or the newest), with the findings the deploy that caused
      it saw; C(observed) is false when no deploy recorded the start running now.
  returned: success
  type: dict
  sample: {"invocation": "0c1f6f6a", "phases": {"weights_loaded": 412.0, "ready": 470.5},
           "durations": {"weights_loaded": 412.0, "ready": 58.5},
           "last_good": {"invocation": "9a0e77c1", "at": "2026-12-01T10:00:00Z", "phases": {"weights_loaded": 61.0}},
           "findings": [{"id": "K26-START-SLOWER", "severity": "warning", "message": "loading the weights took ..."}]}
findings:
  description: The C(K26-START-SLOWER) findings of this start (id, severity, title, message, fix, evidence).
  returned: success
  type: list
  elements: dict
path:
  description: The host's record file.
  returned: success
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils import sglang_startup
from ansible_collections.k26.deploy.plugins.module_utils.k26_files import write_atomically

ARGUMENT_SPEC = dict(
    host=dict(type='str', required=True),
    startup=dict(type='dict', required=True),
    ready=dict(type='bool', required=True),
    results_dir=dict(type='path', required=True),
    slower_ratio=dict(type='float', default=1.5),
    slower_min_seconds=dict(type='float', default=30),
    caches=dict(type='str', default=''),
    invocation=dict(type='str', default=''),
    keep=dict(type='int', default=50),
)


def read_records(path):
    try:
        with open(path) as handle:
            records = json.load(handle)
    except (OSError, ValueError):
        return []
    return [record for record in records if isinstance(record, dict)] if isinstance(records, list) else []


def write_records(path, records):
    # the user's own records: private, in a directory made as the user's umask says
    write_atomically(path, json.dumps(records, indent=1, sort_keys=True), mode=0o600, dir_mode=0o777)


def reported(record, last_good, findings):
    return {'invocation': record.get('invocation', ''), 'at': record.get('at', ''), 'ready': record.get('ready'),
            'phases': record.get('phases') or {}, 'durations': sglang_startup.durations(record.get('phases') or {}),
            'last_good': last_good and dict((key, last_good.get(key)) for key in ('invocation', 'at', 'phases')),
            'findings': findings, 'observed': True}


def recorded(records, invocation, params):
    """The recorded start of ``invocation`` (the newest without one) as its deploy saw it: compared with the last
    good start before it. A start no deploy recorded is reported as not observed."""
    index = next((i for i in range(len(records) - 1, -1, -1)
                  if not invocation or records[i].get('invocation') == invocation), None)
    if index is None:
        return {'invocation': invocation, 'observed': False} if invocation else {}
    record = records[index]
    last_good = sglang_startup.last_good(records[:index], record.get('invocation'))
    findings = sglang_startup.slower_findings(record.get('phases') or {}, last_good, params['slower_ratio'],
                                              params['slower_min_seconds'], record.get('caches') or '')
    return reported(record, last_good, findings)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params['slower_ratio'] < 1 or params['slower_min_seconds'] < 0 or params['keep'] < 1:
        module.fail_json(msg='slower_ratio must be 1 or more, slower_min_seconds 0 or more and keep 1 or more; got '
                             '%(slower_ratio)r, %(slower_min_seconds)r and %(keep)r' % params)
    path = os.path.join(params['results_dir'], '%s.json' % params['host'].replace(os.sep, '_'))
    records = read_records(path)
    startup = params['startup'] or {}
    if not startup.get('invocation'):
        seen = recorded(records, params['invocation'], params)
        module.exit_json(changed=False, path=path, findings=seen.get('findings', []), startup=seen)
    at = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    record = sglang_startup.record_of(params['host'], startup, at, params['ready'], params['caches'])
    known = [r for r in records if r.get('invocation') == record['invocation']]
    if known:
        record['at'] = known[-1].get('at') or at
    last_good = sglang_startup.last_good(records, record['invocation'])
    findings = sglang_startup.slower_findings(record['phases'], last_good, params['slower_ratio'],
                                              params['slower_min_seconds'], params['caches'])
    updated = sglang_startup.add_record(records, record, params['keep'])
    changed = updated != records
    if changed and not module.check_mode:
        write_records(path, updated)
    module.exit_json(changed=changed, path=path, findings=findings, startup=reported(record, last_good, findings))


if __name__ == '__main__':
    main()
