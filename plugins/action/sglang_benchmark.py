# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for sglang_benchmark: runs the module once per concurrency level so that a sweep shows progress.

After each level it prints one line and appends a progress record (module_utils/k26_progress.py) with the level's
figures; the task's result joins the levels' results as one sweep, in the module's RETURN shape.
"""

from __future__ import annotations

import time

from ansible.utils.display import Display
from ansible_collections.k26.deploy.plugins.module_utils.k26_progress import write_progress
from ansible_collections.k26.deploy.plugins.module_utils.sglang_benchmark_report import level_line
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import PROGRESS_RECORD_FIELDS
from ansible_collections.k26.deploy.plugins.plugin_utils.progress_action import ProgressAction

display = Display()

DEFAULT_LEVELS = [1, 8, 16, 32]


def progress_record(host, unit, started, done, total, level):
    """The progress record after a level: phase 'benchmark N/M', the level's figures as its line."""
    values = dict(host=host, unit=unit, elapsed=round(time.time() - started, 1), phase='benchmark %d/%d' % (done, total),
                  last_log_line=level_line(level), restarts=0, time=time.time())
    return {name: values[name] for name in PROGRESS_RECORD_FIELDS}


def join_sweep(results, started):
    """The levels' results as one sweep: levels in order, journal lines of every level, the sweep's time."""
    sweep = dict(results[-1])
    sweep['levels'] = [level for result in results for level in result.get('levels') or []]
    sweep['journal_lines'] = [line for result in results for line in result.get('journal_lines') or []]
    sweep['started'] = started
    sweep['duration'] = round(time.time() - started, 1)
    return sweep


class ActionModule(ProgressAction):

    def run_in_steps(self, args, task_vars):
        levels = list(args.get('levels') or DEFAULT_LEVELS)
        host = task_vars.get('inventory_hostname', '')
        started = time.time()
        results = []
        for done, concurrency in enumerate(levels, start=1):
            level_result = self._execute_module(module_args=dict(args, levels=[concurrency]), task_vars=task_vars)
            if level_result.get('failed'):
                return level_result
            results.append(level_result)
            for level in level_result.get('levels') or []:
                record = progress_record(host, str(args.get('unit') or ''), started, done, len(levels), level)
                display.display('sglang_benchmark [%s] %s: %s' % (host, record['phase'], record['last_log_line']))
                write_progress(record, lambda text: display.warning('sglang_benchmark: ' + text))
        return join_sweep(results, started)
