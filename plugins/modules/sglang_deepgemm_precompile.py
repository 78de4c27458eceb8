#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_deepgemm_precompile: compile DeepGEMM's kernels for the serving configuration before a start."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_deepgemm_precompile
short_description: Precompile SGLang's DeepGEMM kernels for a serving configuration before the server starts with it
description:
  - Decides whether the start that is coming needs DeepGEMM's kernels compiled first (the model, so served on these
    GPUs, calls DeepGEMM; no precompile for this configuration has run on the host yet; a start is coming) and, with
    O(run), compiles them with SGLang's own C(python -m sglang.compile_deep_gemm).
  - The precompile starts a whole SGLang server (every rank, the weights, a KV cache) on 127.0.0.1 and a free port,
    so the GPUs must be free - stop the service first. It runs as a transient systemd unit, as O(user) with the
    service's environment file O(env_file) (the compile caches), with a deadline of O(timeout) seconds after which
    systemd stops the whole unit (SGLang's precompile never exits when its server hangs).
  - A successful precompile leaves a record named by the configuration's key (SGLang's version, the compute
    capability, the options and model fields that change the kernels, the kernel environment) in O(state_dir), owned
    by root, so the same configuration is not compiled again while its kernels are in O(deep_gemm_dir).
  - A failed one fails with the unit's journal, and the cache keeps whatever it compiled.
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  run:
    description: Precompile when needed. V(false) only decides (RV(needed), RV(reason)).
    type: bool
    default: true
  mode:
    description:
      - V(auto) precompiles when the model (its C(config.json) in the C(model-path) directory) calls DeepGEMM on these
        GPUs, V(always) whatever the model, V(never) not at all (a start then compiles what it needs itself).
    type: str
    choices: [auto, always, never]
    default: auto
  start_coming:
    description: The deploy starts the server (a first start, or a restart for a changed configuration).
    type: bool
    required: true
  options:
    description: The serving options, by SGLang's names (the config file's content, without the API key).
    type: dict
    required: true
  environment:
    description: The service's own environment variables (those that change the kernels are part of the key).
    type: dict
    default: {}
  compute_capabilities:
    description: The GPUs' compute capabilities as nvidia-smi reports them (C(9.0)); empty without a GPU.
    type: list
    elements: str
    default: []
  sglang_version:
    description: The SGLang version that serves (part of the key).
    type: str
    required: true
  nnodes:
    description: Nodes of the instance; a multi-node instance compiles at its start.
    type: int
    default: 1
  config_file:
    description: The config file the service's C(launch_server --config) reads; the precompile reads the same one.
    type: path
    required: true
  env_file:
    description: The service's environment file (the compile caches' variables).
    type: path
    required: true
  python:
    description: The interpreter of SGLang's virtualenv (or the simulator's).
    type: path
    required: true
  simulator_path:
    description: The SGLang simulator (its package directory) when the host runs the simulator (its compile mode stands for SGLang's).
    type: path
  user:
    description: The service account the precompile runs as.
    type: str
    required: true
  group:
    description: The service account's group.
    type: str
    required: true
  working_dir:
    description: The precompile's working directory (the service's home).
    type: path
    required: true
  hardening:
    description:
      - The service's sandbox as [directive, value] pairs (the sglang_service role's unit writes the same list, from
        C(service_hardening) in plugins/module_utils/systemd_unit_values.py); the transient unit gets each as
        C(systemd-run -p), and C(PrivateNetwork=yes) besides, so that the keyless server the precompile starts on
        127.0.0.1 is reachable from its own network namespace only.
    type: list
    elements: list
    default: []
  deep_gemm_dir:
    description: The DeepGEMM cache directory the environment file names (C(SGLANG_DG_CACHE_DIR)).
    type: path
    required: true
  state_dir:
    description: Root's directory for the records of precompiles that ran (one per configuration key).
    type: path
    default: /var/lib/k26deploy/deepgemm
  name:
    description: Names the records' subdirectory and the transient unit (the service's name).
    type: str
    required: true
  timeout:
    description: Seconds the precompile may take (SGLang's C(--timeout)); systemd stops it a minute later.
    type: int
    default: 3600
  journal_lines:
    description: Journal lines of the precompile in RV(journal_excerpt) when it fails.
    type: int
    default: 40
attributes:
  check_mode:
    description: Decides and reports what would run; compiles nothing.
extends_documentation_fragment:
  - k26.deploy.attributes
notes:
  - SGLang 0.5.23's C(compile_deep_gemm) ignores C(--config); the command merges the config file the way
    C(launch_server) does first, and drops the API keys and TLS options (its readiness poll sends no key and speaks
    plain HTTP; its server listens on 127.0.0.1 only).
"""

EXAMPLES = r"""
- name: Decide whether the coming start needs DeepGEMM's kernels first
  k26.deploy.sglang_deepgemm_precompile:
    run: false
    start_coming: true
    options: "{{ sglang_service_effective_options }}"
    sglang_version: "0.5.23"
    compute_capabilities: ["9.0"]
    config_file: /etc/sglang/sglang-k26.yaml
    env_file: /etc/sglang/sglang-k26.env
    python: /opt/sglang/venv/bin/python
    user: sglang
    group: sglang
    working_dir: /var/lib/sglang
    deep_gemm_dir: /var/cache/sglang/sglang-0.5.23-sm90/deep_gemm
    name: sglang-k26
  register: plan
"""

RETURN = r"""
needed:
  description: A precompile is needed before the coming start.
  returned: always
  type: bool
ran:
  description: This run precompiled (and it succeeded).
  returned: always
  type: bool
reason:
  description: Why it is needed or not, in words.
  returned: always
  type: str
uses_deepgemm:
  description: Whether the model, so served on these GPUs, calls DeepGEMM (None when its config.json is not on the host).
  returned: always
  type: bool
key:
  description: The configuration's key (16 hex digits).
  returned: always
  type: str
seconds:
  description: How long the precompile took (None when it did not run).
  returned: always
  type: float
unit:
  description: The transient unit the precompile ran in ('' when it did not run).
  returned: always
  type: str
record:
  description: The record of the precompile for this key ('' when there is none).
  returned: always
  type: str
journal_excerpt:
  description: The precompile's last journal lines (a failed one's explain why).
  returned: always
  type: list
  elements: str
reason_code:
  description: On failure, C(precompile_failed) or C(precompile_timeout).
  returned: failure
  type: str
"""

import json
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils import sglang_deepgemm
from ansible_collections.k26.deploy.plugins.module_utils.k26_files import write_atomically
from ansible_collections.k26.deploy.plugins.module_utils.sglang_probe import SglangProbe
from ansible_collections.k26.deploy.plugins.module_utils.sglang_rollback_store import path_and_parents, untrusted

ARGUMENT_SPEC = dict(
    run=dict(type='bool', default=True),
    mode=dict(type='str', choices=list(sglang_deepgemm.PRECOMPILE_MODES), default='auto'),
    start_coming=dict(type='bool', required=True),
    options=dict(type='dict', required=True),
    environment=dict(type='dict', default={}),
    compute_capabilities=dict(type='list', elements='str', default=[]),
    sglang_version=dict(type='str', required=True),
    nnodes=dict(type='int', default=1),
    config_file=dict(type='path', required=True),
    env_file=dict(type='path', required=True),
    python=dict(type='path', required=True),
    simulator_path=dict(type='path'),
    user=dict(type='str', required=True),
    group=dict(type='str', required=True),
    working_dir=dict(type='path', required=True),
    hardening=dict(type='list', elements='list', default=[]),
    deep_gemm_dir=dict(type='path', required=True),
    state_dir=dict(type='path', default='/var/lib/k26deploy/deepgemm'),
    name=dict(type='str', required=True),
    timeout=dict(type='int', default=3600),
    journal_lines=dict(type='int', default=40),
)

#: seconds systemd gives the precompile beyond its own --timeout before it stops the unit
DEADLINE_GRACE = 60
#: the transient unit's own properties, beside the service's hardening: its environment, deadline and end; and a
#: network namespace of its own (it needs only loopback, where its server answers without a key)
OWN_PROPERTIES = ('EnvironmentFile', 'RuntimeMaxSec', 'KillMode', 'TimeoutStopSec', 'RemainAfterExit',
                  'PrivateNetwork')


def read_model_config(options):
    """The model's config.json (a dict) when model-path is a directory on this host, else None."""
    model_path = str(options.get('model-path') or options.get('model') or '')
    path = os.path.join(model_path, 'config.json')
    if not model_path.startswith('/') or not os.path.isfile(path):
        return None
    with open(path, encoding='utf-8') as handle:
        return json.load(handle)


def lowest_capability(capabilities):
    """The lowest compute capability of the GPUs (the one DeepGEMM's support depends on), None without a GPU."""
    known = [cc for cc in capabilities if sglang_deepgemm.sm_version(cc) is not None]
    return min(known, key=sglang_deepgemm.sm_version) if known else None


def stat_dict(path):
    """What sglang_rollback_store.untrusted reads of a path (ansible.builtin.stat's shape), without following links."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {'item': path, 'stat': {'exists': False}}
    return {'item': path, 'stat': {'exists': True, 'path': path, 'islnk': os.path.islink(path), 'uid': st.st_uid,
                                   'mode': '%04o' % (st.st_mode & 0o7777)}}


def record_path(params, key):
    return os.path.join(params['state_dir'], params['name'], '%s.json' % key)


def read_record(path):
    try:
        with open(path, encoding='utf-8') as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def cache_entries(directory):
    try:
        return len(os.listdir(directory))
    except OSError:
        return 0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def compile_command(params, port):
    extra = ['--port', str(port), '--timeout', str(params['timeout'])]
    if params['simulator_path']:
        return [params['python'], params['simulator_path'], '--sim-compile-deep-gemm', '--config',
                params['config_file'], '--host', '127.0.0.1'] + extra
    return sglang_deepgemm.compile_argv(params['python'], params['config_file'], extra)


def systemd_run_argv(params, unit, command):
    """The transient unit: the service's user, environment file, home and hardening, a network namespace of its own,
    the whole cgroup stopped at the deadline. It stays loaded once its process ended (RemainAfterExit), so its result
    can be read; systemd-run starts it and returns (its --wait needs the D-Bus daemon, which a host without one
    lacks: systemctl does not)."""
    own = ['EnvironmentFile=%s' % params['env_file'], 'RuntimeMaxSec=%d' % (params['timeout'] + DEADLINE_GRACE),
           'KillMode=control-group', 'TimeoutStopSec=30', 'RemainAfterExit=yes', 'PrivateNetwork=yes']
    properties = own + ['%s=%s' % (name, value) for name, value in params.get('hardening') or []]
    argv = ['systemd-run', '--unit', unit, '--description', 'DeepGEMM precompile for %s' % params['name'],
            '--uid', params['user'], '--gid', params['group'], '--working-directory', params['working_dir']]
    for assignment in properties:
        argv += ['--property', assignment]
    return argv + ['--service-type=exec', '--quiet', '--'] + command


def outcome_of(properties):
    """running, succeeded, timeout or failed, from the transient unit's properties (SglangProbe.unit_properties)."""
    state = properties.get('ActiveState', '')
    if state == 'active' and properties.get('SubState') == 'exited':
        return 'succeeded' if properties.get('Result') == 'success' else 'failed'
    if state in ('failed', 'inactive'):
        return 'timeout' if properties.get('Result') == 'timeout' else 'failed'
    return 'running'


def wait_for(module, probe, deadline):
    """The unit's outcome; 'timeout' when it still runs at ``deadline`` (monotonic), after systemd stopped it."""
    while True:
        properties = probe.unit_properties()
        outcome = outcome_of(properties)
        if outcome != 'running':
            return outcome, properties
        if time.monotonic() > deadline:
            module.run_command(['systemctl', 'stop', probe.unit])
            return 'timeout', properties
        time.sleep(1)


def precompile(module, params, key):
    """Run the precompile in a transient unit; (seconds, unit, excerpt) or fail_json."""
    unit = '%s-deepgemm-%s-%d.service' % (params['name'], key, int(time.time()))
    command = compile_command(params, free_port())
    if any('$' in word for word in command):
        module.fail_json(msg='a path of the precompile holds a "$", which systemd would expand: %s' % command)
    started = time.monotonic()
    rc, dummy, err = module.run_command(systemd_run_argv(params, unit, command))
    if rc != 0:
        module.fail_json(msg='systemd-run could not start the DeepGEMM precompile: %s' % err.strip(),
                         reason_code='precompile_failed', needed=True, ran=False, key=key, unit=unit)
    probe = SglangProbe(module, unit, url='')  # the unit only: its properties and its journal
    outcome, properties = wait_for(module, probe, started + params['timeout'] + 2 * DEADLINE_GRACE)
    seconds = round(time.monotonic() - started, 1)
    probe.sync_journal(ended=outcome != 'timeout')
    excerpt = probe.journal_lines([], params['journal_lines'])
    module.run_command(['systemctl', 'stop', unit])
    module.run_command(['systemctl', 'reset-failed', unit])
    if outcome != 'succeeded':
        timed_out = outcome == 'timeout' or seconds >= params['timeout']
        what = ('did not finish within its timeout of %ds' % params['timeout'] if timed_out else
                'failed (%s, status %s)' % (properties.get('Result') or '?', properties.get('ExecMainStatus') or '?'))
        module.fail_json(msg='the DeepGEMM precompile %s (%.1fs), before the server was started with this '
                             'configuration; its journal (%s) says: %s' % (what, seconds, unit,
                                                                           ' | '.join(excerpt[-5:])),
                         reason_code='precompile_timeout' if timed_out else 'precompile_failed',
                         needed=True, ran=False, key=key, seconds=seconds, unit=unit, journal_excerpt=excerpt,
                         reason='the precompile failed', record='', uses_deepgemm=None)
    return seconds, unit, excerpt


def keep_record(module, params, key, seconds, unit):
    """Root's record of a successful precompile, written only where root alone controls every directory above it."""
    path = record_path(params, key)
    reason = untrusted([stat_dict(p) for p in path_and_parents(os.path.dirname(path))])
    if reason:
        module.warn('the precompile is not recorded (%s): the next deploy compiles again' % reason)
        return ''
    record = {'key': key, 'at': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), 'seconds': seconds,
              'unit': unit, 'sglang': params['sglang_version'], 'deep_gemm_dir': params['deep_gemm_dir']}
    write_atomically(path, json.dumps(record, indent=2, sort_keys=True) + '\n', mode=0o644, dir_mode=0o755)
    return path


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params['timeout'] < 1:
        module.fail_json(msg='timeout must be 1 or more seconds, not %d' % params['timeout'])
    if any(len(pair) != 2 or not str(pair[0]).isalnum() for pair in params['hardening']):
        module.fail_json(msg='hardening must be [directive, value] pairs, got %r' % (params['hardening'],))
    options = sglang_deepgemm.long_option_names(params['options'])
    try:
        model_config = read_model_config(options)
    except (OSError, ValueError) as error:
        module.fail_json(msg="the model's config.json cannot be read: %s" % error)
    capability = lowest_capability(params['compute_capabilities'])
    used, why = (None, '') if model_config is None else sglang_deepgemm.uses_deepgemm(
        capability, options, params['environment'], model_config)
    key = sglang_deepgemm.cache_key(params['sglang_version'], capability, options, model_config,
                                    params['environment'])
    path = record_path(params, key)
    compiled = sglang_deepgemm.precompiled_marker(read_record(path), params['deep_gemm_dir'],
                                                  cache_entries(params['deep_gemm_dir']))
    needed, reason = sglang_deepgemm.precompile_plan(params['mode'], used, why, compiled, params['start_coming'],
                                                     params['nnodes'])
    result = dict(changed=False, needed=needed, ran=False, reason=reason, uses_deepgemm=used, key=key, seconds=None,
                  unit='', record=path if compiled else '', journal_excerpt=[])
    if needed and params['run'] and not module.check_mode:
        seconds, unit, excerpt = precompile(module, params, key)
        result.update(ran=True, seconds=seconds, unit=unit, journal_excerpt=excerpt,
                      record=keep_record(module, params, key, seconds, unit))
    result['changed'] = needed and params['run']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
