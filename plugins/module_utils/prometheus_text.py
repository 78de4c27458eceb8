# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The samples of a /metrics text, read by the rules of Prometheus's text exposition format
(https://prometheus.io/docs/instrumenting/exposition_formats/), and of OpenMetrics' text where it differs (what
SGLang's prometheus_client writes to a client that asks for it). Python's standard library only: the replica guard
imports this file on hosts without the collection (roles/sglang_service/vars/main.yml installs it beside the guard).

The rules, as read here:
- A line ends in a line feed (not CR LF); an empty line, or one of blanks and tabs only, is nothing.
- A line whose first character past blanks and tabs is ``#`` is a comment: ``# HELP name docstring`` and
  ``# TYPE name type`` are checked (a name; a docstring's backslashes escape only ``\\``, ``n`` and, in
  OpenMetrics, ``"``; exactly one type of Prometheus's or OpenMetrics'), the others (``# UNIT``, OpenMetrics'
  ``# EOF``) are ignored. Nothing of them is returned.
- Any other line is a sample: ``name{label="value",...} value [timestamp]``, tokens apart by any blanks and tabs.
  The name is ``[a-zA-Z_:][a-zA-Z0-9_:]*``, or any string quoted first inside the braces (``{"my.name",a="b"}``);
  a label's name is ``[a-zA-Z_][a-zA-Z0-9_]*`` or quoted; a label value is quoted, with ``\\\\``, ``\\"`` and
  ``\\n`` its only escapes (any other character, ``}``, ``,``, ``#`` or a tab included, stands for itself); a
  comma may follow the last label; no label twice.
- A value is a float as Go's ParseFloat reads it, less what Prometheus refuses: decimal digits with an optional
  point and exponent, ``NaN``, ``Inf``/``Infinity`` with an optional sign, in any case; no hexadecimal, no ``_``,
  nothing beyond a float64's range. A timestamp is an int64 (the text format's milliseconds) or a decimal number
  (OpenMetrics' seconds); it is checked, not returned.
- After the value (and timestamp), `` # {labels} value [timestamp]`` is an OpenMetrics exemplar: checked, ignored.

A line off these rules is skipped, and the text's other lines are read: the format is line by line, and one line
says nothing of the others. Prometheus refuses a whole scrape for one such line; the callers here look for a few
named gauges, and losing them all to a line they do not need would cost more (a drain that does not wait, a guard
that cannot tell a busy scheduler from a hung one) than the line itself. A text cut short (a body at its size limit)
loses its unfinished last line, which has no line feed. A caller that wants them gets the skipped lines (samples'
``malformed``). The format's rules across lines (a metric's lines in one group, TYPE before its samples) are not
checked: no caller needs them.
"""

from __future__ import annotations

import math
import re
from collections import namedtuple

Sample = namedtuple('Sample', ['name', 'labels', 'value'])

METRIC_NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
LABEL_NAME = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*')
_DECIMAL = re.compile(r'[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?')
_SPECIAL = re.compile(r'[+-]?(?:inf|infinity)|nan', re.IGNORECASE)
_INTEGER = re.compile(r'[+-]?[0-9]+')
_BLANKS = re.compile(r'[ \t]+')
BLANKS = ' \t'
ESCAPES = {'\\': '\\', '"': '"', 'n': '\n'}
TYPES = ('counter', 'gauge', 'histogram', 'summary', 'untyped',  # Prometheus
         'unknown', 'gaugehistogram', 'stateset', 'info')  # OpenMetrics
INT64 = 2 ** 63


class MalformedLine(ValueError):
    """A line off the format; its message says where."""


def samples(text, malformed=None):
    """Each sample of ``text`` (a str; anything else has none), in order: Sample(name, labels, value), ``labels``
    a dict, ``value`` a float. A malformed line is skipped; with a list as ``malformed``, (its number from 1, the
    line, why) is appended for each."""
    if not isinstance(text, str):
        return
    lines = text.split('\n')
    unfinished = lines.pop()  # what follows the last line feed: nothing in a whole text
    for number, line in enumerate(lines, 1):
        try:
            sample = parse_line(line)
        except MalformedLine as exc:
            if malformed is not None:
                malformed.append((number, line, str(exc)))
            continue
        if sample is not None:
            yield sample
    if unfinished.strip(BLANKS) and malformed is not None:
        malformed.append((len(lines) + 1, unfinished, 'no line feed at its end (a text cut short)'))


def parse_line(line):
    """One line without its line feed: a Sample, or None for an empty line or a comment. Raises MalformedLine."""
    pos = _skip(line, 0)
    if pos == len(line):
        return None
    if line[pos] == '#':
        _comment(line, pos + 1)
        return None
    name = None
    if line[pos] != '{':
        match = METRIC_NAME.match(line, pos)
        if not match:
            raise MalformedLine('no metric name at column %d' % (pos + 1))
        name, pos = match.group(), match.end()
        if pos < len(line) and line[pos] not in BLANKS + '{':
            raise MalformedLine('%r at column %d: not in a metric name' % (line[pos], pos + 1))
    labels = {}
    brace = _skip(line, pos)
    if brace < len(line) and line[brace] == '{':
        name, labels, pos = _labels(line, brace, name)
        if name is None:
            raise MalformedLine('no metric name, outside the braces or quoted first inside them')
    rest, hashed, exemplar = line[pos:].partition('#')
    tokens = _tokens(rest)
    if not 1 <= len(tokens) <= 2:
        raise MalformedLine('%d tokens after the name and labels: a value and an optional timestamp wanted'
                            % len(tokens))
    value = parse_value(tokens[0])
    if len(tokens) == 2:
        parse_timestamp(tokens[1])
    if hashed:
        _exemplar(rest, exemplar)
    return Sample(name, labels, value)


def parse_value(token):
    """A sample's value: a float64 as Prometheus reads it."""
    if _SPECIAL.fullmatch(token):
        return float(token)
    if _DECIMAL.fullmatch(token):
        value = float(token)
        if not math.isinf(value):
            return value
        raise MalformedLine('%s: beyond a float64' % token)
    raise MalformedLine('%r: not a value (a decimal number, NaN, +Inf or -Inf)' % token)


def parse_timestamp(token):
    """A sample's timestamp: an int64 (milliseconds) or, in OpenMetrics, a decimal number (seconds)."""
    if _INTEGER.fullmatch(token):
        if -INT64 <= int(token) < INT64:
            return int(token)
        raise MalformedLine('%s: a timestamp beyond an int64' % token)
    if _DECIMAL.fullmatch(token):
        return parse_value(token)
    raise MalformedLine('%r: not a timestamp' % token)


def _skip(line, pos):
    while pos < len(line) and line[pos] in BLANKS:
        pos += 1
    return pos


def _tokens(text):
    return [token for token in _BLANKS.split(text) if token]


def _quoted(line, pos):
    """The string quoted at ``line[pos]`` (a double quote), unescaped, and the position past its closing quote."""
    chars = []
    pos += 1
    while pos < len(line):
        char = line[pos]
        if char == '"':
            return ''.join(chars), pos + 1
        if char == '\\':
            escaped = line[pos + 1:pos + 2]
            if escaped not in ESCAPES:
                raise MalformedLine('\\%s at column %d: only \\\\, \\" and \\n are escapes' % (escaped, pos + 1))
            chars.append(ESCAPES[escaped])
            pos += 2
        else:
            chars.append(char)
            pos += 1
    raise MalformedLine('a quoted string without its closing quote')


def _labels(line, pos, name):
    """The braces opening at ``line[pos]``: (the metric name, quoted first inside them or else ``name``, the labels,
    the position past the closing brace)."""
    labels = {}
    pos += 1
    while True:
        pos = _skip(line, pos)
        if pos < len(line) and line[pos] == '}':  # none, or a comma after the last
            return name, labels, pos + 1
        if line[pos:pos + 1] == '"':
            key, pos = _quoted(line, pos)
            pos = _skip(line, pos)
            if line[pos:pos + 1] != '=':  # a quoted metric name, first and alone
                if labels or name is not None or not key:
                    raise MalformedLine('a quoted name at column %d that names no label and no metric' % (pos + 1))
                name = key
                key = None
        else:
            match = LABEL_NAME.match(line, pos)
            if not match:
                raise MalformedLine('no label name at column %d' % (pos + 1))
            key, pos = match.group(), _skip(line, match.end())
        if key is not None:
            if not key or key in labels:
                raise MalformedLine('label %r empty or twice' % key)
            if line[pos:pos + 1] != '=':
                raise MalformedLine('no = after label %s' % key)
            pos = _skip(line, pos + 1)
            if line[pos:pos + 1] != '"':
                raise MalformedLine('label %s: its value unquoted' % key)
            labels[key], pos = _quoted(line, pos)
            pos = _skip(line, pos)
        if line[pos:pos + 1] == ',':
            pos += 1
        elif line[pos:pos + 1] == '}':
            return name, labels, pos + 1
        else:
            raise MalformedLine('column %d: a comma or a closing brace wanted' % (pos + 1))


def _exemplar(before, text):
    """OpenMetrics' `` # {labels} value [timestamp]`` after a sample's value: checked."""
    pos = _skip(text, 0)
    if not before.endswith(tuple(BLANKS)) or pos == 0 or text[pos:pos + 1] != '{':
        raise MalformedLine('a # after the value that starts no exemplar ( # {labels} value)')
    name, dummy, pos = _labels(text, pos, None)
    tokens = _tokens(text[pos:])
    if name is not None or not 1 <= len(tokens) <= 2:
        raise MalformedLine('an exemplar without its value, or with more than a value and a timestamp')
    parse_value(tokens[0])
    if len(tokens) == 2:
        parse_timestamp(tokens[1])


def _comment(line, pos):
    """A comment's text from ``line[pos]`` (past its #): HELP and TYPE checked, the others ignored."""
    pos = _skip(line, pos)
    end = pos
    while end < len(line) and line[end] not in BLANKS:
        end += 1
    keyword = line[pos:end]
    if keyword not in ('HELP', 'TYPE'):
        return
    pos = _skip(line, end)
    if line[pos:pos + 1] == '"':
        name, pos = _quoted(line, pos)
    else:
        match = METRIC_NAME.match(line, pos)
        name, pos = (match.group(), match.end()) if match else ('', pos)
    if not name or (pos < len(line) and line[pos] not in BLANKS):
        raise MalformedLine('# %s without a metric name' % keyword)
    if keyword == 'TYPE' and _tokens(line[pos:]) not in [[kind] for kind in TYPES]:
        raise MalformedLine('# TYPE %s: one of %s wanted after the name' % (name, ', '.join(TYPES)))
    escape = line.find('\\', pos) if keyword == 'HELP' else -1
    while escape >= 0:  # a docstring's escapes: \\ and \n (the text format), \" too (OpenMetrics)
        if line[escape + 1:escape + 2] not in ESCAPES:
            raise MalformedLine('# HELP %s: \\%s at column %d is no escape'
                                % (name, line[escape + 1:escape + 2], escape + 1))
        escape = line.find('\\', escape + 2)
