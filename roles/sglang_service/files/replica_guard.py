# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The replica guard: watches one SGLang service after its deploy and acts on what the engines do not.

Run by its own systemd unit (<service>-guard.service, written by the sglang_service role), as root without
capabilities (it restarts and stops the service through systemd, reads the kernel's log through the journal):
``replica_guard.py CONFIG``, a JSON file of root's alone (the API key is in it, never in argv); its state, incidents
and metrics go to its StateDirectory. The decisions are sglang_guard.py's (beside this file,
the collection's plugins/module_utils/sglang_guard.py), the kernel events nvidia_health.py's, the reading of
/metrics prometheus_text.py's.

Its metrics (the verdict, the last canary's latency, the incidents by verdict) are served on metrics_host:metrics_port
(GET /metrics) and kept in metrics.prom beside its state (root's, 0600).

Every tick (the policy's interval): systemctl show; a one-token completion through the API key with a deadline
(the canary); the scheduler's progress marker (its gauges in /metrics); the kernel's new NVIDIA events on this
replica's GPUs (journalctl -k -f, from the cursor kept in the state: such an event starts the next tick at once, and
one that asks for a restart or a reset decides without a canary). An action leaves an incident record (incidents/*.json): the
verdict, why, the evidence (that invocation's journal, the kernel lines, the GPUs' readings), what was done and
how long it took; a restart's record gets the seconds until the server answered again.
"""

import http.server
import json
import os
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nvidia_health  # noqa: E402
import prometheus_text  # noqa: E402
import sglang_guard  # noqa: E402
import sglang_options  # noqa: E402

UNIT_PROPERTIES = ('ActiveState', 'SubState', 'MainPID', 'InvocationID', 'NRestarts', 'Result')
KEPT_INCIDENTS = 50
COMMAND_TIMEOUT = 30
ENV = dict(os.environ, LC_ALL='C', SYSTEMD_PAGER='', SYSTEMD_COLORS='0')
GPU_QUERY = ('index,pci.bus_id,name,temperature.gpu,power.draw,utilization.gpu,memory.used,memory.total,'
             'clocks_event_reasons.active')
# The scheduler's gauges that move with every batch it runs (SGLang 0.5.23, srt/observability/metrics_collector.py:
# a long prefill's chunks move the KV tokens in use though no request finishes, and generation_tokens_total counts
# only finished requests); a hung scheduler moves none of them. Either spelling (sglang: or, over OpenMetrics, sglang_).
PROGRESS_GAUGES = ('num_used_tokens', 'token_usage', 'num_running_reqs', 'num_queue_reqs', 'gen_throughput',
                   'generation_tokens_total')


def progress_marker(text):
    """The scheduler's progress gauges in a /metrics text (prometheus_text reads it): one line for each sample, its
    gauge's name without the prefix, its labels and its value, sorted; None without them. Timestamps and exemplars
    are left out: they tell of the scrape, not of the scheduler."""
    values = []
    for name, labels, value in prometheus_text.samples(text):
        if name[:len('sglang:')] in ('sglang:', 'sglang_') and name[len('sglang:'):] in PROGRESS_GAUGES:
            values.append(json.dumps([name[len('sglang:'):], labels, value], sort_keys=True))
    return '\n'.join(sorted(values)) or None


def log(text):
    print(text, flush=True)


def run(argv, timeout=COMMAND_TIMEOUT):
    """(exit status, stdout); never raises."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV, check=False)
        return proc.returncode, proc.stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return 1, str(exc)


def write_atomic(path, text, mode=0o600):
    scratch = '%s.%d.tmp' % (path, os.getpid())
    with open(os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode), 'w') as handle:
        handle.write(text)
    os.replace(scratch, path)


def load_config(argv):
    if len(argv) != 2:
        raise SystemExit('usage: replica_guard.py CONFIG.json')
    with open(argv[1]) as handle:
        config = json.load(handle)
    config['policy'] = sglang_guard.policy_of(config.get('policy'))
    config['state_dir'] = config.get('state_dir') or os.environ.get('STATE_DIRECTORY', '').split(':')[0]
    if not config['state_dir']:
        raise SystemExit('sglang_guard: no state directory (StateDirectory= or state_dir)')
    return config


class Host(object):
    """The guard's I/O: systemd, the service's HTTP endpoint, the journal, nvidia-smi."""

    def __init__(self, config):
        self.config = config
        self.unit = config['unit']
        self.base = config['url'].rstrip('/')
        self.tls = None
        if self.base.startswith('https:'):
            self.tls = ssl.create_default_context(cafile=config.get('ca_file') or None)
        # no proxy: the service is this host's own
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                  urllib.request.HTTPSHandler(context=self.tls))

    def unit_properties(self):
        rc, out = run(['systemctl', 'show', self.unit, '--property=' + ','.join(UNIT_PROPERTIES)])
        return dict(line.split('=', 1) for line in out.splitlines() if '=' in line) if rc == 0 else {}

    def _request(self, path, body=None, timeout=5.0, auth=False):
        headers = {'Content-Type': 'application/json'} if body is not None else {}
        if auth and self.config.get('api_key'):
            headers['Authorization'] = 'Bearer %s' % self.config['api_key']
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        with self.opener.open(request, timeout=timeout) as response:
            return response.status, response.read(4 * 1024 * 1024)

    def canary(self):
        """A real one-token completion, with the clients' key and the policy's deadline."""
        body = {'model': self.config.get('model') or 'default', 'prompt': 'ping', 'max_tokens': 1, 'temperature': 0}
        started = time.monotonic()
        try:
            status, dummy = self._request('/v1/completions', body, timeout=self.config['policy']['canary_timeout'],
                                          auth=True)
            return {'ok': 200 <= status < 300, 'latency': time.monotonic() - started, 'error': 'HTTP %d' % status}
        except urllib.error.HTTPError as exc:
            return {'ok': False, 'latency': time.monotonic() - started, 'error': 'HTTP %d' % exc.code}
        except Exception as exc:  # pylint: disable=broad-except
            return {'ok': False, 'latency': time.monotonic() - started,
                    'error': '%s: %s' % (type(exc).__name__, exc)}

    def progress(self):
        """The scheduler's progress marker from /metrics (open, no key): its gauges' values, sorted; None without
        them."""
        try:
            dummy, text = self._request('/metrics', timeout=3.0)
        except Exception:  # pylint: disable=broad-except
            return None
        return progress_marker(text.decode('utf-8', 'replace'))

    def journal_excerpt(self, invocation, lines):
        if not invocation:
            return []
        rc, out = run(['journalctl', '-q', '--no-pager', '-o', 'short-iso', '-n', str(lines),
                       '_SYSTEMD_INVOCATION_ID=%s' % invocation])
        return [self.clean(line) for line in out.splitlines()] if rc == 0 else []

    def clean(self, line):
        """A journal line without secrets (SGLang logs its keys in server_args) and without control characters."""
        line = sglang_options.redact(sglang_options.redact_log_line(line), [self.config.get('api_key') or ''])
        return sglang_options.printable(line)

    def gpu_readings(self):
        """nvidia-smi's readings, or none: on a GPU that fell off the bus it may never return, so it is left behind
        after its deadline instead of waited for."""
        try:
            proc = subprocess.Popen(['nvidia-smi', '--query-gpu=' + GPU_QUERY, '--format=csv'],  # noqa: S603
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
        except OSError:
            return []
        try:
            out = proc.communicate(timeout=15)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            return ['nvidia-smi did not answer within 15 s']
        return out.splitlines() if proc.returncode == 0 else []

    def restart(self):
        """Kill the (hung) process tree, then start again: systemd's own stop would wait TimeoutStopSec for it."""
        run(['systemctl', 'kill', '--signal=SIGKILL', self.unit])
        return run(['systemctl', 'restart', '--no-block', self.unit])[0] == 0

    def hold(self):
        """Stop for good: what the guard holds is broken (a GPU fault, a hang, a crash loop), so the stop's SIGTERM is
        followed by SIGKILL at once; the port closes now and the routers' checks find it gone."""
        stopped = run(['systemctl', 'stop', '--no-block', self.unit])[0] == 0
        run(['systemctl', 'kill', '--signal=SIGKILL', self.unit])
        return stopped


class KernelLog(object):
    """The kernel's messages as the journal receives them: one ``journalctl -k -f`` kept running from the cursor kept
    in the state, so that an NVIDIA event wakes the guard at once instead of at its next tick. Without a cursor it
    starts at the newest entry (what the kernel said before the guard started is the deploy's preflight's to judge).
    A follower that ends is started again from the cursor; one that ends before saying anything (a cursor the journal
    no longer holds) is started again from the newest entry."""

    ARGV = ('journalctl', '-k', '-q', '--no-pager', '-f', '-o', 'json', '--output-fields=MESSAGE,SYSLOG_IDENTIFIER')

    def __init__(self, cursor, argv=ARGV):
        self.cursor = cursor
        self.argv = list(argv)
        self.messages = []
        self.proc = None
        self.buffer = b''
        self.heard = False

    def _start(self):
        argv = self.argv + (['--after-cursor', self.cursor] if self.cursor else ['-n', '0'])
        try:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,  # noqa: S603
                                         env=ENV)
        except OSError:
            self.proc = None
        self.buffer, self.heard = b'', False

    def _ended(self):
        self.proc.stdout.close()
        self.proc.wait()
        if not self.heard:
            self.cursor = ''
        self.proc = None

    def _read(self, lines, wakes):
        woken = False
        for raw in lines:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            self.heard = True
            self.cursor = entry.get('__CURSOR') or self.cursor
            message = sglang_guard.kernel_message(entry)
            if message is not None:
                # one entry, one message: the kernel's own escapes may hold a newline (a file name), and what follows
                # it is no message of the driver
                self.messages.append(message.split('\n', 1)[0])
                woken = woken or wakes(self.messages[-1:])
        return woken

    def wait(self, seconds, wakes=lambda messages: False):
        """Listen to the kernel for up to ``seconds`` (0: read what is there); True as soon as a message for which
        ``wakes([message])`` holds came (the messages are kept for ``take``)."""
        deadline = time.monotonic() + seconds
        while True:
            if self.proc is None:
                self._start()
                if self.proc is None:  # no journalctl: listen again at the next wait
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    return False
            if not select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return False
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self._ended()
                if time.monotonic() >= deadline:
                    return False
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))  # a follower that keeps ending: no spin
                continue
            lines = (self.buffer + chunk).split(b'\n')
            self.buffer = lines.pop()
            if self._read(lines, wakes):
                return True

    def take(self):
        """The messages heard since the last take."""
        messages, self.messages = self.messages, []
        return messages


class MetricsHandler(http.server.BaseHTTPRequestHandler):
    """GET /metrics: the guard's metrics (Prometheus's text format), nothing else; no secret is in them."""

    text = b''

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.split('?', 1)[0] != '/metrics':
            self.send_error(404)
            return
        body = MetricsHandler.text
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # the scrapes stay out of the journal
        pass


class MetricsServer(http.server.ThreadingHTTPServer):
    daemon_threads = True


def serve_metrics(host, port):
    """Serve MetricsHandler.text on host:port in a thread (port 0: not at all). A port it cannot have (taken by another
    service's guard, an address the host lacks) costs the metrics, never the guarding."""
    if not port:
        return None
    MetricsServer.address_family = socket.AF_INET6 if ':' in host else socket.AF_INET
    try:
        server = MetricsServer((host, port), MetricsHandler)
    except OSError as exc:
        log('metrics not served on %s:%d (%s): the guard goes on without them' % (host, port, exc))
        return None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def on_our_gpus(events, bus_ids):
    """The events of this replica's GPUs (every GPU's when their bus ids are not known)."""
    if not bus_ids:
        return list(events)
    return [event for event in events if any(nvidia_health.same_gpu(event['pci'], bus) for bus in bus_ids)]


class Guard(object):

    def __init__(self, config, host):
        self.config = config
        self.host = host
        self.dir = config['state_dir']
        self.incident_dir = os.path.join(self.dir, 'incidents')
        os.makedirs(self.incident_dir, mode=0o700, exist_ok=True)
        self.state = self._load_state()
        self.kernel = KernelLog(self.state['cursor'])
        self.canary_latency = 0.0

    def _load_state(self):
        state = sglang_guard.initial_state()
        state['cursor'] = ''
        state['incidents'] = {}
        try:
            with open(os.path.join(self.dir, 'state.json')) as handle:
                state.update(json.load(handle).get('state') or {})
        except (OSError, ValueError, AttributeError):
            pass
        return state

    def tick(self, now=None):
        now = time.time() if now is None else now
        self.kernel.wait(0)
        events = self.events_of(self.kernel.take())
        self.state['cursor'] = self.kernel.cursor
        unit = self.host.unit_properties()
        running = unit.get('ActiveState') == 'active' and unit.get('MainPID', '0') not in ('', '0')
        # an event that asks for a restart or a reset decides alone: no canary's deadline is waited for first
        asking = running and not sglang_guard.gpu_action(events)[0]
        canary = self.host.canary() if asking else None
        if canary and canary['ok']:
            self.canary_latency = canary['latency']
        progress = self.host.progress() if asking else None
        invocation = unit.get('InvocationID', '')
        before = self.state['verdict']
        verdict, action, why = sglang_guard.decide(self.state, {'unit': unit, 'canary': canary, 'progress': progress,
                                                                'events': events}, self.config['policy'], now)
        if verdict != before:
            log('%s: %s -> %s: %s' % (self.config['unit'], before, verdict, why))
        if action or (verdict != before and verdict in (sglang_guard.GPU_FAULT, sglang_guard.CRASH_LOOP)):
            self.incident(now, verdict, action, why, invocation, events)
        took = sglang_guard.recovered(self.state, verdict, now)
        if took is not None:
            self.note_recovery(took)
        self.save(now, verdict, why)
        return verdict, action

    def events_of(self, messages):
        """The NVIDIA events of this replica's GPUs in the kernel's messages."""
        return on_our_gpus(nvidia_health.parse_kernel_events('\n'.join(messages)), self.config.get('gpu_bus_ids'))

    def listen(self, seconds):
        """Until the next tick: the kernel's messages as they come; an event of this replica's GPUs ends the wait."""
        self.kernel.wait(seconds, wakes=lambda messages: bool(self.events_of(messages)))

    def incident(self, now, verdict, action, why, invocation, events):
        # act first, then gather the evidence (the journal outlives the process; nvidia-smi may hang on a dead GPU),
        # and keep the decision (the restart budget, the count) before anything that may fail
        started = time.monotonic()
        done = {sglang_guard.RESTART: self.host.restart, sglang_guard.HOLD: self.host.hold}.get(action, lambda: True)()
        took = round(time.monotonic() - started, 3)
        name = '%d-%s.json' % (int(now * 1000), verdict)
        self.state['incidents'][verdict] = self.state['incidents'].get(verdict, 0) + 1
        self.state['last_incident'] = name
        self.save(now, verdict, why)
        log('%s: incident %s: %s %s (%s)' % (self.config['unit'], name, verdict, action or 'none', why))
        evidence = {'journal': self.host.journal_excerpt(invocation, self.config.get('journal_lines', 40)),
                    'kernel': [self.host.clean(event['line']) for event in events],
                    'gpus': self.host.gpu_readings()}
        record = {'time': now, 'service': self.config['unit'], 'verdict': verdict, 'action': action or 'none',
                  'acted': bool(done), 'why': why, 'invocation': invocation, 'evidence': evidence,
                  'action_seconds': took, 'recovered_after_seconds': None,
                  'operator': OPERATOR_HINTS.get((verdict, action), '')}
        try:
            write_atomic(os.path.join(self.incident_dir, name), json.dumps(record, indent=1, sort_keys=True))
            for old in sorted(os.listdir(self.incident_dir))[:-KEPT_INCIDENTS]:
                os.unlink(os.path.join(self.incident_dir, old))
        except OSError as exc:
            log('%s: incident %s not written (%s)' % (self.config['unit'], name, exc))

    def note_recovery(self, seconds):
        path = os.path.join(self.incident_dir, self.state.get('last_incident') or '')
        try:
            with open(path) as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            return
        record['recovered_after_seconds'] = round(seconds, 3)
        write_atomic(path, json.dumps(record, indent=1, sort_keys=True))
        log('%s: answers again %.1f s after the guard acted' % (self.config['unit'], seconds))

    def save(self, now, verdict, why):
        summary = {'service': self.config['unit'], 'verdict': verdict, 'why': why, 'time': now,
                   'held': self.state['held'], 'canary_seconds': self.canary_latency,
                   'incidents': self.state['incidents'], 'last_incident': self.state.get('last_incident', ''),
                   'state': self.state}
        metrics = sglang_guard.metrics_text(self.config['service'], self.state, self.canary_latency,
                                            self.state['incidents'], now)
        MetricsHandler.text = metrics.encode()
        try:
            write_atomic(os.path.join(self.dir, 'state.json'), json.dumps(summary, sort_keys=True))
            write_atomic(os.path.join(self.dir, 'metrics.prom'), metrics)
        except OSError as exc:  # a full disk: the guard goes on, from the state it holds in memory
            log('%s: state not written (%s)' % (self.config['unit'], exc))


OPERATOR_HINTS = {
    (sglang_guard.GPU_FAULT, sglang_guard.HOLD):
        'The GPU needs a reset or a reboot (NVIDIA\'s immediate action in the kernel line): drain the host, reset the '
        'GPU (nvidia-smi -r) or reboot, then start the service again (or deploy): the guard lets it run.',
    (sglang_guard.HUNG, sglang_guard.HOLD):
        'The server hung again after the restarts the policy allows: read the journal excerpt, fix the cause, then '
        'start the service again (or deploy).',
    (sglang_guard.CRASH_LOOP, sglang_guard.HOLD):
        'The server crashes at every start: read the journal excerpt, fix the configuration or the host, then start '
        'the service again (or deploy).',
    (sglang_guard.CRASH_LOOP, None):
        'systemd gave up restarting the crashing server: read the journal excerpt, fix it, then start it again.',
}


def main(argv):
    config = load_config(argv)
    guard = Guard(config, Host(config))
    serve_metrics(config.get('metrics_host') or '127.0.0.1', int(config.get('metrics_port') or 0))
    interval = config['policy']['interval']
    policy = json.dumps(config['policy'], sort_keys=True)
    log('%s: guarding %s (every %.0f s, policy %s)' % (config['unit'], config['url'], interval, policy))
    while True:
        started = time.monotonic()
        try:
            guard.tick()
        except Exception as exc:  # pylint: disable=broad-except
            # one bad look (a full disk, a journal that does not answer) must not end the guarding
            log('%s: this look failed (%s: %s): trying again' % (config['unit'], type(exc).__name__, exc))
        guard.listen(max(0.0, interval - (time.monotonic() - started)))


if __name__ == '__main__':
    main(sys.argv)
