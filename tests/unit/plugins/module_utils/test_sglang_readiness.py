"""Unit tests of the pure readiness logic (plugins/module_utils/sglang_readiness.py)."""
import json

import pytest

from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import printable
from ansible_collections.k26.deploy.plugins.module_utils.sglang_readiness import (
    PROBE_HEALTH_GENERATE, PROBE_READINESS, PROBE_READY, Settings, U_ACTIVATING, U_ACTIVE, U_BROKEN, U_DEACTIVATING,
    U_FAILED, U_INACTIVE, U_MISSING, U_RESTART_PENDING, advance, build_msg, classify_unit, count_restarts,
    clean_line, decode_message, describe_exit, error_lines, http_result, journal_excerpt, journal_matches, key_error_line,
    last_line, model_ids_from, new_state, parse_journal_json, parse_systemctl_show, timeout_reason,
    warmup_probe_due, would_restart,
)

# `systemctl show loop.service` recorded on Debian 12 (systemd 252) while the simulator crash-loops
# under Restart=on-failure: the process died, systemd waits RestartSec before restarting it.
SHOW_AUTO_RESTART = """\
Type=simple
Restart=on-failure
NotifyAccess=none
RestartUSec=3s
TimeoutStopUSec=1min 30s
MainPID=0
ControlPID=0
StatusErrno=0
Result=exit-code
ReloadResult=success
CleanResult=success
UID=[not set]
GID=[not set]
NRestarts=0
ExecMainStartTimestamp=Sun 2026-11-29 10:09:03 UTC
ExecMainStartTimestampMonotonic=940200116
ExecMainExitTimestamp=Sun 2026-11-29 10:09:05 UTC
ExecMainExitTimestampMonotonic=941500631
ExecMainPID=1634
ExecMainCode=1
ExecMainStatus=1
ExecStart={ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 /opt/sim.py --model-path /models/kimi --port 30002 \
--sim-failure crash_loading ; ignore_errors=no ; start_time=[Sun 2026-11-29 10:09:03 UTC] ; \
stop_time=[Sun 2026-11-29 10:09:05 UTC] ; pid=1634 ; code=exited ; status=1 }
Slice=system.slice
MemoryCurrent=[not set]
TasksCurrent=[not set]
LimitNOFILE=524288
StandardOutput=journal
StandardError=inherit
KillMode=control-group
KillSignal=15
Id=loop.service
Names=loop.service
Description=sim loop
LoadState=loaded
ActiveState=activating
FreezerState=running
SubState=auto-restart
FragmentPath=/etc/systemd/system/loop.service
UnitFileState=static
UnitFilePreset=enabled
StateChangeTimestamp=Sun 2026-11-29 10:09:05 UTC
StateChangeTimestampMonotonic=941501667
InactiveExitTimestamp=Sun 2026-11-29 10:09:05 UTC
InactiveExitTimestampMonotonic=941501667
ActiveEnterTimestamp=Sun 2026-11-29 10:09:03 UTC
ActiveEnterTimestampMonotonic=940203765
ActiveExitTimestamp=Sun 2026-11-29 10:09:05 UTC
ActiveExitTimestampMonotonic=941501208
InactiveEnterTimestamp=Sun 2026-11-29 10:09:05 UTC
InactiveEnterTimestampMonotonic=941501208
CanStart=yes
ConditionResult=yes
AssertResult=yes
StartLimitIntervalUSec=10s
StartLimitBurst=5
InvocationID=cbc57ece148a4996b8fbeb0bfa66c895
CollectMode=inactive
"""

# `systemctl show nope.service` for a unit that does not exist (exit status 0).
SHOW_NOT_FOUND = """\
Restart=no
NRestarts=0
MainPID=0
ExecMainCode=0
ExecMainStatus=0
Result=success
Id=nope.service
Names=nope.service
LoadState=not-found
ActiveState=inactive
SubState=dead
Job=
StateChangeTimestampMonotonic=0
InactiveEnterTimestampMonotonic=0
LoadError=org.freedesktop.systemd1.NoSuchUnit "Unit nope.service not found."
InvocationID=
"""

INV1 = 'cbc57ece148a4996b8fbeb0bfa66c895'
INV2 = '0d4c1f0e2b9a4f6e8d7c6b5a49382716'
INV3 = '7a1e9f3c5b2d4e6f8a0b1c2d3e4f5a6b'

OOM_TEXT = (
    'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of '
    '139.72 GiB of which 1.27 GiB is free.')

# What journalctl shows of an SGLang start-up that dies of CUDA OOM while loading weights.
SGLANG_OOM_JOURNAL = [
    'Started sglang.service - SGLang serving Kimi K2.6.',
    "[2026-11-29 10:00:01] server_args=ServerArgs(model_path='/models/Kimi-K2.6', tp_size=8, pp_size=1)",
    '[2026-11-29 10:00:05 TP0] Load weight begin. avail mem=138.72 GB',
    'Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]',
    'Loading safetensors checkpoint shards:  12% Completed | 8/64 [00:40<04:40,  5.00s/it]',
    '[2026-11-29 10:00:49 TP3] Scheduler hit an exception: Traceback (most recent call last):',
    '  File "/opt/sglang/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 3112, '
    'in run_scheduler_process',
    '    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)',
    '  File "/opt/sglang/lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py", line 402, '
    'in initialize',
    '    self.load_model()',
    '  File "/opt/sglang/lib/python3.11/site-packages/sglang/srt/layers/moe/fused_moe_triton/layer.py", '
    'line 588, in weight_loader',
    '    expert_data.copy_(loaded_weight)',
    OOM_TEXT,
    '',
    '[2026-11-29 10:00:49] Received sigquit from a child process. It usually means the child failed.',
    'sglang.service: Main process exited, code=exited, status=1/FAILURE',
    "sglang.service: Failed with result 'exit-code'.",
    'sglang.service: Consumed 5min 3.120s CPU time.',
]


def settings(**over):
    values = dict(unit='sglang.service', url='http://127.0.0.1:30000', model='moonshotai/Kimi-K2.6',
                  require_warmup=True, timeout=3600, max_restarts=0, startup_grace=10,
                  model_mismatch_grace=15, warmup_timeout=900)
    values.update(over)
    return Settings(**values)


def unit(active='active', sub='running', nrestarts=0, inv=INV1, result='success', load='loaded',
         restart='no', code=0, status=0, job=''):
    return {
        'Id': 'sglang.service', 'LoadState': load, 'ActiveState': active, 'SubState': sub, 'Result': result,
        'Restart': restart, 'NRestarts': str(nrestarts), 'InvocationID': inv, 'MainPID': '4242',
        'ExecMainCode': str(code), 'ExecMainStatus': str(status), 'Job': job,
    }


def models(*ids):
    return http_result('/v1/models', 'ok', 200, {'object': 'list', 'data': [{'id': i, 'object': 'model'} for i in ids]})


REFUSED = http_result('/v1/models', 'refused', error='URLError: [Errno 111] Connection refused')
READY_200 = dict(http_result('/ready', 'ok', 200), probe=PROBE_READY)
READY_503 = dict(http_result('/ready', 'http', 503), probe=PROBE_READY)
KIMI = models('moonshotai/Kimi-K2.6')


def obs(t, props, models_result=None, warmup=None):
    return {'elapsed': t, 'unit': props, 'models': models_result, 'warmup': warmup}


def run(observations, **over):
    """Feed observations to the state machine; return (decisions, state)."""
    state = new_state(1795946000.0, 100.0)
    cfg = settings(**over)
    decisions = [advance(state, o, cfg) for o in observations]
    return decisions, state


# --------------------------------------------------------------------------
# systemctl show
# --------------------------------------------------------------------------

def test_parse_systemctl_show_recorded_output():
    props = parse_systemctl_show(SHOW_AUTO_RESTART)
    assert props['ActiveState'] == 'activating'
    assert props['SubState'] == 'auto-restart'
    assert props['NRestarts'] == '0'
    assert props['InvocationID'] == INV1
    assert props['ExecMainStatus'] == '1'
    assert props['Result'] == 'exit-code'
    assert props['ActiveEnterTimestamp'] == 'Sun 2026-11-29 10:09:03 UTC'
    assert props['UID'] == '[not set]'
    # Values containing '=' stay whole.
    assert props['ExecStart'].startswith('{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3')
    assert props['ExecStart'].endswith('code=exited ; status=1 }')


@pytest.mark.parametrize('text, expected', [
    ('', {}),
    ('garbage line\n\nActiveState=active\n', {'ActiveState': 'active'}),
    ('InvocationID=\n', {'InvocationID': ''}),
    ('A=1\nA=2\n', {'A': '2'}),
])
def test_parse_systemctl_show_edge_cases(text, expected):
    assert parse_systemctl_show(text) == expected


@pytest.mark.parametrize('props, expected', [
    (parse_systemctl_show(SHOW_AUTO_RESTART), U_RESTART_PENDING),
    (parse_systemctl_show(SHOW_NOT_FOUND), U_MISSING),
    ({}, U_MISSING),
    (unit(load='masked', active='inactive', sub='dead'), U_MISSING),
    (unit(load='bad-setting', active='inactive', sub='dead'), U_BROKEN),
    (unit(active='failed', sub='failed', result='exit-code'), U_FAILED),
    (unit(), U_ACTIVE),
    (unit(active='reloading', sub='reload'), U_ACTIVE),
    (unit(active='activating', sub='start'), U_ACTIVATING),
    (unit(active='activating', sub='auto-restart-queued'), U_ACTIVATING),  # systemd >= 254: already counted
    (unit(active='deactivating', sub='stop-sigterm', result='exit-code', restart='on-failure'), U_RESTART_PENDING),
    (unit(active='deactivating', sub='stop-sigterm', result='exit-code', restart='no'), U_DEACTIVATING),
    (unit(active='inactive', sub='dead'), U_INACTIVE),
    (unit(active='maintenance', sub='dead'), U_INACTIVE),
])
def test_classify_unit(props, expected):
    assert classify_unit(props) == expected


@pytest.mark.parametrize('restart, result, expected', [
    ('no', 'exit-code', False),
    ('always', 'success', True),
    ('on-failure', 'success', False),
    ('on-failure', 'exit-code', True),
    ('on-failure', 'signal', True),
    ('on-abnormal', 'exit-code', False),
    ('on-abnormal', 'signal', True),
    ('on-abort', 'core-dump', True),
    ('on-success', 'success', True),
    ('on-watchdog', 'watchdog', True),
])
def test_would_restart(restart, result, expected):
    assert would_restart({'Restart': restart, 'Result': result}) is expected


@pytest.mark.parametrize('props, expected', [
    ({'ExecMainCode': '1', 'ExecMainStatus': '1'}, 'exit status 1'),
    ({'ExecMainCode': '2', 'ExecMainStatus': '9'}, 'killed by SIGKILL'),
    ({'ExecMainCode': '3', 'ExecMainStatus': '11'}, 'dumped core on SIGSEGV'),
    ({'ExecMainCode': '2', 'ExecMainStatus': '9', 'Result': 'oom-kill'}, 'killed by the kernel OOM killer'),
    ({'ExecMainCode': '0', 'ExecMainStatus': '0'}, ''),
])
def test_describe_exit(props, expected):
    assert describe_exit(props) == expected


# --------------------------------------------------------------------------
# Restart counting
# --------------------------------------------------------------------------

def _count(sequence, start_state=None):
    state = start_state or new_state(0.0, 0.0)
    counts = []
    for props in sequence:
        counts.append(count_restarts(state, props, classify_unit(props)))
    return counts


@pytest.mark.parametrize('sequence, expected', [
    pytest.param([unit(), unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code')],
                 [0, 1], id='auto-restart counts before NRestarts grows'),
    pytest.param([
        unit(),
        unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code'),
        # systemd 252: NRestarts incremented while SubState is still auto-restart
        unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code', nrestarts=1),
        unit(nrestarts=1, inv=INV2),
    ], [0, 1, 1, 1], id='the same crash is counted once'),
    pytest.param([
        unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code', nrestarts=3),
        unit(nrestarts=3, inv=INV2),
        unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code', nrestarts=3,
             inv=INV2),
        unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code', nrestarts=4,
             inv=INV2),
    ], [1, 1, 2, 2], id='wait starts after NRestarts was incremented'),
    pytest.param([unit(nrestarts=2), unit(nrestarts=4, inv=INV2)], [0, 2],
                 id='restarts missed between polls come from NRestarts'),
    pytest.param([unit(nrestarts=5), unit(nrestarts=0, inv=INV2), unit(nrestarts=1, inv=INV3)], [0, 0, 1],
                 id='manual restart resets NRestarts: new baseline'),
    pytest.param([unit(), unit(active='deactivating', sub='stop-sigterm', restart='on-failure', result='exit-code'),
                  unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code'),
                  unit(active='activating', sub='auto-restart-queued', restart='on-failure', result='exit-code',
                       nrestarts=1),
                  unit(nrestarts=1, inv=INV2)],
                 [0, 1, 1, 1, 1], id='systemd 254 states: deactivating, auto-restart, auto-restart-queued'),
])
def test_count_restarts(sequence, expected):
    assert _count(sequence) == expected


# --------------------------------------------------------------------------
# The state machine: every reason
# --------------------------------------------------------------------------

def test_ready_path_records_timeline_and_probe():
    decisions, state = run([
        obs(0.0, unit(active='activating', sub='start')),
        obs(0.3, unit(), REFUSED),
        obs(88.1, unit(), KIMI, READY_503),
        obs(94.9, unit(), None, READY_200),
    ])
    assert [d.phase for d in decisions] == ['loading', 'loading', 'warming', 'ready']
    assert decisions[-1].done and decisions[-1].reason == 'ready'
    assert state['timeline'] == {'loading': 0.0, 'http_up': 88.1, 'warm': 94.9, 'ready': 94.9}
    assert state['warmup_probe'] == PROBE_READY
    assert state['model_ids'] == ['moonshotai/Kimi-K2.6']


def test_ready_without_warmup_and_without_expected_model():
    decisions, state = run([obs(1.0, unit(), models('any-model'))], model=None, require_warmup=False)
    assert decisions[-1] == (True, 'ready', 'ready')
    assert 'warm' not in state['timeline']
    assert state['warmup_probe'] is None


def test_models_must_list_at_least_one_id_when_no_model_is_expected():
    decisions, dummy = run([obs(1.0, unit(), models())], model=None, require_warmup=False)
    assert not decisions[-1].done


def test_health_generate_fallback_when_ready_is_missing():
    hg_503 = dict(http_result('/health_generate', 'http', 503), probe=PROBE_HEALTH_GENERATE, started=5.0)
    hg_200 = dict(http_result('/health_generate', 'ok', 200), probe=PROBE_HEALTH_GENERATE, started=6.5)
    decisions, state = run([obs(5.0, unit(), KIMI, hg_503), obs(6.5, unit(), None, hg_200)])
    assert decisions[-1].reason == 'ready'
    assert state['warmup_probe'] == PROBE_HEALTH_GENERATE


def test_ready_404_switches_probe():
    ready_404 = dict(http_result('/ready', 'http', 404), probe=PROBE_READY)
    decisions, state = run([obs(5.0, unit(), KIMI, ready_404)])
    assert not decisions[-1].done
    assert state['warmup_probe'] == PROBE_HEALTH_GENERATE


def test_a_named_probe_is_the_only_one_asked():
    readiness_404 = dict(http_result('/readiness', 'http', 404), probe=PROBE_READINESS)
    router = settings(warmup_probe=PROBE_READINESS)
    decisions, state = run([obs(5.0, unit(), KIMI, readiness_404)], warmup_probe=PROBE_READINESS)
    assert not decisions[-1].done and state['warmup_probe'] == PROBE_READINESS
    assert warmup_probe_due(new_state(0.0, 0.0), router, 1.0) == PROBE_READINESS
    ready_404 = dict(http_result('/ready', 'http', 404), probe=PROBE_READY)
    decisions, state = run([obs(5.0, unit(), KIMI, ready_404)], warmup_probe=PROBE_READY)
    assert state['warmup_probe'] == PROBE_READY


def test_health_generate_is_rate_limited():
    state = new_state(0.0, 0.0)
    assert warmup_probe_due(state, settings(), 3.0) == PROBE_READY
    state.update(warmup_probe=PROBE_HEALTH_GENERATE, last_probe_at=3.0)
    assert warmup_probe_due(state, settings(), 3.5) is None
    assert warmup_probe_due(state, settings(), 4.0) == PROBE_HEALTH_GENERATE


def test_ready_requires_the_unit_to_be_active():
    decisions, dummy = run([obs(5.0, unit(active='activating', sub='start'), KIMI, READY_200)])
    assert not decisions[-1].done


def test_models_are_not_asked_again_for_the_same_invocation():
    decisions, dummy = run([obs(5.0, unit(), KIMI, READY_503), obs(5.3, unit(), None, READY_503)])
    assert decisions[-1].phase == 'warming'


@pytest.mark.parametrize('observations, over, reason, phase', [
    pytest.param([obs(0.0, unit(), REFUSED),
                  obs(12.3, unit(active='failed', sub='failed', result='exit-code', code=1, status=1))],
                 {}, 'unit_failed', 'loading', id='unit_failed while loading'),
    pytest.param([obs(0.0, unit(load='bad-setting', active='inactive', sub='dead'))],
                 {}, 'unit_failed', 'starting', id='unit file with errors'),
    pytest.param([obs(0.0, unit(), REFUSED),
                  obs(3.0, unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code'))],
                 {}, 'crash_loop', 'loading', id='crash_loop on first auto-restart with max_restarts 0'),
    pytest.param([obs(0.0, unit(), REFUSED),
                  obs(3.0, unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code')),
                  obs(6.0, unit(nrestarts=1, inv=INV2), REFUSED),
                  obs(9.0, unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code',
                                nrestarts=1, inv=INV2))],
                 {'max_restarts': 1}, 'crash_loop', 'loading', id='crash_loop beyond max_restarts 1'),
    pytest.param([obs(0.0, unit(active='inactive', sub='dead', job='78')),
                  obs(10.0, unit(active='inactive', sub='dead', job='78'))],
                 {}, 'unit_inactive', 'starting', id='unit_inactive after startup_grace (start job never ran)'),
    pytest.param([obs(0.0, unit(active='inactive', sub='dead'))],
                 {}, 'unit_inactive', 'starting', id='unit_inactive at once: no start job queued'),
    pytest.param([obs(0.0, parse_systemctl_show(SHOW_NOT_FOUND))],
                 {}, 'unit_missing', 'starting', id='unit_missing at once: no start job queued'),
    pytest.param([obs(0.0, unit(), REFUSED), obs(50.0, unit(active='inactive', sub='dead'))],
                 {}, 'unit_inactive', 'loading', id='inactive after having been active'),
    pytest.param([obs(0.0, unit(), REFUSED),
                  obs(50.0, unit(active='deactivating', sub='stop-sigterm', result='exit-code'))],
                 {}, 'unit_failed', 'loading', id='process exited: deactivating without restart'),
    pytest.param([obs(0.0, {}), obs(11.0, {})], {}, 'unit_missing', 'starting', id='systemctl cannot tell'),
    pytest.param([obs(95.0, unit(), http_result('/v1/models', 'http', 401))],
                 {}, 'auth_failed', 'http_up', id='auth_failed 401'),
    pytest.param([obs(95.0, unit(), KIMI, dict(http_result('/ready', 'http', 403), probe=PROBE_READY))],
                 {}, 'auth_failed', 'warming', id='auth_failed 403 on the warm-up probe'),
    pytest.param([obs(90.0, unit(), models('kimi-k2')), obs(105.0, unit(), models('kimi-k2'))],
                 {}, 'model_mismatch', 'http_up', id='model_mismatch after grace'),
    pytest.param([obs(90.0, unit(), KIMI, READY_503), obs(990.0, unit(), None, READY_503)],
                 {}, 'warmup_failed', 'warming', id='warmup_failed after warmup_timeout'),
    pytest.param([obs(0.0, unit(), REFUSED), obs(3600.0, unit(), REFUSED)],
                 {}, 'timeout', 'loading', id='timeout while loading'),
    pytest.param([obs(0.0, unit(), KIMI, READY_503), obs(600.0, unit(), None, READY_503)],
                 {'timeout': 600}, 'warmup_failed', 'warming', id='timeout while warming is warmup_failed'),
])
def test_failure_reasons(observations, over, reason, phase):
    decisions, dummy = run(observations, **over)
    assert all(not d.done for d in decisions[:-1])
    assert decisions[-1] == (True, reason, phase)


@pytest.mark.parametrize('observations, over', [
    pytest.param([obs(0.0, unit(active='inactive', sub='dead', job='78')),
                  obs(9.9, unit(active='inactive', sub='dead', job='78'))],
                 {}, id='inactive within startup_grace (queued start job)'),
    pytest.param([obs(0.0, {}), obs(5.0, {})], {}, id='systemctl cannot tell, within startup_grace'),
    pytest.param([obs(0.0, unit(active='activating', sub='start'), REFUSED)], {}, id='refused while activating'),
    pytest.param([obs(0.0, unit(), REFUSED), obs(1000.0, unit(), REFUSED)], {}, id='refused while active'),
    pytest.param([obs(0.0, unit(), http_result('/v1/models', 'timeout'))], {}, id='HTTP timeout'),
    pytest.param([obs(0.0, unit(), http_result('/v1/models', 'reset'))], {}, id='connection reset'),
    pytest.param([obs(90.0, unit(), models('kimi-k2')), obs(104.0, unit(), models('kimi-k2'))], {},
                 id='model mismatch within grace'),
    pytest.param([obs(0.0, unit(), REFUSED),
                  obs(3.0, unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code'))],
                 {'max_restarts': 1}, id='one restart allowed'),
    pytest.param([obs(0.0, unit(active='deactivating', sub='stop-sigterm')),
                  obs(1.0, unit(active='activating', sub='start'), REFUSED)], {}, id='restart by hand in progress'),
])
def test_keeps_waiting(observations, over):
    decisions, dummy = run(observations, **over)
    assert not any(d.done for d in decisions)


def test_mismatch_grace_restarts_with_a_new_invocation():
    decisions, dummy = run([
        obs(90.0, unit(), models('kimi-k2')),
        obs(100.0, unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code')),
        obs(101.0, unit(nrestarts=1, inv=INV2), models('kimi-k2')),
        obs(110.0, unit(nrestarts=1, inv=INV2), models('kimi-k2')),
    ], max_restarts=1)
    assert not any(d.done for d in decisions)


def test_invocations_are_collected():
    dummy, state = run([
        obs(0.0, unit(), REFUSED),
        obs(3.0, unit(active='activating', sub='auto-restart', restart='on-failure', result='exit-code')),
        obs(6.0, unit(nrestarts=1, inv=INV2), REFUSED),
        obs(7.0, unit(nrestarts=1, inv=INV2), REFUSED),
    ], max_restarts=3)
    assert state['invocation_ids'] == [INV1, INV2]
    assert state['restarts'] == 1
    assert state['timeline'] == {'loading': 0.0}


def test_state_survives_json_round_trip_between_slices():
    cfg = settings()
    state = new_state(0.0, 0.0)
    advance(state, obs(0.0, unit(), REFUSED), cfg)
    state = json.loads(json.dumps(state))
    advance(state, obs(88.0, unit(), KIMI, READY_503), cfg)
    state = json.loads(json.dumps(state))
    decision = advance(state, obs(95.0, unit(), None, READY_200), cfg)
    assert decision.reason == 'ready'
    assert state['timeline'] == {'loading': 0.0, 'http_up': 88.0, 'warm': 95.0, 'ready': 95.0}


@pytest.mark.parametrize('phase, reason', [
    ('starting', 'timeout'), ('loading', 'timeout'), ('restarting', 'timeout'),
    ('http_up', 'warmup_failed'), ('warming', 'warmup_failed'),
])
def test_timeout_reason(phase, reason):
    assert timeout_reason(phase) == reason


# --------------------------------------------------------------------------
# HTTP bodies
# --------------------------------------------------------------------------

@pytest.mark.parametrize('body, expected', [
    ({'object': 'list', 'data': [{'id': 'a'}, {'id': 'b'}]}, ['a', 'b']),
    ({'object': 'list', 'data': []}, []),
    ({'detail': 'Not Found'}, None),
    (None, None),
    ('text', None),
])
def test_model_ids_from(body, expected):
    assert model_ids_from(body) == expected


# --------------------------------------------------------------------------
# Journal
# --------------------------------------------------------------------------

def test_journal_matches_or_both_fields_of_every_invocation():
    assert journal_matches([INV1, INV2]) == [
        '_SYSTEMD_INVOCATION_ID=' + INV1, '+', 'INVOCATION_ID=' + INV1, '+',
        '_SYSTEMD_INVOCATION_ID=' + INV2, '+', 'INVOCATION_ID=' + INV2,
    ]
    assert journal_matches([]) == []


def test_parse_journal_json_decodes_byte_arrays_multiline_and_colours():
    text = '\n'.join([
        json.dumps({'MESSAGE': 'plain line', '_SYSTEMD_INVOCATION_ID': INV1}),
        json.dumps({'MESSAGE': list('bytes \xe9\n2nd'.encode('utf-8'))}),
        json.dumps({'MESSAGE': '\x1b[31mred error\x1b[0m'}),
        json.dumps({'MESSAGE': None}),
        'not json',
        json.dumps({'MESSAGE': 'x' * 5000}),
    ])
    lines = parse_journal_json(text)
    assert lines[:4] == ['plain line', 'bytes \xe9', '2nd', 'red error']
    assert lines[4] == ''
    assert len(lines[5]) == 1000 and lines[5].endswith('...')


def test_a_line_reaches_the_terminal_without_escape_sequences_or_control_characters():
    """OSC (a window title, a hyperlink), a carriage return that rewrites the line, a bell, a backspace, cursor moves
    and a C1 CSI: what a service writes must not act on the operator's terminal."""
    written = ('\x1b]0;owned title\x07step 1\r\x1b[2Kfaked ok\x1b]8;;http://x.invalid/\x1b\\link\x1b]8;;\x1b\\'
               '\x08\x07\x1bPdcs\x1b\\\x9b31m\ttab\x1b7')
    lines = parse_journal_json(json.dumps({'MESSAGE': written}))
    assert lines == ['step 1', 'faked oklink31m tab'], lines  # a carriage return starts a line of its own
    assert printable(written) == 'step 1faked oklink31m tab' and printable('a\nb') == 'a\nb'


def test_decode_message_invalid_utf8():
    assert decode_message([0x66, 0xff, 0x6f]) == 'f\ufffdo'


def test_error_lines_take_whole_traceback_then_error_lines():
    errors = error_lines(SGLANG_OOM_JOURNAL)
    start = SGLANG_OOM_JOURNAL.index(
        '[2026-11-29 10:00:49 TP3] Scheduler hit an exception: Traceback (most recent call last):')
    assert errors[:8] == SGLANG_OOM_JOURNAL[start:start + 8]
    assert errors[7] == OOM_TEXT
    assert errors[8:] == ['sglang.service: Main process exited, code=exited, status=1/FAILURE']


def test_excerpt_errors_first_then_tail_without_duplicates():
    excerpt = journal_excerpt(SGLANG_OOM_JOURNAL, tail=5)
    errors = error_lines(SGLANG_OOM_JOURNAL)
    assert excerpt[:len(errors)] == errors
    tail = excerpt[len(errors):]
    assert tail == [
        '',
        '[2026-11-29 10:00:49] Received sigquit from a child process. It usually means the child failed.',
        "sglang.service: Failed with result 'exit-code'.",
        'sglang.service: Consumed 5min 3.120s CPU time.',
    ]
    assert len(excerpt) == len(set(excerpt))


def test_excerpt_is_bounded_and_deduplicated_across_ranks():
    # Eight TP ranks print the same traceback; a crash loop repeats it per invocation.
    block = SGLANG_OOM_JOURNAL[5:13]
    lines = (block * 8 + ['CUDA error %d' % i for i in range(200)]) * 3
    excerpt = journal_excerpt(lines, tail=30, max_error_lines=60)
    assert excerpt.count(OOM_TEXT) == 0 or excerpt.count(OOM_TEXT) == 1
    assert len(excerpt) <= 60 + 30
    assert len(excerpt) == len(set(excerpt))


def test_excerpt_leaves_probe_access_lines_out_of_the_tail():
    lines = ['The server is fired up and ready to roll!'] + [
        'INFO:     127.0.0.1:39852 - "GET /ready HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:39854 - "GET /v1/models HTTP/1.1" 200 OK',
    ] * 20
    assert journal_excerpt(lines, tail=3) == ['The server is fired up and ready to roll!']
    assert last_line(lines) == 'The server is fired up and ready to roll!'


@pytest.mark.parametrize('lines, expected', [
    (SGLANG_OOM_JOURNAL, OOM_TEXT),
    (['Loading', 'RuntimeError: NCCL error in: init.cpp:1', 'sglang.service: Main process exited, code=exited, '
      'status=1/FAILURE'], 'RuntimeError: NCCL error in: init.cpp:1'),
    (['all fine', "sglang.service: Failed with result 'exit-code'."], ''),
    ([], ''),
])
def test_key_error_line(lines, expected):
    assert key_error_line(lines) == expected


# --------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------

def _msg(reason, state_over=None, over=None, props=None, elapsed=12.3, key_line='', last_log=''):
    state = new_state(0.0, 0.0)
    state.update(state_over or {})
    return build_msg(reason, state, settings(**(over or {})), props if props is not None else unit(),
                     elapsed, key_line=key_line, last_log=last_log)


FAILED = unit(active='failed', sub='failed', result='exit-code', code=1, status=1)


@pytest.mark.parametrize('reason, kwargs, expected', [
    ('ready', dict(state_over={'warmup_probe': 'ready', 'phase': 'ready'}, elapsed=95.3),
     'sglang.service ready after 95.3s (model moonshotai/Kimi-K2.6, warm-up confirmed by /ready)'),
    ('unit_failed', dict(state_over={'phase': 'loading'}, props=FAILED, key_line=OOM_TEXT),
     'sglang.service failed after 12.3s while loading: torch.OutOfMemoryError: CUDA out of memory. Tried to '
     'allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which 1.27 GiB is free. (exit status 1); '
     'see journal_excerpt'),
    ('crash_loop', dict(state_over={'phase': 'loading', 'restarts': 1},
                        props=unit(active='activating', sub='auto-restart', result='exit-code', code=1, status=1)),
     'sglang.service crashed 1 time(s) during the wait, more than max_restarts 0 (systemd restarts it: now '
     'activating (auto-restart), result exit-code, NRestarts 0) after 12.3s (exit status 1); see journal_excerpt'),
    ('unit_inactive', dict(props=unit(active='inactive', sub='dead', job='78')),
     'sglang.service is inactive (dead) and was not started within startup_grace 10s; start it first '
     '(systemctl start sglang.service)'),
    ('unit_inactive', dict(props=unit(active='inactive', sub='dead')),
     'sglang.service is inactive (dead) and no start job is queued; start it first '
     '(systemctl start sglang.service)'),
    ('unit_missing', dict(props=parse_systemctl_show(SHOW_NOT_FOUND)),
     'sglang.service does not exist (LoadState not-found); check the unit name or install the unit file'),
    ('auth_failed', dict(state_over={'last_http_error': 'HTTP 401 from /v1/models'}),
     'http://127.0.0.1:30000 answered HTTP 401 from /v1/models after 12.3s: check api_key (SGLang --api-key)'),
    ('model_mismatch', dict(state_over={'model_ids': ['kimi-k2']}),
     "http://127.0.0.1:30000/v1/models lists [\"kimi-k2\"] but not 'moonshotai/Kimi-K2.6' (for 15s, "
     "model_mismatch_grace); check model or --served-model-name"),
    ('warmup_failed', dict(state_over={'http_up_at': 90.0, 'warmup_probe': 'ready', 'warmup_last': 'HTTP 503'},
                           elapsed=990.0),
     'sglang.service: HTTP up at 90.0s but warm-up not done within warmup_timeout 900s (/ready: HTTP 503) '
     'after 990.0s; see journal_excerpt'),
    ('timeout', dict(state_over={'phase': 'loading'}, elapsed=3600.0,
                     last_log='Loading safetensors checkpoint shards:  37% Completed | 24/64'),
     'sglang.service not ready after 3600.0s (timeout 3600s): still loading, unit active (running), restarts 0; '
     'last log line: Loading safetensors checkpoint shards: 37% Completed | 24/64; see journal_excerpt'),
    ('check_mode', dict(state_over={'phase': 'loading'}),
     'check mode: sglang.service is not ready (phase loading, unit active (running)); not waiting'),
])
def test_build_msg(reason, kwargs, expected):
    assert _msg(reason, **kwargs) == expected


def test_msg_is_one_bounded_line():
    long_error = 'RuntimeError: ' + 'x' * 5000 + '\nsecond line'
    text = _msg('unit_failed', props=FAILED, key_line=long_error)
    assert '\n' not in text
    assert len(text) < 400


@pytest.mark.parametrize("line, expected", [
    ("server_args=ServerArgs(model_path='m', api_key='s3cr3t', admin_api_key=None, port=30000)",
     "server_args=ServerArgs(model_path='m', api_key='********', admin_api_key=None, port=30000)"),
    ("server_args={'model_path': 'm', 'api_key': 's3cr3t', 'admin_api_key': None, 'port': 30000}",
     "server_args={'model_path': 'm', 'api_key': '********', 'admin_api_key': None, 'port': 30000}"),
    ('launch --api-key s3cr3t --port 30000', "launch --api-key '********' --port 30000"),
    ('ssl_keyfile_password="p a,ss" next', 'ssl_keyfile_password="********" next'),
    ('no secret here: api_keys are set in the config', 'no secret here: api_keys are set in the config'),
])
def test_secret_values_never_leave_the_journal_filter(line, expected):
    assert clean_line(line) == expected
    assert parse_journal_json(json.dumps({"MESSAGE": line})) == [expected]


# --------------------------------------------------------------------------
# A node of rank >= 1 of a multi-node instance (worker): its dummy /health is its readiness
# --------------------------------------------------------------------------

HEALTH_200 = http_result('/health', 'ok', 200)
HEALTH_REFUSED = http_result('/health', 'refused', error='URLError: [Errno 111] Connection refused')


def worker_obs(t, props, health=None):
    return {'elapsed': t, 'unit': props, 'health': health}


def test_worker_is_ready_when_its_dummy_health_answers_without_models_or_warmup():
    decisions, state = run([worker_obs(0.0, unit('activating', 'start')), worker_obs(1.0, unit(), HEALTH_REFUSED),
                            worker_obs(2.0, unit(), HEALTH_200)], worker=True)
    assert [d.done for d in decisions] == [False, False, True]
    assert decisions[-1].reason == 'ready' and state['timeline']['http_up'] == 2.0
    assert 'rank >= 1' in build_msg('ready', state, settings(worker=True), unit(), 2.0)


def test_worker_that_dies_fails_like_any_unit():
    decisions, state = run([worker_obs(0.0, unit(), HEALTH_REFUSED),
                            worker_obs(1.0, unit('failed', 'failed', result='signal', code=2, status=9))],
                           worker=True)
    assert decisions[-1] == (True, 'unit_failed', decisions[-1].phase)


def test_worker_health_error_is_kept_for_the_message():
    decisions, state = run([worker_obs(0.0, unit(), http_result('/health', 'http', 503))], worker=True, timeout=0)
    assert decisions[-1].reason == 'timeout' and state['last_http_error'] == 'HTTP 503 from /health'
