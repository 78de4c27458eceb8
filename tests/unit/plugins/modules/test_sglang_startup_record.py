"""The start-up timeline read from a start's journal (SGLang 0.5.23's own lines) and the slower-start finding."""
import json

from ansible_collections.k26.deploy.plugins.module_utils import sglang_startup
from ansible_collections.k26.deploy.plugins.modules import sglang_ready, sglang_startup_record
from module_runner import run_module as run_shared

START = 5_000_000_000  # the unit's ExecMainStartTimestampMonotonic, microseconds


def entry(seconds, message):
    return json.dumps({'__MONOTONIC_TIMESTAMP': str(START + int(seconds * 1e6)), 'MESSAGE': message})


# As two TP ranks of SGLang 0.5.23 log them (model_runner.py, kv_cache_configurator.py, cuda_graph_setup.py,
# http_server.py), between lines no phase ends on.
JOURNAL = '\n'.join([
    entry(2.0, '[2026-12-04 06:30:42] server_args=ServerArgs(...)'),
    entry(9.0, '[2026-12-04 06:30:49 TP0] Load weight begin. avail mem=93.72 GB'),
    entry(60.5, '[2026-12-04 06:31:40 TP1] Load weight end. elapsed=51.30 s, type=DeepseekV3ForCausalLM, '
                'avail mem=30.10 GB, mem usage=63.62 GB.'),
    entry(61.0, '[2026-12-04 06:31:41 TP0] Load weight end. elapsed=51.80 s, type=DeepseekV3ForCausalLM, '
                'avail mem=30.10 GB, mem usage=63.62 GB.'),
    entry(63.0, '[2026-12-04 06:31:43 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 421000, '
                'KV size: 20.10 GB'),
    entry(63.2, '[2026-12-04 06:31:43 TP0] Memory pool end. avail mem=9.80 GB'),
    entry(63.3, '[2026-12-04 06:31:43 TP1] Memory pool end. avail mem=9.80 GB'),
    entry(64.0, '[2026-12-04 06:31:44 TP0] Capture target decode CUDA graph begin. backend=full'),
    entry(80.0, '[2026-12-04 06:32:00 TP0] Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=16.0 s'),
    entry(88.0, '[2026-12-04 06:32:08 TP0] Capture target prefill CUDA graph end. elapsed=8.0 s'),
    entry(90.0, 'INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)'),
    entry(94.0, '[2026-12-04 06:32:14] The server is fired up and ready to roll!'),
    entry(500.0, '[2026-12-04 06:39:00 TP0] Load weight end. elapsed=3.00 s (an update of the weights)'),
    'not json',
    json.dumps({'MESSAGE': 'no timestamp'}),
])


def test_each_phase_ends_on_its_last_ranks_line_and_later_lines_move_nothing():
    entries = sglang_startup.journal_entries(JOURNAL)
    assert sglang_startup.timeline(entries, START) == {
        'weights_loaded': 61.0, 'kv_cache_allocated': 63.3, 'graphs_captured': 88.0, 'warmed_up': 94.0}


def test_ready_is_when_the_poll_saw_it_and_phases_keep_their_order():
    entries = sglang_startup.journal_entries(JOURNAL)
    phases = sglang_startup.timeline(entries, START, ready_us=START + 94_400_000)
    assert list(phases) == ['weights_loaded', 'kv_cache_allocated', 'graphs_captured', 'warmed_up', 'ready']
    assert phases['ready'] == 94.4
    # a poll that saw it ready 30 ms before the fired-up line reached the journal: ready is that line's time
    early = sglang_startup.timeline(entries, START, ready_us=START + 93_970_000)
    assert early['ready'] == early['warmed_up'] == 94.0


def test_a_start_without_graphs_or_warm_up_has_only_what_it_reached():
    cpu = '\n'.join(line for line in JOURNAL.splitlines() if 'Capture' not in line and 'fired up' not in line)
    phases = sglang_startup.timeline(sglang_startup.journal_entries(cpu), START)
    assert set(phases) == {'weights_loaded', 'kv_cache_allocated'}
    assert phases['weights_loaded'] == 500.0  # no warm-up line: nothing bounds a later weight update


def test_lines_of_an_earlier_start_are_not_this_ones():
    entries = sglang_startup.journal_entries(JOURNAL)
    assert sglang_startup.timeline(entries, START + 70_000_000) == {'graphs_captured': 18.0, 'warmed_up': 24.0}


def test_a_binary_message_is_decoded():
    raw = json.dumps({'__MONOTONIC_TIMESTAMP': str(START + 1_000_000), 'MESSAGE': list(b'Load weight end. x')})
    assert sglang_startup.timeline(sglang_startup.journal_entries(raw), START) == {'weights_loaded': 1.0}


def test_durations_run_from_the_phase_before():
    assert sglang_startup.durations({'weights_loaded': 60.0, 'graphs_captured': 90.0, 'ready': 95.5}) == {
        'weights_loaded': 60.0, 'graphs_captured': 30.0, 'ready': 5.5}


GOOD = {'weights_loaded': 60.0, 'kv_cache_allocated': 63.0, 'graphs_captured': 90.0, 'warmed_up': 95.0,
        'ready': 96.0}


def test_a_phase_slower_by_the_ratio_and_the_minimum_is_named():
    slow = dict(GOOD, weights_loaded=400.0, kv_cache_allocated=403.0, graphs_captured=430.0, warmed_up=435.0,
                ready=436.0)
    assert sglang_startup.slower_phases(slow, GOOD, 1.5, 30) == [('weights_loaded', 400.0, 60.0)]


def test_small_or_proportionate_differences_are_no_finding():
    a_bit = dict(GOOD, weights_loaded=85.0, kv_cache_allocated=88.0, graphs_captured=115.0, warmed_up=120.0,
                 ready=121.0)
    assert sglang_startup.slower_phases(a_bit, GOOD, 1.5, 30) == []  # 25 s more, under the minimum
    fast_phase = dict(GOOD, warmed_up=100.0, ready=101.0)
    assert sglang_startup.slower_phases(fast_phase, GOOD, 1.5, 3) == [('warmed_up', 10.0, 5.0)]
    assert sglang_startup.slower_phases(fast_phase, GOOD, 1.5, 30) == []


def test_a_phase_missing_on_either_side_is_not_compared():
    no_graphs = dict((k, v) for k, v in GOOD.items() if k != 'graphs_captured')
    no_graphs['warmed_up'] = 300.0
    no_graphs['ready'] = 301.0
    # without graphs the warm-up phase runs from the KV cache: 237 s against the 5 s after the graphs, yet the
    # comparison is of the phase as each start had it
    assert [name for name, dummy, dummy in sglang_startup.slower_phases(no_graphs, GOOD, 1.5, 30)] == ['warmed_up']
    assert sglang_startup.slower_phases(GOOD, {}, 1.5, 30) == []


def test_the_finding_says_the_phase_the_figures_and_the_fix():
    slow = dict(GOOD, graphs_captured=690.0, warmed_up=695.0, ready=696.0)
    last = {'invocation': 'abc', 'at': '2026-12-01T10:00:00Z', 'phases': GOOD}
    findings = sglang_startup.slower_findings(slow, last, 1.5, 30)
    assert len(findings) == 1
    finding = findings[0]
    assert finding['id'] == 'K26-START-SLOWER' and finding['severity'] == 'warning'
    assert finding['message'] == ('capturing the CUDA graphs took 627.0s, 23.2x the 27.0s of the last good start '
                                  '(2026-12-01T10:00:00Z).')
    assert 'DeepGEMM' in finding['fix']
    assert finding['evidence'] == {'phase': 'graphs_captured', 'seconds': 627.0, 'last_good_seconds': 27.0,
                                   'last_good_invocation': 'abc', 'caches': '', 'last_good_caches': ''}


def test_a_slower_start_with_new_compile_caches_says_so_and_the_same_caches_say_nothing():
    slow = dict(GOOD, graphs_captured=690.0, warmed_up=695.0, ready=696.0)
    last = {'invocation': 'abc', 'at': '2026-12-01T10:00:00Z', 'phases': GOOD, 'caches': 'sglang-0.5.23-sm90'}
    upgraded = sglang_startup.slower_findings(slow, last, 1.5, 30, 'sglang-0.5.24-sm90')[0]
    assert upgraded['message'].endswith(
        '(2026-12-01T10:00:00Z). Its compile caches were new (sglang-0.5.24-sm90; the last good start used '
        'sglang-0.5.23-sm90): a new SGLang or GPU compiles its kernels once, and the next start of the same finds '
        'them.')
    assert (upgraded['evidence']['caches'], upgraded['evidence']['last_good_caches']) == (
        'sglang-0.5.24-sm90', 'sglang-0.5.23-sm90')
    for caches in ('sglang-0.5.23-sm90', ''):
        same = sglang_startup.slower_findings(slow, last, 1.5, 30, caches)[0]
        assert same['message'].endswith('(2026-12-01T10:00:00Z).'), same['message']


def test_the_last_good_start_is_another_invocation_that_reached_ready():
    records = [{'invocation': 'a', 'ready': True, 'phases': GOOD}, {'invocation': 'b', 'ready': False, 'phases': GOOD},
               {'invocation': 'c', 'ready': True, 'phases': GOOD}]
    assert sglang_startup.last_good(records, 'c')['invocation'] == 'a'
    assert sglang_startup.last_good(records, 'd')['invocation'] == 'c'
    assert sglang_startup.last_good([], 'd') is None


def test_records_keep_one_entry_per_invocation_and_the_newest_only():
    records = [{'invocation': str(i)} for i in range(5)]
    kept = sglang_startup.add_record(records, {'invocation': '2', 'ready': True}, keep=3)
    assert [r['invocation'] for r in kept] == ['3', '4', '2']


# -------------------------------------------------------------- the module's side: whose start it is


class StartProbe(object):
    def __init__(self, text):
        self.text, self.asked = text, []

    def sync_journal(self):
        self.asked.append('sync')

    def start_journal(self, invocation, entries):
        self.asked.append(invocation)
        return self.text


def state(current='new', timeline=None, started_mono=START / 1e6 + 30):
    return {'current_invocation': current, 'timeline': timeline or {'ready': 64.4}, 'started_mono': started_mono}


def test_a_start_this_run_caused_is_read_from_its_own_journal():
    probe = StartProbe(JOURNAL)
    startup = sglang_ready.startup_of(probe, state(), {'ExecMainStartTimestampMonotonic': str(START)}, 'old')
    assert probe.asked == ['sync', 'new']
    assert startup == {'invocation': 'new', 'phases': {'weights_loaded': 61.0, 'kv_cache_allocated': 63.3,
                                                       'graphs_captured': 88.0, 'warmed_up': 94.0, 'ready': 94.4}}


def test_a_server_this_run_did_not_start_has_no_timeline():
    props = {'ExecMainStartTimestampMonotonic': str(START)}
    probe = StartProbe(JOURNAL)
    assert sglang_ready.startup_of(probe, state(current='old'), props, 'old') == {}
    # without the invocation before: only a start the wait saw (the server was not ready at the first look)
    assert sglang_ready.startup_of(probe, state(), props, None) == {}
    assert probe.asked == []
    seen = sglang_ready.startup_of(probe, state(timeline={'loading': 0.1, 'ready': 64.4}), props, None)
    assert seen['phases']['ready'] == 94.4
    assert sglang_ready.startup_of(probe, state(), {}, 'old') == {}  # systemd did not say when it started


# -------------------------------------------------------------- the record kept on the controller

def record(tmp_path, capsys, startup, ready=True, check_mode=False, **extra):
    args = dict(host='gpu-1', startup=startup, ready=ready, results_dir=str(tmp_path / 'startups'), **extra)
    if check_mode:
        args['_ansible_check_mode'] = True
    return run_shared(sglang_startup_record, args, capsys)


def test_a_slower_start_is_a_finding_against_the_last_good_one_and_every_start_is_kept(tmp_path, capsys):
    rc, first = record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD})
    assert rc == 0 and first['changed'] and first['findings'] == [] and first['startup']['last_good'] is None
    failed = dict(GOOD, weights_loaded=900.0)
    rc, dummy = record(tmp_path, capsys, {'invocation': 'b', 'phases': failed}, ready=False)
    slow = dict(GOOD, weights_loaded=400.0, kv_cache_allocated=403.0, graphs_captured=430.0, warmed_up=435.0,
                ready=436.0)
    rc, third = record(tmp_path, capsys, {'invocation': 'c', 'phases': slow})
    assert third['startup']['last_good']['invocation'] == 'a'  # b never reached ready
    assert [f['evidence']['phase'] for f in third['findings']] == ['weights_loaded']
    assert third['startup']['durations']['weights_loaded'] == 400.0
    kept = json.loads((tmp_path / 'startups' / 'gpu-1.json').read_text())
    assert [r['invocation'] for r in kept] == ['a', 'b', 'c'] and kept[1]['ready'] is False


def test_a_start_seen_again_is_not_counted_twice_and_no_start_reads_the_newest(tmp_path, capsys):
    record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD})
    rc, again = record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD})
    assert again['changed'] is False and again['startup']['last_good'] is None
    rc, newest = record(tmp_path, capsys, {})
    assert newest['changed'] is False and newest['startup']['invocation'] == 'a'
    assert newest['startup']['phases'] == GOOD


def test_check_mode_compares_and_writes_nothing(tmp_path, capsys):
    rc, result = record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD}, check_mode=True)
    assert rc == 0 and result['changed'] is True
    assert not (tmp_path / 'startups').exists()


def test_thresholds_that_make_no_sense_are_refused(tmp_path, capsys):
    rc, result = record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD}, slower_ratio=0.5)
    assert rc == 1 and 'slower_ratio must be 1 or more' in result['msg']


def test_the_record_keeps_each_starts_caches_and_an_upgraded_start_says_they_were_new(tmp_path, capsys):
    record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD}, caches='sglang-0.5.23-sm90')
    slow = dict(GOOD, weights_loaded=400.0, kv_cache_allocated=403.0, graphs_captured=430.0, warmed_up=435.0,
                ready=436.0)
    rc, upgraded = record(tmp_path, capsys, {'invocation': 'b', 'phases': slow}, caches='sglang-0.5.24-sm90')
    assert 'Its compile caches were new (sglang-0.5.24-sm90;' in upgraded['findings'][0]['message']
    kept = json.loads((tmp_path / 'startups' / 'gpu-1.json').read_text())
    assert [r['caches'] for r in kept] == ['sglang-0.5.23-sm90', 'sglang-0.5.24-sm90']


def test_a_look_in_check_mode_caused_no_start_and_times_none():
    """status looks once (check mode): its poll is not when the server became ready, whatever the timeline says."""
    class Probe(StartProbe):
        def journal_lines(self, invocation_ids, entries, streams=False, since_us=None):
            return []
    decision = type('Decision', (), {'reason': 'ready', 'done': True})()
    st = dict(state(timeline={'loading': 0.1, 'ready': 300.8}), invocation_ids=['new'], phase='ready', model_ids=[],
              restarts=0, warmup_probe='ready')
    obs = {'unit': {'ExecMainStartTimestampMonotonic': str(START), 'MainPID': '12'}}
    settings = type('Settings', (), {})()
    original = sglang_ready.build_msg
    sglang_ready.build_msg = lambda *args, **kwargs: 'ready'
    try:
        looked = sglang_ready.final_result(Probe(JOURNAL), st, settings, decision, obs, 30, check_mode=True)
        waited = sglang_ready.final_result(Probe(JOURNAL), st, settings, decision, obs, 30, check_mode=False)
    finally:
        sglang_ready.build_msg = original
    assert looked['startup'] == {}
    assert waited['startup']['invocation'] == 'new'


def test_a_phase_under_a_second_at_the_last_good_start_is_no_base_for_a_ratio():
    quick = dict(GOOD, ready=95.05)  # the poll saw it ready 50 ms after the warm-up
    slow = dict(GOOD, ready=95.0 + 40.0)
    findings = sglang_startup.slower_findings(slow, {'at': 'then', 'phases': quick}, 1.5, 30)
    assert [f['evidence']['phase'] for f in findings] == ['ready']
    assert findings[0]['message'].startswith('the readiness check took 40.0s, where the last good start took under 1s')
    assert 'x the' not in findings[0]['message']


def test_no_start_reads_the_running_invocation_as_its_deploy_recorded_it_or_says_it_was_not_observed(tmp_path, capsys):
    record(tmp_path, capsys, {'invocation': 'a', 'phases': GOOD})
    slow = dict(GOOD, weights_loaded=400.0, kv_cache_allocated=403.0, graphs_captured=430.0, warmed_up=435.0,
                ready=436.0)
    record(tmp_path, capsys, {'invocation': 'b', 'phases': slow})
    record(tmp_path, capsys, {'invocation': 'c', 'phases': GOOD})
    rc, running_b = record(tmp_path, capsys, {}, invocation='b')
    assert rc == 0 and running_b['changed'] is False and running_b['startup']['observed'] is True
    assert running_b['startup']['phases'] == slow and running_b['startup']['last_good']['invocation'] == 'a'
    assert [f['evidence']['phase'] for f in running_b['findings']] == ['weights_loaded']  # as its deploy saw it
    rc, by_hand = record(tmp_path, capsys, {}, invocation='d')
    assert by_hand['changed'] is False and by_hand['startup'] == {'invocation': 'd', 'observed': False}
    assert by_hand['findings'] == []
