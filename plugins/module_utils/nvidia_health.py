# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A GPU's health from ``nvidia-smi -q`` and the kernel's NVIDIA events: pure parsing and verdicts, no I/O.

Sources:
- ``nvidia-smi -q`` as driver 580 prints it (the H200's, recorded in tests/fixtures/nvidia/, is the reference layout:
  sections by indentation, "Name : value" leaves; ECC Errors, Retired Pages, Remapped Rows, Clocks Event Reasons,
  GPU Recovery Action, GPU Reset Status where the driver has it).
- Xid and SXid lines as the NVIDIA kernel driver logs them (``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen
  off the bus.``; NVSwitch: ``nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, ...``).
- The meaning and the immediate action of each Xid: NVIDIA's Xid Catalog (docs.nvidia.com/deploy/xid-errors,
  "Analyzing Xid Errors with the Xid Catalog", column "Resolution Bucket (Immediate Action)"). An action that needs a
  GPU reset or a reboot (RESET_GPU, RESTART_BM) makes the GPU unfit to serve until then: an error; RESTART_APP is a
  fault of the program that ran (a warning: the next start may be fine); IGNORE is information.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
from xml.etree import ElementTree

ERROR = 'error'
WARNING = 'warning'
INFO = 'info'

#: Xid -> (what it means, NVIDIA's immediate action). Xids not listed are reported with their number only.
XID_CATALOG = {
    8: ('GPU stopped processing (channel idle timeout)', 'RESTART_APP'),
    13: ('graphics engine exception', 'RESTART_APP'),
    31: ('GPU memory page fault', 'RESTART_APP'),
    32: ('invalid or corrupted push buffer stream', 'RESTART_APP'),
    38: ('driver firmware error', 'RESET_GPU'),
    43: ('GPU stopped processing (a channel was reset)', 'RESTART_APP'),
    45: ('preemptive cleanup after earlier errors', 'IGNORE'),
    46: ('GPU stopped processing', 'RESET_GPU'),
    48: ('double bit ECC error (uncorrectable)', 'RESET_GPU'),
    61: ('internal micro-controller breakpoint/warning', 'RESET_GPU'),
    62: ('internal micro-controller halt', 'RESET_GPU'),
    63: ('ECC page retirement or row remapping recorded: reset the GPU to activate it', 'RESET_GPU'),
    64: ('ECC page retirement or row remapper recording failure', 'RESET_GPU'),
    69: ('graphics engine class error', 'RESTART_APP'),
    74: ('NVLink error', 'RESET_GPU'),
    79: ('GPU has fallen off the bus', 'RESTART_BM'),
    92: ('high single-bit ECC error rate', 'IGNORE'),
    94: ('contained ECC error (the application that hit it must restart)', 'RESTART_APP'),
    95: ('uncontained ECC error', 'RESET_GPU'),
    109: ('context switch timeout', 'RESTART_APP'),
    119: ('GSP RPC timeout', 'RESET_GPU'),
    120: ('GSP error', 'RESET_GPU'),
    121: ('C2C link error', 'RESET_GPU'),
    140: ('unrecovered ECC error', 'RESET_GPU'),
    154: ('GPU recovery action changed (the line names the action)', 'IGNORE'),
}
ACTION_SEVERITY = {'RESET_GPU': ERROR, 'RESTART_BM': ERROR, 'CONTACT_SUPPORT': ERROR, 'RESTART_APP': WARNING,
                   'IGNORE': INFO}
#: NVSwitch SXids: the line itself says fatal or non-fatal, which is not parsed here; a warning, with the line shown
SXID_SEVERITY = WARNING

_DMESG_TIME = re.compile(r'^\[\s*(\d+\.\d+)\]')
# What comes before the kernel's message itself: dmesg's time, or journalctl's and syslog's "DATE HOST kernel: ".
_LINE_PREFIX = re.compile(r'^\s*(?:\[\s*\d+\.\d+\]\s*'
                          r'|(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) \S+ kernel: (?:\[\s*\d+\.\d+\]\s*)?)?')
# The driver's own messages begin with these words; another driver's message that quotes them (a mount error names a
# file system label any user may choose) is not an event.
_XID = re.compile(r'NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)$')
_SXID = re.compile(r'(nvidia-nvswitch\d*): SXid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)$')
_LEAF = re.compile(r'^(\s*)(\S.*?)\s*:\s(.*)$')
_SECTION = re.compile(r'^(\s*)(\S.*?)\s*$')
_GPU_HEADER = re.compile(r'^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$')

#: the clocks-event reasons that mean the hardware slowed the GPU down (not the idle or application settings)
SLOWDOWN_REASONS = ('HW Slowdown', 'HW Thermal Slowdown', 'HW Power Brake Slowdown', 'SW Thermal Slowdown')


def parse_smi_q(text):
    """``nvidia-smi -q`` -> {pci bus id: nested dict of its sections and values}, by indentation."""
    gpus = {}
    stack = None
    for raw in (text or '').splitlines():
        if not raw.strip():
            continue
        header = _GPU_HEADER.match(raw)
        if header:
            root = gpus.setdefault(header.group(1).upper(), {})
            stack = [(-1, root)]
            continue
        if stack is None or not raw.startswith(' '):
            continue
        leaf = _LEAF.match(raw)
        indent = len((leaf or _SECTION.match(raw)).group(1))
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if leaf and leaf.group(3).strip():
            parent[leaf.group(2).strip()] = leaf.group(3).strip()
        else:
            name = (leaf or _SECTION.match(raw)).group(2).strip().rstrip(':').strip()
            child = parent.setdefault(name, {})
            if isinstance(child, dict):
                stack.append((indent, child))
    return gpus


def _get(tree, *path):
    for name in path:
        if not isinstance(tree, dict) or name not in tree:
            return None
        tree = tree[name]
    return tree


def _count(value):
    """'0' -> 0; 'N/A' or absent -> None."""
    try:
        return int(str(value).split()[0])
    except (ValueError, IndexError, TypeError):
        return None


def _text(value):
    text = str(value or '').strip()
    return None if not text or text.upper() in ('N/A', '[N/A]') or isinstance(value, dict) else text


def _yes(value):
    """'Yes'/'No' -> True/False; 'N/A' or absent -> None."""
    text = str(value or '').strip().lower()
    return True if text == 'yes' else False if text == 'no' else None


def _uncorrectable(tree, kind):
    counts = [_count(value) for name, value in (_get(tree, 'ECC Errors', kind) or {}).items()
              if 'Uncorrectable' in name and not isinstance(value, dict)]
    counts = [count for count in counts if count is not None]
    return sum(counts) if counts else None


def gpu_health(tree):
    """The health readings of one GPU's ``nvidia-smi -q`` tree (None where the GPU does not report one)."""
    reasons = _get(tree, 'Clocks Event Reasons') or _get(tree, 'Clocks Throttle Reasons') or {}
    active = []
    for name, value in _flatten(reasons):
        if name in SLOWDOWN_REASONS and str(value).strip() == 'Active':
            active.append(name)
    reset = _get(tree, 'GPU Reset Status') or {}
    return {
        'ecc_uncorrectable_volatile': _uncorrectable(tree, 'Volatile'),
        'ecc_uncorrectable_aggregate': _uncorrectable(tree, 'Aggregate'),
        'retired_pages_pending': _yes(_get(tree, 'Retired Pages', 'Pending Page Blacklist')),
        'remapped_rows_pending': _yes(_get(tree, 'Remapped Rows', 'Pending')),
        'remapping_failed': _yes(_get(tree, 'Remapped Rows', 'Remapping Failure Occurred')),
        'recovery_action': _text(_get(tree, 'GPU Recovery Action')),
        'reset_required': _yes(reset.get('Reset Required')),
        'drain_and_reset_recommended': _yes(reset.get('Drain and Reset Recommended')),
        'slowdown': active,
    }


# nvidia-smi -q -x's clocks-event (older drivers: clocks-throttle) reason elements -> SLOWDOWN_REASONS' names
_XML_SLOWDOWNS = {'hw_slowdown': 'HW Slowdown', 'hw_thermal_slowdown': 'HW Thermal Slowdown',
                  'hw_power_brake_slowdown': 'HW Power Brake Slowdown', 'sw_thermal_slowdown': 'SW Thermal Slowdown'}


def _xml_text(gpu, path):
    element = gpu.find(path)
    return None if element is None else (element.text or '').strip()


def _xml_uncorrectable(gpu, kind):
    counts = [_count(child.text) for child in gpu.findall('ecc_errors/%s/*' % kind)
              if 'uncorrectable' in child.tag and len(child) == 0]
    counts = [count for count in counts if count is not None]
    return sum(counts) if counts else None


def gpu_health_xml(gpu):
    """The health readings of one ``<gpu>`` element of ``nvidia-smi -q -x`` (the keys of gpu_health)."""
    active = []
    for parent in ('clocks_event_reasons', 'clocks_throttle_reasons'):
        for child in gpu.findall(parent + '/*'):
            reason = re.sub(r'^clocks_(?:event|throttle)_reason_', '', child.tag)
            if reason in _XML_SLOWDOWNS and (child.text or '').strip() == 'Active':
                active.append(_XML_SLOWDOWNS[reason])
    return {
        'ecc_uncorrectable_volatile': _xml_uncorrectable(gpu, 'volatile'),
        'ecc_uncorrectable_aggregate': _xml_uncorrectable(gpu, 'aggregate'),
        'retired_pages_pending': _yes(_xml_text(gpu, 'retired_pages/pending_blacklist')),
        'remapped_rows_pending': _yes(_xml_text(gpu, 'remapped_rows/remapped_row_pending')),
        'remapping_failed': _yes(_xml_text(gpu, 'remapped_rows/remapped_row_failure')),
        'recovery_action': _text(_xml_text(gpu, 'gpu_recovery_action')),
        'reset_required': _yes(_xml_text(gpu, 'gpu_reset_status/reset_required')),
        'drain_and_reset_recommended': _yes(_xml_text(gpu, 'gpu_reset_status/drain_and_reset_recommended')),
        'slowdown': sorted(active, key=SLOWDOWN_REASONS.index),
    }


def health_from_xml(text):
    """``nvidia-smi -q -x`` -> {pci bus id: gpu_health_xml readings}; None for what is not its XML (an nvidia-smi
    without -x, an error text), so that the caller reads ``nvidia-smi -q`` instead."""
    try:
        root = ElementTree.fromstring(text or '')
    except ElementTree.ParseError:
        return None
    if root.tag != 'nvidia_smi_log':
        return None
    return {str(gpu.get('id') or '').upper(): gpu_health_xml(gpu) for gpu in root.findall('gpu') if gpu.get('id')}


def health_from_text(text):
    """``nvidia-smi -q`` -> {pci bus id: gpu_health readings}."""
    return {bus: gpu_health(tree) for bus, tree in parse_smi_q(text).items()}


def _flatten(tree):
    for name, value in tree.items():
        if isinstance(value, dict):
            yield from _flatten(value)
        else:
            yield name, value


def parse_kernel_events(text):
    """Kernel log lines (dmesg's, journalctl -k's or bare messages) -> the NVIDIA events in them, each a message
    that begins with the driver's words: [{kind, code, pci, detail, meaning, action, severity, line}]."""
    events = []
    for line in (text or '').splitlines():
        message = line[_LINE_PREFIX.match(line).end():]
        xid = _XID.match(message)
        if xid:
            code = int(xid.group(2))
            unknown = ('Xid %d (not in the catalog this package keeps)' % code, 'CONTACT_SUPPORT')
            meaning, action = XID_CATALOG.get(code, unknown)
            events.append({'kind': 'Xid', 'code': code, 'pci': xid.group(1).upper(), 'detail': xid.group(3).strip(),
                           'meaning': meaning, 'action': action, 'severity': ACTION_SEVERITY[action],
                           'line': line.strip()})
            continue
        sxid = _SXID.match(message)
        if sxid:
            events.append({'kind': 'SXid', 'code': int(sxid.group(3)), 'pci': sxid.group(2).upper(),
                           'detail': sxid.group(4).strip(), 'meaning': 'NVSwitch error (%s)' % sxid.group(1),
                           'action': 'CONTACT_SUPPORT', 'severity': SXID_SEVERITY, 'line': line.strip()})
    return events


def kmsg_line(record):
    """One /dev/kmsg record (``prio,seq,microseconds,flags[,...];text`` then `` KEY=value`` lines) -> the line dmesg
    prints for it, ``[seconds] text``; None for what is no record. The kernel writes a message's control characters
    as escapes (``\\x0a``), so one record stays one line."""
    head, separator, text = record.partition(b';')
    fields = head.split(b',')
    if not separator or len(fields) < 3 or not fields[2].isdigit():
        return None
    return '[%12.6f] %s' % (int(fields[2]) / 1e6, text.split(b'\n', 1)[0].decode('utf-8', 'replace'))


def read_kmsg(path='/dev/kmsg'):
    """The kernel's ring buffer in dmesg's format, read record by record from /dev/kmsg (each read is one record), or
    None where it cannot be read (no privilege, a container without it). dmesg's own output prints a newline inside a
    message as a line break, so text a user put in a kernel message (a file name in a mount error) could pass for a
    line of the driver's; a record's line cannot."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    lines = []
    try:
        while True:
            try:
                record = os.read(handle, 16384)
            except BlockingIOError:  # the newest record was read
                break
            except BrokenPipeError:  # overwritten while being read: the next one
                continue
            except OSError:
                break
            if not record:
                break
            line = kmsg_line(record)
            if line is not None:
                lines.append(line)
    finally:
        os.close(handle)
    return '\n'.join(lines)


def events_since(dmesg_text, since_seconds):
    """The NVIDIA events of ``dmesg`` output (seconds since boot in brackets) at or after ``since_seconds`` (the
    unit's start on the same clock: systemd's ...TimestampMonotonic / 1e6)."""
    kept = []
    for line in (dmesg_text or '').splitlines():
        stamp = _DMESG_TIME.match(line.strip())
        if stamp and float(stamp.group(1)) >= since_seconds:
            kept.append(line)
    return parse_kernel_events('\n'.join(kept))


def excerpt_lines(events):
    """Lines for a crash's journal excerpt: each event with its meaning, then the kernel's own line."""
    return ['kernel: %s: %s' % (describe(event), event['line']) for event in events]


def same_gpu(event_pci, bus_id):
    """Whether the kernel's PCI address (0000:3b:00, domain:bus:device) names the GPU of nvidia-smi's bus id
    (00000000:3B:00.0): compared on bus and device."""
    def bus_device(address):
        parts = address.upper().split(':')
        return tuple(part.split('.')[0].lstrip('0') or '0' for part in parts[-2:]) if len(parts) >= 2 else ()
    return bool(event_pci and bus_id) and bus_device(event_pci) == bus_device(bus_id)


def problems(health, events=()):
    """[(severity, what)] for one GPU: its readings, then its kernel events."""
    found = []
    action = health.get('recovery_action')
    if action in ('Reset', 'Reboot'):
        found.append((ERROR, 'the driver asks for a GPU %s before the GPU is used again (GPU Recovery Action: %s)'
                      % (action.lower(), action)))
    elif action and action != 'None':
        found.append((WARNING, 'the driver asks for %s (GPU Recovery Action)' % action))
    if health.get('reset_required'):
        found.append((ERROR, 'the GPU requires a reset (nvidia-smi: GPU Reset Status, Reset Required: Yes)'))
    if health.get('remapped_rows_pending'):
        found.append((ERROR, 'a remapped row is pending: it takes effect only after a GPU reset'))
    if health.get('remapping_failed'):
        found.append((ERROR, 'row remapping failed: the memory has an error the GPU could not remap'))
    if health.get('retired_pages_pending'):
        found.append((ERROR, 'a retired page is pending: it takes effect only after a GPU reset'))
    if health.get('ecc_uncorrectable_volatile'):
        found.append((ERROR, '%d uncorrectable ECC errors since the driver loaded'
                      % health['ecc_uncorrectable_volatile']))
    if health.get('drain_and_reset_recommended'):
        found.append((WARNING, 'nvidia-smi recommends draining and resetting the GPU'))
    if health.get('slowdown'):
        found.append((WARNING, 'the hardware slows the GPU down now: %s' % ', '.join(health['slowdown'])))
    for event in events:
        found.append((event['severity'], describe(event)))
    return found


def describe(event):
    """'Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) on 0000:3B:00'."""
    return '%s %d (%s; NVIDIA: %s) on %s' % (event['kind'], event['code'], event['meaning'], event['action'],
                                             event['pci'])


def verdict(found):
    """The worst severity of ``problems``, or None for a healthy GPU."""
    for severity in (ERROR, WARNING, INFO):
        if any(level == severity for level, dummy in found):
            return severity
    return None
