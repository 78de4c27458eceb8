# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for sglang_ready: runs the module in slices so that long waits show progress.

Each slice runs the module for ``progress_interval`` seconds with ``resume`` set; a
slice that ends without a decision returns the state to resume from, and this
plugin prints one progress line, optionally appends a JSON record to the file
named by K26DEPLOY_PROGRESS_FILE, and starts the next slice.  The last slice's
result, less the internal keys, is the task's result.
"""

from __future__ import annotations

import os
import time

from ansible.utils.display import Display
from ansible_collections.k26.deploy.plugins.module_utils.k26_progress import PROGRESS_FILE_ENV, write_progress
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import SECRET_MASK
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import PROGRESS_RECORD_FIELDS
from ansible_collections.k26.deploy.plugins.plugin_utils.progress_action import ProgressAction

display = Display()

INTERNAL_KEYS = ('resume', 'done')
MAX_LOG_CHARS = 300


def mask_secrets(text, secrets):
    """Replace every secret value in ``text``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, SECRET_MASK)
    return text


def progress_record(host, unit, result, secrets, hide_log):
    """The structured progress record of one unfinished slice (PROGRESS_RECORD_FIELDS)."""
    log = '' if hide_log else mask_secrets(str(result.get('last_log_line') or ''), secrets)
    values = dict(host=host, unit=unit, elapsed=result.get('elapsed'), phase=result.get('phase'), last_log_line=log,
                  restarts=result.get('restarts', 0), time=time.time())
    return {name: values[name] for name in PROGRESS_RECORD_FIELDS}


def progress_line(record):
    """'sglang_ready [host] unit: 120s loading (restarts 0) | <latest journal line>'."""
    line = 'sglang_ready [%s] %s: %ds %s (restarts %s)' % (
        record['host'], record['unit'], int(record['elapsed'] or 0), record['phase'], record['restarts'])
    log = record['last_log_line']
    if log:
        if len(log) > MAX_LOG_CHARS:
            log = log[:MAX_LOG_CHARS - 3] + '...'
        line += ' | ' + log
    return line


class ActionModule(ProgressAction):

    CHECK_MODE_DROPPED = ('resume',)

    def run_in_steps(self, args, task_vars):
        host = task_vars.get('inventory_hostname', '')
        unit = str(args.get('unit', ''))
        secrets = [str(args['api_key'])] if args.get('api_key') else []
        progress_file = os.environ.get(PROGRESS_FILE_ENV)
        args['resume'] = {}
        while True:
            slice_result = self._execute_module(module_args=args, task_vars=task_vars)
            if slice_result.get('failed') or slice_result.get('done', True) is not False \
                    or not isinstance(slice_result.get('resume'), dict):
                break
            record = progress_record(host, unit, slice_result, secrets, hide_log=self._task.no_log)
            display.display(progress_line(record))
            self._write_progress(progress_file, record)
            args['resume'] = slice_result['resume']

        for key in INTERNAL_KEYS:
            slice_result.pop(key, None)
        if progress_file and 'reason' in slice_result:
            record = progress_record(host, unit, slice_result, secrets, hide_log=self._task.no_log)
            record.update(done=True, reason=slice_result['reason'], ready=bool(slice_result.get('ready')))
            self._write_progress(progress_file, record)
        return slice_result

    @staticmethod
    def _write_progress(path, record):
        write_progress(record, lambda text: display.warning('sglang_ready: ' + text), path=path)
