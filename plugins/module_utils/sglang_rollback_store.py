# -*- coding: utf-8 -*-
"""The rollback store: where root keeps the last configuration that reached ready, and whether root may trust it.

Root copies the store's files into /etc/systemd/system and /etc/sglang and restarts the unit, so whoever can write
the store, or any directory above it, or swap one of them for a link, chooses what root runs. The store is trusted
only when the directory, every directory above it and each saved file are owned by root, are not links, and are
writable by nobody else (no group or other write bit). Anything else is refused, with the path that failed.
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
