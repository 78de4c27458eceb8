# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Inputs that are well-formed but would break the host late or silently: the service account and its directories.

The role makes the service user a system account with no login shell and its home at sglang_service_home, and
gives its directories to that user with mode 0750. Pointed at an account or a directory others depend on, that
would take a person's login away, or a shared directory away from its other users; so those are refused before
anything changes, with the reason, unless the operator says the account is meant (sglang_service_existing_account_ok).
Root's account and group are refused always: the service runs code it downloads.
"""

from __future__ import annotations

import posixpath

NO_LOGIN_SHELLS = frozenset(['/usr/sbin/nologin', '/sbin/nologin', '/bin/false', '/usr/bin/false'])
# The first UID of people's accounts (login.defs UID_MIN on Debian, Ubuntu and EL).
FIRST_LOGIN_UID = 1000
# The first UID useradd --system hands out (login.defs SYS_UID_MIN: 100 on Debian, 201 on EL); below it are the
# distribution's static accounts (daemon, www-data), never the role's.
FIRST_DYNAMIC_SYSTEM_UID = 100
# Directories the system and other software share (FHS): chowning one to the service breaks them.
SYSTEM_DIRECTORIES = frozenset([
    '/', '/bin', '/boot', '/dev', '/etc', '/home', '/lib', '/lib32', '/lib64', '/media', '/mnt', '/opt', '/proc',
    '/root', '/run', '/sbin', '/srv', '/sys', '/tmp', '/usr', '/usr/bin', '/usr/lib', '/usr/lib64', '/usr/local',
    '/usr/local/bin', '/usr/local/lib', '/usr/sbin', '/usr/share', '/var', '/var/cache', '/var/lib', '/var/log',
    '/var/opt', '/var/spool', '/var/tmp', '/etc/systemd', '/etc/systemd/system',
])


def user_problem(user, home, passwd, existing_ok):
    """Why `user` may not be the service user. `passwd` is getent's passwd database ({name: [password, uid, gid,
    gecos, home, shell]}); an account the role would have created itself is a dynamic system account without a
    login shell or a comment (the role sets none) whose home is `home`. A distribution's account with that home
    (www-data with /var/www) is not: the service's files would be its other programs' too."""
    entry = passwd.get(user)
    if entry is None:
        return None
    uid, gecos, account_home, shell = int(entry[1]), entry[3], entry[4], entry[5]
    if uid == 0:
        return 'sglang_service_user %s is root\'s account (uid 0): SGLang must not run as root' % user
    if existing_ok:
        return None
    ours = (FIRST_DYNAMIC_SYSTEM_UID <= uid < FIRST_LOGIN_UID and shell in NO_LOGIN_SHELLS and account_home == home
            and not gecos)
    if not ours:
        return ('sglang_service_user %s is an existing account (uid %d, shell %s, home %s%s) the role did not create: '
                'it would set its shell to nologin and its home to %s, and its other programs would share the '
                'service\'s files. Choose another name, or set sglang_service_existing_account_ok: true to use it as '
                'it is meant' % (user, uid, shell, account_home, ', comment %r' % gecos if gecos else '', home))
    return None


def group_problem(group, user, passwd, groups, existing_ok):
    """Why `group` may not be the service group: root's group, or (unless existing_ok) a group with other members,
    who could then read the config file that holds the API key. `groups` is getent's group database
    ({name: [password, gid, members]})."""
    entry = groups.get(group)
    if entry is None:
        return None
    gid = int(entry[1])
    if gid == 0:
        return 'sglang_service_group %s is root\'s group (gid 0)' % group
    if existing_ok:
        return None
    members = set(name for name in (entry[2] or '').split(',') if name)
    members |= set(name for name, fields in passwd.items() if str(fields[2]) == str(gid))
    others = sorted(members - {user})
    if others:
        return ('sglang_service_group %s has other members (%s): they could read the config file with the API key. '
                'Choose a group of its own, or set sglang_service_existing_account_ok: true to share it as meant'
                % (group, ', '.join(others)))
    return None


def account_in_place(user, group, home, shell, supplementary, passwd, groups):
    """Whether getent's databases (`passwd`, `groups`, as above) show the service account as the role's user and group
    tasks would leave it: the group exists, and the user exists with it as primary group, `home`, `shell` and a
    member of each of the `supplementary` groups. Then neither task would change anything."""
    entry, primary = passwd.get(user), groups.get(group)
    if entry is None or primary is None:
        return False
    if entry[2] != primary[1] or entry[4] != home or entry[5] != shell:
        return False
    return all(name in groups and user in groups[name][2].split(',') for name in supplementary)


def directory_problems(directories, root_only):
    """Why each of `directories` ([variable, path]) may not be given to the service (owner and mode 0750);
    `root_only` is the directory of root's rollback store, which the service may not own any part of."""
    problems = []
    for name, path in directories:
        normal = posixpath.normpath(str(path))
        if normal in SYSTEM_DIRECTORIES:
            problems.append('%s is %s, a directory the system shares: the role would give it to the service '
                            '(owner, mode 0750). Use a directory of its own, e.g. %s/sglang' % (name, normal, normal.rstrip('/')))
        elif normal == root_only or normal.startswith(root_only + '/'):
            problems.append('%s is %s, inside root\'s rollback store: the service may not own it' % (name, normal))
    return problems


def missing_path_problems(missing):
    """Extra writable paths (sglang_service_read_write_paths) that do not exist on the host: systemd cannot make
    them writable and refuses to start the unit (status 226/NAMESPACE)."""
    return ['sglang_service_read_write_paths names %s, which does not exist on the host: systemd would refuse to '
            'start the unit (226/NAMESPACE). Create it first, or remove it from the list' % path for path in missing]


def problems(user, group, home, directories, passwd, groups, root_only, existing_ok=False, missing=()):
    """Every reason the account and directories may not be used ([] when none); `root_only`: see
    directory_problems; `missing` lists the extra writable paths that do not exist."""
    found = [user_problem(user, home, passwd, existing_ok), group_problem(group, user, passwd, groups, existing_ok)]
    return ([problem for problem in found if problem] + directory_problems(directories, posixpath.normpath(root_only))
            + missing_path_problems(missing))
