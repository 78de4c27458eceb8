# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A path as a role looks at it before it writes there (never through a link), whether a directory is already as
ansible.builtin.file would leave it, and a file's content digest that says nothing of a secret in it.

The digest is HMAC-SHA-256 under a key the controller makes for one run: a module's result (kept in the run's
artifacts) may then show whether a file holding an API key is as the role would write it, without a plain hash
anyone could test guesses of the key against."""

from __future__ import annotations

import grp
import hashlib
import hmac
import os
import pwd
import stat


def _name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return ''


def lstat_info(path):
    """What ansible.builtin.stat (follow: false) says of PATH's kind, owner, group and mode; {'exists': False} when
    nothing is there. Any other error (a path through a file, no permission) is raised as OSError."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {'exists': False, 'path': path}
    return {'exists': True, 'path': path, 'isdir': stat.S_ISDIR(info.st_mode), 'isreg': stat.S_ISREG(info.st_mode),
            'islnk': stat.S_ISLNK(info.st_mode), 'uid': info.st_uid, 'gid': info.st_gid,
            'owner': _name(pwd.getpwuid, info.st_uid), 'group': _name(grp.getgrgid, info.st_gid),
            'mode': '%04o' % stat.S_IMODE(info.st_mode)}


def dir_in_place(info, owner, group, mode):
    """Whether INFO (lstat_info's) is a directory, not a link, with OWNER, GROUP (names) and MODE ('0750'): then
    ansible.builtin.file (state: directory, follow: false) would change nothing there."""
    return bool(info.get('exists') and info.get('isdir') and not info.get('islnk')
                and info.get('owner') == owner and info.get('group') == group and info.get('mode') == mode)


def file_in_place(info, digest, owner, group, mode):
    """Whether INFO (lstat_info's, with the file's 'digest') is a regular file, not a link, with OWNER, GROUP (names),
    MODE ('0640') and the content whose digest is DIGEST: then a template or copy would change nothing there."""
    return bool(info.get('exists') and info.get('isreg') and not info.get('islnk') and digest
                and info.get('digest') == digest and info.get('owner') == owner and info.get('group') == group
                and info.get('mode') == mode)


def text_digest(text, key):
    """HMAC-SHA-256 (hex) of TEXT, encoded as UTF-8 as Ansible writes a template or a copy's content, under KEY."""
    return hmac.new(key.encode('utf-8'), text.encode('utf-8'), hashlib.sha256).hexdigest()


def file_hashes(path, key):
    """(SHA-256, HMAC-SHA-256 under KEY or '' without one), both hex, of the file at PATH, read once."""
    checksum = hashlib.sha256()
    digest = hmac.new(key.encode('utf-8'), digestmod=hashlib.sha256) if key else None
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 16), b''):
            checksum.update(block)
            if digest:
                digest.update(block)
    return checksum.hexdigest(), digest.hexdigest() if digest else ''


def file_digest(path, key):
    """HMAC-SHA-256 (hex) of the file at PATH under KEY (equal to text_digest of the text Ansible wrote there)."""
    return file_hashes(path, key)[1]
