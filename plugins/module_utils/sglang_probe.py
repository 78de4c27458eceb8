# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The I/O of the sglang_ready module: systemctl, journalctl and HTTP GETs.

Every failure to reach the server is classified into an HTTP result dict
(see sglang_readiness.http_result), never raised: a closed port is the normal
state of a loading server.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import ssl
import time

from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url
from ansible_collections.k26.deploy.plugins.module_utils import nvidia_health
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import is_loopback_url
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import (
    PROBE_HEALTH_GENERATE, UNIT_PROPERTIES, WARMUP_PATHS,
    falls_back, http_result, journal_matches, models_known, models_match, model_ids_from, parse_journal_json,
    parse_systemctl_show, stream_matches, wants_http, classify_unit, warmup_probe_due,
)

# journald's state file of each open stdout/stderr stream (it names the stream's unit): systemd's journald-stream.c
JOURNAL_STREAMS_DIR = '/run/systemd/journal/streams'
# how long an ended process's output may still be on its way into the journal; waited only while its stream is open
STREAM_DRAIN_SECONDS = 5.0
STREAM_POLL_SECONDS = 0.1
# how long a unit whose stream journald has not read yet may take before its first line shows (one that wrote nothing)
OUTPUT_GRACE_SECONDS = 2.0
REQUEST_TIMEOUT = 2.0            # seconds, every fast endpoint
HEALTH_GENERATE_TIMEOUT = 5.0    # /health_generate runs a one-token generation and sleeps >= 1 s
MAX_BODY_BYTES = 1024 * 1024


def _errno_kind(exc):
    """Classify a low-level exception into refused / reset / timeout / error."""
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return 'timeout'
    if isinstance(exc, ConnectionRefusedError):
        return 'refused'
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return 'reset'
    if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError):
        code = exc.errno
        if code == errno.ECONNREFUSED:
            return 'refused'
        if code in (errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE):
            return 'reset'
        if code == errno.ETIMEDOUT:
            return 'timeout'
    name = type(exc).__name__
    if name in ('RemoteDisconnected', 'BadStatusLine', 'IncompleteRead'):
        return 'reset'
    return 'error'


def classify_exception(exc):
    """URLError wraps the socket error in .reason; unwrap before classifying."""
    reason = getattr(exc, 'reason', None)
    if isinstance(exc, URLError) and isinstance(reason, BaseException):
        return _errno_kind(reason)
    if isinstance(exc, URLError) and isinstance(reason, str) and 'timed out' in reason:
        return 'timeout'
    return _errno_kind(exc)


def _read_text(response):
    return response.read(MAX_BODY_BYTES).decode('utf-8', 'replace')


def _read_json(response):
    data = response.read(MAX_BODY_BYTES)
    try:
        return json.loads(data.decode('utf-8', 'replace')) if data else None
    except ValueError:
        return None


def http_request(url, path=None, method='GET', api_key=None, body=None, timeout=REQUEST_TIMEOUT, text=False,
                 validate_certs=True, ca_path=None, agent='k26deploy-sglang_ready'):
    """One HTTP request with the API key as a Bearer token and ``body`` as JSON; returns an HTTP result dict
    (the body parsed as JSON, or as text with ``text``), never raises on network errors."""
    headers = {'Accept': 'text/plain' if text else 'application/json'}
    if api_key:
        headers['Authorization'] = 'Bearer %s' % api_key
    data = None
    if body is not None:
        headers['Content-Type'] = 'application/json'
        data = json.dumps(body)
    path = url if path is None else path
    try:
        response = open_url(url, method=method, headers=headers, data=data, timeout=timeout,
                            validate_certs=validate_certs, ca_path=ca_path, use_proxy=not is_loopback_url(url),
                            use_netrc=False, follow_redirects='safe', http_agent=agent)
        try:
            status = response.getcode()
            parsed = _read_text(response) if text else _read_json(response)
        finally:
            response.close()
        return http_result(path, 'ok' if 200 <= status < 300 else 'http', status=status, body=parsed)
    except HTTPError as exc:
        return http_result(path, 'http', status=exc.code, body=_read_json(exc), error=str(exc))
    except Exception as exc:  # pylint: disable=broad-except
        # Network failures come as URLError, socket errors, http.client errors,
        # SSL errors or ansible.module_utils.urls' own exceptions.
        return http_result(path, classify_exception(exc), error='%s: %s' % (type(exc).__name__, exc))


def stream_units(texts):
    """The units named by journald stream state files (their ``UNIT=`` line), from the files' texts."""
    units = set()
    for text in texts:
        for line in text.splitlines():
            if line.startswith('UNIT='):
                units.add(line[len('UNIT='):].strip())
    return units


def open_streams(directory=JOURNAL_STREAMS_DIR):
    """(unit, when journald opened the stream: its state file's mtime, epoch seconds) of every stdout stream open to
    journald now; None when the directory cannot be read."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    streams = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path) as handle:
                text = handle.read()
            opened = os.stat(path).st_mtime
        except (OSError, UnicodeDecodeError):
            continue  # closed meanwhile
        streams.extend((unit, opened) for unit in stream_units([text]))
    return streams


def wait_for_streams_closed(unit, new_process_since=lambda: None, output_seen=lambda: True,
                            limit=STREAM_DRAIN_SECONDS, directory=JOURNAL_STREAMS_DIR, mono=time.monotonic,
                            sleep=time.sleep):
    """Wait until journald holds no open stream of the ended process of ``unit`` and ``output_seen()`` (the journal
    has a line the unit's processes wrote since this start), at most ``limit`` seconds; whether both came. Under load
    journald may not even have accepted the stream yet (no state file), so an empty directory alone proves nothing
    until a line is there or OUTPUT_GRACE_SECONDS passed (a process that wrote nothing). When the unit started a new
    process meanwhile (systemd's Restart=), ``new_process_since()`` says when (epoch seconds; None while none runs):
    that process's own stream, opened since, is not waited for; the ended one's, opened before, still is."""
    started = mono()
    deadline = started + limit
    while True:
        opened_at = [opened for name, opened in open_streams(directory) or () if name == unit]
        since = new_process_since() if opened_at else None  # (systemctl only while a stream of the unit is open)
        ended = [opened for opened in opened_at if since is None or opened < since]
        if not ended and (mono() - started >= OUTPUT_GRACE_SECONDS or output_seen()):
            return True
        if mono() >= deadline:
            return False
        sleep(STREAM_POLL_SECONDS)


def epoch_of_monotonic(monotonic_us, clock=time.time, monotonic=lambda: time.clock_gettime(time.CLOCK_MONOTONIC)):
    """The wall-clock time (seconds since the epoch) of a CLOCK_MONOTONIC timestamp in microseconds (systemd's
    ...TimestampMonotonic): journalctl's --since takes the former."""
    return clock() - (monotonic() - int(monotonic_us) / 1e6)


def merged_journal_json(*texts):
    """``journalctl -o json`` outputs as one, each entry once (by its cursor), oldest first."""
    entries = {}
    for text in texts:
        for raw in (text or '').splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries[entry.get('__CURSOR') or raw] = entry
    ordered = sorted(entries.values(), key=lambda entry: int(entry.get('__REALTIME_TIMESTAMP') or 0))
    return '\n'.join(json.dumps(entry) for entry in ordered)


class SglangProbe(object):
    """Looks at one systemd unit and one SGLang HTTP endpoint."""

    def __init__(self, module, unit, url, api_key=None, validate_certs=True, ca_path=None):
        self.module = module
        self.unit = unit
        self.base = url.rstrip('/')
        self.api_key = api_key
        self.validate_certs = validate_certs
        self.ca_path = ca_path
        self.systemctl = module.get_bin_path('systemctl')
        self.journalctl = module.get_bin_path('journalctl')
        self.env = {'LC_ALL': 'C', 'SYSTEMD_PAGER': '', 'SYSTEMD_COLORS': '0'}

    # -- systemd -----------------------------------------------------------
    def unit_properties(self):
        """``systemctl show`` of the unit; {'_error': text} when systemctl fails."""
        if not self.systemctl:
            return {'_error': 'systemctl not found on the target'}
        cmd = [self.systemctl, 'show', self.unit, '--property=' + ','.join(UNIT_PROPERTIES)]
        rc, out, err = self.module.run_command(cmd, environ_update=self.env)
        if rc != 0:
            return {'_error': (err or out or 'systemctl show exited %d' % rc).strip()}
        return parse_systemctl_show(out)

    def new_process_since(self):
        """When the unit's running main process started (epoch seconds), None while none runs."""
        unit = self.unit_properties()
        start_us = unit.get('ExecMainStartTimestampMonotonic', '')
        if unit.get('MainPID', '0') in ('', '0') or not str(start_us).isdigit() or int(start_us) == 0:
            return None
        return epoch_of_monotonic(start_us)

    # -- journal -----------------------------------------------------------
    def journal_lines(self, invocation_ids, entries, streams=False, since_us=None):
        """Message lines of the last ``entries`` journal entries of the given invocations,
        oldest first; of the unit (``-u``) only when no invocation is known. ``streams``: also the lines of the
        invocations' output streams that journald stored without the invocation (read after the unit stopped), and,
        with ``since_us`` (the current start, monotonic microseconds), every line of the unit since then."""
        if not self.journalctl:
            return []
        base = [self.journalctl, '--no-pager', '-q', '-o', 'json', '-n', str(max(1, entries))]
        cmd = base + (journal_matches(invocation_ids) if invocation_ids else ['-u', self.unit])
        rc, out, err = self.module.run_command(cmd, environ_update=self.env)
        more = stream_matches(out) if streams and invocation_ids else []
        if more:
            rc, out, err = self.module.run_command(cmd + more, environ_update=self.env)
        if streams and str(since_us or '').isdigit() and int(since_us) > 0:
            since = ['--since', '@%.6f' % epoch_of_monotonic(since_us), '-u', self.unit]
            rc, recent, err = self.module.run_command(base + since, environ_update=self.env)
            out = merged_journal_json(out, recent)
        return parse_journal_json(out)

    def output_seen(self, since_us):
        """Whether the journal holds a line the unit's processes wrote (stdout/stderr) since ``since_us``."""
        if not (self.journalctl and str(since_us or '').isdigit() and int(since_us) > 0):
            return True
        cmd = [self.journalctl, '--no-pager', '-q', '-o', 'json', '-n', '1', '--since',
               '@%.6f' % epoch_of_monotonic(since_us), '_SYSTEMD_UNIT=%s' % self.unit, '_TRANSPORT=stdout']
        rc, out, err = self.module.run_command(cmd, environ_update=self.env)
        return rc == 0 and bool(out.strip())

    def start_journal(self, invocation_id, entries):
        """``journalctl -o json`` of one invocation's last ``entries`` entries (their MESSAGE and timestamps)."""
        if not (self.journalctl and invocation_id):
            return ''
        cmd = [self.journalctl, '--no-pager', '-q', '-o', 'json', '--output-fields=MESSAGE', '-n', str(entries),
               '_SYSTEMD_INVOCATION_ID=%s' % invocation_id]
        rc, out, err = self.module.run_command(cmd, environ_update=self.env)
        return out

    def sync_journal(self, ended=False, since_us=None):
        """Ask journald to store what the service wrote before it died (needs root; best effort).

        ``ended``: the unit's processes have exited. Their last lines reach journald through the unit's stdout
        stream, which journald may read after systemd's own "Main process exited" (under load, seconds later);
        ``journalctl --sync`` does not wait for it. So first wait, bounded, until journald has closed every stream
        of the unit: then everything the processes wrote is in the journal."""
        if ended:
            wait_for_streams_closed(self.unit, new_process_since=self.new_process_since,
                                    output_seen=lambda: self.output_seen(since_us))
        if self.journalctl:
            self.module.run_command([self.journalctl, '--sync'], environ_update=self.env)

    def kernel_events_since(self, start_us):
        """The kernel's NVIDIA events (Xid, SXid) since the unit's process started (monotonic microseconds), from
        /dev/kmsg record by record, else ``dmesg``; [] where the kernel log cannot be read (a container, no
        privilege)."""
        if not str(start_us or '').isdigit():
            return []
        text = nvidia_health.read_kmsg()
        if text is None:
            dmesg = self.module.get_bin_path('dmesg')
            rc, out, err = self.module.run_command([dmesg], environ_update=self.env) if dmesg else (1, '', '')
            text = out if rc == 0 else ''
        return nvidia_health.events_since(text, int(start_us) / 1e6)

    # -- HTTP --------------------------------------------------------------
    def get(self, path, timeout=REQUEST_TIMEOUT):
        """GET base+path; returns an HTTP result dict, never raises on network errors."""
        return http_request(self.base + path, path=path, api_key=self.api_key, timeout=timeout,
                            validate_certs=self.validate_certs, ca_path=self.ca_path)

    def warmup(self, probe, settings, elapsed):
        """Run the warm-up probe ``probe``; under auto, on 404 from /ready fall back to /health_generate at once."""
        result = self._warmup_once(probe, elapsed)
        if falls_back(settings, probe, result):
            result = self._warmup_once(PROBE_HEALTH_GENERATE, elapsed)
        return result

    def _warmup_once(self, probe, elapsed):
        timeout = HEALTH_GENERATE_TIMEOUT if probe == PROBE_HEALTH_GENERATE else REQUEST_TIMEOUT
        result = self.get(WARMUP_PATHS[probe], timeout=timeout)
        result['probe'] = probe
        result['started'] = elapsed
        return result

    # -- one observation ---------------------------------------------------
    def observe(self, state, settings, elapsed):
        """Look at the unit and, when it runs, at HTTP: one observation for advance()."""
        props = self.unit_properties()
        obs = {'elapsed': elapsed, 'unit': props, 'models': None, 'warmup': None}
        if '_error' in props:
            state['unit_error'] = props['_error']
            obs['unit'] = {}
            return obs
        state['unit_error'] = ''
        if not wants_http(classify_unit(props)):
            return obs
        if settings.worker:
            obs['health'] = self.get('/health')
            return obs
        if models_known(state, props):
            matched = True
        else:
            models = obs['models'] = self.get('/v1/models')
            ids = model_ids_from(models.get('body')) if models.get('kind') == 'ok' else None
            matched = models_match(ids, settings.model)
        if settings.require_warmup and matched:
            probe = warmup_probe_due(state, settings, elapsed)
            if probe:
                obs['warmup'] = self.warmup(probe, settings, elapsed)
        return obs
