"""k26_preflight_rules: one case per rule that fires and one that does not, as data; plus the module end to end."""
import json
import sys

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as r
from ansible_collections.k26.deploy.plugins.module_utils import sglang_layout, sglang_version
import topologies as t
from module_runner import run_module as run_shared

GIB = 1 << 30


def gpu_facts(count, name, cc, mem_mib, driver="580.95.05", cuda="13.0", module="open", nvswitch=0, fm=None):
    return {
        "gpu_count": count,
        "gpus": [{"index": i, "name": name, "uuid": "GPU-%d" % i, "pci_bus_id": "0000:%02x:00.0" % i,
                  "memory_total_mib": mem_mib, "compute_capability": cc, "persistence_mode": True,
                  "power_limit_w": 600.0} for i in range(count)],
        "driver_version": driver if count else None,
        "cuda_driver_version": cuda if count else None,
        "kernel_module": module if count else None,
        "compute_capabilities": [cc] if count else [],
        "nvswitch_present": nvswitch > 0,
        "nvswitch_count": nvswitch,
        "fabric_manager": fm or {"installed": False, "active": None, "binary": None},
        "nvidia_smi_error": None if count else "nvidia-smi not found",
    }


RTX8 = gpu_facts(8, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887)
H200X8_HGX = gpu_facts(8, "NVIDIA H200", "9.0", 143771, nvswitch=4,
                       fm={"installed": True, "active": True, "binary": "/usr/bin/nv-fabricmanager"})
H200X1 = gpu_facts(1, "NVIDIA H200", "9.0", 143771, driver="580.159.04")
B200X8 = gpu_facts(8, "NVIDIA B200", "10.0", 183359)
NO_GPU = gpu_facts(0, None, None, None)
NO_GPU_DRIVER_BROKEN = dict(NO_GPU, nvidia_smi_error="driver/library version mismatch (driver upgraded without reboot?)")

# The Kimi K2.6 profile for 8x RTX PRO 6000 (issue 37): TP8 (auto on PCIe), graphs on, triton on SM120,
# mem-fraction-static left to SGLang.
K26 = {
    "model-path": "/models/Kimi-K2.6",
    "served-model-name": "kimi-k2.6",
    "tp-size": 8,
    "pp-size": 1,
    "attention-backend": "triton",
    "trust-remote-code": True,
    "tool-call-parser": "kimi_k2",
    "reasoning-parser": "kimi_k2",
}
# The seed deployment's layout, set by hand: eight pipeline stages.
PP8 = {"tp-size": 1, "pp-size": 8}
MODEL_OK = {"path": "/models/Kimi-K2.6", "hub_id": False, "exists": True, "is_dir": True, "has_config": True,
            "size_bytes": 590 * 10 ** 9}
# What preflight keeps of K2.6's config.json for the KV cache (its text_config).
K26_KV = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_hidden_layers": 61, "max_position_embeddings": 262144}
CACHE_OK = {"path": "/var/cache/sglang", "free_bytes": 200 * GIB, "min_free_bytes": 50 * GIB}


# What preflight keeps of config.json (sglang_deepgemm.deciding_config): Kimi K2.6's INT4, Kimi K2's block FP8.
K26_INT4 = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
    "input_activations": None, "weights": {"type": "int", "num_bits": 4, "strategy": "group", "block_structure": None}}}}}
K2_FP8 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}

PY = {"interpreter": "python3", "minimum": "3.11", "requires": ">=3.11", "requires_source": "sglang 0.5.23 (pinned)",
      "variable": "sglang_python_interpreter", "installable": False, "package": "", "hint": ""}


FELL_OFF_THE_BUS = {"verdict": "error",
                    "problems": [["error", "Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) on 0000:03:00"]]}


def ctx(options=None, drop=(), **kwargs):
    opts = dict(K26)
    opts.update(options or {})
    for key in drop:
        opts.pop(key, None)
    base = dict(gpu=RTX8, simulator=False, expected_gpus=8, model=MODEL_OK, cache=CACHE_OK)
    base.update(kwargs)
    return r.build_context(opts, **base)


def resolved(fraction=None, decode_max_bs=None, multimodal=False):
    """The sglang_resolve module's answer, as much as the memory rules read: SGLang's own figures are inputs here
    (tests/unit/test_sglang_memory_resolution.py has the real SGLang give them)."""
    return {"ok": True, "resolved": {"mem_fraction_static": fraction, "cuda_graph": {"decode": {"max_bs": decode_max_bs}},
                                     "model": {"is_multimodal": multimodal}}}


# SGLang 0.5.23's figures for a text MLA model on 97887 MiB GPUs (RTX PRO 6000): at TP8 0.833 and decode graphs up
# to 512; at PP8 (tp 1) 0.854 and graphs up to 256 (srt/arg_groups/memory_hook.py, handle_gpu_memory_settings)
RTX8_TP8 = resolved(0.833, 512)
RTX8_PP8 = resolved(0.854, 256)


# a k26deploy tune report as the CLI hands it on (k26deploy.tune.latest_report)
TUNED_TP8 = {"time": "2026-12-05T01:00:00Z", "objective": "c1", "unit": "tok/s of one request alone", "winner": "tp8pp1",
             "hosts": ["gpu-1"], "file": "r.json",
             "rows": [{"name": name, "extra_vars": {"sglang_service_tp_size": tp, "sglang_service_pp_size": pp},
                       "ok": True, "score": score, "score_level": 1}
                      for name, tp, pp, score in (("tp8pp1", 8, 1, 73.7), ("tp1pp8", 1, 8, 35.6))]}


# (rule id, case name, context, expected severity or None, substring of the message)
CASES = [
    ("K26-CUDA-GRAPH-OFF", "SGLang on the CPU", ctx({"device": "cpu", "attention-backend": "torch_native"}, gpu=NO_GPU),
     None, None),
    ("K26-CUDA-GRAPH-OFF", "profile keeps graphs", ctx(), None, None),
    ("K26-CUDA-GRAPH-OFF", "deprecated flag", ctx({"disable-cuda-graph": True}), "warning", "disable-cuda-graph is set"),
    ("K26-CUDA-GRAPH-OFF", "underscore spelling", ctx({"disable_decode_cuda_graph": True}), "warning",
     "disable-decode-cuda-graph"),
    ("K26-CUDA-GRAPH-OFF", "backend disabled", ctx({"cuda-graph-backend-decode": "disabled"}), "warning", "disabled"),
    ("K26-CUDA-GRAPH-OFF", "torch_native implicit", ctx({"attention-backend": "torch_native"}), "warning",
     "torch native attention backend"),
    ("K26-CUDA-GRAPH-OFF", "flex implicit", ctx({"attention-backend": "flex_attention"}), "warning", "Flex Attention"),
    ("K26-CUDA-GRAPH-OFF", "enable-mis implicit", ctx({"enable-mis": True}), "warning", "enable-mis"),
    ("K26-CUDA-GRAPH-OFF", "flag false", ctx({"disable-cuda-graph": False, "enable-mis": "false"}), None, None),
    ("K26-CUDA-GRAPH-OFF", "prefill only stays quiet", ctx({"disable-prefill-cuda-graph": True}), None, None),
    ("K26-CUDA-GRAPH-OFF", "DWDP", ctx({"dwdp-size": 2}), "warning", "dwdp-size 2"),
    ("K26-CUDA-GRAPH-OFF", "tensor dump", ctx({"debug-tensor-dump-output-folder": "/tmp/dump"}), "warning",
     "debug-tensor-dump-output-folder is set"),
    ("K26-CUDA-GRAPH-OFF", "KV sharding with speculation",
     ctx({"enable-kv-cache-sharding": True, "speculative-algorithm": "EAGLE3"}), "warning", "enable-kv-cache-sharding"),
    ("K26-CUDA-GRAPH-OFF", "KV sharding alone stays quiet", ctx({"enable-kv-cache-sharding": True}), None, None),
    ("K26-CUDA-GRAPH-OFF", "cuda-graph-config JSON", ctx({"cuda-graph-config": '{"decode": {"backend": "disabled"}}'}),
     "warning", "cuda-graph-config"),
    # the largest decode graph SGLang captures by default is its own resolution's (256 at PP8 on a 96 GB GPU)
    ("K26-CUDA-GRAPH-PARTIAL", "unset max-running-requests is left to SGLang", ctx(resolution=RTX8_TP8), None, None),
    ("K26-CUDA-GRAPH-PARTIAL", "PP8 micro-batches above the default graphs",
     ctx(dict(PP8, **{"max-running-requests": 4096}), resolution=RTX8_PP8), "warning",
     "decode batches of 257 to 512 requests"),
    ("K26-CUDA-GRAPH-PARTIAL", "PP8 micro-batches within the default graphs",
     ctx(dict(PP8, **{"max-running-requests": 2048}), resolution=RTX8_PP8), None, None),
    ("K26-CUDA-GRAPH-PARTIAL", "before SGLang resolves, no default size is assumed",
     ctx(dict(PP8, **{"max-running-requests": 4096})), None, None),
    ("K26-CUDA-GRAPH-PARTIAL", "one stage: SGLang lowers its default to max-running-requests",
     ctx({"max-running-requests": 128, "pp-size": 1, "tp-size": 8}, resolution=RTX8_TP8), None, None),
    ("K26-CUDA-GRAPH-PARTIAL", "TP8 captures up to SGLang's 512",
     ctx({"max-running-requests": 1024, "pp-size": 1, "tp-size": 8}, resolution=RTX8_TP8), "warning",
     "decode batches of 513 to 1024 requests (max-running-requests) run without a graph: the largest captured is "
     "512 (SGLang's own resolution on this host)"),
    ("K26-CUDA-GRAPH-PARTIAL", "an explicit graph size above the batch",
     ctx(dict(PP8, **{"max-running-requests": 4096, "cuda-graph-max-bs-decode": 512})), None, None),
    ("K26-CUDA-GRAPH-PARTIAL", "an explicit list below the micro-batch",
     ctx(dict(PP8, **{"pp-max-micro-batch-size": 64, "cuda-graph-bs-decode": [1, 2, 4, 8, 16, 32]})), "warning",
     "decode batches of 33 to 64 requests (pp-max-micro-batch-size)"),
    ("K26-CUDA-GRAPH-PARTIAL", "no padding with a list",
     ctx({"disable-cuda-graph-padding": True, "cuda-graph-bs-decode": [1, 8, 64]}), "warning", "not in the list"),
    ("K26-CUDA-GRAPH-PARTIAL", "mixed chunks", ctx({"enable-mixed-chunk": True}), "warning", "enable-mixed-chunk"),
    ("K26-CUDA-GRAPH-PARTIAL", "graphs wholly off is the other rule's",
     ctx({"disable-decode-cuda-graph": True, "max-running-requests": 4096}), None, None),
    ("K26-LAYOUT", "no layout handed in", ctx(), None, None),
    ("K26-LAYOUT", "chosen from the interconnect", ctx(layout=sglang_layout.choose(t.PCIE8, 8)), "info",
     "tp-size 8, pp-size 1: the 8 GPUs share PCIe only"),
    ("K26-TUNED", "no tune report", ctx(PP8), None, None),
    ("K26-TUNED", "PP8 measured slower than TP8 here", ctx(PP8, tune=TUNED_TP8), "warning",
     "measured this configuration (tp1pp8) at 35.6 tok/s of one request alone, 2.07x slower than tp8pp1 (73.7)"),
    ("K26-LAYOUT-TOPOLOGY", "TP8 on PCIe", ctx(gpu=dict(RTX8, topology=t.PCIE8)), None, None),
    ("K26-LAYOUT-TOPOLOGY", "PP8 on PCIe, set by hand", ctx(PP8, gpu=dict(RTX8, topology=t.PCIE8)),
     "warning", "against the seed's PP8 35.6"),
    ("K26-LAYOUT-TOPOLOGY", "TP2 x PP4 on NVLink pairs, set by hand: unmeasured, information (never --strict's error)",
     ctx({"tp-size": 2, "pp-size": 4}, gpu=dict(RTX8, topology=t.BRIDGED_PAIRS8)), "info",
     "no published measurement of this class"),
    ("K26-LAYOUT-TOPOLOGY", "PP8 on NVSwitch, set by hand", ctx(PP8, gpu=dict(H200X8_HGX, topology=t.NVSWITCH8)),
     "warning", "SGLang's Kimi K2 cookbook serves 8x H200 with --tp 8"),
    ("K26-LAYOUT-TOPOLOGY", "PP8 on NVSwitch, chosen without facts",
     ctx(gpu=dict(H200X8_HGX, topology=t.NVSWITCH8), layout=sglang_layout.choose(t.UNKNOWN, 8)), None, None),
    ("K26-PP-ASYNC-DEPTH", "seed: depth 0", ctx(dict(PP8, **{"pp-async-batch-depth": 0})), "info",
     "pp-size + depth = 8 micro-batch slots, so with 8 or more requests every pipeline stage has a micro-batch"),
    ("K26-PP-ASYNC-DEPTH", "depth unset", ctx(PP8), "info", "the depth changes nothing"),
    ("K26-PP-ASYNC-DEPTH", "depth 8", ctx(dict(PP8, **{"pp-async-batch-depth": 8})), "info", "= 16 micro-batch slots"),
    ("K26-PP-ASYNC-DEPTH", "no pipeline", ctx({"pp-async-batch-depth": 0}), None, None),
    ("K26-NNODES-DIVISOR", "one node", ctx(), None, None),
    ("K26-NNODES-DIVISOR", "2 nodes divide 8", ctx({"nnodes": 2}), None, None),
    ("K26-NNODES-DIVISOR", "3 nodes", ctx({"nnodes": 3}), "error", "not divisible by nnodes 3"),
    ("K26-NO-GPU", "GPUs present", ctx(), None, None),
    ("K26-NO-GPU", "simulator", ctx(gpu=NO_GPU, simulator=True), None, None),
    ("K26-NO-GPU", "SGLang on the CPU", ctx({"device": "cpu"}, gpu=NO_GPU_DRIVER_BROKEN), None, None),
    ("K26-NO-GPU", "bare host before the driver", ctx(gpu=NO_GPU), "warning", "nvidia-smi not found"),
    ("K26-NO-GPU", "broken driver", ctx(gpu=NO_GPU_DRIVER_BROKEN), "error", "version mismatch"),
    ("K26-GPU-COUNT", "8 of 8", ctx(), None, None),
    ("K26-GPU-COUNT", "PP8 on one H200", ctx(gpu=H200X1), "error", "needs 8 GPUs on this node but 1 are present"),
    ("K26-GPU-COUNT", "TP4 on 8", ctx({"tp-size": 4}), "warning", "uses 4 of the 8"),
    ("K26-GPU-COUNT", "two nodes, 4 each, 4 present",
     ctx({"nnodes": 2}, gpu=gpu_facts(4, "NVIDIA H200", "9.0", 143771)), None, None),
    ("K26-GPU-COUNT", "base-gpu-id overflow", ctx({"base-gpu-id": 1}), "error", "from base-gpu-id 1"),
    ("K26-GPU-COUNT", "simulator: info", ctx(gpu=NO_GPU, simulator=True), "info", "without GPU (simulator)"),
    ("K26-GPU-COUNT", "device cpu: info", ctx({"device": "cpu"}, gpu=NO_GPU), "info", "without GPU (device cpu)"),
    ("K26-GPU-EXPECTED", "8 expected, 8 found", ctx(), None, None),
    ("K26-GPU-EXPECTED", "not asked", ctx(expected_gpus=None, gpu=H200X1), None, None),
    ("K26-GPU-EXPECTED", "a card missing", ctx(gpu=gpu_facts(7, "X", "12.0", 97887)), "error", "8 GPUs expected but 7"),
    ("K26-ATTN-ARCH", "triton on SM120", ctx(), None, None),
    ("K26-ATTN-ARCH", "fa3 on SM90", ctx({"attention-backend": "fa3"}, gpu=H200X8_HGX), None, None),
    ("K26-ATTN-ARCH", "fa3 on SM120", ctx({"attention-backend": "fa3"}), "error",
     "fa3 on compute capability 12.0"),
    ("K26-ATTN-ARCH", "fa3 on SM100", ctx({"decode-attention-backend": "fa3"}, gpu=B200X8), "error",
     "use attention-backend: trtllm_mla"),
    ("K26-ATTN-ARCH", "trtllm_mla on SM90", ctx({"attention-backend": "trtllm_mla"}, gpu=H200X8_HGX), "error",
     "Blackwell-only"),
    ("K26-ATTN-ARCH", "trtllm_mla on SM100", ctx({"attention-backend": "trtllm_mla"}, gpu=B200X8), None, None),
    ("K26-ATTN-ARCH", "cutedsl_mla on SM120", ctx({"attention-backend": "cutedsl_mla"}), "error", "SM100-only"),
    ("K26-ATTN-ARCH", "simulator: info", ctx({"attention-backend": "fa3"}, gpu=NO_GPU, simulator=True), "info",
     "not checked"),
    ("K26-GPU-ARCH-UNSUPPORTED", "SM120", ctx(), None, None),
    ("K26-GPU-ARCH-UNSUPPORTED", "Volta", ctx(gpu=gpu_facts(8, "Tesla V100", "7.0", 32768)), "error", "7.0"),
    ("K26-MODEL-MISSING", "present", ctx(), None, None),
    ("K26-MODEL-MISSING", "not checked", ctx(model=None), None, None),
    ("K26-MODEL-MISSING", "missing", ctx(model=dict(MODEL_OK, exists=False, is_dir=False, has_config=False)),
     "error", "does not exist"),
    ("K26-MODEL-MISSING", "no config.json", ctx(model=dict(MODEL_OK, has_config=False)), "error", "no config.json"),
    ("K26-MODEL-MISSING", "hub id", ctx(model={"path": "moonshotai/Kimi-K2.6", "hub_id": True}), "warning",
     "not a local directory"),
    ("K26-MODEL-MISSING", "no model-path", ctx(model={"path": None}), "error", "no model-path"),
    ("K26-MODEL-TOO-LARGE", "590 GB on 8x96 GiB, SGLang's fraction", ctx(resolution=RTX8_TP8), None, None),
    ("K26-MODEL-TOO-LARGE", "590 GB on 8x96 GiB before SGLang resolves: within their whole memory", ctx(), None, None),
    ("K26-MODEL-TOO-LARGE", "TP8 on one H200, before SGLang resolves: more than its whole memory", ctx(gpu=H200X1),
     "error", "more than the 140.4 GiB of 1 GPU(s) x 143771 MiB altogether: SGLang runs out of memory"),
    ("K26-MODEL-TOO-LARGE", "800 GiB on 8x96 GiB before SGLang resolves",
     ctx(model=dict(MODEL_OK, size_bytes=800 * GIB)), "error", "whatever share of it SGLang takes"),
    # SGLang's fraction at TP8 on 97887 MiB GPUs: 0.833 -> 8 x 79.6 GiB = 637 GiB
    ("K26-MODEL-TOO-LARGE", "tight", ctx(model=dict(MODEL_OK, size_bytes=620 * GIB), resolution=RTX8_TP8), "warning",
     "mem-fraction-static 0.833 (SGLang's own resolution on this host"),
    ("K26-MODEL-TOO-LARGE", "tight, but counted in tokens by K26-KV-CACHE",
     ctx(model=dict(MODEL_OK, size_bytes=620 * GIB, config={"kv": K26_KV}), resolution=RTX8_TP8), None, None),
    ("K26-MODEL-TOO-LARGE", "too large at SGLang's fraction",
     ctx(model=dict(MODEL_OK, size_bytes=650 * GIB), resolution=RTX8_TP8), "error",
     "x mem-fraction-static 0.833 (SGLang's own resolution on this host"),
    ("K26-MODEL-TOO-LARGE", "the same set to 0.95", ctx({"mem-fraction-static": 0.95},
                                                        model=dict(MODEL_OK, size_bytes=650 * GIB)), None, None),
    ("K26-KV-CACHE", "no model config", ctx(), None, None),
    ("K26-KV-CACHE", "before SGLang resolves: not sized yet", ctx(model=dict(MODEL_OK, config={"kv": K26_KV})), "info",
     "KV cache not sized yet: mem-fraction-static is not known before SGLang's own resolution"),
    ("K26-KV-CACHE", "TP8 on 8x RTX PRO 6000: the 256K context does not fit",
     ctx(model=dict(MODEL_OK, config={"kv": K26_KV}), resolution=RTX8_TP8), "warning", "not one request of the context length 262144"),
    ("K26-KV-CACHE", "PP8 holds an eighth of the layers per GPU",
     ctx(PP8, model=dict(MODEL_OK, config={"kv": K26_KV}), resolution=RTX8_PP8),
     "info", "request(s) of the full context length 262144 fit"),
    ("K26-KV-CACHE", "a shorter context fits",
     ctx({"context-length": 65536}, model=dict(MODEL_OK, config={"kv": K26_KV}), resolution=RTX8_TP8),
     "info", "of the full context length 65536 fit"),
    ("K26-MODEL-TOO-LARGE", "simulator: info", ctx(gpu=NO_GPU, simulator=True), "info", "not checked"),
    ("K26-CACHE-DISK", "200 GiB free", ctx(), None, None),
    ("K26-CACHE-DISK", "10 GiB free", ctx(cache=dict(CACHE_OK, free_bytes=10 * GIB)), "error",
     "only 10.0 GiB free for the caches"),
    ("K26-CACHE-DISK", "10 GiB free, simulator: info", ctx(gpu=NO_GPU, simulator=True,
                                                           cache=dict(CACHE_OK, free_bytes=10 * GIB)),
     "info", "not an error on a host without GPU (simulator)"),
    ("K26-CACHE-DISK", "10 GiB free, device cpu: info", ctx({"device": "cpu"}, gpu=NO_GPU,
                                                            cache=dict(CACHE_OK, free_bytes=10 * GIB)),
     "info", "(device cpu)"),
    ("K26-GPU-HEALTH", "healthy GPUs", ctx(), None, None),
    ("K26-GPU-HEALTH", "GPU 3 fell off the bus", ctx(gpu=dict(RTX8, gpus=[
        dict(gpu, health=FELL_OFF_THE_BUS) if gpu["index"] == 3 else gpu for gpu in RTX8["gpus"]])),
     "error", "GPU 3 (0000:03:00.0): Xid 79"),
    ("K26-DRIVER-TOO-OLD", "580.95.05", ctx(), None, None),
    ("K26-DRIVER-TOO-OLD", "no GPU: nothing", ctx(gpu=NO_GPU, simulator=True), None, None),
    ("K26-DRIVER-TOO-OLD", "575 driver", ctx(gpu=gpu_facts(8, "X", "12.0", 97887, driver="575.57.08", cuda="12.9")),
     "error", "driver 575.57.08 is older than 580.65.06; the driver supports CUDA 12.9 only"),
    ("K26-DRIVER-TOO-OLD", "580.65.06 exactly", ctx(gpu=gpu_facts(8, "X", "12.0", 97887, driver="580.65.06")),
     None, None),
    ("K26-OPEN-KERNEL-MODULE", "open on Blackwell", ctx(), None, None),
    ("K26-OPEN-KERNEL-MODULE", "proprietary on Blackwell",
     ctx(gpu=gpu_facts(8, "X", "12.0", 97887, module="proprietary")), "error", "Blackwell requires the open"),
    ("K26-OPEN-KERNEL-MODULE", "proprietary on Hopper",
     ctx(gpu=gpu_facts(8, "NVIDIA H200", "9.0", 143771, module="proprietary")), "warning", "recommends"),
    ("K26-FABRIC-MANAGER", "PCIe box", ctx(), None, None),
    ("K26-FABRIC-MANAGER", "HGX with FM active", ctx(gpu=H200X8_HGX), None, None),
    ("K26-FABRIC-MANAGER", "HGX without FM", ctx(gpu=gpu_facts(8, "NVIDIA H200", "9.0", 143771, nvswitch=4)),
     "error", "error 802"),
    ("K26-FABRIC-MANAGER", "HGX with FM stopped",
     ctx(gpu=gpu_facts(8, "NVIDIA H200", "9.0", 143771, nvswitch=4,
                       fm={"installed": True, "active": False, "binary": None})), "error", "not active"),
    ("K26-FABRIC-MANAGER", "HGX, no systemd",
     ctx(gpu=gpu_facts(8, "NVIDIA H200", "9.0", 143771, nvswitch=4,
                       fm={"installed": True, "active": None, "binary": None})), "warning", "state is unknown"),
    ("K26-REMOVED-OPTION", "current flags", ctx({"cuda-graph-max-bs-decode": 256}), None, None),
    ("K26-REMOVED-OPTION", "cuda-graph-max-bs", ctx({"cuda-graph-max-bs": 256}), "error",
     "cuda-graph-max-bs -> cuda-graph-max-bs-decode"),
    ("K26-REMOVED-OPTION", "--cuda_graph_bs spelling", ctx({"--cuda_graph_bs": [1, 2]}), "error", "cuda-graph-bs"),
    ("K26-DEPRECATED-OPTION", "none", ctx(), None, None),
    ("K26-DEPRECATED-OPTION", "disable-cuda-graph in the file", ctx({"disable-cuda-graph": True}), "error",
     "DeprecatedStoreTrueAction"),
    ("K26-DEPRECATED-OPTION", "set to false", ctx({"enable-dp-attention": False}), None, None),
    ("K26-SPEED-DEFAULT-OFF", "the defaults kept", ctx(), None, None),
    ("K26-SPEED-DEFAULT-OFF", "radix cache off", ctx({"disable-radix-cache": True}), "warning",
     "disable-radix-cache turns off prefix caching (RadixAttention)"),
    ("K26-SPEED-DEFAULT-OFF", "two off, one of them costing nothing under PP8",
     ctx(dict(PP8, **{"disable-overlap-schedule": True, "disable-shared-experts-fusion": "true"})), "warning",
     "disable-shared-experts-fusion turns off the fusion of the shared expert"),
    ("K26-SPEED-DEFAULT-OFF", "overlap schedule under PP8: SGLang turns it off itself",
     ctx(dict(PP8, **{"disable-overlap-schedule": True})), None, None),
    ("K26-SPEED-DEFAULT-OFF", "overlap schedule with TP8", ctx({"tp-size": 8, "pp-size": 1,
                                                               "disable-overlap-schedule": True}), "warning",
     "disable-overlap-schedule turns off the overlap scheduler"),
    ("K26-SPEED-DEFAULT-OFF", "custom all-reduce with one TP rank", ctx({"tp-size": 1, "pp-size": 8,
                                                                        "disable-custom-all-reduce": True}), None, None),
    ("K26-SPEED-DEFAULT-OFF", "custom all-reduce with TP8", ctx({"tp-size": 8, "pp-size": 1,
                                                                "disable-custom-all-reduce": True}), "warning",
     "tensor-parallel all-reduces fall back to NCCL"),
    ("K26-SPEED-DEFAULT-OFF", "flashinfer autotune and chunked prefix cache",
     ctx({"disable-flashinfer-autotune": True, "disable-chunked-prefix-cache": True}), "warning",
     "disable-chunked-prefix-cache turns off the chunked prefix cache of DeepSeek's MLA attention (SGLang 0.5.23, "
     "srt/arg_groups/fields/schedule.py); disable-flashinfer-autotune"),
    ("K26-SPEC-PP", "no speculative", ctx(), None, None),
    # SGLang 0.5.23's check_pipeline_parallel_compat (validation_hook.py), case by case
    ("K26-SPEC-PP", "EAGLE3 with PP8", ctx(dict(PP8, **{"speculative-algorithm": "EAGLE3"})), "error",
     "only EAGLE (not multi-layer)"),
    ("K26-SPEC-PP", "multi-layer EAGLE with PP8",
     ctx(dict(PP8, **{"speculative-algorithm": "EAGLE", "enable-multi-layer-eagle": True}),
         environment={"SGLANG_ENABLE_PP_SPEC": "1"}), "error", "only EAGLE (not multi-layer)"),
    ("K26-SPEC-PP", "EAGLE with PP8, no gate", ctx(dict(PP8, **{"speculative-algorithm": "EAGLE"})), "error",
     "SGLANG_ENABLE_PP_SPEC"),
    ("K26-SPEC-PP", "NEXTN (EAGLE's alias) with PP8, gate false",
     ctx(dict(PP8, **{"speculative-algorithm": "nextn"}), environment={"SGLANG_ENABLE_PP_SPEC": "no"}), "error",
     "SGLANG_ENABLE_PP_SPEC"),
    ("K26-SPEC-PP", "EAGLE with PP8 under the gate, attention DP",
     ctx(dict(PP8, **{"speculative-algorithm": "EAGLE", "attn-dp-size": 2}), environment={"SGLANG_ENABLE_PP_SPEC": "Y"}),
     "error", "attention DP"),
    ("K26-SPEC-PP", "EAGLE with PP8 under the gate",
     ctx(dict(PP8, **{"speculative-algorithm": "EAGLE"}), environment={"SGLANG_ENABLE_PP_SPEC": "true"}), "warning",
     "no published K2.6 measurement"),
    ("K26-SPEC-PP", "DFLASH without PP", ctx({"speculative-algorithm": "DFLASH", "pp-size": 1, "tp-size": 8}),
     None, None),
    ("K26-PYTHON-VERSION", "Debian 12's 3.11", ctx(python=dict(PY, version="3.11.2")), None, None),
    ("K26-PUBLIC-WITHOUT-TLS", "loopback", ctx({"host": "127.0.0.1"}), None, None),
    ("K26-PUBLIC-WITHOUT-TLS", "public with TLS", ctx({"host": "0.0.0.0", "ssl-certfile": "/etc/sglang/tls/server.crt"}),
     None, None),
    ("K26-PUBLIC-WITHOUT-TLS", "public over HTTP", ctx({"host": "0.0.0.0"}), "warning", "in clear"),
    ("K26-METRICS-OPEN", "loopback", ctx({"host": "127.0.0.1", "enable-metrics": True}), None, None),
    ("K26-METRICS-OPEN", "public without metrics", ctx({"host": "0.0.0.0", "enable-metrics": None}), None, None),
    ("K26-METRICS-OPEN", "public with metrics", ctx({"host": "0.0.0.0", "enable-metrics": True}), "warning",
     "/metrics without the API key"),
    ("K26-PYTHON-VERSION", "Ubuntu 22.04's 3.10", ctx(python=dict(PY, version="3.10.12")), "error",
     "python3 is Python 3.10.12 but SGLang needs >=3.11"),
    ("K26-DEEPGEMM", "no config read", ctx(), None, None),
    ("K26-DEEPGEMM", "an unquantized model (no DeepGEMM expected)", ctx(model=dict(MODEL_OK, config={})), None, None),
    ("K26-DEEPGEMM", "no GPU", ctx(gpu=NO_GPU, model=dict(MODEL_OK, config=K26_INT4)), None, None),
    ("K26-DEEPGEMM", "K2.6's INT4 weights on Blackwell", ctx(model=dict(MODEL_OK, config=K26_INT4)), "info",
     "unused: INT4 weights (W4A16, compressed-tensors, as Kimi K2.6 ships)"),
    ("K26-DEEPGEMM", "K2's block-FP8 weights on H200", ctx(gpu=H200X8_HGX, model=dict(MODEL_OK, config=K2_FP8)), "info",
     "The deploy precompiles them (sglang_service_deepgemm_precompile auto)"),
]
RULES = {rule.id: rule for rule in r.RULES}


@pytest.mark.parametrize("rule_id, name, context, severity, text", CASES,
                         ids=["%s: %s" % (c[0], c[1]) for c in CASES])
def test_rule(rule_id, name, context, severity, text):
    findings = r.evaluate(context, rules=[RULES[rule_id]])
    if severity is None:
        assert findings == [], findings
        return
    (finding,) = findings
    assert finding["id"] == rule_id and finding["severity"] == severity
    assert text in finding["message"] + " " + finding["fix"], finding
    assert finding["fix"] and isinstance(finding["evidence"], dict) and finding["evidence"], finding


def test_every_rule_has_a_firing_and_a_quiet_case():
    informational = {rule.id for rule in r.RULES if rule.severity == r.INFO}  # they only ever say what they see
    fired = {c[0] for c in CASES if c[3] in (r.ERROR, r.WARNING) or (c[3] == r.INFO and c[0] in informational)}
    quiet = {c[0] for c in CASES if c[3] is None}
    assert set(r.RULE_IDS) == fired == quiet
    assert len(set(r.RULE_IDS)) == len(r.RULE_IDS)


def test_issue_list_is_covered():
    for rule_id in ("K26-CUDA-GRAPH-OFF", "K26-PP-ASYNC-DEPTH", "K26-GPU-COUNT", "K26-NNODES-DIVISOR",
                    "K26-ATTN-ARCH", "K26-MODEL-MISSING", "K26-MODEL-TOO-LARGE", "K26-CACHE-DISK",
                    "K26-DRIVER-TOO-OLD", "K26-FABRIC-MANAGER"):
        assert rule_id in r.RULE_IDS


def test_profile_is_clean_on_its_target():
    assert r.evaluate(ctx()) == []


def test_simulator_host_reports_no_errors_for_gpu_rules():
    findings = r.evaluate(ctx(gpu=NO_GPU, simulator=True, expected_gpus=8, model=None))
    assert {f["severity"] for f in findings} == {r.INFO}
    assert {f["id"] for f in findings} == {"K26-GPU-COUNT", "K26-GPU-EXPECTED"}


def test_seed_configuration_gives_the_graph_warning_and_the_depth_as_information():
    seed = ctx(dict(PP8, **{"disable-cuda-graph": True, "pp-async-batch-depth": 0}))
    graphs, depth = r.evaluate(seed)[:2]
    assert (graphs["id"], graphs["severity"], graphs["fix"], graphs["evidence"]) == (
        "K26-CUDA-GRAPH-OFF", "warning", "remove disable-cuda-graph",
        {"disable-cuda-graph": True, "attention-backend": "triton"})
    assert "graphs back on raised single-request throughput by 44%" in graphs["message"]
    assert (depth["id"], depth["severity"], depth["evidence"]) == (
        "K26-PP-ASYNC-DEPTH", "info", {"pp-size": 8, "pp-async-batch-depth": 0, "micro-batch slots": 8})
    assert "1/8" not in depth["message"] and depth["fix"].startswith("nothing to do")


def test_severity_overrides():
    seed = ctx(dict(PP8, **{"pp-async-batch-depth": 0}))
    (finding,) = r.evaluate(seed, severity_overrides={"K26-PP-ASYNC-DEPTH": "error"})
    assert finding["severity"] == "info"  # information stays information
    assert r.evaluate(seed, severity_overrides={"K26-PP-ASYNC-DEPTH": "off"}) == []
    graphs = ctx({"disable-decode-cuda-graph": True})
    assert [f["severity"] for f in r.evaluate(graphs, severity_overrides={"K26-CUDA-GRAPH-OFF": "error"})] == ["error"]
    info = r.evaluate(ctx(gpu=NO_GPU, simulator=True, model=None), severity_overrides={"K26-GPU-COUNT": "error"})
    assert {f["severity"] for f in info} == {r.INFO}


def test_kv_cache_budget_follows_sglangs_fraction_and_mla():
    """TP8 keeps the whole latent KV on each GPU; PP8 an eighth of it: (static - weights) / bytes per token."""
    model = dict(MODEL_OK, config={"kv": K26_KV})
    tp8 = r.kv_cache_budget(ctx(model=model, resolution=RTX8_TP8))
    static = 97887 * (1 << 20) * 0.833
    assert tp8["fraction"] == 0.833 and tp8["KV bytes per token per GPU"] == 70272
    assert tp8["tokens"] == int((static - 590e9 / 8) / 70272)
    pp8 = r.kv_cache_budget(ctx(PP8, model=model, resolution=RTX8_PP8))
    assert pp8["fraction"] == 0.854 and pp8["KV bytes per token per GPU"] == 70272 // 8
    assert pp8["tokens"] > 8 * tp8["tokens"]
    set_by_hand = r.kv_cache_budget(ctx({"mem-fraction-static": 0.94, "kv-cache-dtype": "fp8_e4m3"}, model=model))
    assert (set_by_hand["fraction"], set_by_hand["fraction source"]) == (0.94, "set")
    assert set_by_hand["KV bytes per token per GPU"] == 35136
    (finding,) = [f for f in r.evaluate(ctx({"mem-fraction-static": 0.94}, model=model)) if f["id"] == "K26-KV-CACHE"]
    assert finding["severity"] == "info"  # 0.94 leaves room for 256K


def test_options_are_read_with_dashed_keys():
    ctx_ = r.build_context({"--pp_size": 8, "pp_async_batch_depth": 0})
    assert ctx_["options"] == {"pp-size": 8, "pp-async-batch-depth": 0}


def test_format_finding():
    assert r.format_finding({"id": "K26-X", "severity": "warning", "message": "m", "fix": "do this."}) == (
        "WARNING K26-X: m Fix: do this.")
    assert r.format_finding({"id": "K26-X", "severity": "info", "message": "m", "fix": r.NOTHING_TO_DO}) == (
        "INFO    K26-X: m")
    assert r.format_finding({"id": "K26-X", "severity": "error", "message": "m", "fix": "did you mean y?"}) == (
        "ERROR   K26-X: m Fix: did you mean y?")


# ---------------------------------------------------------------- findings from outside the rules

KNOWN = ["sglang_service_port", "sglang_service_host", "sglang_version", "nvidia_cuda_driver_branch",
         "k26_target_hosts"]


def test_typo_names_the_closest_known_variable():
    (finding,) = r.unknown_variable_findings(["sglang_servce_port", "sglang_service_host", "ansible_host"], KNOWN)
    assert (finding["id"], finding["severity"]) == ("K26-UNKNOWN-VARIABLE", "warning")
    assert finding["fix"] == "did you mean sglang_service_port?"
    assert finding["evidence"] == {"variable": "sglang_servce_port", "closest": "sglang_service_port"}


def test_unknown_variable_without_a_close_name():
    (finding,) = r.unknown_variable_findings(["k26_something_else_entirely"], KNOWN)
    assert finding["evidence"]["closest"] is None and "play_variables.yml" in finding["fix"]


def test_known_internal_and_foreign_variables_are_quiet():
    assert r.unknown_variable_findings(KNOWN + ["__sglang_service_x", "ansible_user", "my_sglang_x"], KNOWN) == []


def test_sglang_verdict_is_a_finding():
    refused = {"ok": False, "stage": "parse", "error": "unrecognized arguments: --pp-sise 8",
               "sglang_version": "0.5.23", "abbreviated": ["--pp-async-batch-dept"]}
    error, abbreviation = r.args_check_findings(refused)
    assert (error["id"], error["severity"]) == ("K26-SGLANG-REFUSES", "error")
    assert "unrecognized arguments: --pp-sise 8" in error["message"]
    assert error["evidence"] == {"stage": "parse", "sglang_version": "0.5.23"}
    assert (abbreviation["id"], abbreviation["severity"]) == ("K26-SGLANG-ABBREVIATION", "warning")
    assert abbreviation["evidence"]["option"] == "--pp-async-batch-dept"
    assert r.args_check_findings({"ok": True, "abbreviated": []}) == []
    assert r.args_check_findings({"skipped": True}) == []


def test_strict_makes_every_warning_an_error_and_errors_come_first():
    findings = r.evaluate(ctx({"disable-decode-cuda-graph": True}, gpu=NO_GPU, simulator=True, model=None))
    assert [f["severity"] for f in findings] == ["warning", "info", "info"]
    strict = r.by_severity(r.strict(findings))
    assert [(f["id"], f["severity"]) for f in strict] == [
        ("K26-CUDA-GRAPH-OFF", "error"), ("K26-GPU-COUNT", "info"), ("K26-GPU-EXPECTED", "info")]


@pytest.mark.parametrize("python, severity, text", [
    (dict(PY, version="3.11.2"), None, None),
    (dict(PY, version="3.12.3"), None, None),
    (dict(PY, version="3.10.12", hint="install Python 3.11 (deadsnakes)"), "error",
     "python3 is Python 3.10.12 but SGLang needs >=3.11"),
    (dict(PY, version="3.9.18"), "error", "point sglang_python_interpreter at it"),
    (dict(PY, interpreter="python3.11", version=None, installable=True, package="python3.11"), "info",
     "the sglang role installs it (package python3.11)"),
    (dict(PY, interpreter="python3.11", version=None), "error", "python3.11 not found on the host"),
], ids=["3.11", "3.12", "Ubuntu 22.04", "EL9 python3", "EL9 python3.11 to install", "missing"])
def test_interpreter_against_sglang_requires_python(python, severity, text):
    findings = r.evaluate(ctx(python=python), rules=[RULES["K26-PYTHON-VERSION"]])
    if severity is None:
        assert findings == []
        return
    (finding,) = findings
    assert finding["severity"] == severity and text in finding["message"] + " " + finding["fix"], finding
    assert finding["evidence"]["interpreter"] == python["interpreter"]


# ---------------------------------------------------------------- the module

def run_module(args, capsys):
    from ansible_collections.k26.deploy.plugins.modules import sglang_preflight

    return run_shared(sglang_preflight, args, capsys)


def test_module_passes_and_measures_model(tmp_path, capsys):
    model = tmp_path / "Kimi-K2.6"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "w.safetensors").write_bytes(b"x" * 1000)
    (model / "link.safetensors").symlink_to(model / "sub" / "w.safetensors")  # counted once
    options = dict(K26, **{"model-path": str(model), "api-key": "sekrit-value"})
    rc, result = run_module({"options": options, "gpu_facts": RTX8, "expected_gpus": 8,
                             "cache_dir": str(tmp_path / "cache" / "sglang"), "min_cache_free_gb": 0.001}, capsys)
    assert rc == 0, result
    assert result["error_count"] == 0 and result["findings"] == [] and result["changed"] is False
    assert result["model"]["size_bytes"] == 1002
    assert result["cache"]["checked_path"] == str(tmp_path)
    assert "sekrit-value" not in json.dumps(result)


def test_module_reads_the_kv_cache_fields_of_the_config_and_reports_the_budget(tmp_path, capsys):
    model = tmp_path / "Kimi-K2.6"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                                   "text_config": dict(K26_KV, hidden_size=7168)}))
    (model / "w.safetensors").write_bytes(b"x" * 1000)
    options = dict(K26, **{"model-path": str(model), "context-length": 131072})
    rc, result = run_module({"options": options, "gpu_facts": RTX8, "expected_gpus": 8, "resolution": RTX8_TP8,
                             "cache_dir": str(tmp_path / "cache"), "min_cache_free_gb": 0.001}, capsys)
    assert rc == 0, result
    assert result["model"]["config"]["kv"] == K26_KV
    (kv,) = [f for f in result["findings"] if f["id"] == "K26-KV-CACHE"]
    assert kv["severity"] == "info" and kv["evidence"]["KV bytes per token per GPU"] == 70272
    assert "of the full context length 131072 fit" in kv["message"]


def test_module_fails_on_errors_with_findings(capsys):
    options = dict(K26, **{"disable-decode-cuda-graph": True, "cuda-graph-max-bs": 256})
    rc, result = run_module({"options": options, "gpu_facts": H200X1, "check_model": False}, capsys)
    assert rc == 1 and result["failed"] is True
    assert "K26-GPU-COUNT" in result["msg"] and "K26-REMOVED-OPTION" in result["msg"]
    assert result["warning_count"] == 1 and result["error_count"] == 2
    assert any(line.startswith("WARNING K26-CUDA-GRAPH-OFF: CUDA graphs will be off for decode")
               for line in result["lines"])


def test_a_group_names_its_rules_in_rule_order_and_an_unknown_name_is_returned():
    assert r.select_rules(None) == (r.RULES, [])
    chosen, unknown = r.select_rules(["memory", "K26-LAYOUT", "K26-NOPE", "storage"])
    assert [rule.id for rule in chosen] == ["K26-CUDA-GRAPH-PARTIAL", "K26-LAYOUT", "K26-MODEL-TOO-LARGE",
                                            "K26-KV-CACHE"]
    assert unknown == ["K26-NOPE", "storage"]
    assert all(set(ids) <= set(r.RULE_IDS) for ids in r.RULE_GROUPS.values())


def test_module_evaluates_only_the_rules_asked_and_says_which(capsys):
    """The deploy's check with SGLang's figures (rules: [memory]): the graphs turned off for every batch are a
    finding of another rule, left out here."""
    options = dict(K26, **{"disable-decode-cuda-graph": True})
    rc, result = run_module({"options": options, "gpu_facts": RTX8, "check_model": False, "resolution": RTX8_TP8,
                             "rules": ["memory"]}, capsys)
    assert rc == 0 and result["rules"] == ["K26-CUDA-GRAPH-PARTIAL", "K26-MODEL-TOO-LARGE", "K26-KV-CACHE"], result
    assert {f["id"] for f in result["findings"]} <= set(result["rules"]) and result["warning_count"] == 0
    rc, result = run_module({"options": K26, "gpu_facts": RTX8, "check_model": False, "rules": ["mem"]}, capsys)
    assert rc == 1 and "unknown rule id(s) or group(s) mem" in result["msg"] and "groups: memory" in result["msg"]


def test_module_simulator_host(capsys):
    rc, result = run_module({"options": K26, "gpu_facts": NO_GPU, "simulator": True, "check_model": False}, capsys)
    assert rc == 0 and result["error_count"] == 0 and result["info_count"] == 1


def test_module_rejects_unknown_override(capsys):
    rc, result = run_module({"options": K26, "gpu_facts": RTX8, "check_model": False,
                             "severity_overrides": {"K26-NOPE": "error"}}, capsys)
    assert rc == 1 and "K26-NOPE" in result["msg"]


def test_module_strict_makes_warnings_fail(capsys):
    options = dict(K26, **{"disable-decode-cuda-graph": True})
    rc, result = run_module({"options": options, "gpu_facts": RTX8, "check_model": False}, capsys)
    assert rc == 0 and result["warning_count"] == 1 and result["strict"] is False
    rc, result = run_module({"options": options, "gpu_facts": RTX8, "check_model": False, "strict": True}, capsys)
    assert rc == 1 and result["error_count"] == 1 and result["warning_count"] == 0
    assert result["findings"][0]["id"] == "K26-CUDA-GRAPH-OFF" and "K26-CUDA-GRAPH-OFF" in result["msg"]


def test_module_folds_in_sglang_verdict_and_unknown_variables(capsys):
    rc, result = run_module({"options": K26, "gpu_facts": RTX8, "check_model": False,
                             "args_check": {"ok": False, "stage": "parse", "error": "unrecognized arguments: --x 1"},
                             "variables": ["sglang_servce_port", "sglang_service_port"],
                             "known_variables": ["sglang_service_port"]}, capsys)
    assert rc == 1
    assert [(f["id"], f["severity"]) for f in result["findings"]] == [
        ("K26-SGLANG-REFUSES", "error"), ("K26-UNKNOWN-VARIABLE", "warning")]
    assert result["lines"][1] == ("WARNING K26-UNKNOWN-VARIABLE: sglang_servce_port is set but no role or play of "
                                  "k26deploy reads it: it has no effect. Fix: did you mean sglang_service_port?")


def test_module_reads_the_interpreter_version(tmp_path, capsys):
    rc, result = run_module({"options": K26, "gpu_facts": RTX8, "check_model": False,
                             "python_interpreter": sys.executable}, capsys)
    assert rc == 0 and result["findings"] == []
    assert result["python"]["version"] == "%d.%d.%d" % sys.version_info[:3]
    assert result["python"]["requires"] == sglang_version.SGLANG_REQUIRES_PYTHON
    assert result["python"]["requires_source"] == "sglang %s (pinned)" % sglang_version.SGLANG_VERSION
    overridden = run_module({"options": K26, "gpu_facts": RTX8, "check_model": False,
                             "python_interpreter": sys.executable, "sglang_version": "0.5.99"}, capsys)[1]
    assert overridden["python"]["requires_source"].startswith(
        "sglang %s, the release this collection is checked against (sglang_version is 0.5.99" % sglang_version.SGLANG_VERSION)
    old = tmp_path / "python3.10"
    old.write_text("#!/bin/sh\necho 3.10.12\n")
    old.chmod(0o755)
    rc, result = run_module({"options": K26, "gpu_facts": RTX8, "check_model": False,
                             "python_interpreter": str(old), "python_variable": "sglang_python_interpreter"}, capsys)
    assert rc == 1 and result["findings"][0]["id"] == "K26-PYTHON-VERSION"
    assert result["findings"][0]["evidence"]["version"] == "3.10.12"
