# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Files the modules keep between runs (the model's manifest on a host, the start-up records on the controller),
written so that a reader never sees half of one, and directories that must be the module's user's alone."""

from __future__ import annotations

import os
import stat
import tempfile


def write_atomically(path, text, mode=0o644, dir_mode=0o755):
    """Write ``text`` to ``path`` through a temporary file in the same directory (created with ``dir_mode``),
    flushed to disk, given ``mode`` and renamed over ``path``; the temporary file is removed on any failure."""
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, mode=dir_mode, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(handle, 'w', encoding='utf-8') as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def private_directory(path):
    """Make ``path`` a directory that only this process's user can enter (0700), or say why it cannot be one.

    In a directory others can write (``/var/tmp``), another user may have made ``path`` first, or put a link or a file
    there: what is written under it would then be theirs to read or replace. A directory this user owns is kept
    (its mode narrowed to 0700); anything else is refused and left as it is. Returns None, or the reason."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return ('%s is not a directory (a link or a file is in its place): remove it, or choose another directory'
                % path)
    if info.st_uid != os.geteuid():
        return ('%s belongs to uid %d, not to uid %d: another user made it first, and could read or replace what is '
                'written under it; remove it, or choose another directory' % (path, info.st_uid, os.geteuid()))
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return None
