"""Unit tests of the probe (plugins/module_utils/sglang_probe.py): commands and HTTP classification.

HTTP tests use throw-away servers on 127.0.0.1 only.
"""
import json
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import is_loopback_url as is_loopback
from ansible_collections.k26.deploy.plugins.module_utils import sglang_probe as probe_mod
from ansible_collections.k26.deploy.plugins.module_utils.sglang_probe import SglangProbe, classify_exception
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import PROBE_HEALTH_GENERATE, PROBE_READY, new_state, Settings

INV1 = 'cbc57ece148a4996b8fbeb0bfa66c895'
INV2 = '0d4c1f0e2b9a4f6e8d7c6b5a49382716'


class FakeModule(object):
    def __init__(self, outputs=None):
        self.outputs = outputs or {}
        self.commands = []

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def run_command(self, cmd, environ_update=None, **kwargs):
        self.commands.append(cmd)
        for key, value in self.outputs.items():
            if key in cmd:
                return value
        return 0, '', ''


class Handler(BaseHTTPRequestHandler):
    routes = {}
    seen = []

    def do_GET(self):  # noqa: N802 (http.server API)
        Handler.seen.append((self.path, self.headers.get('Authorization')))
        status, body = Handler.routes.get(self.path, (404, {'detail': 'Not Found'}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Handler.routes, Handler.seen = {}, []
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d' % httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def free_port():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def probe_for(url, module=None, **kwargs):
    return SglangProbe(module or FakeModule(), 'sglang.service', url, **kwargs)


def settings(**over):
    values = dict(unit='sglang.service', url='http://127.0.0.1:30000', model='kimi', require_warmup=True,
                  timeout=3600, max_restarts=0, startup_grace=10, model_mismatch_grace=15, warmup_timeout=900)
    values.update(over)
    return Settings(**values)


# --------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------

def test_get_json_with_bearer_key(server):
    Handler.routes['/v1/models'] = (200, {'object': 'list', 'data': [{'id': 'kimi'}]})
    result = probe_for(server, api_key='k3y').get('/v1/models')
    assert result['kind'] == 'ok' and result['status'] == 200
    assert result['body']['data'][0]['id'] == 'kimi'
    assert Handler.seen == [('/v1/models', 'Bearer k3y')]


def test_no_authorization_header_without_key(server):
    Handler.routes['/ready'] = (200, {})
    probe_for(server).get('/ready')
    assert Handler.seen == [('/ready', None)]


@pytest.mark.parametrize('status', [401, 403, 503])
def test_http_errors_are_results(server, status):
    Handler.routes['/v1/models'] = (status, {'error': 'x'})
    result = probe_for(server).get('/v1/models')
    assert (result['kind'], result['status']) == ('http', status)


def test_connection_refused_is_classified():
    result = probe_for('http://127.0.0.1:%d' % free_port()).get('/v1/models')
    assert result['kind'] == 'refused'


def test_silent_server_is_a_timeout():
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(5)  # accepts into the backlog, never answers
    try:
        result = probe_for('http://127.0.0.1:%d' % listener.getsockname()[1]).get('/v1/models', timeout=0.3)
    finally:
        listener.close()
    assert result['kind'] == 'timeout'


def test_closed_connection_is_a_reset():
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(5)

    def close_at_once():
        conn, dummy = listener.accept()
        conn.recv(1024)
        conn.close()

    thread = threading.Thread(target=close_at_once, daemon=True)
    thread.start()
    try:
        result = probe_for('http://127.0.0.1:%d' % listener.getsockname()[1]).get('/v1/models', timeout=2)
    finally:
        thread.join(2)
        listener.close()
    assert result['kind'] == 'reset', result


@pytest.mark.parametrize('exc, kind', [
    (ConnectionRefusedError(111, 'Connection refused'), 'refused'),
    (ConnectionResetError(104, 'Connection reset by peer'), 'reset'),
    (socket.timeout('timed out'), 'timeout'),
    (OSError(113, 'No route to host'), 'error'),
])
def test_classify_exception_unwraps_urlerror(exc, kind):
    from urllib.error import URLError
    assert classify_exception(exc) == kind
    assert classify_exception(URLError(exc)) == kind


@pytest.mark.parametrize('url, expected', [
    ('http://127.0.0.1:30000', True), ('http://localhost:30000', True), ('http://[::1]:30000', True),
    ('https://sglang.internal:30000', False),
])
def test_no_proxy_for_loopback(url, expected):
    assert is_loopback(url) is expected


def test_warmup_falls_back_to_health_generate_on_404(server):
    Handler.routes['/health_generate'] = (200, {})
    result = probe_for(server).warmup(PROBE_READY, settings(), 5.0)
    assert result['probe'] == PROBE_HEALTH_GENERATE and result['kind'] == 'ok'
    assert [path for path, dummy in Handler.seen] == ['/ready', '/health_generate']


# --------------------------------------------------------------------------
# systemctl / journalctl commands
# --------------------------------------------------------------------------

def test_unit_properties_command_and_parse():
    module = FakeModule({'show': (0, 'ActiveState=active\nSubState=running\nNRestarts=2\n', '')})
    props = probe_for('http://127.0.0.1:1', module).unit_properties()
    assert props == {'ActiveState': 'active', 'SubState': 'running', 'NRestarts': '2'}
    cmd = module.commands[0]
    assert cmd[:3] == ['/usr/bin/systemctl', 'show', 'sglang.service']
    assert cmd[3].startswith('--property=') and 'NRestarts' in cmd[3] and 'InvocationID' in cmd[3]


def test_unit_properties_error():
    module = FakeModule({'show': (1, '', 'Failed to connect to bus: No such file or directory')})
    assert probe_for('http://127.0.0.1:1', module).unit_properties() == {
        '_error': 'Failed to connect to bus: No such file or directory'}


def test_journal_by_invocations():
    out = '\n'.join(json.dumps({'MESSAGE': m}) for m in ('one', 'two'))
    module = FakeModule({'-o': (0, out, '')})
    lines = probe_for('http://127.0.0.1:1', module).journal_lines([INV1, INV2], 500)
    assert lines == ['one', 'two']
    cmd = module.commands[0]
    assert cmd[:7] == ['/usr/bin/journalctl', '--no-pager', '-q', '-o', 'json', '-n', '500']
    assert cmd[7:] == ['_SYSTEMD_INVOCATION_ID=' + INV1, '+', 'INVOCATION_ID=' + INV1, '+',
                       '_SYSTEMD_INVOCATION_ID=' + INV2, '+', 'INVOCATION_ID=' + INV2]
    assert '-u' not in cmd


def test_journal_by_unit_when_no_invocation_is_known():
    module = FakeModule()
    probe_for('http://127.0.0.1:1', module).journal_lines([], 30)
    assert module.commands[0][-4:] == ['-n', '30', '-u', 'sglang.service']


# --------------------------------------------------------------------------
# observe()
# --------------------------------------------------------------------------

def show(active, sub, inv=INV1):
    return (0, 'ActiveState=%s\nSubState=%s\nLoadState=loaded\nInvocationID=%s\nNRestarts=0\n' % (active, sub, inv),
            '')


def test_observe_skips_http_when_the_unit_does_not_run(server):
    probe = probe_for(server, FakeModule({'show': show('inactive', 'dead')}))
    obs = probe.observe(new_state(0.0, 0.0), settings(), 1.0)
    assert obs['models'] is None and obs['warmup'] is None
    assert Handler.seen == []


def test_observe_asks_models_then_ready(server):
    Handler.routes['/v1/models'] = (200, {'data': [{'id': 'kimi'}]})
    Handler.routes['/ready'] = (503, {})
    probe = probe_for(server, FakeModule({'show': show('active', 'running')}))
    state = new_state(0.0, 0.0)
    obs = probe.observe(state, settings(), 1.0)
    assert obs['models']['kind'] == 'ok' and obs['warmup']['status'] == 503
    assert [p for p, dummy in Handler.seen] == ['/v1/models', '/ready']
    # Once the invocation listed the model, only the warm-up probe is asked.
    state['models_ok_for'] = INV1
    Handler.seen[:] = []
    obs = probe.observe(state, settings(), 1.3)
    assert obs['models'] is None
    assert [p for p, dummy in Handler.seen] == ['/ready']


def test_observe_wrong_model_skips_warmup(server):
    Handler.routes['/v1/models'] = (200, {'data': [{'id': 'other'}]})
    probe = probe_for(server, FakeModule({'show': show('active', 'running')}))
    obs = probe.observe(new_state(0.0, 0.0), settings(), 1.0)
    assert obs['warmup'] is None


def test_observe_reports_systemctl_failure():
    probe = probe_for('http://127.0.0.1:1', FakeModule({'show': (1, '', 'boom')}))
    state = new_state(0.0, 0.0)
    obs = probe.observe(state, settings(), 1.0)
    assert obs['unit'] == {} and state['unit_error'] == 'boom'


# -- the unit's output streams, after its process ended ------------------------------------------------------------
# journald's state file of an open stream, as systemd 252 writes it (seen in the test image)
STREAM_FILE = ("# This is private data. Do not parse\nPRIORITY=30\nLEVEL_PREFIX=1\nFORWARD_TO_SYSLOG=0\n"
               "FORWARD_TO_KMSG=0\nFORWARD_TO_CONSOLE=0\nSTREAM_ID=03a737c4020b4b3796d79ba874bc2ae2\n"
               "IDENTIFIER=python3\nUNIT=%s")


def test_the_units_with_an_open_stream_come_from_journald_s_state_files(tmp_path):
    (tmp_path / "9:1").write_text(STREAM_FILE % "sglang.service")
    (tmp_path / "9:2").write_text(STREAM_FILE % "dbus.service")
    assert {unit for unit, opened in probe_mod.open_streams(str(tmp_path))} == {"sglang.service", "dbus.service"}
    assert probe_mod.open_streams(str(tmp_path / "absent")) is None


def test_the_wait_for_the_streams_ends_when_the_unit_s_stream_closes_or_at_its_bound(tmp_path):
    state = tmp_path / "9:1"
    state.write_text(STREAM_FILE % "sglang.service")
    clock = {"now": 0.0}

    def sleep(seconds):  # journald closes the stream 0.3 s after the wait began
        clock["now"] += seconds
        if clock["now"] >= 0.3 and state.exists():
            state.unlink()
    assert probe_mod.wait_for_streams_closed("sglang.service", directory=str(tmp_path), mono=lambda: clock["now"],
                                             sleep=sleep) is True
    assert 0.3 <= clock["now"] < 0.5
    state.write_text(STREAM_FILE % "sglang.service")
    clock["now"] = 0.0
    assert probe_mod.wait_for_streams_closed("sglang.service", limit=1.0, directory=str(tmp_path),
                                             mono=lambda: clock["now"], sleep=lambda s: clock.update(now=clock["now"] + s)) is False
    assert 1.0 <= clock["now"] < 1.2
    clock["now"] = 0.0
    # a restarted unit: its new process's stream, opened after the new process started, is not waited for
    started_again = os.stat(state).st_mtime - 1
    assert probe_mod.wait_for_streams_closed("sglang.service", new_process_since=lambda: started_again,
                                             directory=str(tmp_path), mono=lambda: clock["now"],
                                             sleep=lambda s: pytest.fail("waited for the new process's stream"))
    assert probe_mod.wait_for_streams_closed("other.service", directory=str(tmp_path), mono=lambda: 0.0,
                                             sleep=lambda s: pytest.fail("waited for another unit's stream")) is True


def test_the_excerpt_adds_the_invocation_s_streams_whose_late_lines_lost_the_invocation():
    stream = '{"MESSAGE": "starting", "_SYSTEMD_INVOCATION_ID": "%s", "_STREAM_ID": "5f0c"}' % INV1
    systemd = '{"MESSAGE": "Main process exited", "INVOCATION_ID": "%s"}' % INV1
    late = '{"MESSAGE": "RuntimeError: late", "_STREAM_ID": "5f0c"}'
    module = FakeModule()
    answers = iter([(0, stream + "\n" + systemd + "\n", ""), (0, stream + "\n" + systemd + "\n" + late + "\n", "")])
    module.run_command = lambda cmd, **kw: (module.commands.append(cmd), next(answers))[1]
    probe = SglangProbe(module, 'sglang.service', 'http://127.0.0.1:30000')
    assert probe.journal_lines([INV1], 100, streams=True) == ["starting", "Main process exited", "RuntimeError: late"]
    assert module.commands[1][-2:] == ['+', '_STREAM_ID=5f0c']


def test_a_restart_does_not_end_the_wait_for_the_ended_process_s_stream(tmp_path):
    """CI of f3f90da: a node that crashed was started again by Restart= before journald had read its traceback; the
    wait ended at the restart and the excerpt had no traceback. The ended process's stream (opened before the new
    process started) is still waited for; the new one's is not."""
    ended = tmp_path / "9:1"
    ended.write_text(STREAM_FILE % "sglang.service")
    os.utime(ended, (1000.0, 1000.0))
    new = tmp_path / "9:2"
    new.write_text(STREAM_FILE % "sglang.service")
    os.utime(new, (1010.0, 1010.0))
    clock = {"now": 0.0}

    def sleep(seconds):  # journald reads the ended stream to its end 0.4 s after the wait began
        clock["now"] += seconds
        if clock["now"] >= 0.4 and ended.exists():
            ended.unlink()
    assert probe_mod.wait_for_streams_closed("sglang.service", new_process_since=lambda: 1005.0,
                                             directory=str(tmp_path), mono=lambda: clock["now"], sleep=sleep) is True
    assert 0.4 <= clock["now"] < 0.6 and new.exists()


def test_no_open_stream_proves_nothing_until_a_line_of_the_unit_is_in_the_journal_or_the_grace_passed(tmp_path):
    """Under load journald may not have accepted the unit's stream yet (no state file): the wait also wants a line
    the unit wrote, for at most OUTPUT_GRACE_SECONDS (a process that wrote nothing)."""
    clock = {"now": 0.0}
    seen = {"after": 0.7}

    def tick(seconds):
        clock["now"] += seconds
    assert probe_mod.wait_for_streams_closed("sglang.service", output_seen=lambda: clock["now"] >= seen["after"],
                                             directory=str(tmp_path), mono=lambda: clock["now"], sleep=tick) is True
    assert 0.7 <= clock["now"] < 0.9
    clock["now"] = 0.0
    assert probe_mod.wait_for_streams_closed("sglang.service", output_seen=lambda: False, directory=str(tmp_path),
                                             mono=lambda: clock["now"], sleep=tick) is True
    assert probe_mod.OUTPUT_GRACE_SECONDS <= clock["now"] < probe_mod.OUTPUT_GRACE_SECONDS + 0.2


def test_the_lines_of_both_queries_are_merged_once_each_oldest_first():
    first = '{"__CURSOR": "a", "__REALTIME_TIMESTAMP": "20", "MESSAGE": "Main process exited"}'
    late = '{"__CURSOR": "b", "__REALTIME_TIMESTAMP": "30", "MESSAGE": "RuntimeError: late"}'
    early = '{"__CURSOR": "c", "__REALTIME_TIMESTAMP": "10", "MESSAGE": "starting"}'
    merged = probe_mod.merged_journal_json(first, "\n".join([early, first, late]))
    messages = [json.loads(line)["MESSAGE"] for line in merged.splitlines()]
    assert messages == ["starting", "Main process exited", "RuntimeError: late"]
    assert probe_mod.epoch_of_monotonic(5_000_000, clock=lambda: 1000.0, monotonic=lambda: 7.0) == 998.0
