"""Unit tests of the sglang_ready module (documentation, results) and of its action plugin."""
import json

import pytest

from ansible.plugins.action import ActionBase
from ansible_collections.k26.deploy.plugins.action import sglang_benchmark as benchmark_action
from ansible_collections.k26.deploy.plugins.action import sglang_ready as action
from ansible_collections.k26.deploy.plugins.module_utils import nvidia_health
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import PROBE_READY, http_result
from ansible_collections.k26.deploy.plugins.modules import sglang_ready
from module_runner import assert_documented_as_specified, run_module as run_shared
from module_runner import doc as module_doc

INV1 = 'cbc57ece148a4996b8fbeb0bfa66c895'
OOM = 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'
JOURNAL = [
    'Started sglang.service - SGLang.',
    "[2026-11-29 10:00:01] server_args=ServerArgs(model_path='/models/kimi', api_key='s3cr3t-key')",
    '[2026-11-29 10:00:49 TP0] Scheduler hit an exception: Traceback (most recent call last):',
    '  File "/opt/sglang/sglang/srt/model_executor/model_runner.py", line 402, in initialize',
    '    self.load_model()',
    OOM,
    'sglang.service: Main process exited, code=exited, status=1/FAILURE',
    "sglang.service: Failed with result 'exit-code'.",
]


START_US = '5000000'  # the unit's start (monotonic microseconds): the journal's lines since then are this start's


def unit(active='active', sub='running', result='success', code=0, status=0, nrestarts=0):
    return {'Id': 'sglang.service', 'LoadState': 'loaded', 'ActiveState': active, 'SubState': sub,
            'Result': result, 'Restart': 'no', 'NRestarts': str(nrestarts), 'InvocationID': INV1,
            'MainPID': '0' if active in ('failed', 'inactive') else '42', 'ExecMainCode': str(code),
            'ExecMainStatus': str(status),
            'ActiveEnterTimestamp': 'Sun 2026-11-29 10:00:00 UTC', 'ExecMainStartTimestampMonotonic': START_US}


REFUSED = http_result('/v1/models', 'refused')
KIMI = http_result('/v1/models', 'ok', 200, {'data': [{'id': 'kimi'}]})
READY = dict(http_result('/ready', 'ok', 200), probe=PROBE_READY)
NOT_WARM = dict(http_result('/ready', 'http', 503), probe=PROBE_READY)


class FakeProbe(object):
    """Plays recorded observations (the last one repeats) instead of asking systemd and HTTP."""
    script = []
    journal = []
    calls = []
    kernel = []

    def __init__(self, module, unit, url, **kwargs):
        self.systemctl = '/bin/systemctl'
        FakeProbe.calls.append(('init', unit, url, kwargs))

    def observe(self, state, settings, elapsed):
        step = FakeProbe.script.pop(0) if len(FakeProbe.script) > 1 else FakeProbe.script[0]
        t, props, models, warmup = step
        return {'elapsed': t, 'unit': props, 'models': models, 'warmup': warmup}

    def journal_lines(self, invocation_ids, entries, streams=False, since_us=None):
        FakeProbe.calls.append(('journal', list(invocation_ids), entries, streams, since_us))
        return list(FakeProbe.journal)

    def sync_journal(self, ended=False, since_us=None):
        FakeProbe.calls.append(('sync', ended, since_us))

    def start_journal(self, invocation, entries):
        FakeProbe.calls.append(('start_journal', invocation, entries))
        return []

    def kernel_events_since(self, start_us):
        return list(FakeProbe.kernel)


@pytest.fixture
def fake_probe(monkeypatch):
    monkeypatch.setattr(sglang_ready, 'SglangProbe', FakeProbe)
    FakeProbe.calls = []
    FakeProbe.journal = list(JOURNAL)
    FakeProbe.kernel = []
    return FakeProbe


def run_module(args, script, capsys, check_mode=False):
    FakeProbe.script = list(script)
    args = dict(args, interval=0.001)
    if check_mode:
        args['_ansible_check_mode'] = True
    return run_shared(sglang_ready, args, capsys)[1]


def doc(name):
    return module_doc(sglang_ready, name)


# --------------------------------------------------------------------------
# Documentation matches the interface
# --------------------------------------------------------------------------

def test_documented_options_match_argument_spec():
    assert_documented_as_specified(sglang_ready)


def test_interface_defaults():
    spec = sglang_ready.ARGUMENT_SPEC
    assert spec['api_key']['no_log'] is True
    assert spec['url']['default'] == 'http://127.0.0.1:30000'
    assert spec['interval']['default'] <= 0.5
    assert spec['require_warmup']['default'] is True
    assert spec['max_restarts']['default'] == 0


def test_examples_are_yaml_tasks():
    examples = doc('EXAMPLES')
    assert all('name' in task for task in examples)


SCENARIOS = {
    'ready': ([(0.0, unit(), REFUSED, None), (90.0, unit(), KIMI, NOT_WARM), (95.0, unit(), None, READY)], {}),
    'unit_failed': ([(0.0, unit(), REFUSED, None),
                     (12.3, unit('failed', 'failed', 'exit-code', 1, 1), None, None)], {}),
    'crash_loop': ([(0.0, unit(), REFUSED, None),
                    (3.0, dict(unit('activating', 'auto-restart', 'exit-code', 1, 1), Restart='on-failure'),
                     None, None)], {}),
    'unit_inactive': ([(0.0, unit('inactive', 'dead'), None, None), (10.0, unit('inactive', 'dead'), None, None)],
                      {}),
    'unit_missing': ([(0.0, dict(unit('inactive', 'dead'), LoadState='not-found', InvocationID=''), None, None),
                      (10.0, dict(unit('inactive', 'dead'), LoadState='not-found', InvocationID=''), None, None)],
                     {}),
    'auth_failed': ([(95.0, unit(), http_result('/v1/models', 'http', 401), None)], {}),
    'model_mismatch': ([(90.0, unit(), KIMI, None), (105.0, unit(), KIMI, None)], {'model': 'moonshotai/Kimi-K2.6'}),
    'warmup_failed': ([(90.0, unit(), KIMI, NOT_WARM), (990.0, unit(), None, NOT_WARM)], {}),
    'timeout': ([(0.0, unit(), REFUSED, None), (60.0, unit(), REFUSED, None)], {'timeout': 60}),
}


@pytest.mark.parametrize('reason', sorted(SCENARIOS))
def test_every_reason_through_main(reason, fake_probe, capsys):
    script, extra = SCENARIOS[reason]
    result = run_module(dict({'unit': 'sglang.service'}, **extra), script, capsys)
    assert result['reason'] == reason
    assert result['changed'] is False
    assert result['ready'] is (reason == 'ready')
    assert bool(result.get('failed')) is (reason != 'ready')
    assert result['msg'] and '\n' not in result['msg']
    returned = set(doc('RETURN'))
    assert set(result) - {'failed', 'invocation', 'changed'} <= returned, set(result) - returned
    if reason == 'ready':
        assert result['journal_excerpt'] == []
        assert result['timeline'] == {'loading': 0.0, 'http_up': 90.0, 'warm': 95.0, 'ready': 95.0}
        assert result['warmup_probe'] == 'ready'
    else:
        assert [call for call in FakeProbe.calls if call[0] == 'sync']
        assert isinstance(result['unit_state'], dict)
        assert result['last_log_line'] == "sglang.service: Failed with result 'exit-code'."


def test_failure_result_carries_excerpt_and_actionable_msg(fake_probe, capsys):
    script, dummy = SCENARIOS['unit_failed']
    result = run_module({'unit': 'sglang.service', 'journal_lines': 3}, script, capsys)
    assert result['journal_excerpt'][0].endswith('Traceback (most recent call last):')
    assert OOM in result['journal_excerpt']
    assert result['msg'].startswith('sglang.service failed after ')
    assert 'while loading: ' + OOM in result['msg']
    assert result['msg'].endswith('(exit status 1); see journal_excerpt')
    assert result['unit_state']['ActiveState'] == 'failed'
    # The journal is read for the invocations seen, with room for the traceback.
    journal_calls = [c for c in FakeProbe.calls if c[0] == 'journal']
    assert journal_calls[-1][1] == [INV1]
    assert journal_calls[-1][2] >= 3
    # the process ended: the journal is synced for its last lines, and read with the lines its output streams left
    # without the invocation since this start (the --since fallback)
    assert ('sync', True, START_US) in FakeProbe.calls
    assert journal_calls[-1][3:] == (True, START_US)


def test_a_crash_s_excerpt_ends_with_the_gpus_kernel_events_and_their_meaning(fake_probe, capsys):
    FakeProbe.kernel = nvidia_health.parse_kernel_events(
        "[ 7321.000002] NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.")
    script, dummy = SCENARIOS['unit_failed']
    result = run_module({'unit': 'sglang.service', 'journal_lines': 3}, script, capsys)
    assert result['journal_excerpt'][-1] == ('kernel: Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) on '
                                             '0000:00:06: [ 7321.000002] NVRM: Xid (PCI:0000:00:06): 79, GPU has '
                                             'fallen off the bus.')
    assert OOM in result['journal_excerpt']


def test_kernel_events_before_the_unit_started_are_not_this_crash_s():
    dmesg = ("[  100.000000] NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception\n"
             "[  200.500000] NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.\n")
    assert [event['code'] for event in nvidia_health.events_since(dmesg, 150.0)] == [79]


def test_api_key_is_masked_in_the_result(fake_probe, capsys):
    script, dummy = SCENARIOS['unit_failed']
    result = run_module({'unit': 'sglang.service', 'api_key': 's3cr3t-key'}, script, capsys)
    assert 's3cr3t-key' not in json.dumps(result)
    assert any('api_key=' in line for line in result['journal_excerpt'])
    assert FakeProbe.calls[0][3]['api_key'] == 's3cr3t-key'


def test_check_mode_looks_once_and_never_fails(fake_probe, capsys):
    script = [(0.0, unit('failed', 'failed', 'exit-code', 1, 1), None, None)]
    result = run_module({'unit': 'sglang.service', 'resume': {}}, script, capsys, check_mode=True)
    # One look suffices to know the unit failed: the reason says so, but check mode does not fail the task.
    assert result['reason'] == 'unit_failed'
    assert result['ready'] is False and not result.get('failed') and result['changed'] is False
    assert 'resume' not in result


def test_check_mode_says_check_mode_when_one_look_cannot_decide(fake_probe, capsys):
    result = run_module({'unit': 'sglang.service'}, [(1.0, unit(), REFUSED, None)], capsys, check_mode=True)
    assert result['reason'] == 'check_mode' and result['phase'] == 'loading'
    assert result['ready'] is False and not result.get('failed')


def test_check_mode_reports_ready(fake_probe, capsys):
    result = run_module({'unit': 'sglang.service'}, [(1.0, unit(), KIMI, READY)], capsys, check_mode=True)
    assert result['reason'] == 'ready' and result['ready'] is True


def test_slice_without_decision_returns_resume_state(fake_probe, capsys):
    script = [(0.0, unit(), REFUSED, None)]
    result = run_module({'unit': 'sglang.service', 'resume': {}, 'progress_interval': 1}, script, capsys)
    assert result['done'] is False and not result.get('failed')
    assert result['phase'] == 'loading'
    assert result['resume']['invocation_ids'] == [INV1]
    assert set(result) - {'invocation', 'changed'} <= set(doc('RETURN'))
    # The next slice continues from that state.
    state = result['resume']
    result = run_module({'unit': 'sglang.service', 'resume': state, 'progress_interval': 1},
                        [(95.0, unit(), KIMI, READY)], capsys)
    assert result['reason'] == 'ready'
    assert result['timeline'] == {'loading': 0.0, 'http_up': 95.0, 'warm': 95.0, 'ready': 95.0}


@pytest.mark.parametrize('args', [{'interval': 0}, {'timeout': -1}, {'progress_interval': 0}])
def test_bad_parameters_fail_before_looking(args, fake_probe, capsys):
    FakeProbe.script = [(0.0, unit(), REFUSED, None)]
    dummy, result = run_shared(sglang_ready, dict({'unit': 'sglang.service'}, **args), capsys)
    assert result['failed'] and 'must' in result['msg']


def test_slice_deadline_runs_to_the_end_near_the_timeout():
    from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import Settings
    cfg = Settings('u', 'http://127.0.0.1:1', None, True, 100, 0, 10, 15, 900)
    state = {'started_mono': 0.0}
    assert sglang_ready.slice_deadline(state, cfg, 30, mono=lambda: 10.0) == 40.0
    assert sglang_ready.slice_deadline(state, cfg, 30, mono=lambda: 60.0) is None


# --------------------------------------------------------------------------
# Action plugin
# --------------------------------------------------------------------------

def test_progress_line_and_mask():
    record = action.progress_record('gpu1', 'sglang.service',
                                    {'elapsed': 120.7, 'phase': 'loading', 'restarts': 0,
                                     'last_log_line': "server_args=ServerArgs(api_key='k3y')"}, ['k3y'], False)
    line = action.progress_line(record)
    assert line == "sglang_ready [gpu1] sglang.service: 120s loading (restarts 0) | server_args=ServerArgs(api_key='********')"
    hidden = action.progress_record('gpu1', 'u', {'elapsed': 1, 'phase': 'loading', 'last_log_line': 'x'}, [], True)
    assert action.progress_line(hidden) == 'sglang_ready [gpu1] u: 1s loading (restarts 0)'


class FakeTask(object):
    def __init__(self, args, check_mode=False, no_log=False):
        self.args = args
        self.check_mode = check_mode
        self.no_log = no_log
        self.async_val = 0
        self.action = 'sglang_ready'


def make_action(monkeypatch, args, slices, check_mode=False, plugin_module=action):
    plugin = plugin_module.ActionModule.__new__(plugin_module.ActionModule)
    plugin._task = FakeTask(args, check_mode)
    sent = []

    def execute_module(module_args=None, task_vars=None, **kwargs):
        sent.append(json.loads(json.dumps(module_args)))
        return slices.pop(0)

    monkeypatch.setattr(plugin, '_execute_module', execute_module, raising=False)
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    return plugin, sent


def test_action_runs_slices_prints_progress_and_writes_records(monkeypatch, tmp_path):
    progress_file = tmp_path / 'progress.jsonl'
    monkeypatch.setenv('K26DEPLOY_PROGRESS_FILE', str(progress_file))
    shown = []
    monkeypatch.setattr(action.display, 'display', lambda msg, *a, **k: shown.append(msg))
    state1, state2 = {'started_mono': 1.0, 'n': 1}, {'started_mono': 1.0, 'n': 2}
    slices = [
        {'done': False, 'ready': False, 'phase': 'loading', 'elapsed': 30.2, 'restarts': 0,
         'last_log_line': 'Loading safetensors checkpoint shards:  12% Completed', 'resume': state1},
        {'done': False, 'ready': False, 'phase': 'warming', 'elapsed': 60.4, 'restarts': 0,
         'last_log_line': 'INFO: k3y', 'resume': state2},
        {'ready': True, 'reason': 'ready', 'phase': 'ready', 'elapsed': 75.0, 'restarts': 0, 'msg': 'ok',
         'last_log_line': 'The server is fired up and ready to roll!', 'changed': False},
    ]
    plugin, sent = make_action(monkeypatch, {'unit': 'sglang.service', 'api_key': 'k3y'}, slices)
    result = plugin.run(task_vars={'inventory_hostname': 'gpu1'})
    assert [s['resume'] for s in sent] == [{}, state1, state2]
    assert all(s['api_key'] == 'k3y' for s in sent)
    assert shown == [
        'sglang_ready [gpu1] sglang.service: 30s loading (restarts 0) | '
        'Loading safetensors checkpoint shards:  12% Completed',
        'sglang_ready [gpu1] sglang.service: 60s warming (restarts 0) | INFO: ********',
    ]
    assert result['reason'] == 'ready' and result['elapsed'] == 75.0
    assert 'resume' not in result and 'done' not in result
    records = [json.loads(line) for line in progress_file.read_text().splitlines()]
    assert [r['phase'] for r in records] == ['loading', 'warming', 'ready']
    assert set(records[0]) == {'host', 'unit', 'elapsed', 'phase', 'last_log_line', 'restarts', 'time'}
    assert records[-1]['done'] is True and records[-1]['reason'] == 'ready'
    assert 'k3y' not in progress_file.read_text()


def test_action_stops_on_failure_and_in_check_mode(monkeypatch):
    monkeypatch.delenv('K26DEPLOY_PROGRESS_FILE', raising=False)
    failed = {'failed': True, 'ready': False, 'reason': 'unit_failed', 'msg': 'x', 'elapsed': 3.0}
    plugin, sent = make_action(monkeypatch, {'unit': 'u'}, [dict(failed)])
    assert plugin.run(task_vars={})['reason'] == 'unit_failed'
    assert len(sent) == 1
    plugin, sent = make_action(monkeypatch, {'unit': 'u'}, [{'ready': False, 'reason': 'check_mode'}],
                               check_mode=True)
    assert plugin.run(task_vars={})['reason'] == 'check_mode'
    assert 'resume' not in sent[0]


def sweep_level(concurrency, tok_s):
    return {'concurrency': concurrency, 'output_tokens_per_second': tok_s, 'per_request_tokens_per_second': tok_s,
            'ttft_ms': {'p50': 40.0}, 'errors': 0, 'gpus': []}


def test_benchmark_action_runs_one_level_at_a_time_and_reports_each(monkeypatch, tmp_path):
    progress_file = tmp_path / 'progress.jsonl'
    monkeypatch.setenv('K26DEPLOY_PROGRESS_FILE', str(progress_file))
    monkeypatch.setattr(benchmark_action.display, 'display', lambda msg, *a, **k: None)
    levels = [{'changed': False, 'levels': [sweep_level(1, 35.6)], 'journal_lines': ['a'], 'tool': 'aiperf 0.13.0'},
              {'changed': False, 'levels': [sweep_level(8, 128.9)], 'journal_lines': ['b'], 'tool': 'aiperf 0.13.0'}]
    plugin, sent = make_action(monkeypatch, {'levels': [1, 8], 'unit': 'sglang.service'}, levels,
                               plugin_module=benchmark_action)
    result = plugin.run(task_vars={'inventory_hostname': 'gpu1'})
    assert [s['levels'] for s in sent] == [[1], [8]]
    assert [level['concurrency'] for level in result['levels']] == [1, 8]
    assert result['journal_lines'] == ['a', 'b'] and result['tool'] == 'aiperf 0.13.0'
    records = [json.loads(line) for line in progress_file.read_text().splitlines()]
    assert [r['phase'] for r in records] == ['benchmark 1/2', 'benchmark 2/2']
    assert records[1]['last_log_line'].startswith('C=8: 128.9 tok/s')


def test_benchmark_action_stops_at_the_first_failed_level(monkeypatch):
    monkeypatch.delenv('K26DEPLOY_PROGRESS_FILE', raising=False)
    plugin, sent = make_action(monkeypatch, {'levels': [1, 8]}, [{'failed': True, 'msg': 'no aiperf'}],
                               plugin_module=benchmark_action)
    assert plugin.run(task_vars={})['msg'] == 'no aiperf' and len(sent) == 1
