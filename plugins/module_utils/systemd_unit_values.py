# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an inventory value may be before it lands in a systemd unit or an EnvironmentFile, and how it is written there.

Two rules. A value that no escaping can carry is refused before anything changes: a control character (a newline
would start a new directive or section), a trailing backslash where the value ends a line (systemd would join the
next line to it), a user name systemd would not accept, a path that is relative, not normalised or (in a
space-separated list) holds a space or quote. Every other value is written by systemd's own
rules: ``%`` doubled wherever specifiers expand (systemd.unit(5)), and command-line words quoted and escaped as
systemd.service(5) "Command lines" reads them (``$$`` for a literal ``$``). EnvironmentFile values are
double-quoted with ``\\``, ``"``, ``$`` and the backtick escaped (systemd.exec(5)).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re

# Whole-value patterns end in \Z, not $: $ also matches before a trailing newline, which would slip into the unit.
CONTROL = re.compile(r'[\x00-\x1f\x7f]')
# systemd's valid_user_group_name() in its strict form (the one useradd on Debian agrees with), 31 characters at most.
ACCOUNT = re.compile(r'^[a-z_][a-z0-9_-]{0,30}\Z')
UNIT_NAME = re.compile(r'^[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,200}\Z')
ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*\Z')
# Names that choose what code a process loads: the dynamic linker's and Python's own.
CODE_LOADING = re.compile(r'^(LD_|PYTHON)')
# A command-line word made of these alone is written bare (an ExecStart= stays readable); any other is quoted.
BARE_WORD = re.compile(r'^[A-Za-z0-9_+=:,./@%-]+\Z')
LIST_UNSAFE = re.compile(r'[\s"\'\\]')


def control_problem(name, value):
    if CONTROL.search(str(value)):
        return ('%s holds a control character (%r): in a unit a newline starts a new directive, so it is refused'
                % (name, str(value)))
    return None


def line_end_problem(name, value):
    """A value written bare at the end of a directive's line: a trailing backslash makes systemd read the next line
    of the unit as part of it (Description= would swallow Documentation=), and no escaping of a bare value undoes
    that without changing the value."""
    if str(value).endswith('\\'):
        return ('%s ends with "\\" (%r): systemd would read the next line of the unit as part of it, so it is refused'
                % (name, str(value)))
    return None


def text_problem(name, value):
    """A free-text value (Description=, a host, a policy, a version)."""
    return control_problem(name, value) or line_end_problem(name, value)


def account_problem(name, value):
    if not ACCOUNT.match(str(value)):
        return ('%s is %r: a user or group name is lower-case letters, digits, "_" and "-", starts with a letter '
                'or "_" and has at most 31 characters' % (name, str(value)))
    return None


def unit_name_problem(name, value):
    """A unit's name without '.service' (it is also part of file names under /etc)."""
    if not UNIT_NAME.match(str(value)) or '@' in str(value):
        return ('%s is %r: a unit name is letters, digits, "_", "-", ":" and "." (not first), without "/" or "@"'
                % (name, str(value)))
    return None


def path_problem(name, value, in_list=False):
    """An absolute, normalised path; in a space-separated list (ReadWritePaths=) also no space, quote or backslash."""
    path = str(value)
    problem = control_problem(name, path)
    if problem:
        return problem
    if not path.startswith('/') or posixpath.normpath(path) != (path.rstrip('/') or '/') or path.startswith('//'):
        return '%s is %r: it must be an absolute, normalised path (no "..", "." or doubled "/")' % (name, path)
    if in_list and LIST_UNSAFE.search(path):
        return '%s holds %r: a path in a space-separated list may not contain spaces, quotes or backslashes' % (
            name, path)
    return line_end_problem(name, path)


def command_problem(name, words):
    """A command line (a list of words): its first word an absolute path, no word with a control character."""
    if not isinstance(words, (list, tuple)) or not words:
        return '%s is empty: the unit needs a command to start' % name
    if not str(words[0]).startswith('/'):
        return '%s starts with %r: the first word must be an absolute path' % (name, str(words[0]))
    return words_problem(name, words)


def words_problem(name, words):
    """Command-line words of a list (extra arguments): none with a control character."""
    for word in words or []:
        problem = control_problem(name, word)
        if problem:
            return problem
    return None


SYSCALL_SET = re.compile(r'^@?[a-z0-9_-]+\Z')
# systemd's keywords for IPAddressAllow= and the prefixes each stands for (systemd.resource-control(5)). Only a unit
# file reads the keywords: systemd 252's systemd-run -p IPAddressAllow=localhost fails ("Failed to parse IP address
# prefix"), so the one hardening list spells them out for the unit and the precompile alike.
ADDRESS_KEYWORD_PREFIXES = {
    'any': ('0.0.0.0/0', '::/0'),
    'localhost': ('127.0.0.0/8', '::1/128'),
    'link-local': ('169.254.0.0/16', 'fe80::/64'),
    'multicast': ('224.0.0.0/4', 'ff00::/8'),
}
ADDRESS_KEYWORDS = tuple(ADDRESS_KEYWORD_PREFIXES)


def syscalls_problem(name, sets):
    """System call names or @sets for SystemCallFilter=."""
    for entry in sets or []:
        if not SYSCALL_SET.match(str(entry)):
            return '%s holds %r: a system call name or an @set (e.g. @privileged)' % (name, str(entry))
    return None


def addresses_problem(name, addresses):
    """Entries for IPAddressAllow=: an address, a network (10.0.0.0/8) or one of systemd's keywords."""
    for entry in addresses or []:
        if str(entry) in ADDRESS_KEYWORDS:
            continue
        try:
            ipaddress.ip_network(str(entry), strict=False)
        except ValueError:
            return '%s holds %r: an IP address, a network like 10.0.0.0/8, or one of %s' % (
                name, str(entry), ', '.join(ADDRESS_KEYWORDS))
    return None


def environment_problems(name, environment, allowed=()):
    """Problems with an environment mapping: names must be valid, and names that change what code is loaded
    (LD_*, PYTHON*) must be listed in `allowed`; values must not hold control characters."""
    problems = []
    for key in sorted(environment or {}, key=str):
        key_text = str(key)
        if not ENV_NAME.match(key_text):
            problems.append('%s has the variable name %r: a name is letters, digits and "_", not starting with a '
                            'digit' % (name, key_text))
        elif CODE_LOADING.match(key_text) and key_text not in allowed:
            problems.append('%s sets %s, which changes what code the service loads: list it in the allow-list '
                            'to mean it' % (name, key_text))
        problem = control_problem('%s[%s]' % (name, key_text), environment[key])
        if problem:
            problems.append(problem)
    return problems


CHECKS = {
    'text': text_problem,
    'account': account_problem,
    'path': path_problem,
    'listed_path': lambda name, value: path_problem(name, value, in_list=True),
    'unit_name': unit_name_problem,
    'command': command_problem,
    'words': words_problem,
    'syscalls': syscalls_problem,
    'addresses': addresses_problem,
}


def problems(values):
    """Every problem of `values`, a list of [variable name, kind, value] with kind one of CHECKS ('listed_path': a
    path in a space-separated directive) or 'paths' (a list of those); [] when all may be written into a unit."""
    found = []
    for name, kind, value in values:
        if kind == 'paths':
            found.extend(problem for problem in (path_problem(name, path, in_list=True) for path in value or [])
                         if problem)
            continue
        problem = CHECKS[kind](name, value)
        if problem:
            found.append(problem)
    return found


def specifiers_escaped(value):
    """A value for a directive that expands specifiers (Description=, User=, WorkingDirectory=, paths): % -> %%."""
    return str(value).replace('%', '%%')


def command_word(word):
    """One word of an ExecStart= line, read back by systemd as exactly `word`."""
    text = str(word)
    escaped = specifiers_escaped(text).replace('$', '$$')
    if BARE_WORD.match(text):
        return escaped
    return '"%s"' % escaped.replace('\\', '\\\\').replace('"', '\\"')


def command_line(words):
    return ' '.join(command_word(word) for word in words)


def environment_value(value):
    """A value of an EnvironmentFile= line (NAME=VALUE), read back by systemd as exactly `value`."""
    text = str(value)
    for char in ('\\', '"', '$', '`'):
        text = text.replace(char, '\\' + char)
    return '"%s"' % text


def service_hardening(read_write_paths, protect_home='yes', syscall_deny=(), syscall_allow=(), ip_address_allow=(),
                      device_allow=()):
    """The service's sandbox as [directive, value] pairs, in the unit's order: the one list the unit template writes
    (each value through specifiers_escaped) and the DeepGEMM precompile hands systemd-run (-p NAME=VALUE), so the
    transient unit that runs the service's code is no less confined than the service.

    Measured on an H200: CUDA, NVML, NCCL, Triton JIT, inductor and CUDA graphs run under it."""
    pairs = [
        ['UMask', '0077'],
        ['NoNewPrivileges', 'yes'],
        ['CapabilityBoundingSet', ''],
        ['AmbientCapabilities', ''],
        ['ProtectSystem', 'strict'],
        ['ReadWritePaths', ' '.join(str(path) for path in read_write_paths)],
        ['ProtectHome', str(protect_home)],
        ['PrivateTmp', 'yes'],
        # a user namespace that maps only root and the service's own user and group: seen to serve the real SGLang
        # (CPU) and the GPU stand-in (CUDA, NVML, NCCL) as before
        ['PrivateUsers', 'yes'],
        ['ProtectKernelTunables', 'yes'],
        ['ProtectKernelModules', 'yes'],
        ['ProtectKernelLogs', 'yes'],
        ['ProtectControlGroups', 'yes'],
        ['ProtectClock', 'yes'],
        ['ProtectHostname', 'yes'],
        ['ProtectProc', 'invisible'],
        ['RestrictNamespaces', 'yes'],
        ['RestrictRealtime', 'yes'],
        ['RestrictSUIDSGID', 'yes'],
        ['LockPersonality', 'yes'],
        ['RemoveIPC', 'yes'],
        ['SystemCallArchitectures', 'native'],
        # an allow-list (what a system service needs), less the denied sets; a call outside it fails with EPERM
        # instead of killing the process
        ['SystemCallFilter', '@system-service'],
    ]
    if syscall_deny:
        pairs.append(['SystemCallFilter', '~' + ' '.join(syscall_deny)])
    if syscall_allow:
        pairs.append(['SystemCallFilter', ' '.join(syscall_allow)])
    pairs += [
        ['SystemCallErrorNumber', 'EPERM'],
        ['PrivateMounts', 'yes'],
        ['RestrictAddressFamilies', 'AF_UNIX AF_INET AF_INET6 AF_NETLINK'],
    ]
    if ip_address_allow:
        # only these peers (clients, the router, the other nodes of an instance) and this host reach the service
        allowed = [prefix for entry in ['localhost'] + list(ip_address_allow)
                   for prefix in ADDRESS_KEYWORD_PREFIXES.get(str(entry), (str(entry),))]
        pairs += [['IPAddressDeny', 'any'], ['IPAddressAllow', ' '.join(dict.fromkeys(allowed))]]
    pairs.append(['DevicePolicy', 'closed'])
    # NVIDIA GPUs (and RDMA): systemd matches these groups against /proc/devices when the unit starts
    pairs += [['DeviceAllow', str(entry)] for entry in device_allow] or [['PrivateDevices', 'yes']]
    return pairs


RUNNING_STATES = ('active', 'activating', 'reloading')


def show_units(text):
    """`systemctl show UNIT... --property=...` output -> one {property: value} per unit, in the order given (systemd
    separates the units' blocks with an empty line)."""
    return [dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
            for block in str(text).strip().split('\n\n') if block.strip()]


def running(shown):
    """Whether a unit (a mapping with its ActiveState, as systemctl show or ansible.builtin.systemd_service's status
    gives it) runs or is starting: a start would change nothing."""
    return (shown or {}).get('ActiveState', '') in RUNNING_STATES


def settled(shown, enabled):
    """Whether a unit (one of show_units' dicts, with ActiveState, UnitFileState and NeedDaemonReload) runs, is
    enabled or not as ENABLED says, and is loaded as its file is written: starting and enabling it would change
    nothing, and systemd needs no daemon-reload for it."""
    return (running(shown)
            and shown.get('UnitFileState') == ('enabled' if enabled else 'disabled')
            and shown.get('NeedDaemonReload') == 'no')
