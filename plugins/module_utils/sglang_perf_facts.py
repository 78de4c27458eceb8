# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The performance facts the rules, the layout choice and the simulator rely on, each with its source.

Two kinds of facts:

- ``SGLANG_FACTS``: what SGLang 0.5.23 does, each naming the file (inside the ``sglang`` package) and the function
  that does it, and the expressions that must be there for the fact to hold. tests/unit/test_sglang_perf_facts.py
  reads the installed SGLang source and fails when one of them no longer holds (the way the option table is held
  to SGLang's parser).
- ``MEASUREMENTS``: published decode throughputs of Kimi K2.x on 8 GPUs (hardware, engine, layout, figures,
  source). The layout choice (sglang_layout) cites them by id, and the simulator's performance model is held to
  each row in tests/unit/test_simulator_performance.py.

The figures SGLang computes for a configuration (its ``mem-fraction-static`` estimate, chunked prefill, the largest
decode CUDA graph) are not copied here: SGLang's own resolution gives them (sglang_resolver); the facts above say
what that code does, for the findings' reasons. One small computation follows SGLang's code: the KV cache bytes per
token of an MLA model (``mla_kv_bytes_per_token``).
"""

from __future__ import annotations

import math
from collections import namedtuple

# file, function (a method as Class.method is looked up by its name alone), expressions that must appear in the
# function's source (compared after ast.unparse, so spacing does not matter), and what they mean.
SglangFact = namedtuple("SglangFact", "id file function expressions claim")

SGLANG_FACTS = (
    SglangFact(
        "pp-loop-size", "srt/managers/scheduler_pp_mixin.py", "init_pp_loop_state",
        ("get_parallel().pp_size + get_parallel().pp_async_batch_depth",),
        "The pipeline scheduler keeps pp_loop_size = pp_size + pp_async_batch_depth micro-batch slots: with depth 0 "
        "one micro-batch per stage is in flight when there are enough requests; the depth adds slots beyond that."),
    SglangFact(
        "pp-async-depth-purpose", "srt/managers/scheduler_pp_mixin.py", "event_loop_pp",
        ("async batch depth to buffer the outputs in the last stage",
         "overlapping the GPU computation and CPU processing"),
        "The depth buffers the last stage's outputs so that their CPU processing overlaps GPU work "
        "(event_loop_pp's docstring): slack for output processing, not the micro-batches that fill the stages."),
    SglangFact(
        "pp-no-overlap-schedule", "srt/arg_groups/overrides.py", "_pipeline_parallel_overlap_disable",
        ("view.pp_size > 1", "{'disable_overlap_schedule': True}"),
        "pp-size > 1 turns the overlap scheduler off: the CPU work of a step no longer hides behind the GPU's."),
    SglangFact(
        "pp-prefill-graph-off", "srt/arg_groups/cuda_graph_hook.py", "apply_cuda_graph_compatibility",
        ("cfg.pp_size > 1 and cfg.cuda_graph_config.prefill.backend == Backend.BREAKABLE",),
        "With pp-size > 1 the prefill CUDA graph is off unless cuda-graph-backend-prefill is set to breakable."),
    SglangFact(
        "mem-fraction-static", "srt/arg_groups/memory_hook.py", "handle_gpu_memory_settings",
        ("cfg.mem_fraction_static is None", "reserved_mem = 512", "activation_tokens * 1.5",
         "max(cfg.chunked_prefill_size, 2048)", "cfg.tp_size * cfg.pp_size / 8 * 1024",
         "reserve_for_graph_mb(server_args)", "max(reserved_mem, 10 * 1024)", "gpu_mem > 60 * 1024",
         "round((gpu_mem - reserved_mem) / gpu_mem, 3)"),
        "Without mem-fraction-static SGLang sets it to (gpu_mem - reserved) / gpu_mem, reserved (MiB) = 512 + "
        "1.5 x max(chunked-prefill-size, 2048) + tp x pp / 8 x 1024 + the CUDA graphs' reserve, at least 10 GiB on "
        "GPUs above 60 GiB (SGLang's own resolution gives the figure: sglang_resolver)."),
    SglangFact(
        "vlm-mem-fraction", "srt/arg_groups/memory_hook.py", "handle_gpu_memory_settings",
        ("model_config.is_multimodal", "not cfg.language_only", "not cfg.language_model_only",
         "cfg.disaggregation_mode != 'decode'", "adjust_mem_fraction_for_vlm(mem_fraction_static, model_config, "
         "post_capture_kv_sizing, gpu_mem)"),
        "A multimodal model (Kimi K2.6's KimiK25ForConditionalGeneration is one) gets its estimate multiplied by "
        "the vision tower's factor, unless served language-only or as a decode server."),
    SglangFact(
        "vlm-factor", "srt/arg_groups/memory_hook.py", "adjust_mem_fraction_for_vlm",
        ("base_mem_fraction_reduction_ratio = 0.95", "baseline_vit_layers = 24", "baseline_vit_hidden_size = 1024",
         "current_complexity_score = vit_num_layers * vit_hidden_size ** 2", "sensitivity_scale = 0.1",
         "max(0.8, min(1.05, dynamic_adjustment_factor))",
         "mem_fraction_static * final_overall_factor"),
        "The vision tower's factor: 0.95 x (1 - 0.1 x (layers x hidden^2 / (24 x 1024^2) - 1)), the second term "
        "kept within 0.8-1.05, applied to the rounded estimate (about 0.910 for Kimi K2.6's 27 x 1152 tower)."),
    SglangFact(
        "graph-reserve", "srt/arg_groups/memory_hook.py", "reserve_for_graph_mb",
        ("decode_cuda_graph_config.max_bs * 2", "1.5 * 1024"),
        "The CUDA graphs' reserve: 2 MiB per decode graph batch size up to max_bs, and 1.5 GiB for an MLA model's "
        "prefill graph when it is on."),
    SglangFact(
        "gpu-memory-tiers", "srt/arg_groups/memory_hook.py", "handle_gpu_memory_settings",
        ("gpu_mem < 20 * 1024", "gpu_mem < 35 * 1024", "gpu_mem < 60 * 1024", "gpu_mem < 90 * 1024",
         "gpu_mem < 160 * 1024", "chunked_prefill_size=8192", "chunked_prefill_size=16384",
         "decode_cuda_graph_config.max_bs = 512"),
        "chunked-prefill-size and the largest decode CUDA graph follow the GPU's memory (SGLang's own resolution "
        "gives them: sglang_resolver)."),
    SglangFact(
        "max-request-length", "srt/managers/tp_worker.py", "TpModelWorker.alloc_memory_pool",
        ("min(self.model_config.context_len - 1, self.model_runner.effective_logical_max_total_num_tokens - 1)",),
        "A request may hold at most min(context length, KV cache tokens) - 1 tokens: a KV cache smaller than the "
        "context length caps every request at its size."),
    SglangFact(
        "mla-kv-per-token", "srt/mem_cache/memory_pool.py", "MLATokenToKVPool.__init__",
        ("kv_lora_rank + qk_rope_head_dim",),
        "An MLA model's KV cache holds kv_lora_rank + qk_rope_head_dim values per token and layer "
        "(mla_kv_bytes_per_token below)."),
    SglangFact(
        "draft-kv-cell", "srt/model_executor/pool_configurator.py", "DefaultPoolConfigurator.__init__",
        ("kvc.spec_algorithm.is_eagle() or kvc.spec_algorithm.is_standalone()",
         "kvc.spec_aux_config.eagle_draft_num_layers", "self._cell_size * draft_num_layers / int(num_layers)"),
        "With EAGLE, EAGLE3 or STANDALONE speculative decoding each token's KV cell grows by the draft's layers at the "
        "target's per-layer size; the draft's layer count is the model runner's eagle_draft_num_layers, which "
        "sglang_resolver asks SGLang for (K26-KV-CACHE)."),
)


def mla_kv_bytes_per_token(config, dtype_bytes=2):
    """KV cache bytes one token takes in all layers of an MLA model (MLATokenToKVPool: kv_lora_rank +
    qk_rope_head_dim values per layer), from the model's config.json; None when the config is not MLA."""
    try:
        per_layer = int(config["kv_lora_rank"]) + int(config["qk_rope_head_dim"])
        layers = int(config["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        return None
    return per_layer * layers * dtype_bytes


# What preflight keeps of a model's config.json for the KV cache (its text model's part).
KV_CONFIG_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "num_hidden_layers", "max_position_embeddings")


def kv_config(config):
    """The fields of a config.json mla_kv_bytes_per_token and the context length read, or {}."""
    text = text_config(config)
    return dict((key, text[key]) for key in KV_CONFIG_KEYS if key in text)


def text_config(config):
    """The language model's part of a config.json (Kimi K2.6 nests it under text_config)."""
    config = config or {}
    return config.get("text_config") if isinstance(config.get("text_config"), dict) else config


# ---------------------------------------------------------------- published measurements

Measurement = namedtuple("Measurement", "id engine model hardware interconnect tp pp graphs depth tokens_per_s "
                                        "source note")

RTX_PRO_6000_X8 = "8x RTX PRO 6000 Blackwell (96 GB, SM120)"

MEASUREMENTS = (
    Measurement("seed-pp8-graphs-off", "SGLang", "Kimi K2.6", RTX_PRO_6000_X8, "pcie", 1, 8, False, 0,
                {1: 24.7, 8: 95.6},
                "the seed deployment's benchmark (docs/performance.md, the seed's story)",
                "--disable-cuda-graph left from an earlier bring-up, pp-async-batch-depth 0"),
    Measurement("seed-pp8-graphs-on", "SGLang", "Kimi K2.6", RTX_PRO_6000_X8, "pcie", 1, 8, True, 8,
                {1: 35.6, 16: 156.4, 32: 248.0},
                "the seed deployment's benchmark (docs/performance.md, the seed's story)",
                "graphs back on and pp-async-batch-depth 8 in one change; at C=1 only the graphs can matter"),
    Measurement("sglang-k25-tp8", "SGLang", "Kimi K2.5", RTX_PRO_6000_X8, "pcie", 8, 1, True, 0,
                {1: 81.5},
                "voipmonitor/rtx6kpro models/kimi-k25.md (Launch Commands -- SGLang, BF16 KV cache)",
                "published as 73-90 tok/s (the middle kept); with settings of its own that this package does not "
                "set: NCCL_P2P_LEVEL, the flashinfer attention backend, mem-fraction-static 0.94, "
                "cuda-graph-max-bs 16"),
    Measurement("sglang-k25-tp8-ep8-custom-ar", "SGLang", "Kimi K2.5", RTX_PRO_6000_X8 + ", PCIe switches",
                "pcie-custom-allreduce", 8, 1, True, 0,
                {1: 101.0},
                "voipmonitor/rtx6kpro models/kimi-k25.md (INT4 with EP and custom allreduce)",
                "a patched SGLang (custom all-reduce), overclocked memory; not a stock configuration"),
    Measurement("vllm-k26-tp8", "vLLM", "Kimi K2.6", RTX_PRO_6000_X8, "pcie", 8, 1, True, 0,
                {1: 88.5, 8: 340.7, 16: 475.2},
                "voipmonitor/rtx6kpro models/kimi-k26.md (DCP=1, No MTP, context 0)",
                "another engine (PCIe custom all-reduce, NCCL graph file): the same hardware's TP8 reach"),
)

# The rows a layout choice on 8 PCIe-only GPUs stands on (stock SGLang and the same hardware class).
PCIE8_LAYOUT_EVIDENCE = ("seed-pp8-graphs-on", "sglang-k25-tp8", "vllm-k26-tp8")
# An 8x H200 (NVLink) reference: SGLang's cookbook serves Kimi K2.x with --tp 8. Its figures are its own: Kimi K2.5
# on SGLang 0.5.6.post2 (sgl-cookbook docs/autoregressive/Moonshotai/Kimi-K2.5.md, 5.2 Speed Benchmark), the stock
# command (--tp 8, no other tuning), bench_serving random 1000 in / 1000 out: output 106.10 tok/s at concurrency 1,
# 258.18 at 16.
NVLINK_LAYOUT_SOURCE = ("SGLang cookbook, Kimi K2.5 on SGLang 0.5.6.post2: --tp 8 on 8x H200, stock options "
                        "(bench_serving random 1K/1K: 106 tok/s at C=1, 258 at C=16)")


def measurement(row_id):
    return next(row for row in MEASUREMENTS if row.id == row_id)


def evidence_line(row):
    figures = ", ".join("C=%d %.1f" % (c, v) for c, v in sorted(row.tokens_per_s.items()))
    layout = " ".join(part for part in ("TP%d" % row.tp if row.tp > 1 else "", "PP%d" % row.pp if row.pp > 1 else "")
                      if part)
    # the note says under which settings the figures were measured: they hold for those, not for ours
    return "%s %s %s on %s: %s tok/s (%s; %s)" % (row.engine, row.model, layout, row.hardware, figures, row.source,
                                                  row.note)


def best_at_one(rows):
    """The row with the highest C=1 throughput."""
    return max(rows, key=lambda row: row.tokens_per_s.get(1, -math.inf))
