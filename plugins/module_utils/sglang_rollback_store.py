# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollback store: where root keeps the last configuration that reached ready, and whether root may trust it.

Root copies the store's files into /etc/systemd/system and /etc/sglang and restarts the unit, so whoever can write
the store, or any directory above it, or swap one of them for a link, chooses what root runs. The store is trusted
only when the directory, every directory above it and each saved file are owned by root, are not links, and are
writable by nobody else (no group or other write bit). Anything else is refused, with the path that failed.

The live files root saves into the store and restores over are held to the same rule: each a regular file (not a
link, a fifo, a directory) of root's, in directories root alone can write; otherwise whoever controls one (the service
account, when the configuration directory is its own) could have root copy any file (/etc/shadow) into the store and
back out with the service's group. And no directory root writes into may overlap one the service account can write.
"""

from __future__ import annotations

import posixpath

S_IWGRP = 0o020
S_IWOTH = 0o002


def path_and_parents(path):
    """'/a/b/c' -> ['/', '/a', '/a/b', '/a/b/c'] (an absolute, normalised path; a relative one is an error)."""
    if not str(path).startswith('/'):
        raise ValueError('the rollback store must be an absolute path, not %r' % (path,))
    parts = [part for part in posixpath.normpath(str(path)).split('/') if part]
    return ['/'] + ['/' + '/'.join(parts[:index]) for index in range(1, len(parts) + 1)]


def untrusted(stat_results):
    """The first reason not to trust the store, from ansible.builtin.stat results (follow: false) of its directories
    and saved files in path order; None when root alone controls every one of them. A file or directory that does
    not exist is no reason (there is then nothing to restore from it)."""
    for result in stat_results:
        stat = result.get('stat') or {}
        path = stat.get('path') or result.get('item')
        if not stat.get('exists'):
            continue
        if stat.get('islnk'):
            return '%s is a symbolic link' % path
        if stat.get('uid') != 0:
            return '%s is owned by uid %s, not root' % (path, stat.get('uid'))
        mode = int(str(stat.get('mode') or '0'), 8)
        if mode & (S_IWGRP | S_IWOTH):
            return '%s is writable by %s (mode %04o)' % (
                path, 'everyone' if mode & S_IWOTH else 'its group', mode)
    return None


def compare(files, untrusted_reason):
    """(can roll back, live differs from saved) for files looked at: each with required (default true),
    live_exists, saved_exists, live_sha256 and saved_sha256 ('' for a file that is absent or not a regular file).
    Rolling back needs a trusted store that holds a saved copy of every required file."""
    can_roll_back = not untrusted_reason and all(entry['saved_exists'] for entry in files
                                                 if entry.get('required', True))
    differs = any(entry['live_sha256'] != entry['saved_sha256'] for entry in files)
    return can_roll_back, differs


def unsafe_live_file(directories, live):
    """Why root must not save (read) or restore (write) a live file, from ansible.builtin.stat-like results (follow:
    false, with isreg) of the directories above it, in path order, and of the file itself; None when it may.
    A file that does not exist is no reason (a restore creates it, in directories root alone can write)."""
    reason = untrusted(list(directories) + [live])
    if reason:
        return reason
    stat = live.get('stat') or {}
    if stat.get('exists') and not stat.get('isreg'):
        return '%s is not a regular file' % (stat.get('path') or live.get('item'))
    return None


def _below(inner, outer):
    """INNER is OUTER or lies inside it (normalised absolute paths)."""
    return inner == outer or inner.startswith(outer.rstrip('/') + '/')


def writable_overlaps(name, path, writable):
    """Why the directory PATH (the variable NAME), which root writes into, may not be where it is: it equals,
    contains or lies inside a directory the service account can write. WRITABLE maps variable names to a directory
    or a list of them. [] when it overlaps none."""
    path = posixpath.normpath(str(path))
    found = []
    for variable, value in writable.items():
        for directory in value if isinstance(value, (list, tuple)) else [value]:
            if not directory:
                continue
            directory = posixpath.normpath(str(directory))
            if path == directory:
                how = 'is'
            elif _below(inner=path, outer=directory):
                how = 'lies inside'
            elif _below(inner=directory, outer=path):
                how = 'contains'
            else:
                continue
            found.append('%s %s %s %s %s, which the service account can write'
                         % (name, path, how, variable, directory))
    return found
