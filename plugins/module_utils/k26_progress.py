# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Progress records of long tasks (readiness waits, benchmark sweeps) for k26deploy's live view.

An action plugin appends one JSON line per record to the file named by K26DEPLOY_PROGRESS_FILE (set by k26deploy's
runner); each record carries PROGRESS_RECORD_FIELDS (module_utils/sglang_readiness.py).
"""

from __future__ import annotations

import json
import os

PROGRESS_FILE_ENV = 'K26DEPLOY_PROGRESS_FILE'


def append_progress(path, record):
    """Append one JSON line with a single write (O_APPEND keeps lines of parallel forks whole)."""
    data = (json.dumps(record, sort_keys=True) + '\n').encode('utf-8')
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_progress(record, warn, path=None):
    """Append RECORD to the progress file, if k26deploy named one; WARN(text) when it cannot."""
    path = path if path is not None else os.environ.get(PROGRESS_FILE_ENV)
    if not path:
        return
    try:
        append_progress(path, record)
    except OSError as exc:
        warn('cannot append progress to %s: %s' % (path, exc))
