"""DeepGEMM under SGLang 0.5.23 (plugins/module_utils/sglang_deepgemm.py): when it is used, what changes its kernels,
the precompile command and the cache environment. The last tests hold the command and the cache layout to the real
SGLang (CPU venv) and to the sglang_service role's environment file."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

from ansible_collections.k26.deploy.plugins.module_utils import sglang_deepgemm as dg

ROOT = Path(__file__).resolve().parents[2]

# Kimi K2.6's config.json, cut to what matters here: a KimiK25Config whose language model (DeepSeek-V3 shapes) sits in
# text_config, with native INT4 (W4A16, group 32) compressed-tensors weights; attention, shared experts and the dense
# layer are in "ignore" (unquantized).
K26_CONFIG = {
    'architectures': ['KimiK25ForConditionalGeneration'],
    'model_type': 'kimi_k25',
    'text_config': {
        'architectures': ['DeepseekV3ForCausalLM'], 'model_type': 'kimi_k2', 'hidden_size': 7168,
        'intermediate_size': 18432, 'moe_intermediate_size': 2048, 'n_routed_experts': 384, 'n_shared_experts': 1,
        'num_experts_per_tok': 8, 'num_attention_heads': 64, 'kv_lora_rank': 512, 'q_lora_rank': 1536,
        'qk_nope_head_dim': 128, 'qk_rope_head_dim': 64, 'v_head_dim': 128, 'num_hidden_layers': 61,
    },
    'quantization_config': {
        'quant_method': 'compressed-tensors', 'format': 'pack-quantized',
        'config_groups': {'group_0': {'targets': ['Linear'], 'input_activations': None, 'weights': {
            'type': 'int', 'num_bits': 4, 'group_size': 32, 'strategy': 'group', 'symmetric': True,
            'dynamic': False, 'actorder': None, 'block_structure': None}}},
        'ignore': ['lm_head', 're:.*self_attn.*', 're:.*shared_experts.*', 're:.*mlp\\.(gate|up|gate_up|down)_proj.*'],
    },
}
# Kimi K2 (and DeepSeek V3): block-FP8 weights.
K2_CONFIG = {
    'architectures': ['DeepseekV3ForCausalLM'], 'model_type': 'kimi_k2', 'hidden_size': 7168,
    'moe_intermediate_size': 2048, 'n_routed_experts': 384, 'num_experts_per_tok': 8,
    'quantization_config': {'quant_method': 'fp8', 'fmt': 'e4m3', 'activation_scheme': 'dynamic',
                            'weight_block_size': [128, 128]},
}
BF16_CONFIG = {'architectures': ['DeepseekV3ForCausalLM'], 'hidden_size': 7168, 'n_routed_experts': 384}

SERVING = {'model-path': '/srv/models/Kimi-K2.6', 'tp-size': 8, 'host': '0.0.0.0', 'port': 30000,
           'api-key': 'k' * 32, 'max-running-requests': 64, 'chunked-prefill-size': 8192, 'trust-remote-code': True}


# ---------------------------------------------------------------------------------------------------- the GPU

@pytest.mark.parametrize('given, sm', [('9.0', 90), (' 10.0 ', 100), ('10.3', 103), ('12.0', 120), ('8.9', 89),
                                       (90, 90), ('sm_90a', 90), ('sm100', 100), ('120', 120),
                                       ('', None), (None, None), ('nine', None), (True, None), ('9.0.1', None)])
def test_sm_version_reads_nvidia_smi_and_sm_spellings(given, sm):
    assert dg.sm_version(given) == sm


# ---------------------------------------------------------------------------------------------------- uses_deepgemm

@pytest.mark.parametrize('cc', ['9.0', '10.0', '10.3', '12.0', '12.1'])
def test_on_for_hopper_and_blackwell_by_default(cc):
    used, reason = dg.uses_deepgemm(cc, {'tp-size': 8}, {})
    assert used, reason
    assert 'depends on the model' in reason


def test_rtx_pro_6000_is_on_because_the_pinned_deep_gemm_has_the_sm120_kernels():
    used, reason = dg.uses_deepgemm('12.0', {}, {})
    assert used and 'sm_120' in reason


@pytest.mark.parametrize('cc', ['8.0', '8.6', '8.9', '7.0'])
def test_off_before_hopper(cc):
    used, reason = dg.uses_deepgemm(cc, {}, {})
    assert not used and 'sm_90' in reason and cc in reason


def test_an_unreadable_capability_is_no_but_says_so():
    used, reason = dg.uses_deepgemm('', {}, {})
    assert not used and 'compute capability' in reason


@pytest.mark.parametrize('value, used', [('0', False), ('false', False), ('No', False), ('n', False),
                                         ('1', True), ('TRUE', True), ('y', True),
                                         ('', True), ('maybe', True)])  # SGLang: an invalid value -> the default
def test_the_environment_switch_parses_as_sglang_does(value, used):
    assert dg.uses_deepgemm('9.0', {}, {'SGLANG_ENABLE_JIT_DEEPGEMM': value})[0] is used


def test_the_legacy_sgl_name_overrides_the_sglang_one_as_sglang_rewrites_it():
    env = {'SGLANG_ENABLE_JIT_DEEPGEMM': '1', 'SGL_ENABLE_JIT_DEEPGEMM': '0'}
    used, reason = dg.uses_deepgemm('9.0', {}, env)
    assert not used and 'SGLANG_ENABLE_JIT_DEEPGEMM' in reason
    assert dg.uses_deepgemm('9.0', {}, {'SGL_ENABLE_JIT_DEEPGEMM': '1', 'SGLANG_ENABLE_JIT_DEEPGEMM': '0'})[0]


@pytest.mark.parametrize('cc', ['9.0', '10.0', '12.0'])
def test_kimi_k26_int4_calls_no_deepgemm_kernel(cc):
    used, reason = dg.uses_deepgemm(cc, SERVING, {}, K26_CONFIG)
    assert not used, reason
    assert 'INT4' in reason and 'Marlin' in reason


@pytest.mark.parametrize('cc', ['9.0', '10.0', '12.0'])
def test_block_fp8_kimi_k2_uses_it(cc):
    used, reason = dg.uses_deepgemm(cc, SERVING, {}, K2_CONFIG)
    assert used and 'block-FP8' in reason


def test_per_tensor_fp8_and_bf16_do_not():
    per_tensor = {'quantization_config': {'quant_method': 'fp8', 'activation_scheme': 'dynamic'}}
    assert not dg.uses_deepgemm('9.0', {}, {}, per_tensor)[0]
    assert not dg.uses_deepgemm('9.0', {}, {}, BF16_CONFIG)[0]


def test_what_a_deploy_asks_for_makes_an_int4_or_bf16_model_use_it():
    assert dg.uses_deepgemm('9.0', {'moe_runner_backend': 'deep_gemm'}, {}, BF16_CONFIG)[0]
    assert dg.uses_deepgemm('9.0', {'--fp8-gemm-backend': 'deep_gemm'}, {}, K26_CONFIG)[0]
    assert dg.uses_deepgemm('9.0', {'speculative-draft-model-quantization': 'fp8'}, {}, K26_CONFIG)[0]
    used, reason = dg.uses_deepgemm('9.0', {}, {'SGLANG_OPT_BF16_FP32_GEMM_ALGO': 'deep_gemm'}, K26_CONFIG)
    assert used and 'router' in reason
    # ... but never where SGLang has it off
    assert not dg.uses_deepgemm('9.0', {'moe-runner-backend': 'deep_gemm'}, {'SGLANG_ENABLE_JIT_DEEPGEMM': '0'},
                                BF16_CONFIG)[0]
    assert not dg.uses_deepgemm('8.0', {}, {}, K2_CONFIG)[0]


def test_compressed_tensors_fp8_by_strategy_and_an_untraced_scheme_is_assumed_used():
    def ct(weights):
        return {'quantization_config': {'quant_method': 'compressed-tensors',
                                        'config_groups': {'g': {'weights': weights}}}}
    assert dg.uses_deepgemm('9.0', {}, {}, ct({'type': 'float', 'num_bits': 8, 'strategy': 'block'}))[0]
    assert not dg.uses_deepgemm('9.0', {}, {}, ct({'type': 'float', 'num_bits': 8, 'strategy': 'channel'}))[0]
    used, reason = dg.uses_deepgemm('9.0', {}, {}, ct({'type': 'int', 'num_bits': 8, 'strategy': 'channel'}))
    assert used and 'not traced' in reason
    w4a8 = {'quantization_config': {'quant_method': 'compressed-tensors', 'config_groups': {'g': {
        'weights': {'type': 'int', 'num_bits': 4}, 'input_activations': {'type': 'float', 'num_bits': 8}}}}}
    assert dg.uses_deepgemm('9.0', {}, {}, w4a8)[0]
    used, reason = dg.uses_deepgemm('9.0', {}, {}, {'quantization_config': {'quant_method': 'awq'}})
    assert used and 'not traced' in reason


def test_a_dsa_model_uses_it_for_its_indexer_whatever_the_weights():
    dsa = dict(BF16_CONFIG, index_topk=2048)
    used, reason = dg.uses_deepgemm('9.0', {}, {}, dsa)
    assert used and 'DSA' in reason


# ---------------------------------------------------------------------------------------------------- kernel options

def test_kernel_options_keep_what_changes_the_kernels_and_nothing_else():
    options = dict(SERVING, **{'pp-size': 1, 'kv-cache-dtype': 'fp8_e4m3', 'cuda-graph-max-bs-decode': 64,
                               'ep-size': 8, 'moe-a2a-backend': 'deepep', 'quantization': None})
    assert dg.kernel_options(options) == {'tp-size': 8, 'ep-size': 8, 'moe-a2a-backend': 'deepep',
                                          'chunked-prefill-size': 8192}


def test_kernel_options_take_every_spelling_and_value_form():
    assert dg.kernel_options({'tensor_parallel_size': '8', '--ep': 4, 'attention-data-parallel-size': 8,
                              'speculative_draft_model': '/m/draft', 'enable-dp-attention': 'true'}) == {
        'tp-size': 8, 'ep-size': 4, 'attn-dp-size': 8, 'speculative-draft-model-path': '/m/draft',
        'enable-dp-attention': True}
    assert dg.kernel_options(None) == {}


def test_every_kernel_option_and_alias_is_an_sglang_0523_flag():
    table = json.loads((ROOT / 'roles/sglang/files/sglang_simulator/sglang_server_options.json').read_text())
    assert table['sglang'] == '0.5.23'
    flags = {}
    for option in table['options']:
        longs = [flag[2:] for flag in option['flags'] if flag.startswith('--')]
        for name in longs:
            flags[name] = longs
    for key in dg.KERNEL_OPTION_KEYS:
        assert key in flags and flags[key][0] == key, key
    for alias, name in dg.OPTION_ALIASES.items():
        assert alias in flags.get(name, ()), (alias, name)


# ---------------------------------------------------------------------------------------------------- cache key

def test_cache_key_is_short_hex_and_stable_across_spellings_and_order():
    key = dg.cache_key('0.5.23', '9.0', SERVING, K26_CONFIG)
    assert re.match(r'\A[0-9a-f]{16}\Z', key)
    reordered = dict(reversed(list(SERVING.items())))
    reordered['tp_size'] = reordered.pop('tp-size')
    reordered['chunked-prefill-size'] = '8192'
    assert dg.cache_key('0.5.23', 'sm_90', reordered, json.loads(json.dumps(K26_CONFIG))) == key


def test_cache_key_ignores_what_does_not_change_the_kernels():
    key = dg.cache_key('0.5.23', '9.0', SERVING, K26_CONFIG)
    other = dict(SERVING, **{'port': 30001, 'api-key': 'x' * 32, 'max-running-requests': 256,
                             'model-path': '/elsewhere', 'enable-metrics': True})
    assert dg.cache_key('0.5.23', '9.0', other, dict(K26_CONFIG, transformers_version='9.9')) == key
    assert dg.cache_key('0.5.23', '9.0', SERVING, K26_CONFIG, {'HF_HOME': '/x', 'SGLANG_CACHE_DIR': '/y'}) == key


@pytest.mark.parametrize('change', [
    {'version': '0.5.24'}, {'cc': '10.0'}, {'options': {'tp-size': 4}}, {'options': {'ep-size': 8}},
    {'options': {'chunked-prefill-size': 16384}}, {'options': {'attn-dp-size': 8}},
    {'options': {'moe-runner-backend': 'deep_gemm'}}, {'options': {'speculative-algorithm': 'EAGLE3'}},
    {'model': {'moe_intermediate_size': 1024}}, {'model': {'n_routed_experts': 256}},
    {'model': {'num_experts_per_tok': 6}}, {'model': {'hidden_size': 4096}},
    {'quant': {'quant_method': 'fp8', 'weight_block_size': [128, 128]}},
    {'env': {'SGLANG_JIT_DEEPGEMM_FAST_WARMUP': '1'}}, {'env': {'SGL_DG_USE_NVRTC': '1'}},
])
def test_cache_key_changes_with_each_thing_that_changes_the_kernels(change):
    base = dg.cache_key('0.5.23', '9.0', SERVING, K26_CONFIG, {})
    config = json.loads(json.dumps(K26_CONFIG))
    config['text_config'].update(change.get('model', {}))
    if 'quant' in change:
        config['quantization_config'] = change['quant']
    changed = dg.cache_key(change.get('version', '0.5.23'), change.get('cc', '9.0'),
                           dict(SERVING, **change.get('options', {})), config, change.get('env', {}))
    assert changed != base


# ---------------------------------------------------------------------------------------------------- the command

def test_compile_argv_merges_the_config_then_the_extra_arguments_on_loopback():
    argv = dg.compile_argv('/opt/sglang/bin/python', '/etc/sglang/config.yaml', ['--port', '30100', '--timeout', 900])
    assert argv == ['/opt/sglang/bin/python', '-c', dg.COMPILE_SCRIPT, '--config', '/etc/sglang/config.yaml',
                    '--port', '30100', '--timeout', '900', '--host', '127.0.0.1']
    compile(dg.COMPILE_SCRIPT, '<compile_script>', 'exec')
    assert "runpy.run_module('sglang.compile_deep_gemm', run_name='__main__', alter_sys=True)" in dg.COMPILE_SCRIPT


def test_compile_argv_keeps_a_host_given_and_refuses_a_second_config_or_none():
    assert dg.compile_argv('py', '/c.yaml', ['--host=::1'])[-1] == '--host=::1'
    assert dg.compile_argv('py', '/c.yaml', ['--host', '10.0.0.1'])[-2:] == ['--host', '10.0.0.1']
    with pytest.raises(ValueError, match='--config'):
        dg.compile_argv('py', '/c.yaml', ['--config', '/other.yaml'])
    with pytest.raises(ValueError, match='config_file'):
        dg.compile_argv('py', '', [])


# The real SGLang's parser, fed what COMPILE_SCRIPT hands sglang.compile_deep_gemm (run_module replaced by a probe),
# and fed the plain `-m sglang.compile_deep_gemm --config FILE` for comparison; and SGLang's DeepGEMM cache default.
PROBE = r'''
import argparse, json, os, runpy, sys
from sglang.srt.server_args import ServerArgs
from sglang.srt.environ import envs

def parse(argv):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    parser.add_argument("--timeout", type=int, default=3600)  # compile_deep_gemm.CompileArgs
    args = parser.parse_args(argv)
    return {name: getattr(args, name) for name in ("model_path", "tp_size", "host", "port", "api_key",
                                                   "ssl_certfile", "timeout", "chunked_prefill_size")}

def probe(name, run_name=None, alter_sys=False):
    plain = parse(["--config", os.environ["PROBE_CONFIG"], "--model-path", "/m"])
    print("RESULT=" + json.dumps({"module": name, "run_name": run_name, "alter_sys": alter_sys,
                                  "argv0": sys.argv[0], "merged": parse(sys.argv[1:]), "plain": plain,
                                  "dg_cache": envs.SGLANG_DG_CACHE_DIR.get()}))

runpy.run_module = probe
script = sys.argv.pop(1)
exec(compile(script, "<compile_script>", "exec"))
'''


@requires_real_sglang
def test_the_command_gives_sglang_the_serving_options_without_the_key_and_the_plain_module_would_not(tmp_path):
    config = tmp_path / 'config.yaml'
    config.write_text('model-path: /srv/models/Kimi-K2.6\ntp-size: 8\nhost: 0.0.0.0\nport: 30000\n'
                      'api-key: %s\nssl-certfile: /etc/sglang/cert.pem\nchunked-prefill-size: 8192\n'
                      'trust-remote-code: true\n' % ('k' * 32))
    argv = dg.compile_argv(str(SGLANG_PYTHON), str(config), ['--port', '30100', '--timeout', '900'])
    assert 'k' * 32 not in ' '.join(argv)
    # argv[2] is the script: the probe takes it out of sys.argv and runs it with the arguments that follow
    probe = [argv[0], '-c', PROBE, argv[2]] + argv[3:]
    env = dict(os.environ, SGLANG_CACHE_DIR=str(tmp_path / 'cache'), PROBE_CONFIG=str(config))
    env.pop('SGLANG_DG_CACHE_DIR', None)
    out = subprocess.run(probe, capture_output=True, text=True, timeout=300, env=env, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith('RESULT=')]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    result = json.loads(lines[-1][len('RESULT='):])
    assert (result['module'], result['run_name'], result['alter_sys']) == ('sglang.compile_deep_gemm', '__main__', True)
    assert result['argv0'] == 'sglang.compile_deep_gemm'
    assert result['merged'] == {'model_path': '/srv/models/Kimi-K2.6', 'tp_size': 8, 'host': '127.0.0.1',
                                'port': 30100, 'api_key': None, 'ssl_certfile': None, 'timeout': 900,
                                'chunked_prefill_size': 8192}
    # `python -m sglang.compile_deep_gemm --config FILE --model-path ...` parses without reading FILE: TP 1
    assert result['plain']['tp_size'] == 1 and result['plain']['api_key'] is None
    assert result['dg_cache'] == str(tmp_path / 'cache' / 'deep_gemm')
    assert dg.cache_env(str(tmp_path / 'cache'))['SGLANG_DG_CACHE_DIR'] == result['dg_cache']


# ---------------------------------------------------------------------------------------------------- caches

def test_cache_env_puts_every_cache_under_the_directory():
    env = dg.cache_env('/var/cache/sglang/')
    assert env['SGLANG_CACHE_DIR'] == '/var/cache/sglang'
    assert env['SGLANG_DG_CACHE_DIR'] == env['DG_JIT_CACHE_DIR'] == '/var/cache/sglang/deep_gemm'
    assert env['SGLANG_JIT_CACHE_DIR'] == '/var/cache/sglang/jit'
    assert all(value == '/var/cache/sglang' or value.startswith('/var/cache/sglang/') for value in env.values())
    assert {'TRITON_CACHE_DIR', 'TORCHINDUCTOR_CACHE_DIR', 'CUDA_CACHE_PATH', 'FLASHINFER_WORKSPACE_BASE',
            'TILELANG_CACHE_DIR', 'SGLANG_CUTE_AOT_CACHE_DIR'} <= set(env)


@pytest.mark.parametrize('bad', ['', None, 'cache', '/'])
def test_cache_env_wants_an_absolute_directory(bad):
    with pytest.raises(ValueError):
        dg.cache_env(bad)


def test_the_services_caches_are_those_of_its_release_and_gpus():
    template = (ROOT / 'roles/sglang_service/templates/etc/sglang/service.env.j2').read_text()
    assert '__sglang_service_cache_env | dictsort' in template and 'CACHE' not in template.replace('cache_env', '')
    assert dg.cache_release_dir('/var/cache/sglang/', '0.5.23', ['9.0', '9.0']) == '/var/cache/sglang/sglang-0.5.23-sm90'
    assert dg.cache_release_dir('/c', '0.5.24', ['12.0']) == '/c/sglang-0.5.24-sm120'
    assert dg.cache_release_dir('/c', '0.5.23', ['9.0', '10.0']) == '/c/sglang-0.5.23-sm90+sm100'
    assert dg.cache_release_dir('/c', '0.5.23', []) == '/c/sglang-0.5.23-cpu'
    assert dg.cache_release_dir('/c', '../x y', None) == '/c/sglang-.._x_y-cpu'


# ---------------------------------------------------------------------------------------------------- the deploy's step

USED = (True, 'block-FP8 weights')
UNUSED = (False, 'INT4 weights: no layer calls DeepGEMM')
UNKNOWN = (None, '')


@pytest.mark.parametrize('mode, use, compiled, coming, nnodes, run, says', [
    ('auto', USED, False, True, 1, True, 'block-FP8'),
    ('always', UNUSED, False, True, 1, True, 'mode always'),
    ('always', UNKNOWN, False, True, 1, True, 'mode always'),
    ('never', USED, False, True, 1, False, 'off'),
    ('auto', UNUSED, False, True, 1, False, 'INT4'),
    ('auto', UNKNOWN, False, True, 1, False, 'config.json is not on the host'),
    ('auto', USED, True, True, 1, False, 'precompiled on this host already'),
    ('always', USED, True, True, 1, False, 'precompiled on this host already'),
    ('auto', USED, False, False, 1, False, 'no start is coming'),
    ('auto', USED, False, True, 2, False, 'multi-node'),
])
def test_the_deploy_precompiles_only_for_a_start_that_needs_it(mode, use, compiled, coming, nnodes, run, says):
    needed, reason = dg.precompile_plan(mode, use[0], use[1], compiled, coming, nnodes)
    assert needed is run
    assert says in reason


def test_an_unknown_precompile_mode_is_refused():
    with pytest.raises(ValueError, match='auto, always, never'):
        dg.precompile_plan('sometimes', True, '', False, True)


def test_a_precompile_record_holds_only_while_its_cache_is_there():
    record = {'key': 'ab', 'deep_gemm_dir': '/var/cache/sglang/sglang-0.5.23-sm90/deep_gemm'}
    assert dg.precompiled_marker(record, '/var/cache/sglang/sglang-0.5.23-sm90/deep_gemm', 3)
    assert not dg.precompiled_marker(record, '/var/cache/sglang/sglang-0.5.23-sm90/deep_gemm', 0)
    assert not dg.precompiled_marker(record, '/var/cache/sglang/sglang-0.5.24-sm90/deep_gemm', 3)
    assert not dg.precompiled_marker(None, '/var/cache/sglang/sglang-0.5.23-sm90/deep_gemm', 3)
