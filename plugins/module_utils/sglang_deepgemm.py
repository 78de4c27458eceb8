# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""DeepGEMM in SGLang 0.5.23: whether a server uses it, what changes the kernels it compiles, a key for "precompiled
for this configuration", the command that precompiles them, and the environment that puts the compile caches in one
directory. Pure logic, no I/O.

What SGLang 0.5.23 does, with the lines this follows (sglang/ of the pinned wheel):

- DeepGEMM is on when SGLANG_ENABLE_JIT_DEEPGEMM is true (the default), the GPU is sm_90 or newer and deep_gemm imports;
  on sm_120/121 the deep_gemm build must also export the SM120 APIs, which the pinned sgl-deep-gemm 0.2.3.post2 does
  (srt/layers/deep_gemm_wrapper/configurer.py:32-55). Being on does not mean it compiles anything: kernels are built
  only when a layer calls it. Block-FP8 linear layers do by default (srt/layers/quantization/fp8_utils.py:1181); the
  INT4 (W4A16, compressed-tensors) MoE of Kimi K2.6 goes to Marlin, or Triton on sm_100
  (srt/layers/quantization/compressed_tensors/compressed_tensors.py:912-951), and its unquantized layers to cuBLAS.
- ``python -m sglang.compile_deep_gemm`` parses the server's options with a plain argparse: ``--config FILE`` is
  accepted and ignored (compile_deep_gemm.py:232-238, unlike server_args.py:683-689), so :func:`compile_argv` merges
  the config file the way launch_server does and then runs the module.
- The first rank on a node compiles every M from 1 to m_max for each (kernel type, N, K, groups) a forward meets; m_max
  follows chunked-prefill-size (srt/layers/deep_gemm_wrapper/compile_utils.py:59-110). N, K and the groups are the
  layers' weight shapes on a rank: the model's config cut by the parallel layout.
- The kernels land in SGLANG_DG_CACHE_DIR (default $SGLANG_CACHE_DIR/deep_gemm), which SGLang writes into
  DG_JIT_CACHE_DIR, overriding any value of it (compile_utils.py:49-51, srt/environ.py:1373, 1383).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

# ---------------------------------------------------------------------------------------------------- names

#: spellings of an option other than its long name, as SGLang 0.5.23's parser has them -> the long name
OPTION_ALIASES = {
    'model': 'model-path',
    'tensor-parallel-size': 'tp-size',
    'pipeline-parallel-size': 'pp-size',
    'data-parallel-size': 'dp-size',
    'attention-data-parallel-size': 'attn-dp-size',
    'expert-parallel-size': 'ep-size',
    'ep': 'ep-size',
    'moe-data-parallel-size': 'moe-dp-size',
    'speculative-draft-model': 'speculative-draft-model-path',
}


def _option_name(name):
    key = str(name).strip().lstrip('-').replace('_', '-')
    return OPTION_ALIASES.get(key, key)


def long_option_names(options):
    """Options by their long names; of two spellings of one option the later wins, as on a command line."""
    return {_option_name(key): value for key, value in (options or {}).items()}


def _canonical_value(value):
    """'8' and 8 are one value to SGLang's parser; so are 'true' and True."""
    if isinstance(value, str):
        text = value.strip()
        if re.match(r'\A-?\d+\Z', text):
            return int(text)
        if text.lower() in ('true', 'false'):
            return text.lower() == 'true'
        return text
    if isinstance(value, dict):
        return {str(key): _canonical_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical_value(item) for item in value]
    return value


# ---------------------------------------------------------------------------------------------------- the GPU

def sm_version(compute_capability):
    """'9.0' (nvidia-smi's compute_cap) -> 90, '12.0' -> 120; also 90, '90', 'sm_90', 'sm_100a'. None when unreadable."""
    if compute_capability is None or isinstance(compute_capability, bool):
        return None
    text = str(compute_capability).strip().lower()
    match = re.match(r'\A(\d+)\.(\d)\Z', text)
    if match:
        return int(match.group(1)) * 10 + int(match.group(2))
    match = re.match(r'\A(?:sm_?)?(\d{2,3})[af]?\Z', text)
    if match:
        return int(match.group(1))
    return None


def _capability_text(compute_capability):
    sm = sm_version(compute_capability)
    return None if sm is None else '%d.%d' % (sm // 10, sm % 10)


# ---------------------------------------------------------------------------------------------------- environment

_TRUE = ('true', '1', 'yes', 'y')
_FALSE = ('false', '0', 'no', 'n')


def _env_value(environment, name):
    """The value SGLang reads for SGLANG_<X>: a legacy SGL_<X> overwrites it at import (srt/environ.py:2298-2305)."""
    environment = environment or {}
    legacy = 'SGL_' + name[len('SGLANG_'):] if name.startswith('SGLANG_') else None
    if legacy and legacy in environment:
        return environment[legacy]
    return environment.get(name)


def env_bool(environment, name, default):
    """SGLang's EnvBool: true/1/yes/y and false/0/no/n, any case; unset or anything else -> the default
    (srt/environ.py:67-86, 143-150)."""
    value = _env_value(environment, name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return default


#: environment variables that change which DeepGEMM kernels a start compiles, or how (compile_utils.py:42-56,
#: kernels/ops/gemm/bf16_fp32.py:9, 153-158, srt/models/deepseek_common/deepseek_weight_loader.py:694-699)
KERNEL_ENVIRONMENT = (
    'SGLANG_ENABLE_JIT_DEEPGEMM',        # on/off
    'SGLANG_JIT_DEEPGEMM_PRECOMPILE',    # the all-M pass at start (off: each shape compiles when first served)
    'SGLANG_JIT_DEEPGEMM_FAST_WARMUP',   # a sample of the Ms instead of every M
    'SGLANG_DG_USE_NVRTC',               # NVRTC instead of NVCC: another compiler, other cache entries
    'SGLANG_USE_DEEPGEMM_BMM',           # MLA's FP8 kv_b bmm on DeepGEMM (sm_90)
    'SGLANG_OPT_BF16_FP32_GEMM_ALGO',    # deep_gemm: the MoE router's GEMM on DeepGEMM
)


def kernel_environment(environment):
    """The part of the unit's environment that changes the kernels, by SGLang's names (legacy SGL_ read as SGLang)."""
    found = {}
    for name in KERNEL_ENVIRONMENT:
        value = _env_value(environment, name)
        if value is not None:
            found[name] = str(value)
    return found


# ---------------------------------------------------------------------------------------------------- the model

def _text_config(model_config):
    """A multimodal config (Kimi K2.5/K2.6's KimiK25Config) keeps the language model's fields in text_config."""
    model_config = model_config or {}
    text = model_config.get('text_config')
    return text if isinstance(text, dict) else {}


def quantization_config(model_config):
    """The checkpoint's quantization_config (top level, else text_config's); {} for an unquantized checkpoint."""
    model_config = model_config or {}
    for source in (model_config, _text_config(model_config)):
        found = source.get('quantization_config')
        if isinstance(found, dict):
            return found
    return {}


def _weight_schemes(quant_config):
    """The weights entries of a compressed-tensors config's config_groups."""
    groups = quant_config.get('config_groups') or {}
    schemes = []
    for group in groups.values() if isinstance(groups, dict) else ():
        weights = group.get('weights') if isinstance(group, dict) else None
        if isinstance(weights, dict):
            schemes.append(weights)
    return schemes


def _model_uses_deepgemm(options, environment, model_config):
    """(bool, reason) for a GPU on which DeepGEMM is on: does a layer of this model, so served, call it?"""
    if str(_env_value(environment, 'SGLANG_OPT_BF16_FP32_GEMM_ALGO') or '').strip() == 'deep_gemm':
        return True, 'SGLANG_OPT_BF16_FP32_GEMM_ALGO=deep_gemm puts the MoE router GEMM on DeepGEMM'
    for name in ('fp8-gemm-backend', 'moe-runner-backend', 'speculative-moe-runner-backend'):
        if options.get(name) == 'deep_gemm':
            return True, '%s is deep_gemm' % name
    if _canonical_value(options.get('speculative-draft-model-quantization')) in ('fp8', 'w8a8_fp8'):
        return True, 'the speculative draft model is FP8 (block-FP8 layers go to DeepGEMM)'
    text = _text_config(model_config)
    if 'index_topk' in (model_config or {}) or 'index_topk' in text:
        return True, 'a DSA (sparse attention) model: its indexer runs on DeepGEMM'
    quant = quantization_config(model_config)
    method = options.get('quantization') or quant.get('quant_method')
    if not method:
        return False, ('an unquantized checkpoint: its linear layers run on cuBLAS and its MoE on Triton unless '
                       'moe-runner-backend is deep_gemm')
    if method in ('fp8', 'w8a8_fp8'):
        if method == 'fp8' and quant.get('weight_block_size'):
            return True, 'block-FP8 weights: their GEMMs go to DeepGEMM by default (fp8_utils.py:1181)'
        return False, 'per-tensor or per-channel FP8 weights (no weight_block_size): not a DeepGEMM path'
    if method == 'compressed-tensors':
        schemes = _weight_schemes(quant)
        groups = [g for g in (quant.get('config_groups') or {}).values() if isinstance(g, dict)]
        if schemes and all(s.get('type') == 'int' and s.get('num_bits') == 4 and not s.get('block_structure')
                           for s in schemes) and not any(g.get('input_activations') for g in groups):
            return False, ('INT4 weights (W4A16, compressed-tensors, as Kimi K2.6 ships): the MoE runs on Marlin, or '
                           'on Triton on sm_100, and the unquantized layers on cuBLAS: no layer calls DeepGEMM')
        fp8 = [s for s in schemes if s.get('type') == 'float' and s.get('num_bits') == 8]
        if any(s.get('strategy') == 'block' for s in fp8):
            return True, ('block-FP8 compressed-tensors weights: their GEMMs go to DeepGEMM '
                          '(compressed_tensors_w8a8_fp8.py:206-216)')
        if fp8 and len(fp8) == len(schemes):
            return False, 'per-tensor or per-channel FP8 compressed-tensors weights: not a DeepGEMM path'
        return True, 'a compressed-tensors scheme this module has not traced: assumed to use DeepGEMM'
    return True, 'quantization %s is not traced by this module: assumed to use DeepGEMM' % method


def deciding_config(model_config):
    """The fields of a model's config.json that uses_deepgemm reads (quantization, the DSA indexer), top level and
    text_config's: what a caller keeps of a config that may be large."""
    keep = ('quantization_config', 'index_topk')
    model_config = model_config or {}
    kept = dict((key, model_config[key]) for key in keep if key in model_config)
    text = dict((key, value) for key, value in _text_config(model_config).items() if key in keep)
    if text:
        kept['text_config'] = text
    return kept


def uses_deepgemm(compute_capability, options, environment, model_config=None):
    """(bool, reason in words): whether an SGLang 0.5.23 server with these options and environment on a GPU of this
    compute capability uses DeepGEMM, and so whether precompiling its kernels is of any use.

    Without ``model_config`` (the model's config.json as a dict) the answer is SGLang's own switch
    (configurer.py:32-55): on for sm_90 and newer unless SGLANG_ENABLE_JIT_DEEPGEMM says false. With it, the answer
    also says whether a layer of that model calls DeepGEMM at all: an INT4 checkpoint such as Kimi K2.6 does not.
    """
    sm = sm_version(compute_capability)
    if sm is None:
        return False, 'compute capability %r is not one nvidia-smi reports (e.g. 9.0)' % (compute_capability,)
    capability = _capability_text(compute_capability)
    if not env_bool(environment, 'SGLANG_ENABLE_JIT_DEEPGEMM', True):
        return False, 'SGLANG_ENABLE_JIT_DEEPGEMM turns DeepGEMM off'
    if sm < 90:
        return False, 'compute capability %s: DeepGEMM needs sm_90 (Hopper) or newer' % capability
    where = 'compute capability %s' % capability
    if sm in (120, 121):
        where += ' (the pinned sgl-deep-gemm 0.2.3.post2 has the sm_120 kernels SGLang asks for)'
    if model_config is None:
        return True, 'DeepGEMM is on for %s; whether it compiles anything depends on the model' % where
    used, why = _model_uses_deepgemm(long_option_names(options), environment, model_config)
    if used:
        return True, 'DeepGEMM is on for %s and used: %s' % (where, why)
    return False, 'DeepGEMM is on for %s but unused: %s' % (where, why)


# ---------------------------------------------------------------------------------------------------- kernels

#: options (long names) that change the set of DeepGEMM kernels a start compiles. Left out, each for a reason:
#: max-running-requests and the cuda-graph batch sizes (every M up to m_max is compiled whatever the batch:
#: compile_utils.py:93-102), pp-size (a stage has the same shapes), kv-cache-dtype (the KV cache is no GEMM weight;
#: the DSA indexer's kernels do not go through the precompile pass), model-path (the config's shapes are in the key).
KERNEL_OPTION_KEYS = (
    # the weights: their dtype, quantization and shapes
    'quantization', 'dtype', 'json-model-override-args', 'revision',
    # how the weights are cut: N, K and the number of experts on a rank (the groups)
    'tp-size', 'ep-size', 'dp-size', 'attn-dp-size', 'enable-dp-attention', 'moe-dense-tp-size', 'moe-dp-size',
    'enable-dp-lm-head', 'ep-num-redundant-experts', 'disable-shared-experts-fusion',
    # which kernel family: contiguous or masked grouped GEMMs, FP8 linear backend
    'moe-runner-backend', 'moe-a2a-backend', 'deepep-mode', 'fp8-gemm-backend',
    # the SMs a GEMM may use (two-batch / single-batch overlap give part of them to communication)
    'enable-two-batch-overlap', 'enable-single-batch-overlap', 'deepep-config',
    # the Ms: 1..m_max, m_max from chunked-prefill-size
    'chunked-prefill-size',
    # a draft model brings its own GEMMs
    'speculative-algorithm', 'speculative-draft-model-path', 'speculative-draft-model-revision',
    'speculative-draft-model-quantization', 'speculative-moe-runner-backend', 'speculative-moe-a2a-backend',
)


def kernel_options(options):
    """The options, by long name, that change the compiled kernels (KERNEL_OPTION_KEYS); unset ones (None) left out."""
    named = long_option_names(options)
    return {key: _canonical_value(named[key]) for key in KERNEL_OPTION_KEYS if named.get(key) is not None}


#: config.json fields that give a DeepSeek-V3-style model's GEMM shapes and weight format
MODEL_CONFIG_KEYS = (
    'architectures', 'model_type', 'torch_dtype', 'dtype',
    'hidden_size', 'intermediate_size', 'moe_intermediate_size', 'n_routed_experts', 'n_shared_experts',
    'num_experts_per_tok', 'num_attention_heads', 'num_key_value_heads', 'q_lora_rank', 'kv_lora_rank',
    'qk_nope_head_dim', 'qk_rope_head_dim', 'v_head_dim', 'index_topk', 'index_n_heads', 'index_head_dim',
    'quantization_config',
)


def model_kernel_fields(model_config):
    """The fields of MODEL_CONFIG_KEYS, from the top level and, for a multimodal config, from text_config."""
    model_config = model_config or {}
    fields = {}
    for scope, source in (('', model_config), ('text_config.', _text_config(model_config))):
        for key in MODEL_CONFIG_KEYS:
            if key in source:
                fields[scope + key] = source[key]
    return fields


def cache_key(sglang_version, compute_capability, options, model_config, environment=None):
    """A short hex key (16 digits of a sha256) naming "DeepGEMM precompiled for this": SGLang's version (which pins
    sgl-deep-gemm), the compute capability, kernel_options, the model's shape fields and the kernel environment.

    DeepGEMM's own cache is content-addressed (a kernel's entry is named by a hash of its generated source, compiler
    and flags), so a stale entry is never used: this key only tells whether a precompile for this configuration ran.
    """
    record = {
        'sglang': str(sglang_version),
        'compute_capability': _capability_text(compute_capability) or str(compute_capability),
        'options': kernel_options(options),
        'model': model_kernel_fields(model_config),
        'environment': kernel_environment(environment),
    }
    text = json.dumps(record, sort_keys=True, separators=(',', ':'), default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------- the command

#: the module that precompiles; its parser takes every ServerArgs option plus --timeout (seconds, default 3600)
COMPILE_MODULE = 'sglang.compile_deep_gemm'

#: options the precompile must not carry over from the serving config: its own readiness poll sends no API key and
#: speaks plain HTTP (compile_deep_gemm.py:118-176), so a key makes it wait out --timeout and TLS makes it never see
#: the server. The precompile's server binds to 127.0.0.1 (see compile_argv), so dropping the key opens nothing.
PRECOMPILE_DROPPED_OPTIONS = ('api-key', 'admin-api-key', 'ssl-certfile', 'ssl-keyfile', 'ssl-keyfile-password',
                              'ssl-ca-certs')

# Runs `python -m sglang.compile_deep_gemm` after merging --config FILE the way launch_server does
# (server_args.py:683-689 with ConfigArgumentMerger): config values first, then the other arguments, so the extra
# arguments win. The API key is read from the file inside the process and never appears on a command line.
COMPILE_SCRIPT = '\n'.join((
    'import argparse, runpy, sys',
    'from sglang.srt.server_args import ServerArgs',
    'from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger',
    'parser = argparse.ArgumentParser()',
    'ServerArgs.add_cli_args(parser)',
    "parser.add_argument('--timeout', type=int)",
    'merged = ConfigArgumentMerger(parser).merge_config_with_args(sys.argv[1:])',
    'drop = %r' % (tuple('--' + name for name in PRECOMPILE_DROPPED_OPTIONS),),
    'argv, skip = [], False',
    'for word in merged:',
    '    if skip:',
    '        skip = False',
    "    elif word.split('=', 1)[0] in drop:",
    "        skip = '=' not in word",
    '    else:',
    '        argv.append(word)',
    'sys.argv = [%r] + argv' % COMPILE_MODULE,
    "runpy.run_module(%r, run_name='__main__', alter_sys=True)" % COMPILE_MODULE,
))


def compile_argv(python, config_file, extra=None):
    """The command that precompiles DeepGEMM's kernels for the serving configuration in ``config_file`` (the YAML the
    unit's launch_server reads), with ``extra`` arguments after it (they win over the file), e.g.
    ``['--port', '30100', '--timeout', '1800']``.

    SGLang 0.5.23's ``python -m sglang.compile_deep_gemm --config FILE`` would ignore the file (and fail on the missing
    --model-path): the command merges it first (COMPILE_SCRIPT). Its server binds to 127.0.0.1 unless ``extra`` names
    a --host. Give it a --port no other server holds: it polls host:port and takes whatever answers there for its own
    server. It starts a whole server (all ranks, the weights, the KV cache): the GPUs must be free.
    """
    extra = [str(word) for word in (extra or [])]
    if any(word == '--config' or word.startswith('--config=') for word in extra):
        raise ValueError('extra may not name another --config: SGLang reads one config file')
    if not config_file:
        raise ValueError('config_file is required: the serving configuration to precompile for')
    argv = [str(python), '-c', COMPILE_SCRIPT, '--config', str(config_file)] + extra
    if not any(word == '--host' or word.startswith('--host=') for word in extra):
        argv += ['--host', '127.0.0.1']
    return argv


# ---------------------------------------------------------------------------------------------------- caches

#: cache_dir's subdirectory for each variable; the third-party ones as the sglang_service role's service.env.j2 has
#: them, so a precompile and the service share them
CACHE_SUBDIRS = (
    ('SGLANG_DG_CACHE_DIR', 'deep_gemm'),        # DeepGEMM under SGLang: written into DG_JIT_CACHE_DIR
    ('DG_JIT_CACHE_DIR', 'deep_gemm'),           # DeepGEMM itself (SGLang overwrites it with the one above)
    ('SGLANG_JIT_CACHE_DIR', 'jit'),             # SGLang's JIT kernels: default ~/.cache/sglang/jit, not the cache dir
    ('SGLANG_CUTE_AOT_CACHE_DIR', 'cute_aot'),   # CuTe DSL objects (default under SGLANG_CACHE_DIR already)
    ('TRITON_CACHE_DIR', 'triton'),
    ('TORCHINDUCTOR_CACHE_DIR', 'torchinductor'),
    ('CUDA_CACHE_PATH', 'cuda'),
    ('TILELANG_CACHE_DIR', 'tilelang'),
    ('FLASHINFER_WORKSPACE_BASE', 'flashinfer'),  # FlashInfer appends .cache/flashinfer to it
)


def cache_release_dir(cache_dir, sglang_version, compute_capabilities):
    """``cache_dir``/sglang-VERSION-ARCH (ARCH the GPUs' sm versions, e.g. sm90, or cpu): the compile caches of one
    SGLang release on one GPU architecture. An upgrade or another GPU starts from an empty directory, so no cache
    that does not key itself by both is ever reused stale; the same release on the same GPUs finds its own again."""
    sms = sorted({sm for sm in (sm_version(cc) for cc in compute_capabilities or ()) if sm is not None})
    arch = '+'.join('sm%d' % sm for sm in sms) or 'cpu'
    version = re.sub(r'[^A-Za-z0-9._+-]', '_', str(sglang_version or 'unknown'))
    return '%s/sglang-%s-%s' % (str(cache_dir or '').rstrip('/'), version, arch)


def cache_env(cache_dir):
    """The environment that puts DeepGEMM's and the other JIT caches of SGLang 0.5.23 under ``cache_dir``:
    SGLANG_CACHE_DIR itself (the FlashInfer autotune results live in it) and a subdirectory per cache."""
    base = str(cache_dir or '').rstrip('/')
    if not base.startswith('/'):
        raise ValueError('cache_dir must be an absolute path, not %r' % (cache_dir,))
    env = {'SGLANG_CACHE_DIR': base}
    for name, sub in CACHE_SUBDIRS:
        env[name] = base + '/' + sub
    return env


# ---------------------------------------------------------------------------------------------------- the deploy's step

#: auto: precompile when the model, so served on these GPUs, calls DeepGEMM (uses_deepgemm); always: whatever this
#: module concludes (a model it cannot read or trace); never: leave the compiling to the server's own start
PRECOMPILE_MODES = ('auto', 'always', 'never')


def precompile_plan(mode, used, why, compiled, start_coming, nnodes=1):
    """(run, reason in words): whether the deploy precompiles DeepGEMM's kernels before the start that is coming.

    ``used``/``why`` are uses_deepgemm's answer (``used`` None when the model's config.json could not be read),
    ``compiled`` whether a precompile for this configuration's cache_key already ran on the host and its kernels are
    still in the cache, ``start_coming`` whether the deploy starts the server (a first start, or a restart for a
    changed configuration): a server that keeps running keeps the kernels it has.
    """
    if mode not in PRECOMPILE_MODES:
        raise ValueError('mode must be one of %s, not %r' % (', '.join(PRECOMPILE_MODES), mode))
    if mode == 'never':
        return False, 'precompiling is off: a start compiles the kernels it needs itself'
    if mode == 'auto' and used is None:
        return False, ("the model's config.json is not on the host, so whether it calls DeepGEMM is unknown: a start "
                       "compiles what it needs itself (mode always precompiles anyway)")
    if mode == 'auto' and not used:
        return False, why
    if compiled:
        return False, 'the kernels of this configuration were precompiled on this host already'
    if not start_coming:
        return False, 'no start is coming: the running server keeps the kernels it compiled'
    if int(nnodes or 1) > 1:
        return False, ('a multi-node instance compiles at its start: a precompile would need every node at once, '
                       'like the start itself')
    return True, why if used else 'mode always: precompiling whatever the model'


def precompiled_marker(marker, deep_gemm_dir, entries):
    """Whether a precompile's ``marker`` (the record it left, a dict, or None) still holds: it names the DeepGEMM
    cache directory the configuration compiles into, and that directory has ``entries`` (a cache emptied by hand
    must be compiled again)."""
    return bool(marker) and marker.get('deep_gemm_dir') == str(deep_gemm_dir) and entries > 0
