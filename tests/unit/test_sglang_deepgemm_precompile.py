"""The module that precompiles DeepGEMM's kernels before a start (plugins/modules/sglang_deepgemm_precompile.py):
what it decides from the model on the host, the record of a precompile and the command it runs. The precompile
itself runs in a transient systemd unit: tests/integration/test_promises_starts.py runs it under real systemd."""
import json

import pytest

from module_runner import run_module
from test_sglang_deepgemm import K26_CONFIG, K2_CONFIG

from ansible_collections.k26.deploy.plugins.module_utils import sglang_deepgemm, systemd_unit_values
from ansible_collections.k26.deploy.plugins.modules import sglang_deepgemm_precompile as module


def args_for(tmp_path, config, **extra):
    model = tmp_path / 'model'
    model.mkdir(exist_ok=True)
    (model / 'config.json').write_text(json.dumps(config))
    args = dict(run=False, start_coming=True, options={'model-path': str(model), 'tp-size': 8},
                compute_capabilities=['9.0'], sglang_version='0.5.23', config_file='/etc/sglang/s.yaml',
                env_file='/etc/sglang/s.env', python='/opt/sglang/venv/bin/python', user='sglang', group='sglang',
                working_dir='/var/lib/sglang', deep_gemm_dir=str(tmp_path / 'deep_gemm'),
                state_dir=str(tmp_path / 'state'), name='sglang')
    args.update(extra)
    return args


def test_a_block_fp8_model_on_hopper_needs_it_and_kimi_k26_does_not(tmp_path, capsys):
    rc, fp8 = run_module(module, args_for(tmp_path, K2_CONFIG), capsys)
    assert rc == 0 and fp8['needed'] is True and fp8['uses_deepgemm'] is True and fp8['changed'] is False
    assert 'block-FP8' in fp8['reason'] and len(fp8['key']) == 16
    rc, int4 = run_module(module, args_for(tmp_path, K26_CONFIG), capsys)
    assert int4['needed'] is False and 'INT4' in int4['reason'] and int4['key'] != fp8['key']


def test_a_model_that_is_no_directory_on_the_host_is_not_guessed(tmp_path, capsys):
    args = args_for(tmp_path, K2_CONFIG, options={'model-path': 'moonshotai/Kimi-K2-Instruct'})
    rc, result = run_module(module, args, capsys)
    assert result['needed'] is False and result['uses_deepgemm'] is None and 'config.json is not on the host' in \
        result['reason']
    rc, result = run_module(module, dict(args, mode='always'), capsys)
    assert result['needed'] is True


def test_a_recorded_precompile_holds_while_its_kernels_are_in_the_cache(tmp_path, capsys):
    args = args_for(tmp_path, K2_CONFIG)
    rc, first = run_module(module, args, capsys)
    record = tmp_path / 'state' / 'sglang' / ('%s.json' % first['key'])
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({'key': first['key'], 'deep_gemm_dir': args['deep_gemm_dir']}))
    rc, empty_cache = run_module(module, args, capsys)
    assert empty_cache['needed'] is True  # the cache was emptied by hand: compile again
    (tmp_path / 'deep_gemm').mkdir()
    (tmp_path / 'deep_gemm' / 'cache').mkdir()
    rc, kept = run_module(module, args, capsys)
    assert kept['needed'] is False and kept['record'] == str(record) and 'already' in kept['reason']


def test_check_mode_says_it_would_compile_and_runs_nothing(tmp_path, capsys):
    rc, result = run_module(module, dict(args_for(tmp_path, K2_CONFIG), run=True, _ansible_check_mode=True), capsys)
    assert rc == 0 and result['changed'] is True and result['ran'] is False and result['unit'] == ''


def test_the_command_is_sglangs_precompile_on_loopback_or_the_simulators_compile_mode(tmp_path):
    params = dict(args_for(tmp_path, K2_CONFIG), simulator_path=None, timeout=1800)
    real = module.compile_command(params, 41234)
    assert real == sglang_deepgemm.compile_argv(params['python'], params['config_file'],
                                                ['--port', '41234', '--timeout', '1800'])
    sim = module.compile_command(dict(params, simulator_path='/opt/sglang/simulator/sglang_simulator'), 41234)
    assert sim[:3] == ['/opt/sglang/venv/bin/python', '/opt/sglang/simulator/sglang_simulator',
                       '--sim-compile-deep-gemm'] and sim[-4:] == ['--port', '41234', '--timeout', '1800']
    unit = module.systemd_run_argv(params, 'sglang-deepgemm-x.service', real)
    assert unit[unit.index('--'):] == ['--'] + real
    assert 'RuntimeMaxSec=1860' in unit and 'EnvironmentFile=/etc/sglang/s.env' in unit
    # no --wait: it needs the D-Bus daemon; the unit stays loaded after its process ended, for its result
    assert '--wait' not in unit and 'RemainAfterExit=yes' in unit


@pytest.mark.parametrize('properties, outcome', [
    ({'ActiveState': 'activating', 'SubState': 'start'}, 'running'),
    ({'ActiveState': 'active', 'SubState': 'running'}, 'running'),
    ({'ActiveState': 'active', 'SubState': 'exited', 'Result': 'success'}, 'succeeded'),
    ({'ActiveState': 'failed', 'SubState': 'failed', 'Result': 'exit-code', 'ExecMainStatus': '1'}, 'failed'),
    ({'ActiveState': 'failed', 'SubState': 'failed', 'Result': 'timeout'}, 'timeout'),
    ({'ActiveState': 'inactive', 'SubState': 'dead', 'Result': 'success'}, 'failed'),  # gone before it was read
    ({}, 'running'),
])
def test_the_transient_units_properties_say_how_the_precompile_ended(properties, outcome):
    assert module.outcome_of(properties) == outcome


def test_the_transient_unit_gets_the_services_hardening_and_a_network_of_its_own(tmp_path):
    hardening = systemd_unit_values.service_hardening(
        ['/var/cache/sglang', '/var/lib/sglang'], 'yes', ['@privileged', '@resources'], ['sched_setscheduler'], [],
        ['char-nvidia-frontend rw', 'char-nvidia-uvm rw'])
    params = dict(args_for(tmp_path, K2_CONFIG), simulator_path=None, timeout=1800, hardening=hardening)
    unit = module.systemd_run_argv(params, 'sglang-deepgemm-x.service', ['/bin/true'])
    given = [unit[index + 1] for index, word in enumerate(unit[:unit.index('--')]) if word == '--property']
    assert [pair for pair in given if pair.split('=', 1)[0] not in module.OWN_PROPERTIES] == \
        ['%s=%s' % (name, value) for name, value in hardening]
    # the keyless server it starts on loopback is no local user's: loopback of its own
    assert 'PrivateNetwork=yes' in given
    assert 'SystemCallFilter=~@privileged @resources' in given and 'DeviceAllow=char-nvidia-uvm rw' in given
