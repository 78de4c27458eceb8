# -*- coding: utf-8 -*-
"""Action plugin for sglang_ready: runs the module in slices so that long waits show progress.

Each slice runs the module for ``progress_interval`` seconds with ``resume`` set; a
slice that ends without a decision returns the state to resume from, and this
plugin prints one progress line, optionally appends a JSON record to the file
named by K26DEPLOY_PROGRESS_FILE, and starts the next slice.  The last slice's
result, less the internal keys, is the task's result.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import SECRET_MASK
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import PROGRESS_RECORD_FIELDS

display = Display()

PROGRESS_FILE_ENV = 'K26DEPLOY_PROGRESS_FILE'
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


def append_progress(path, record):
    """Append one JSON line with a single write (O_APPEND keeps lines of parallel forks whole)."""
    data = (json.dumps(record, sort_keys=True) + '\n').encode('utf-8')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect

        args = dict(self._task.args)
        if self._task.check_mode:
            args.pop('resume', None)
            result.update(self._execute_module(module_args=args, task_vars=task_vars))
            return result

        host = task_vars.get('inventory_hostname', '') if task_vars else ''
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
        result.update(slice_result)
        return result

    @staticmethod
    def _write_progress(path, record):
        if not path:
            return
        try:
            append_progress(path, record)
        except OSError as exc:
            display.warning('sglang_ready: cannot append progress to %s: %s' % (path, exc))
