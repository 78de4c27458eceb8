# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Preflight rules for serving Kimi K2.6 with SGLang: data plus small functions.

Each rule has a stable id, a default severity and a check ``check(ctx) -> None | str | (severity, str)``.
A string is a finding with the rule's default severity; a tuple overrides it (for example ``info`` when a
GPU rule cannot be evaluated on a host without GPU). Messages say what will happen and what to change.

The context is a plain dict built by :func:`build_context`:

- ``options``: SGLang options, keys normalised to the dashed flag spelling (``pp-size``), values as given;
- ``gpu``: facts from nvidia_smi.gather_facts (``gpu_count``, ``gpus``, ``driver_version``, ...) or None;
- ``simulator``: True on hosts that run the simulator (no GPU expected, nor with the option ``device: cpu``);
- ``expected_gpus``: int or None; ``nnodes`` comes from the options;
- ``model``: {"path", "exists", "is_dir", "has_config", "size_bytes"} or None (not checked);
- ``cache``: {"path", "free_bytes", "min_free_bytes"} or None;
- ``min_driver_version``: e.g. "580.65.06";
- ``mla``: True when the model uses multi-head latent attention (Kimi K2.x does);
- ``layout``: the sglang_service role's layout (sglang_layout.choose: sizes, source, reason) or None;
- ``tune``: the last ``k26deploy tune`` report for this host (src/k26deploy/tune.py) or None.

Sources: NVIDIA's CUDA 13.0 installation guide and release notes, and the sglang 0.5.23 sources
named next to each table (read from the installed package).
"""

from __future__ import annotations

import difflib
import json
import re
from collections import namedtuple

from ansible_collections.k26.deploy.plugins.module_utils import (
    sglang_deepgemm,
    sglang_layout,
    sglang_perf_facts,
    sglang_tune_evidence,
)
from ansible_collections.k26.deploy.plugins.module_utils.nvidia_smi import version_tuple
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import (
    MLA_DEFAULT_BACKEND,
    as_bool,
    gpus_per_node,
    is_loopback_host,
    option_keys,
)

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)
SEVERITY_OFF = "off"

# CUDA 13.0 GA needs driver >= 580.65.06 (CUDA 13.0 release notes).
DEFAULT_MIN_DRIVER_VERSION = "580.65.06"
MIN_CUDA_DRIVER_API = "13.0"
# Weights above this share of the budget leave little room for the KV cache.
MODEL_TIGHT_RATIO = 0.9

# Attention backends that switch CUDA graphs off for both phases
# (SGLang 0.5.23 srt/arg_groups/attention_hook.py: "Cuda graph is disabled because of using ...").
GRAPH_DISABLING_BACKENDS = {
    "torch_native": "torch native attention backend",
    "flex_attention": "torch Flex Attention backend",
}

# Attention backend -> (compute capability majors it runs on, for MLA models / for other models, source).
# fa3: srt/layers/attention/attention_registry.py asserts `(major == 8 and not MLA) or major == 9`, and that
#      assert runs when the model runner starts, i.e. after the weights are loaded.
# trtllm_mla: srt/arg_groups/overrides.py requires is_blackwell (majors 10, 11, 12).
# cutedsl_mla: overrides.py requires is_sm100 (major 10).
# trtllm_mha: attention_hook.py requires SM90/SM100/SM120; the registry refuses it for MLA models.
# fa4 on absorbed-MLA models: attention_hook.py refers to SM100/SM110.
ATTENTION_ARCH = {
    "fa3": {"mla": (9,), "other": (8, 9), "hint": "fa3 runs on SM90 (and SM80 for non-MLA models) only"},
    "trtllm_mla": {"mla": (10, 11, 12), "other": (), "hint": "trtllm_mla is Blackwell-only (SM100/SM12x)"},
    "cutedsl_mla": {"mla": (10,), "other": (), "hint": "cutedsl_mla is SM100-only"},
    "trtllm_mha": {"mla": (), "other": (9, 10, 12), "hint": "trtllm_mha is for non-MLA models on SM90/SM100/SM120"},
    "fa4": {"mla": (10, 11), "other": (9, 10, 11, 12), "hint": "fa4 with MLA models needs SM100/SM110"},
}
ATTENTION_OPTION_KEYS = ("attention-backend", "prefill-attention-backend", "decode-attention-backend")

# CUDA 13 dropped Maxwell, Pascal and Volta (CUDA 13.0 release notes): compute capability below 7.5.
MIN_COMPUTE_CAPABILITY = (7, 5)

# Options removed or retired (checked against the 0.5.23 parser by tests/unit/test_simulator_conformance.py).
REMOVED_OPTIONS = {
    "cuda-graph-max-bs": "cuda-graph-max-bs-decode (and cuda-graph-max-bs-prefill)",
    "cuda-graph-bs": "cuda-graph-bs-decode (and cuda-graph-bs-prefill)",
}
# Deprecated flags that 0.5.23 still parses on the command line but refuses in a --config file
# (ConfigArgumentMerger: "Unsupported config option ... with action 'DeprecatedStoreTrueAction'").
DEPRECATED_OPTIONS = {
    "disable-cuda-graph": "disable-decode-cuda-graph and disable-prefill-cuda-graph "
                          "(or cuda-graph-backend-decode: disabled)",
    "enable-dp-attention": "attn-dp-size",
}

Rule = namedtuple("Rule", "id severity title check")
NOTHING_TO_DO = "nothing to do"


# ---------------------------------------------------------------- helpers

def as_int(value, default):
    if value is None or isinstance(value, bool):
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        return default


def as_float(value, default):
    if value is None or isinstance(value, bool):
        return default
    try:
        return float(str(value).strip())
    except ValueError:
        return default


def opt(ctx, key, default=None):
    return ctx["options"].get(key, default)


def parallel(ctx):
    """(tp, pp, nnodes) with SGLang's defaults."""
    return (as_int(opt(ctx, "tp-size"), 1), as_int(opt(ctx, "pp-size"), 1), as_int(opt(ctx, "nnodes"), 1))


def gpus_present(ctx):
    gpu = ctx.get("gpu") or {}
    return int(gpu.get("gpu_count") or 0)


def without_gpu(ctx):
    """Why this host serves without a GPU ("simulator", "device cpu"), or "" on a GPU host."""
    if ctx.get("simulator"):
        return "simulator"
    if str(opt(ctx, "device", "")).strip().lower() == "cpu":
        return "device cpu"
    return ""


def gpu_memories_mib(ctx):
    """Each GPU's total memory in MiB (nvidia-smi memory.total), where the facts have it."""
    gpus = (ctx.get("gpu") or {}).get("gpus") or []
    return [g["memory_total_mib"] for g in gpus if g.get("memory_total_mib")]


def no_gpu_info(ctx, what):
    """The finding for a GPU rule that cannot be evaluated, or None when GPUs are present."""
    if gpus_present(ctx) > 0:
        return None
    why = without_gpu(ctx)
    if why:
        return found("%s not checked: host without GPU (%s)" % (what, why), NOTHING_TO_DO, {"without_gpu": why}, INFO)
    error = (ctx.get("gpu") or {}).get("nvidia_smi_error") or "GPU facts not gathered"
    return found("%s not checked: no GPU listed (%s)" % (what, error), NOTHING_TO_DO,
                 {"gpu.nvidia_smi_error": error}, INFO)


def cc_tuple(text):
    parts = re.findall(r"\d+", str(text or ""))
    if len(parts) < 2:
        return None
    return int(parts[0]), int(parts[1])


def gib(num_bytes):
    return "%.1f GiB" % (num_bytes / float(1 << 30))


def attention_backends(ctx):
    """{option-name: backend} for the attention options that are set."""
    return {key: str(opt(ctx, key)) for key in ATTENTION_OPTION_KEYS if opt(ctx, key) not in (None, "")}


# ---------------------------------------------------------------- rules
# A check returns None (nothing to say) or found(message, fix, evidence, severity=None): what will happen, what to
# change, and the options and facts it read. severity None is the rule's default.

Verdict = namedtuple("Verdict", "message fix evidence severity")


def found(message, fix, evidence=None, severity=None):
    return Verdict(message, fix, dict(evidence or {}), severity)


def option_evidence(ctx, *keys):
    """The options a rule read, as set (unset ones are left out)."""
    return {key: opt(ctx, key) for key in keys if opt(ctx, key) is not None}


def gpu_evidence(ctx, *keys):
    gpu = ctx.get("gpu") or {}
    return {"gpu." + key: gpu.get(key) for key in keys}


def check_cuda_graph_off(ctx):
    if without_gpu(ctx) == "device cpu":
        return None  # no CUDA graphs on the CPU at all
    reasons = []
    fixes = []
    read = ["disable-cuda-graph", "disable-decode-cuda-graph", "cuda-graph-backend-decode", "attention-backend"]
    for key in ("disable-cuda-graph", "disable-decode-cuda-graph"):
        if as_bool(opt(ctx, key)):
            reasons.append("%s is set" % key)
            fixes.append("remove %s" % key)
    if str(opt(ctx, "cuda-graph-backend-decode", "")).lower() == "disabled":
        reasons.append("cuda-graph-backend-decode is 'disabled'")
        fixes.append("set cuda-graph-backend-decode: full")
    backend = str(opt(ctx, "attention-backend", "") or "")
    if backend in GRAPH_DISABLING_BACKENDS:
        reasons.append("attention-backend %s (SGLang: 'Cuda graph is disabled because of using %s')"
                       % (backend, GRAPH_DISABLING_BACKENDS[backend]))
        fixes.append("use attention-backend triton, which keeps graphs")
    for key, value, why in (("enable-mis", True, "enable-mis is set"),
                            ("deepep-mode", "normal", "deepep-mode normal"),
                            ("load-format", "expert_pack", "load-format expert_pack"),
                            ("debug-tensor-dump-output-folder", "", "debug-tensor-dump-output-folder is set"),
                            ("msprobe-dump-config", "", "msprobe-dump-config is set")):
        read.append(key)
        current = opt(ctx, key)
        if (as_bool(current) if value is True else (str(current or "").lower() == value if value else current)):
            reasons.append("%s (SGLang turns graphs off for it)" % why)
            fixes.append("drop %s unless it is needed" % key)
    read += ["dwdp-size", "enable-kv-cache-sharding", "speculative-algorithm", "cuda-graph-config"]
    if as_int(opt(ctx, "dwdp-size"), 1) > 1:
        reasons.append("dwdp-size %s (SGLang sets disable_cuda_graph for DWDP)" % opt(ctx, "dwdp-size"))
        fixes.append("drop dwdp-size unless it is needed")
    if as_bool(opt(ctx, "enable-kv-cache-sharding")) and opt(ctx, "speculative-algorithm"):
        reasons.append("enable-kv-cache-sharding with speculative decoding (SGLang turns graphs off, silently)")
        fixes.append("drop enable-kv-cache-sharding or speculative decoding")
    if str(cuda_graph_config(ctx).get("decode", {}).get("backend", "")).lower() == "disabled":
        reasons.append("cuda-graph-config says decode backend 'disabled' (it overrides every other graph option)")
        fixes.append("remove the decode backend from cuda-graph-config")
    if not reasons:
        return None
    return found("CUDA graphs will be off for decode: %s. Every decode step then pays Python and kernel-launch "
                 "overhead; in the seed deployment, graphs back on raised single-request throughput by 44%% (24.7 -> "
                 "35.6 tok/s; the pp-async-batch-depth 8 set with them cannot act on one request)." % "; ".join(reasons),
                 "; ".join(fixes), option_evidence(ctx, *read))


def cuda_graph_config(ctx):
    """cuda-graph-config as a mapping (SGLang takes JSON text or, from a --config file, a mapping); {} when unset
    or unreadable (SGLang's parser refuses the latter, see K26-SGLANG-ARGS)."""
    value = opt(ctx, "cuda-graph-config")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def decode_graph_max_bs(ctx, running):
    """(largest decode batch SGLang captures a graph for, where that number comes from): the options', else SGLang's
    own resolution on this host; (None, why) before SGLang can resolve it."""
    decode = cuda_graph_config(ctx).get("decode", {})
    listed = opt(ctx, "cuda-graph-bs-decode") or decode.get("bs")
    if listed:
        sizes = [as_int(size, 0) for size in (listed if isinstance(listed, list) else str(listed).split())]
        return max(sizes), "the largest of cuda-graph-bs-decode"
    explicit = opt(ctx, "cuda-graph-max-bs-decode") or decode.get("max_bs")
    if explicit:
        return as_int(explicit, 0), "cuda-graph-max-bs-decode"
    resolved = (((ctx.get("resolved") or {}).get("cuda_graph") or {}).get("decode") or {}).get("max_bs")
    if not resolved:
        return None, MEMORY_UNRESOLVED
    # SGLang lowers its own default to max-running-requests, never an explicit size
    return min(as_int(resolved, 0), running), "SGLang's own resolution on this host"


def largest_decode_batch(ctx):
    """(the largest batch one decode step can run, what bounds it), or (None, why) when the options leave it to
    SGLang's own estimate of the KV cache (max-running-requests unset)."""
    running = as_int(opt(ctx, "max-running-requests"), None)
    _tp, pp, _nnodes = parallel(ctx)
    micro = as_int(opt(ctx, "pp-max-micro-batch-size"), None)
    if pp > 1 and micro:
        return micro, "pp-max-micro-batch-size"
    if running is None:
        return None, "max-running-requests is not set"
    if pp > 1:  # srt/managers/scheduler.py: a micro-batch holds max_running_requests // pp_size
        return max(running // pp, 1), "max-running-requests %d over %d pipeline stages" % (running, pp)
    return running, "max-running-requests"


# SGLang 0.5.23's features that are on by default for speed, other than CUDA graphs (K26-CUDA-GRAPH-*): the option
# that turns each off, what it turns off (the option's own help, srt/arg_groups/fields/<file>), and when turning it
# off costs nothing: pipeline parallelism turns the overlap scheduler off itself (validation_hook.py), and one
# tensor-parallel rank has no all-reduce.
SPEED_DEFAULTS = (
    ("disable-radix-cache", "prefix caching (RadixAttention): every request prefills its whole prompt again, the "
     "system prompt and the earlier turns of a chat or an agent's loop included", "memory.py", lambda tp, pp: False),
    ("disable-overlap-schedule", "the overlap scheduler, which prepares the next batch on the CPU while the GPU runs "
     "this one", "schedule.py", lambda tp, pp: pp > 1),
    ("disable-custom-all-reduce", "SGLang's custom all-reduce kernel: tensor-parallel all-reduces fall back to NCCL",
     "exec_.py", lambda tp, pp: tp == 1),
    ("disable-shared-experts-fusion", "the fusion of the shared expert into the routed experts' MoE kernel (DeepSeek "
     "V3's architecture, which K2.6 has)", "exec_.py", lambda tp, pp: False),
    ("disable-chunked-prefix-cache", "the chunked prefix cache of DeepSeek's MLA attention", "schedule.py",
     lambda tp, pp: False),
    ("disable-flashinfer-autotune", "FlashInfer's autotuning of its kernels", "exec_.py", lambda tp, pp: False),
)


def check_speed_defaults_off(ctx):
    tp, pp, dummy = parallel(ctx)
    off = [(key, what, source) for key, what, source, costs_nothing in SPEED_DEFAULTS
           if as_bool(opt(ctx, key)) and not costs_nothing(tp, pp)]
    if not off:
        return None
    return found("SGLang's speed defaults turned off: %s. No figure of this package measures what each costs on K2.6."
                 % "; ".join("%s turns off %s (SGLang 0.5.23, srt/arg_groups/fields/%s)" % item for item in off),
                 "remove %s, or measure with and without it (k26deploy tune --candidates)"
                 % ", ".join(key for key, dummy, dummy in off),
                 option_evidence(ctx, "tp-size", "pp-size", *(key for key, dummy, dummy in off)))


def check_cuda_graph_partial(ctx):
    if without_gpu(ctx) == "device cpu" or check_cuda_graph_off(ctx):
        return None
    batch, bound = largest_decode_batch(ctx)
    reasons = []
    fixes = []
    graphs = None
    if batch:
        graphs, source = decode_graph_max_bs(ctx, as_int(opt(ctx, "max-running-requests"), batch))
        if graphs is not None and batch > graphs:
            reasons.append("decode batches of %d to %d requests (%s) run without a graph: the largest captured is %d "
                           "(%s), and SGLang 0.5.23 replays a graph only up to it, silently (the decode log line "
                           "says 'cuda graph: False')" % (graphs + 1, batch, bound, graphs, source))
            fixes.append("set cuda-graph-max-bs-decode to %d (the graphs take more GPU memory) or lower the batch "
                         "(%s) to %d" % (batch, bound.split(" ")[0], graphs))
    if as_bool(opt(ctx, "disable-cuda-graph-padding")) and opt(ctx, "cuda-graph-bs-decode"):
        reasons.append("disable-cuda-graph-padding with a cuda-graph-bs-decode list: a batch whose size is not in "
                       "the list runs without a graph")
        fixes.append("drop disable-cuda-graph-padding")
    if as_bool(opt(ctx, "enable-mixed-chunk")):
        reasons.append("enable-mixed-chunk: decode requests that ride in a mixed prefill batch run without the "
                       "decode graph")
        fixes.append("drop enable-mixed-chunk unless prefill latency matters more")
    if not reasons:
        return None
    return found("CUDA graphs will be off for part of the decode batches: %s." % "; ".join(reasons), "; ".join(fixes),
                 dict(option_evidence(ctx, "max-running-requests", "pp-max-micro-batch-size", "pp-size", "tp-size",
                                      "cuda-graph-max-bs-decode", "cuda-graph-bs-decode", "disable-cuda-graph-padding",
                                      "enable-mixed-chunk"),
                      **({"largest_decode_batch": batch, "largest_decode_graph": graphs} if batch else {})))


def micro_batch_slots(pp, depth):
    """Micro-batch slots SGLang's pipeline scheduler keeps: pp_size + pp_async_batch_depth
    (sglang_perf_facts "pp-loop-size"); 1 without pipeline parallelism."""
    return pp + max(depth, 0) if pp > 1 else 1


def check_pp_async_depth(ctx):
    """What the depth does with pipeline parallelism (SGLang 0.5.23's scheduler), as information: neither depth 0
    nor any other was measured apart from CUDA graphs on the seed machine class."""
    _tp, pp, _nnodes = parallel(ctx)
    if pp <= 1:
        return None
    depth = as_int(opt(ctx, "pp-async-batch-depth"), 0)
    slots = micro_batch_slots(pp, depth)
    return found("pp-size %d with pp-async-batch-depth %d: SGLang keeps pp-size + depth = %d micro-batch slots, so "
                 "with %d or more requests every pipeline stage has a micro-batch in flight, whatever the depth; "
                 "the depth adds slots so that the last stage's output processing overlaps GPU work. With one "
                 "request there is one micro-batch and the depth changes nothing (the seed deployment's 24.7 -> "
                 "35.6 tok/s at concurrency 1 came from turning CUDA graphs back on)."
                 % (pp, depth, slots, pp),
                 NOTHING_TO_DO + "; no published measurement separates one depth from another (the seed's depth %d "
                 "came with CUDA graphs): k26deploy tune -i INVENTORY --candidates FILE.json, with one candidate per "
                 "depth (extra var sglang_service_pp_async_batch_depth), settles it where throughput at high "
                 "concurrency matters" % pp, {"pp-size": pp, "pp-async-batch-depth": depth, "micro-batch slots": slots})


def check_nnodes_divisor(ctx):
    tp, pp, nnodes = parallel(ctx)
    evidence = {"tp-size": tp, "pp-size": pp, "nnodes": nnodes}
    if nnodes < 1:
        return found("nnodes %d: must be at least 1." % nnodes, "set nnodes to 1 or more", evidence)
    if gpus_per_node(tp, pp, nnodes) is not None:
        return None
    return found("tp-size %d x pp-size %d = %d is not divisible by nnodes %d: SGLang asserts "
                 "(tp_size * pp_size) %% nnodes == 0 and will not start." % (tp, pp, tp * pp, nnodes),
                 "choose nnodes among the divisors of %d" % (tp * pp), evidence)


def check_gpu_count(ctx):
    skipped = no_gpu_info(ctx, "GPU count")
    if skipped:
        return skipped
    tp, pp, nnodes = parallel(ctx)
    per_node = gpus_per_node(tp, pp, nnodes)
    if per_node is None:
        return None  # K26-NNODES-DIVISOR reports it
    base = as_int(opt(ctx, "base-gpu-id"), 0)
    present = gpus_present(ctx)
    layout = "tp-size %d x pp-size %d%s" % (tp, pp, " / nnodes %d" % nnodes if nnodes > 1 else "")
    evidence = dict(option_evidence(ctx, "base-gpu-id"),
                    **{"tp-size": tp, "pp-size": pp, "nnodes": nnodes, "gpu.gpu_count": present})
    if per_node + base > present:
        return found("%s needs %d GPUs on this node%s but %d are present: SGLang fails when it starts the workers."
                     % (layout, per_node, " from base-gpu-id %d" % base if base else "", present),
                     "make tp-size x pp-size at most %d (%d GPU(s) x %d node(s)), or add GPUs"
                     % ((present - base) * nnodes, present - base, nnodes), evidence)
    if per_node + base < present:
        return found("%s uses %d of the %d GPUs present; the other %d stay idle."
                     % (layout, per_node, present, present - per_node - base),
                     "set pp-size or tp-size so that tp-size x pp-size = %d per node, unless the other GPUs are "
                     "meant for something else" % present, evidence, WARNING)
    return None


def check_expected_gpus(ctx):
    expected = ctx.get("expected_gpus")
    if expected is None:
        return None
    skipped = no_gpu_info(ctx, "expected GPU count (%d)" % expected)
    if skipped:
        return skipped
    present = gpus_present(ctx)
    if present == expected:
        return None
    return found("%d GPUs expected but %d listed by nvidia-smi: a GPU may have fallen off the bus or be hidden "
                 "(CUDA_VISIBLE_DEVICES, failed card)." % (expected, present),
                 "check `nvidia-smi -L` and dmesg before starting",
                 {"expected_gpus": expected, "gpu.gpu_count": present})


def check_no_gpu(ctx):
    if without_gpu(ctx) or gpus_present(ctx) > 0:
        return None
    error = (ctx.get("gpu") or {}).get("nvidia_smi_error") or "GPU facts not gathered"
    evidence = {"gpu.gpu_count": 0, "gpu.nvidia_smi_error": error}
    if error == "nvidia-smi not found":
        return found("no NVIDIA driver yet (nvidia-smi not found): the GPU rules were skipped.",
                     "the nvidia_cuda role installs the driver; run preflight again before starting SGLang",
                     evidence, WARNING)
    return found("no GPU usable on a GPU host: %s. SGLang cannot start." % error,
                 "fix the driver (reboot after an upgrade, load the module); a host without GPU serves with the "
                 "simulator or with sglang_service_profile cpu", evidence)


def check_attention_arch(ctx):
    backends = attention_backends(ctx)
    checked = {key: b for key, b in backends.items() if b in ATTENTION_ARCH}
    if not checked:
        return None
    skipped = no_gpu_info(ctx, "attention backend vs GPU architecture")
    if skipped:
        return skipped
    mla = ctx.get("mla", True)
    problems = []
    suggestion = set()
    capabilities = (ctx.get("gpu") or {}).get("compute_capabilities") or []
    for cc in capabilities:
        major = (cc_tuple(cc) or (0, 0))[0]
        for key, backend in sorted(checked.items()):
            rule = ATTENTION_ARCH[backend]
            if major not in rule["mla" if mla else "other"]:
                problems.append("%s %s on compute capability %s (%s)" % (key, backend, cc, rule["hint"]))
                if mla and major in MLA_DEFAULT_BACKEND:
                    suggestion.add(MLA_DEFAULT_BACKEND[major])
    if not problems:
        return None
    fix = ("use attention-backend: %s or leave it unset so SGLang picks one" % "/".join(sorted(suggestion))
           if suggestion else "leave it unset so SGLang picks a backend for this GPU")
    return found("%s: SGLang refuses this backend, some only after the weights are loaded (an hour for K2.6)."
                 % "; ".join(problems), fix,
                 dict(checked, **{"gpu.compute_capabilities": capabilities, "mla": mla}))


def check_gpu_arch_supported(ctx):
    if gpus_present(ctx) == 0:
        return None
    capabilities = (ctx.get("gpu") or {}).get("compute_capabilities") or []
    old = [cc for cc in capabilities if cc_tuple(cc) and cc_tuple(cc) < MIN_COMPUTE_CAPABILITY]
    if not old:
        return None
    return found("compute capability %s: CUDA 13 (which SGLang 0.5.20+ requires) dropped Maxwell, Pascal and "
                 "Volta; these GPUs cannot run it." % ", ".join(old), "use Turing (7.5) or newer GPUs",
                 {"gpu.compute_capabilities": capabilities})


def check_model_missing(ctx):
    model = ctx.get("model")
    if not model:
        return None
    evidence = {"model-path": model.get("path"), "exists": model.get("exists"), "is_dir": model.get("is_dir"),
                "has_config": model.get("has_config")}
    if not model.get("path"):
        return found("no model-path in the options: SGLang requires it.",
                     "set model-path to the checkpoint directory", evidence)
    if model.get("hub_id"):
        return found("model-path %s is not a local directory: SGLang would download it at start (about a terabyte "
                     "for K2.6, hours of start-up)." % model["path"],
                     "download it first and point model-path at the directory", evidence, WARNING)
    if not model.get("exists"):
        return found("model directory %s does not exist: SGLang would fail (or try to download %s) at start."
                     % (model.get("path"), model.get("path")),
                     "download the weights there first or fix model-path", evidence)
    if not model.get("is_dir"):
        return found("model-path %s is not a directory." % model.get("path"),
                     "point model-path at the checkpoint directory", evidence)
    if not model.get("has_config"):
        return found("model directory %s has no config.json: not a complete Hugging Face checkpoint (download "
                     "interrupted?)." % model.get("path"), "finish the download", evidence)
    return None


def check_deepgemm(ctx):
    """Whether DeepGEMM compiles kernels for this model on these GPUs, and what that costs a start."""
    capabilities = (ctx.get("gpu") or {}).get("compute_capabilities") or []
    config = (ctx.get("model") or {}).get("config")
    if not capabilities or config is None:
        return None
    used, why = sglang_deepgemm.uses_deepgemm(capabilities[0], ctx["options"], {}, config)
    evidence = {"gpu.compute_capabilities": capabilities, "quantization": sglang_deepgemm.quantization_config(config)}
    if not used:  # said for a quantized model only, whose operators may expect DeepGEMM's compile (Kimi K2's FP8 had it)
        return found("%s; nothing to precompile." % why, "nothing to do", evidence) if evidence["quantization"] else None
    return found("%s. Its kernels compile once per SGLang release, GPU and shapes (SGLang's estimate: 10-20 "
                 "minutes) and stay in the service's cache (sglang_service_cache_dir/sglang-VERSION-ARCH/deep_gemm). "
                 "The deploy precompiles them (sglang_service_deepgemm_precompile auto) before a start whose "
                 "configuration has not been compiled on the host; SGLang's precompile runs a whole server on the "
                 "GPUs, so before a restart the running server is stopped first." % why,
                 "nothing to do; for a change that must not stop the server for the compile, deploy it in a "
                 "maintenance window, or set sglang_service_deepgemm_precompile never to let the start compile",
                 evidence)


# What the memory figures say before SGLang's own resolution could run (it needs SGLang on the host).
MEMORY_UNRESOLVED = ("not known before SGLang's own resolution, which needs SGLang on the host: the deploy runs it "
                     "once SGLang is installed, before the start")


def static_fraction(ctx):
    """(mem-fraction-static, where it comes from): the option, else SGLang's own resolution on this host (which sizes
    a multimodal model's with its vision tower's factor), to four decimals; (None, why) before SGLang could resolve it.
    """
    fraction_set = opt(ctx, "mem-fraction-static")
    if fraction_set is not None:
        return as_float(fraction_set, 0.0), "set"
    resolved = ctx.get("resolved") or {}
    if not resolved.get("mem_fraction_static"):
        return None, MEMORY_UNRESOLVED
    multimodal = (resolved.get("model") or {}).get("is_multimodal")
    return round(float(resolved["mem_fraction_static"]), 4), (
        "SGLang's own resolution on this host%s (its code, the GPU facts answering its device questions)"
        % (", a multimodal model to it: its vision tower's factor included" if multimodal else ""))


def check_model_too_large(ctx):
    model = ctx.get("model")
    if not model or not model.get("exists") or not model.get("size_bytes"):
        return None
    skipped = no_gpu_info(ctx, "model size vs GPU memory")
    if skipped:
        return skipped
    tp, pp, nnodes = parallel(ctx)
    mems = gpu_memories_mib(ctx)
    if not mems:
        return None
    used = min(tp * pp, len(mems) * max(nnodes, 1))
    fraction, source = static_fraction(ctx)
    size = model["size_bytes"]
    evidence = {"model.size_bytes": size, "gpus_used": used, "gpu.memory_total_mib": min(mems),
                "mem-fraction-static": fraction, "mem-fraction-static source": source}
    memory = used * min(mems) * (1 << 20)
    if fraction is None:  # before SGLang's resolution only the GPUs' whole memory is a bound
        if size <= memory:
            return None
        return found("model %s is %s, more than the %s of %d GPU(s) x %d MiB altogether: SGLang runs out of memory "
                     "while loading, whatever share of it SGLang takes (mem-fraction-static %s)."
                     % (model.get("path"), gib(size), gib(memory), used, min(mems), source),
                     "use more GPUs/nodes (pp-size, nnodes) or a quantised checkpoint", evidence)
    budget = memory * fraction
    where = "%d GPU(s) x %d MiB x mem-fraction-static %s (%s)" % (used, min(mems), fraction, source)
    if size > budget:
        return found("model %s is %s but the weights may use only %s (%s): SGLang runs out of memory while loading."
                     % (model.get("path"), gib(size), gib(budget), where),
                     "use more GPUs/nodes (pp-size, nnodes), a quantised checkpoint, or a higher mem-fraction-static",
                     evidence)
    if size > MODEL_TIGHT_RATIO * budget and not kv_cache_budget(ctx):  # K26-KV-CACHE counts it in tokens
        return found("model %s is %s of a %s budget (%s): little room is left for the KV cache; expect a short max "
                     "context or few concurrent requests." % (model.get("path"), gib(size), gib(budget), where),
                     "add GPUs or raise mem-fraction-static if the context or concurrency is too small",
                     evidence, WARNING)
    return None


def kv_dtype_bytes(ctx):
    return 1 if str(opt(ctx, "kv-cache-dtype", "") or "").lower().startswith("fp8") else 2


def draft_kv_layers(ctx):
    """(layers of the target's KV that the draft model adds to each token, where that figure comes from): 0 without
    speculative decoding; None when it is not known (the reason instead). SGLang's own resolution answers it
    (sglang_resolver._draft: the model runner's eagle_draft_num_layers, read from the draft's config)."""
    algorithm = opt(ctx, "speculative-algorithm")
    if not algorithm:
        return 0, None
    draft = (ctx.get("resolved") or {}).get("draft") or {}
    if draft.get("kv_layers") is not None:
        return int(draft["kv_layers"]), ("SGLang's own resolution on this host: %s's draft (%s) adds %d layer(s) of "
                                         "the target's KV to each token" % (
                                             draft.get("algorithm"), ", ".join(draft.get("architectures") or ()) or
                                             "its config", int(draft["kv_layers"])))
    if draft.get("sized_with_target_layers") is False:
        return 0, "%s: SGLang sizes its draft's cache apart from the target's cells (not counted here)" % algorithm
    return None, ("the draft model's KV cache and weights are not counted: SGLang's own resolution of them did not "
                  "run (%s)" % (draft.get("error") or "SGLang or the draft's config.json not on the host yet"))


def kv_cache_budget(ctx):
    """{"tokens", "context", ...}: the KV cache SGLang's static memory leaves per GPU once the weights are in, in
    tokens of an MLA model (its latent KV is kept whole on every TP rank; a pipeline stage holds its layers only;
    a speculative draft adds its layers to each token, as SGLang's DefaultPoolConfigurator does, and its weights),
    or None when the GPUs, the model's size or its MLA config are not known; "tokens" None (and why in "fraction
    source") before SGLang could resolve mem-fraction-static. Not modelled: attn-dp, DCP, uneven stages."""
    model = ctx.get("model") or {}
    kv = (model.get("config") or {}).get("kv") or {}
    per_token_all_layers = sglang_perf_facts.mla_kv_bytes_per_token(kv, kv_dtype_bytes(ctx))
    mems = gpu_memories_mib(ctx)
    if not per_token_all_layers or not mems or not model.get("size_bytes") or not model.get("exists"):
        return None
    tp, pp, _nnodes = parallel(ctx)
    fraction, source = static_fraction(ctx)
    if fraction is None:
        return {"tokens": None, "fraction": None, "fraction source": source}
    static = min(mems) * (1 << 20) * fraction
    draft_layers, draft_source = draft_kv_layers(ctx)
    draft_size = ((model.get("draft") or {}).get("size_bytes") or 0) if draft_layers else 0
    weights = model["size_bytes"] / float(tp * pp) + draft_size / float(tp)
    # SGLang adds the draft's layers at the target's per-layer size (pool_configurator.py assumes they match)
    per_token = (per_token_all_layers / float(pp) +
                 (draft_layers or 0) * per_token_all_layers / float(as_int(kv.get("num_hidden_layers"), 1) or 1))
    context = as_int(opt(ctx, "context-length"), None) or as_int(kv.get("max_position_embeddings"), None)
    budget = {"tokens": max(0, int((static - weights) / per_token)), "context": context, "fraction": fraction,
              "fraction source": source, "static per GPU": gib(static), "weights per GPU": gib(weights),
              "KV bytes per token per GPU": int(per_token)}
    if draft_source:
        budget.update({"draft KV layers per token": draft_layers, "draft source": draft_source,
                       "draft weights per GPU": gib(draft_size / float(tp)) if draft_size else None})
    return budget


def draft_note(budget):
    """What the figures say of a speculative draft model, or nothing without one."""
    if "draft source" not in budget:
        return ""
    if budget["draft KV layers per token"] is None:
        return "; %s" % budget["draft source"]
    return "; the draft's weights and %d layer(s) per token included: %s" % (
        budget["draft KV layers per token"], budget["draft source"])


def check_kv_cache(ctx):
    budget = kv_cache_budget(ctx)
    if not budget:
        return None
    if budget["tokens"] is None:
        return found("KV cache not sized yet: mem-fraction-static is %s." % budget["fraction source"],
                     NOTHING_TO_DO, dict(budget, **option_evidence(ctx, "tp-size", "pp-size")), INFO)
    tp, pp, _nnodes = parallel(ctx)
    evidence = dict(budget, **option_evidence(ctx, "mem-fraction-static", "context-length", "kv-cache-dtype",
                                              "tp-size", "pp-size"))
    head = ("KV cache for about %d tokens at tp-size %d, pp-size %d: mem-fraction-static %s (%s) leaves %s per "
            "GPU, the weights take %s of it, a token takes %d bytes per GPU (MLA: kv_lora_rank + qk_rope_head_dim per "
            "layer%s)"
            % (budget["tokens"], tp, pp, budget["fraction"], budget["fraction source"], budget["static per GPU"],
               budget["weights per GPU"], budget["KV bytes per token per GPU"], draft_note(budget)))
    context = budget["context"]
    if context and budget["tokens"] < context:
        return found(head + ": not one request of the context length %d fits; SGLang caps every request at the "
                     "KV cache's size (max_req_len = min(context length, KV tokens) - 1)." % context,
                     "set context-length to %d or less, raise mem-fraction-static (SGLang's published TP8 commands "
                     "on 8x RTX PRO 6000 use 0.90-0.94), or use more GPUs; kv-cache-dtype fp8 doubles the tokens, "
                     "but with the original Kimi checkpoint on SM120 it dropped stock SGLang's decode to 16 tok/s "
                     "(voipmonitor/rtx6kpro models/kimi-k25.md, which also reports about 101 on a patched SGLang: "
                     "measure it with k26deploy tune)" % budget["tokens"], evidence)
    return found(head + (": %d request(s) of the full context length %d fit." % (budget["tokens"] // context, context)
                         if context else "."), NOTHING_TO_DO, evidence, INFO)


def check_cache_disk(ctx):
    cache = ctx.get("cache")
    if not cache or cache.get("free_bytes") is None or not cache.get("min_free_bytes"):
        return None
    if cache["free_bytes"] >= cache["min_free_bytes"]:
        return None
    evidence = {"cache.path": cache.get("path"), "cache.free_bytes": cache["free_bytes"],
                "cache.min_free_bytes": cache["min_free_bytes"]}
    short = "only %s free for the caches at %s (at least %s wanted)" % (
        gib(cache["free_bytes"]), cache.get("path"), gib(cache["min_free_bytes"]))
    why = without_gpu(ctx)
    if why:
        # the minimum is sized for the GPU kernel caches, which a host without GPU never builds
        return found("%s: not an error on a host without GPU (%s)" % (short, why), NOTHING_TO_DO,
                     dict(evidence, without_gpu=why), INFO)
    return found("%s: Triton/inductor/FlashInfer caches then fail or get evicted and every restart recompiles for "
                 "30+ minutes instead of ~90 s." % short,
                 "free space or point the cache directory at a larger disk", evidence)


def check_driver_too_old(ctx):
    if gpus_present(ctx) == 0:
        return None
    gpu = ctx.get("gpu") or {}
    minimum = ctx.get("min_driver_version") or DEFAULT_MIN_DRIVER_VERSION
    problems = []
    driver = gpu.get("driver_version")
    if driver and version_tuple(driver) and version_tuple(driver) < version_tuple(minimum):
        problems.append("driver %s is older than %s" % (driver, minimum))
    cuda = gpu.get("cuda_driver_version")
    if cuda and version_tuple(cuda) and version_tuple(cuda) < version_tuple(MIN_CUDA_DRIVER_API):
        problems.append("the driver supports CUDA %s only" % cuda)
    if not problems:
        return None
    return found("%s: SGLang 0.5.20+ needs CUDA 13 (driver >= %s); CUDA initialisation fails at start."
                 % ("; ".join(problems), minimum), "install the 580 branch (role nvidia_cuda) and reboot",
                 dict(gpu_evidence(ctx, "driver_version", "cuda_driver_version"), min_driver_version=minimum))


def check_gpu_health(ctx):
    """A GPU that needs a reset or a reboot, or has an uncorrectable error since the driver loaded, fails a deploy
    before anything changes; a slowdown or an application-level Xid warns (nvidia_health)."""
    gpus = (ctx.get("gpu") or {}).get("gpus") or []
    sick, evidence, worst = [], {}, None
    for gpu in gpus:
        health = gpu.get("health") or {}
        problems = health.get("problems") or []
        if not problems:
            continue
        name = "GPU %s (%s)" % (gpu.get("index"), gpu.get("pci_bus_id"))
        sick.append("%s: %s" % (name, "; ".join(what for dummy, what in problems)))
        evidence[name] = [what for dummy, what in problems]
        verdict = health.get("verdict")
        worst = verdict if worst is None or (verdict == ERROR and worst != ERROR) else worst
    if not sick:
        return None
    severity = ERROR if worst == ERROR else WARNING if worst == WARNING else INFO
    return found("%s." % " | ".join(sick),
                 "reset the GPU (nvidia-smi -r, with nothing running on it) or reboot as the event says, and look at "
                 "NVIDIA's Xid catalog for the Xid's investigatory action; a GPU that keeps failing needs service",
                 evidence, severity)


def check_open_kernel_module(ctx):
    if gpus_present(ctx) == 0:
        return None
    gpu = ctx.get("gpu") or {}
    if gpu.get("kernel_module") != "proprietary":
        return None
    evidence = gpu_evidence(ctx, "kernel_module", "compute_capabilities")
    blackwell = [cc for cc in gpu.get("compute_capabilities") or [] if (cc_tuple(cc) or (0, 0))[0] >= 10]
    if blackwell:
        return found("proprietary kernel module on Blackwell (compute capability %s): Blackwell requires the open "
                     "kernel modules." % ", ".join(blackwell), "install nvidia-open (580 branch) and reboot", evidence)
    return found("proprietary kernel module loaded: NVIDIA recommends the open kernel modules for Hopper.",
                 "install nvidia-open at the next driver change", evidence, WARNING)


def check_fabric_manager(ctx):
    gpu = ctx.get("gpu") or {}
    if not gpu.get("nvswitch_present"):
        return None
    fm = gpu.get("fabric_manager") or {}
    evidence = dict(gpu_evidence(ctx, "nvswitch_count", "driver_version"),
                    **{"fabric_manager.installed": fm.get("installed"), "fabric_manager.active": fm.get("active")})
    if not fm.get("installed"):
        return found("NVSwitch system (%d switch(es)) without Fabric Manager: CUDA initialisation fails with error "
                     "802." % (gpu.get("nvswitch_count") or 0),
                     "install nvidia-fabricmanager-<driver version> matching driver %s exactly and start it"
                     % gpu.get("driver_version"), evidence)
    if fm.get("active") is False:
        return found("Fabric Manager is installed but nvidia-fabricmanager is not active on this NVSwitch system: "
                     "CUDA initialisation fails with error 802.", "systemctl enable --now nvidia-fabricmanager",
                     evidence)
    if fm.get("active") is None:
        return found("NVSwitch system: Fabric Manager is installed but its state is unknown (systemd not running).",
                     "make sure nv-fabricmanager runs, or CUDA initialisation fails with error 802", evidence, WARNING)
    return None


def check_removed_options(ctx):
    removed = [key for key in sorted(ctx["options"]) if key in REMOVED_OPTIONS]
    if not removed:
        return None
    return found("option(s) removed from SGLang in 0.5.20: %s. argparse rejects them and the service would not "
                 "start." % ", ".join(removed),
                 "rename them: %s" % "; ".join("%s -> %s" % (key, REMOVED_OPTIONS[key]) for key in removed),
                 option_evidence(ctx, *removed))


def check_deprecated_options(ctx):
    deprecated = [key for key in sorted(ctx["options"]) if key in DEPRECATED_OPTIONS and as_bool(ctx["options"][key])]
    if not deprecated:
        return None
    return found("deprecated option(s) %s: SGLang 0.5.23 refuses them in a --config file ('Unsupported config "
                 "option ... DeprecatedStoreTrueAction')." % ", ".join(deprecated),
                 "use instead: %s" % "; ".join("%s -> %s" % (key, DEPRECATED_OPTIONS[key]) for key in deprecated),
                 option_evidence(ctx, *deprecated))


def env_bool(ctx, name):
    """An SGLang boolean environment variable of the service (sglang_service_environment), as SGLang's EnvBool reads
    it: true, 1, yes, y (any case)."""
    return str((ctx.get("environment") or {}).get(name, "")).lower() in ("true", "1", "yes", "y")


def check_speculative_pp(ctx):
    """SGLang 0.5.23 (arg_groups/validation_hook.py, check_pipeline_parallel_compat) asserts, when it resolves its
    options at start, before any weight is read: with pp-size > 1 only EAGLE (NEXTN is its alias), not multi-layer,
    and that only with SGLANG_ENABLE_PP_SPEC (else on prefill nodes of a disaggregated deployment) and then without
    attention DP."""
    algorithm = str(opt(ctx, "speculative-algorithm") or "").upper()
    _tp, pp, _nnodes = parallel(ctx)
    if not algorithm or pp <= 1:
        return None
    evidence = dict(option_evidence(ctx, "speculative-algorithm", "pp-size", "enable-multi-layer-eagle",
                                    "attn-dp-size"), SGLANG_ENABLE_PP_SPEC=env_bool(ctx, "SGLANG_ENABLE_PP_SPEC"))
    source = "SGLang 0.5.23 refuses it when it resolves its options at start (validation_hook.py)"
    drop = "serve speculative decoding with pp-size 1 (tensor parallel across the node), or drop it"
    if algorithm not in ("EAGLE", "NEXTN") or as_bool(opt(ctx, "enable-multi-layer-eagle")):
        return found("speculative-algorithm %s with pp-size %d: pipeline parallelism takes only EAGLE (not "
                     "multi-layer) speculative decoding; %s." % (algorithm, pp, source), drop, evidence)
    if not env_bool(ctx, "SGLANG_ENABLE_PP_SPEC"):
        return found("EAGLE with pp-size %d: outside a disaggregated prefill node SGLang takes it only with "
                     "SGLANG_ENABLE_PP_SPEC set; %s." % (pp, source),
                     drop + "; or set SGLANG_ENABLE_PP_SPEC: \"1\" in sglang_service_environment (SGLang's own "
                     "gate for it)", evidence)
    if as_int(opt(ctx, "attn-dp-size"), 1) > 1:
        return found("EAGLE with pp-size %d and attn-dp-size %s: SGLANG_ENABLE_PP_SPEC does not take attention DP; "
                     "%s." % (pp, opt(ctx, "attn-dp-size"), source), "drop attn-dp-size or speculative decoding",
                     evidence)
    return found("EAGLE with pp-size %d under SGLANG_ENABLE_PP_SPEC: SGLang's gated path for speculative decoding "
                 "with pipeline parallelism, which no published K2.6 measurement used." % pp,
                 "measure it against pp-size 1 with k26deploy tune --candidates", evidence, WARNING)


def check_public_without_tls(ctx):
    host = opt(ctx, "host", "127.0.0.1")
    if is_loopback_host(host) or opt(ctx, "ssl-certfile"):
        return None
    return found("host %s is reachable from other machines over plain HTTP: the API key, every prompt and every "
                 "answer cross the network in clear." % host,
                 "serve HTTPS (sglang_service_tls_cert and sglang_service_tls_key), or bind to 127.0.0.1 behind a "
                 "TLS proxy", dict(option_evidence(ctx, "ssl-certfile"), host=host))


def check_metrics_open(ctx):
    host = opt(ctx, "host", "127.0.0.1")
    if is_loopback_host(host) or not opt(ctx, "enable-metrics"):
        return None
    return found("host %s with enable-metrics: SGLang serves /metrics without the API key, so whoever reaches port "
                 "%s reads the server's load, queue and token counts." % (host, opt(ctx, "port", 30000)),
                 "bind to 127.0.0.1 behind the router or a proxy, filter the port at the host's firewall, or drop "
                 "enable-metrics; if the exposure is meant, set k26_preflight_severity_overrides K26-METRICS-OPEN: info",
                 dict(option_evidence(ctx, "enable-metrics"), host=host))


def check_python(ctx):
    python = ctx.get("python")
    if not python:
        return None
    evidence = {"interpreter": python.get("interpreter"), "version": python.get("version"),
                "requires": python.get("requires"), "requires_source": python.get("requires_source")}
    fix = ("install Python %s or newer and point %s at it%s"
           % (python.get("minimum"), python.get("variable") or "the interpreter variable",
              " (%s)" % python["hint"] if python.get("hint") else ""))
    if python.get("version") is None:
        if python.get("installable"):
            return found("%s is not installed yet; the sglang role installs it (package %s)."
                         % (python.get("interpreter"), python.get("package")), NOTHING_TO_DO, evidence, INFO)
        return found("%s not found on the host: the sglang role cannot build SGLang's virtualenv."
                     % python.get("interpreter"), fix, evidence)
    if version_tuple(python["version"]) >= version_tuple(python.get("minimum")):
        return None
    return found("%s is Python %s but SGLang needs %s: pip refuses to install it, after the driver install and "
                 "its reboot." % (python.get("interpreter"), python["version"], python.get("requires")), fix, evidence)


def check_layout(ctx):
    """Which layout serves, and why (the inventory's sizes, or the interconnect's choice)."""
    layout = ctx.get("layout")
    if not layout:
        return None
    evidence = {"layout.%s" % key: layout.get(key) for key in ("source", "interconnect")}
    if layout.get("evidence"):
        evidence["layout.evidence"] = layout["evidence"]
    return found("tp-size %s, pp-size %s: %s" % (layout.get("tp_size"), layout.get("pp_size"), layout.get("reason")),
                 NOTHING_TO_DO, evidence, INFO)


def check_layout_topology(ctx):
    """A layout set in the inventory that fights the interconnect (a chosen one never does)."""
    layout = ctx.get("layout") or {}
    if layout.get("source") in (sglang_layout.SOURCE_TOPOLOGY, sglang_layout.SOURCE_DEFAULT):
        return None
    tp, pp, nnodes = parallel(ctx)
    if (tp * pp) % nnodes:
        return None  # K26-NNODES-DIVISOR says what is wrong
    topology = (ctx.get("gpu") or {}).get("topology")
    verdict = sglang_layout.mismatch(topology, tp * pp // nnodes, tp, pp, nnodes)
    if not verdict:
        return None
    message, fix, evidence, severity = verdict
    return found(message, fix, evidence, INFO if severity == INFO else None)


def check_tuned(ctx):
    """What k26deploy tune measured for this configuration against its winner (sglang_tune_evidence)."""
    said = sglang_tune_evidence.verdict(ctx.get("tune"), ctx["options"])
    if said is None:
        return None
    slower, message, fix, evidence = said
    return found(message, fix, evidence, None if slower else INFO)


RULES = (
    Rule("K26-CUDA-GRAPH-OFF", WARNING, "CUDA graphs disabled (explicitly or implicitly)", check_cuda_graph_off),
    Rule("K26-CUDA-GRAPH-PARTIAL", WARNING, "CUDA graphs off for part of the decode batches", check_cuda_graph_partial),
    Rule("K26-SPEED-DEFAULT-OFF", WARNING, "an SGLang default that exists for speed turned off", check_speed_defaults_off),
    Rule("K26-PP-ASYNC-DEPTH", INFO, "what pp-async-batch-depth does with pipeline parallelism",
         check_pp_async_depth),
    Rule("K26-LAYOUT", INFO, "tensor and pipeline parallel sizes, and why", check_layout),
    Rule("K26-TUNED", WARNING, "this configuration measured slower than another by k26deploy tune", check_tuned),
    Rule("K26-LAYOUT-TOPOLOGY", WARNING, "tp-size or pp-size fights the GPUs' interconnect", check_layout_topology),
    Rule("K26-NNODES-DIVISOR", ERROR, "(tp-size x pp-size) not divisible by nnodes", check_nnodes_divisor),
    Rule("K26-NO-GPU", ERROR, "no usable GPU on a GPU host", check_no_gpu),
    Rule("K26-GPU-COUNT", ERROR, "tp-size x pp-size does not match the GPUs present", check_gpu_count),
    Rule("K26-GPU-EXPECTED", ERROR, "GPU count differs from the expected one", check_expected_gpus),
    Rule("K26-ATTN-ARCH", ERROR, "attention backend does not run on this GPU architecture", check_attention_arch),
    Rule("K26-GPU-ARCH-UNSUPPORTED", ERROR, "GPU too old for CUDA 13", check_gpu_arch_supported),
    Rule("K26-MODEL-MISSING", ERROR, "model directory missing or incomplete", check_model_missing),
    Rule("K26-MODEL-TOO-LARGE", ERROR, "model larger than the GPU memory budget", check_model_too_large),
    Rule("K26-KV-CACHE", WARNING, "KV cache budget in tokens, against the context length", check_kv_cache),
    Rule("K26-DEEPGEMM", INFO, "DeepGEMM's kernels for this model on these GPUs", check_deepgemm),
    Rule("K26-CACHE-DISK", ERROR, "too little disk for the caches", check_cache_disk),
    Rule("K26-GPU-HEALTH", ERROR, "a GPU is not healthy (Xid events, ECC, row remapping, reset required)",
         check_gpu_health),
    Rule("K26-DRIVER-TOO-OLD", ERROR, "NVIDIA driver too old for CUDA 13", check_driver_too_old),
    Rule("K26-OPEN-KERNEL-MODULE", ERROR, "proprietary kernel module where the open one is required",
         check_open_kernel_module),
    Rule("K26-FABRIC-MANAGER", ERROR, "Fabric Manager missing on an NVSwitch system", check_fabric_manager),
    Rule("K26-REMOVED-OPTION", ERROR, "option removed from SGLang", check_removed_options),
    Rule("K26-DEPRECATED-OPTION", ERROR, "deprecated option refused in the config file", check_deprecated_options),
    Rule("K26-SPEC-PP", ERROR, "speculative decoding with pipeline parallelism", check_speculative_pp),
    Rule("K26-PYTHON-VERSION", ERROR, "interpreter too old for SGLang", check_python),
    Rule("K26-PUBLIC-WITHOUT-TLS", WARNING, "endpoint reachable from other machines without TLS",
         check_public_without_tls),
    Rule("K26-METRICS-OPEN", WARNING, "/metrics reachable from other machines without a key", check_metrics_open),
)
RULE_IDS = tuple(rule.id for rule in RULES)
# The rules that reason from the figures SGLang itself resolves for these GPUs (mem-fraction-static, the largest
# decode graph, the KV cache's inputs): the deploy evaluates them again once SGLang is on the host.
RULE_GROUPS = {"memory": ("K26-MODEL-TOO-LARGE", "K26-KV-CACHE", "K26-CUDA-GRAPH-PARTIAL")}


def select_rules(names):
    """(the rules named, in RULES' order; the names that are neither a rule id nor a group of RULE_GROUPS).
    ``names`` None: every rule."""
    if names is None:
        return RULES, []
    wanted = set()
    unknown = []
    for name in names:
        if name in RULE_GROUPS:
            wanted.update(RULE_GROUPS[name])
        elif name in RULE_IDS:
            wanted.add(name)
        else:
            unknown.append(name)
    return tuple(rule for rule in RULES if rule.id in wanted), sorted(unknown)


def build_context(options, gpu=None, simulator=False, expected_gpus=None, model=None, cache=None,
                  min_driver_version=DEFAULT_MIN_DRIVER_VERSION, mla=True, python=None, layout=None, tune=None,
                  environment=None, resolution=None):
    """``python``: {"interpreter", "version" (None: not found), "minimum", "requires", "requires_source",
    "variable", "installable", "package", "hint"} or None (not checked). ``layout``: the sglang_service role's
    sglang_service_layout (sglang_layout.choose) or None (the sizes count as set by hand). ``tune``: the last tune
    report for this host or None. ``environment``: the service's SGLANG_* environment variables (names to values).
    ``resolution``: what SGLang's own resolution gave on this host (the sglang_resolve module's result) or None."""
    return {
        "environment": dict(environment or {}),
        "resolved": ((resolution or {}).get("resolved") or {}) if (resolution or {}).get("ok") else {},
        "layout": layout,
        "tune": tune,
        "options": option_keys(options),
        "gpu": gpu,
        "simulator": bool(simulator),
        "expected_gpus": expected_gpus,
        "model": model,
        "cache": cache,
        "min_driver_version": min_driver_version or DEFAULT_MIN_DRIVER_VERSION,
        "mla": mla,
        "python": python,
    }


def finding(rule_id, severity, title, verdict):
    """The data every finding is: id, severity, title, message, fix and evidence."""
    return {"id": rule_id, "severity": severity, "title": title, "message": verdict.message, "fix": verdict.fix,
            "evidence": verdict.evidence}


def evaluate(ctx, rules=RULES, severity_overrides=None):
    """Run the rules; return their findings in rule order.

    ``severity_overrides`` maps a rule id to error|warning|info|off; it applies to the error and warning
    findings of that rule (info findings stay info) and 'off' drops the rule.
    """
    overrides = severity_overrides or {}
    findings = []
    for rule in rules:
        override = overrides.get(rule.id)
        if override == SEVERITY_OFF:
            continue
        verdict = rule.check(ctx)
        if not verdict:
            continue
        severity = verdict.severity or rule.severity
        if override in SEVERITIES and severity != INFO:
            severity = override
        findings.append(finding(rule.id, severity, rule.title, verdict))
    return findings


# ---------------------------------------------------------------- findings from outside the rules

UNKNOWN_VARIABLE = "K26-UNKNOWN-VARIABLE"
SGLANG_REFUSES = "K26-SGLANG-REFUSES"
SGLANG_ABBREVIATION = "K26-SGLANG-ABBREVIATION"
SGLANG_RESOLUTION = "K26-SGLANG-RESOLUTION"
#: prefixes of the variables our roles and plays read; a variable with one of them that none of them knows is a typo
VARIABLE_PREFIXES = ("sglang_", "nvidia_cuda_", "k26_")


def unknown_variable_findings(names, known):
    """A warning per variable that carries one of our prefixes but that no role or play knows."""
    known = sorted(set(known))
    findings = []
    for name in sorted(set(names)):
        if not name.startswith(VARIABLE_PREFIXES) or name.startswith("__") or name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        fix = ("did you mean %s?" % close[0]) if close else \
            "remove it, or check its name against the roles' defaults/main.yml and playbooks/vars/play_variables.yml"
        findings.append(finding(UNKNOWN_VARIABLE, WARNING, "variable no role or play knows", found(
            "%s is set but no role or play of k26deploy reads it: it has no effect." % name, fix,
            {"variable": name, "closest": close[0] if close else None})))
    return findings


def args_check_findings(result):
    """SGLang's own verdict on the options (sglang_args_check's result) as findings."""
    findings = []
    evidence = {"stage": result.get("stage"), "sglang_version": result.get("sglang_version")}
    if result.get("ok") is False:
        findings.append(finding(SGLANG_REFUSES, ERROR, "SGLang's own parser refuses the options", found(
            "SGLang refuses the options (%s): %s" % (result.get("stage") or "parse", result.get("error")),
            "fix or remove the option it names; the service would not start with it", evidence)))
    for flag in result.get("abbreviated") or []:
        findings.append(finding(SGLANG_ABBREVIATION, WARNING, "option accepted only as an abbreviation", found(
            "%s is not an SGLang option; argparse accepted it as the abbreviation of a longer flag, which the next "
            "SGLang release may make ambiguous." % flag, "spell the option out", dict(evidence, option=flag))))
    return findings


def resolution_findings(result):
    """SGLang refusing the options while it resolves them (the sglang_resolve module's result) as a finding: what it
    asserts at start, after the parser took the options and before any weight is read."""
    if not result or result.get("ok") is not False:
        return []
    return [finding(SGLANG_RESOLUTION, ERROR, "SGLang's own resolution refuses the options", found(
        "SGLang refuses the options when it resolves them (what it runs at start, before loading): %s"
        % result.get("error"), "change what SGLang names; the service would not start with it",
        {"error": result.get("error")}))]


def strict(findings):
    """--strict: every warning is an error."""
    return [dict(f, severity=ERROR) if f["severity"] == WARNING else f for f in findings]


SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}


def by_severity(findings):
    """Errors first, then warnings, then notes; rule order within each."""
    return sorted(findings, key=lambda f: SEVERITY_ORDER.get(f["severity"], 3))


def count(findings, severity):
    return sum(1 for item in findings if item["severity"] == severity)


def format_finding(item):
    """One line: SEVERITY ID: message Fix: fix. The one way a finding is printed: the modules' lines and the
    k26deploy command's summary (a finding read back from a result may lack a key: "?" for its severity)."""
    fix = str(item.get("fix") or "").rstrip(".")
    shown = "" if not fix or fix == NOTHING_TO_DO else " Fix: %s%s" % (fix, "" if fix.endswith("?") else ".")
    return "%-7s %s: %s%s" % (str(item.get("severity", "?")).upper(), item.get("id"), item.get("message"), shown)


# ---------------------------------------------------------------- findings across the nodes of an instance

INSTANCE_MISMATCH = "K26-INSTANCE-MISMATCH"
#: what every node of a multi-node instance must share: (key of a node's facts, what it is, how to align it)
INSTANCE_SAME = (
    ("sglang_version", "SGLang version", "pin one sglang_version for the whole instance (group_vars of its group)"),
    ("driver_version", "NVIDIA driver", "install one driver on every node (nvidia_cuda_driver_branch in the "
                                        "instance's group_vars) and reboot where the kernel module changed"),
    ("model_files", "model files (names and sizes)", "copy the same checkpoint to sglang_service_model_path on "
                                                     "every node (a partial download differs in size or files)"),
)


def instance_findings(group, nodes):
    """An error per fact that differs between the nodes of instance ``group``. ``nodes``: dicts host, node_rank
    and the keys of INSTANCE_SAME (None where unknown, for example no driver yet: not compared)."""
    findings = []
    for key, what, fix in INSTANCE_SAME:
        seen = dict((node["host"], node.get(key)) for node in nodes if node.get(key) not in (None, ""))
        if len(set(str(value) for value in seen.values())) <= 1:
            continue
        shown = ", ".join("%s: %s" % (host, value) for host, value in sorted(seen.items()))
        findings.append(finding(INSTANCE_MISMATCH, ERROR, "nodes of one instance differ", found(
            "the nodes of instance %s must have the same %s to serve one model together, but they differ (%s)."
            % (group, what, shown), fix, {"instance": group, "fact": key, "values": seen})))
    return findings


def with_findings(result, extra):
    """A preflight result (sglang_preflight's) with ``extra`` findings added: strict applied, order, lines and
    counts as the module makes them."""
    findings = list(result.get("findings") or []) + list(extra)
    if result.get("strict"):
        findings = strict(findings)
    findings = by_severity(findings)
    return dict(result, findings=findings, lines=[format_finding(f) for f in findings],
                error_count=count(findings, ERROR), warning_count=count(findings, WARNING),
                info_count=count(findings, INFO))
