# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's own server-argument resolution for a host's GPUs, without starting SGLang: what preflight reports
(mem-fraction-static, chunked prefill, max running requests, the attention backend, the CUDA graphs' sizes) is the
number SGLang itself would use, not a copy of its heuristics.

Run by the Python of SGLang's virtualenv (the sglang_resolve module hands it this file's source; the tests run it
with the CPU venv's python), JSON in (argv[1], else stdin), JSON out:
    {"model_path": "MODEL_DIR", "argv": ["--config", "FILE"],
     "gpu": {"name": "NVIDIA H200", "memory_mib": 143771, "capability": [9, 0], "count": 8}}
Optional gpu keys: "cuda_version" (default "12.9"; only compared against 12.3 / 12.8 by the sm probes),
"flashinfer" (flashinfer installed on the real host; default true, as sglang 0.5.23 depends on it).
Optional top-level "full": true adds SGLang's whole resolved_dict(). Nothing is imported from sglang until main()
runs, so the module itself imports on any Python (ansible-test's import sanity test, the module's own).

Entry point: sglang.srt.server_args.prepare_server_args(argv) -> ServerArgs.resolve_once()
-> sglang.srt.arg_groups.pipeline.run_resolution_pipeline(), what `sglang serve` / Engine run before any worker
starts. ServerArgs.__post_init__ resolves nothing in 0.5.23. Resolved values are read with resolved_dict()
(the record's fields keep the operator's raw input).

Patch points (the device queries only; SGLang does all the arithmetic) -- the same seams SGLang's own CPU CI
uses for full-resolution tests (override_platform + patching get_device_memory_capacity + torch capability):
 1. runtime_context.override_platform(**facts).install(): every get_platform().is_cuda / is_sm90 / is_sm100 /
    is_blackwell / is_hopper_with_cuda_12_3 / device_sm / device_capability / has_flashinfer read. The sm facts
    are computed by SGLang's own predicates (utils.common.is_sm*_supported partials) for the given capability.
 2. sglang.srt.utils.common.get_device_memory_capacity (rebound in every module that imported it: memory_hook,
    kv_shard_hook, model_overrides/qwen3_vl) -> gpu.memory_mib for device "cuda". On a CPU host it returns None
    and handle_gpu_memory_settings would take its "gpu_mem is None" branch (chunked 4096, max_bs 160, 0.95).
 3. sglang.srt.utils.common.get_device -> "cuda" (handle_missing_default_values; CPU host has no accelerator).
 4. torch.cuda.get_device_capability (called directly by arg_groups/overrides.py, attention_hook.py,
    model_hook.py in some branches), and for completeness get_device_name / get_device_properties /
    device_count / mem_get_info. Calls during resolution are counted in _meta.device_query_calls.
 NOT patched on purpose: torch.cuda.is_available / torch.version.cuda. Faking them flips module-level
 `_is_cuda = is_cuda()` import branches into CUDA-only packages a CPU venv lacks. A tripwire records every
 torch.cuda.is_available() call after setup (_meta.unanswered_cuda_is_available_calls): a call from a function
 (not "<module>") would be a device question SGLang asked behind the patches.
Order matters: a warm-up resolution first imports every module resolution touches under the host's CPU
answers, then the cached utils.common probes (is_cuda, is_sm*_supported, get_device_sm, ...) are rebound to the
target GPU's answers, all other lru caches there are cleared, the tripwire is armed, and the real resolution runs.
Absent optional packages of the minimal CPU venv are stubbed, for imports made by sglang modules only (see
_STUB_IF_ABSENT); _meta.stub_uses_during_resolution must stay empty. A config.json whose auto_map names absent
remote-code files is resolved from a temporary copy without auto_map (SGLang reloads kimi_k25 with its own
sglang.srt.configs.kimi_k25.KimiK25Config anyway).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import resource
import sys
import time
import types


# ---------------------------------------------------------------- stubs for absent optional imports


_RESOLVING = [False]
_STUB_USES: set[str] = set()  # stub attributes touched while resolve_once() ran (should stay empty)


class _Stub(types.ModuleType):
    """A module/attribute stand-in: any attribute, call or subclassing works; nothing is computed."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        full = f"{self.__name__}.{name}"
        if _RESOLVING[0]:
            _STUB_USES.add(full)
        mod = sys.modules.get(full)
        if mod is None:
            mod = _Stub(full)
            mod.__path__ = []
            sys.modules[full] = mod
        return mod

    def __call__(self, *args, **kwargs):
        if _RESOLVING[0]:
            _STUB_USES.add(self.__name__ + "()")
        return _Stub(self.__name__ + "()")

    def __mro_entries__(self, bases):
        return (object,)


_STUBBED_TOPS: set[str] = set()  # a stub package importing its own submodules


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, tops):
        self.tops = set(tops)
        _STUBBED_TOPS.update(tops)

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] not in self.tops or not self._imported_by_sglang():
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    @staticmethod
    def _imported_by_sglang():
        # Only an `import` statement in sglang's own modules gets the stub: availability probes such as
        # transformers' is_torchvision_available() (importlib.util.find_spec) must keep seeing "absent".
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if not (name.startswith("importlib") or name == __name__):
                return name.startswith("sglang.") or name.split(".")[0] in _STUBBED_TOPS
            frame = frame.f_back
        return False

    def create_module(self, spec):
        mod = _Stub(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


# Imported at module level by sglang.srt.* on the way to ModelConfig / the quantization registry, absent from the
# minimal CPU venv (scripts/setup_sglang_cpu.sh installs sglang --no-deps). Checked: with the real packages
# (tvm_ffi, sentencepiece, compressed_tensors, gguf, dill) on sys.path, resolved_dict() is identical.
# torchvision has no usable wheel for CPU torch 2.13 here (the PyPI one fails on torchvision::nms).
_STUB_IF_ABSENT = ["torchvision", "tvm_ffi", "sentencepiece", "compressed_tensors", "gguf"]


def _install_stubs():
    stubbed = []
    absent = [m for m in _STUB_IF_ABSENT + os.environ.get("RESOLVE_EXTRA_STUBS", "").split(",")
              if m and importlib.util.find_spec(m) is None]
    if absent:
        sys.meta_path.insert(0, _StubFinder(absent))
        stubbed.extend(absent)
    if importlib.util.find_spec("dill") is None:
        import pickle

        import torch  # noqa: F401  (torch probes for dill itself; let it see dill as absent first)

        # configs/deepseek_ocr.py runs dill.dumps(cls).hex() at import; pickle does it by reference.
        dill = types.ModuleType("dill")
        dill.dumps, dill.loads = pickle.dumps, pickle.loads
        sys.modules["dill"] = dill
        stubbed.append("dill(pickle shim)")
    return stubbed


# ---------------------------------------------------------------- the device answers

_DEVICE_CALLS: dict[str, int] = {}  # patched device queries answered while resolve_once() ran
_TRIPWIRE: list[str] = []  # device queries that reached torch un-answered during resolution (should stay empty)


def _rebind(module, name, new):
    """Replace module.name, and every `from module import name` copy already bound elsewhere."""
    old = getattr(module, name)
    setattr(module, name, new)
    for mod in list(sys.modules.values()):
        if mod is not None and mod is not module and getattr(mod, "__dict__", {}).get(name) is old:
            setattr(mod, name, new)
    return old


def _platform_facts(gpu, cap, cuda_version):
    """SGLang's own sm predicates (utils.common.is_sm*_supported & co.), evaluated for the given GPU.

    They are lru_cache(partial(_check_cuda_device_version, ...)); their unwrapped partials are called with
    is_cuda/get_device_sm/torch.version.cuda answered for the target GPU, then everything is put back.
    """
    import torch
    from sglang.srt import runtime_context as rc
    from sglang.srt.utils import common

    saved = (common.is_cuda, common.get_device_sm, torch.version.cuda)
    common.is_cuda, common.get_device_sm = (lambda: True), (lambda: cap[0] * 10 + cap[1])
    torch.version.cuda = cuda_version
    try:
        facts = {}
        for fact, probe in rc._PLATFORM_PROBES.items():
            fn = getattr(common, probe)
            inner = getattr(fn, "__wrapped__", None)
            if fact.startswith("is_sm") or fact in ("is_blackwell", "is_hopper_with_cuda_12_3"):
                facts[fact] = bool((inner or fn)())
    finally:
        common.is_cuda, common.get_device_sm, torch.version.cuda = saved
    facts.update(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
                 has_amx=False, has_flashinfer=bool(gpu.get("flashinfer", True)),
                 device_sm=cap[0] * 10 + cap[1], device_capability=cap)
    return facts


def _install_gpu(gpu):
    import torch

    name = str(gpu.get("name") or "NVIDIA H200")
    mem_mib = float(gpu["memory_mib"])
    cap = tuple(int(x) for x in gpu.get("capability") or (9, 0))
    count = int(gpu.get("count") or 1)
    total_bytes = int(mem_mib * (1 << 20))
    props = types.SimpleNamespace(name=name, total_memory=total_bytes, major=cap[0], minor=cap[1],
                                  multi_processor_count=int(gpu.get("sm_count") or 132))

    # 1. torch's per-device queries, called directly by a few hooks (arg_groups/overrides.py,
    #    attention_hook.py, model_hook.py: torch.cuda.get_device_capability()). torch.cuda.is_available()
    #    is deliberately NOT faked: module-level `_is_cuda = is_cuda()` branches would then import CUDA-only
    #    packages (sgl_kernel, tvm_ffi, ...) that a CPU venv lacks.
    answers = {
        "get_device_capability": lambda device=None: cap,
        "get_device_name": lambda device=None: name,
        "get_device_properties": lambda device=None: props,
        "device_count": lambda: count,
        "mem_get_info": lambda device=None: (total_bytes, total_bytes),
    }
    for fn_name, answer in answers.items():
        def counted(*args, _fn_name=fn_name, _answer=answer, **kwargs):
            if _RESOLVING[0]:
                _DEVICE_CALLS[f"torch.cuda.{_fn_name}"] = _DEVICE_CALLS.get(f"torch.cuda.{_fn_name}", 0) + 1
            return _answer(*args, **kwargs)
        setattr(torch.cuda, fn_name, counted)

    real_is_available = torch.cuda.is_available

    def is_available_tripwire():
        chain, frame = [], sys._getframe(1)
        while frame is not None and len(chain) < 4:
            fn = frame.f_code.co_filename
            if "sglang" in fn:
                chain.append(f"{fn.split('site-packages/')[-1]}:{frame.f_lineno}({frame.f_code.co_name})")
            frame = frame.f_back
        _TRIPWIRE.append(" <- ".join(chain))
        return real_is_available()

    from sglang.srt.utils import common

    # 2. SGLang's platform facts, through its own override seam (what SGLang's CPU CI does).
    from sglang.srt.runtime_context import override_platform

    facts = _platform_facts(gpu, cap, str(gpu.get("cuda_version") or "12.9"))
    override_platform(**facts).install()

    # 3. The two device queries SGLang makes through plain functions instead of the platform facts:
    #    get_device_memory_capacity (memory_hook, kv_shard_hook, qwen3_vl: None on a CPU host, which would
    #    take the "gpu_mem is None" fallback branch) and get_device (-> "cuda").
    real_capacity = common.get_device_memory_capacity

    def get_device_memory_capacity(device=None):
        if _RESOLVING[0]:
            _DEVICE_CALLS["get_device_memory_capacity"] = _DEVICE_CALLS.get("get_device_memory_capacity", 0) + 1
        return mem_mib if device in (None, "cuda") else real_capacity(device)

    _rebind(common, "get_device_memory_capacity", get_device_memory_capacity)
    _rebind(common, "get_device", lambda device_id=None: "cuda" if device_id is None else f"cuda:{device_id}")

    def answer_probes():
        """After the warm-up has imported every module resolution needs (so import-time `_is_cuda = is_cuda()`
        branches already took the CPU path), answer SGLang's call-time probes in utils.common for the target GPU.
        Needed because some resolution code calls them directly instead of get_platform(): e.g.
        cuda_graph_config.default_prefill_backend() -> is_cuda() (breakable prefill graph on CUDA, which adds the
        1.5 GiB MLA reserve), moe_hook -> is_sm100_supported(), qwen3_vl -> is_sm90_supported()."""
        from sglang.srt import runtime_context as rc

        def const(value):
            return lambda *a, **k: value
        probes = {"is_cuda": True, "is_cuda_alike": True, "is_sail": False, "get_device_sm": facts["device_sm"],
                  "get_device_capability": cap, "get_nvgpu_memory_capacity": mem_mib,
                  "is_flashinfer_available": facts["has_flashinfer"],
                  "is_sm120": cap == (12, 0), "is_sm121": cap == (12, 1),
                  "is_ampere_with_cuda_12_3": cap[0] == 8, "is_sm80_supported": cap[0] == 8}
        for fact, probe in {**rc._PLATFORM_PROBES, **rc._PLATFORM_VALUES}.items():
            probes.setdefault(probe, facts[fact])
        for probe, value in probes.items():
            if hasattr(common, probe):
                _rebind(common, probe, const(value))
        if hasattr(common, "is_blackwell"):  # alias of is_blackwell_supported
            _rebind(common, "is_blackwell", const(facts["is_blackwell"]))
        # Every other cached probe re-evaluates now, so the tripwire sees any device question left unanswered.
        for value in vars(common).values():
            if hasattr(value, "cache_clear") and hasattr(value, "cache_info"):
                value.cache_clear()
        torch.cuda.is_available = is_available_tripwire

    return facts, answer_probes


# ---------------------------------------------------------------- what to report

KEYS = [
    "device", "tp_size", "dp_size", "pp_size", "ep_size", "attn_dp_size", "enable_dp_attention",
    "mem_fraction_static", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
    "max_total_tokens", "context_length", "page_size", "kv_cache_dtype", "dtype", "quantization",
    "attention_backend", "prefill_attention_backend", "decode_attention_backend", "sampling_backend",
    "moe_runner_backend", "moe_a2a_backend", "disable_radix_cache", "enable_hierarchical_cache",
    "speculative_algorithm", "speculative_num_draft_tokens", "language_only", "language_model_only",
    "disaggregation_mode", "torch_compile_max_bs", "enable_symm_mem", "cpu_offload_gb",
]


def _graph(cg):
    out = {}
    for phase in ("decode", "prefill"):
        p = getattr(cg, phase, None) if not isinstance(cg, dict) else cg.get(phase)
        if p is None:
            continue
        get = p.get if isinstance(p, dict) else (lambda k, p=p: getattr(p, k, None))
        bs = get("bs")
        backend = get("backend")
        out[phase] = {"backend": getattr(backend, "value", backend), "max_bs": get("max_bs"),
                      "num_bs": len(bs) if bs else 0}
    return out


def _draft(sa, model_config, algorithm):
    """What the draft model adds to each token's KV cache, as SGLang 0.5.23 decides it at start: the model runner's
    resolve_spec_aux_hidden_state_config (model_runner_components/spec_aux_hidden_state.py) reads the draft's own
    config (num_nextn_predict_layers, else its layer count) into eagle_draft_num_layers, and for EAGLE, EAGLE3 and
    STANDALONE DefaultPoolConfigurator (model_executor/pool_configurator.py) adds that many of the target's layers
    to each token's cell. None without speculative decoding; {"error"} when SGLang cannot read the draft."""
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
        resolve_spec_aux_hidden_state_config)
    from sglang.srt.runtime_context import publish
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    spec = SpeculativeAlgorithm.from_string(algorithm)
    if spec.is_none():
        return None
    try:
        publish(sa, role="scheduler")  # what the scheduler process does before its model runner resolves this
        aux = resolve_spec_aux_hidden_state_config(server_args=sa, model_config=model_config, spec_algorithm=spec,
                                                   is_draft_worker=False)
    except Exception as exc:  # noqa: BLE001  (an unreadable draft is an answer, not a failure of the resolution)
        return {"error": error_text(exc)}
    sized = spec.is_eagle() or spec.is_standalone()
    draft_config = aux.draft_model_config
    return {"algorithm": str(algorithm), "kv_layers": aux.eagle_draft_num_layers if sized else None,
            "sized_with_target_layers": bool(sized),
            "architectures": list(getattr(getattr(draft_config, "hf_config", None), "architectures", None) or [])}


def _local_config_dir(model_path):
    """A config.json whose auto_map names remote-code files that are absent (only config.json was copied) makes
    AutoConfig(trust_remote_code=True) fail. SGLang re-reads kimi_k25 (and every model_type in its
    _CONFIG_REGISTRY) with its own config class anyway, so a temporary copy without auto_map changes nothing else.
    """
    import tempfile

    cfg_file = os.path.join(model_path, "config.json")
    with open(cfg_file) as f:
        cfg = json.load(f)
    needed = {ref.split(".")[0] + ".py" for ref in (cfg.get("auto_map") or {}).values() if isinstance(ref, str)
              and "--" not in ref}
    if not needed or all(os.path.exists(os.path.join(model_path, n)) for n in needed):
        return model_path, False
    cfg.pop("auto_map", None)
    # Same basename: SGLang has name heuristics on the path (is_mistral_model, "llama-2" in model_path).
    tmp = os.path.join(tempfile.mkdtemp(prefix="resolve-cfg-"), os.path.basename(os.path.normpath(model_path)))
    os.mkdir(tmp)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f)
    for name in os.listdir(model_path):  # tokenizer / generation config files, if any, by link
        if name != "config.json" and not name.endswith((".safetensors", ".bin", ".pt")):
            os.symlink(os.path.join(os.path.abspath(model_path), name), os.path.join(tmp, name))
    return tmp, True


def offline():
    """Nothing is fetched: the model's config.json is on the host."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.pop("SGLANG_USE_CPU_ENGINE", None)  # is_cpu() would turn resolution to the CPU engine


def main():
    offline()
    req = json.loads(sys.argv[1]) if len(sys.argv) > 1 else json.load(sys.stdin)
    t0 = time.perf_counter()
    stubbed = _install_stubs()
    facts, answer_probes = _install_gpu(req["gpu"])

    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.arg_groups.overrides import model_config_of

    model_path, auto_map_dropped = _local_config_dir(req["model_path"])
    if auto_map_dropped:
        import atexit
        import shutil

        atexit.register(shutil.rmtree, os.path.dirname(model_path), True)
    argv = ["--model-path", model_path, *req.get("argv", [])]
    t1 = time.perf_counter()
    # Warm-up: one throwaway resolution imports every module resolution touches, with the host's own (CPU)
    # answers for import-time probes. Its result is discarded; an error here is re-raised by the real run.
    warmup_error = None
    try:
        prepare_server_args(argv).resolve_once()
    except Exception as exc:  # noqa: BLE001
        warmup_error = f"{type(exc).__name__}: {exc}"
    answer_probes()
    t_warm = time.perf_counter()
    sa = prepare_server_args(argv)
    _RESOLVING[0] = True
    try:
        sa.resolve_once()
    finally:
        _RESOLVING[0] = False
    t2 = time.perf_counter()

    resolved = json.loads(json.dumps(sa.resolved_dict(), default=str).replace(
        json.dumps(model_path)[1:-1], json.dumps(req["model_path"])[1:-1]))
    out = {k: resolved.get(k) for k in KEYS}
    out["cuda_graph"] = _graph(resolved.get("cuda_graph_config"))
    mc = model_config_of(sa)
    vc = getattr(mc.hf_config, "vision_config", None)
    out["model"] = {
        "architectures": list(getattr(mc.hf_config, "architectures", None) or []),
        "hf_config_class": type(mc.hf_config).__name__,
        "is_multimodal": bool(getattr(mc, "is_multimodal", False)),
        "vision_config": None if vc is None else {
            "num_hidden_layers": getattr(vc, "num_hidden_layers", None),
            "hidden_size": getattr(vc, "hidden_size", None)},
        "context_len": getattr(mc, "context_len", None),
        "attention_arch": str(getattr(mc, "attention_arch", None)),
        "num_hidden_layers": getattr(mc, "num_hidden_layers", None),
    }
    out["draft"] = _draft(sa, mc, out.get("speculative_algorithm"))
    # Who decided each reported value (SGLang records a source for every resolution-time declaration).
    sources = {}
    for decl in getattr(sa, "_resolved_overrides", ()):
        src = getattr(decl, "source", None) or (decl[0] if isinstance(decl, tuple) else None)
        fields = getattr(decl, "fields", None) or (decl[1] if isinstance(decl, tuple) else {})
        for k in (fields or {}):
            if k in out or k == "cuda_graph_config":
                sources.setdefault(k, []).append(src)
    out["sources"] = sources
    from sglang.srt.utils.common import get_device_memory_capacity
    out["gpu_mem_mib_seen_by_sglang"] = get_device_memory_capacity(out["device"])
    out["_meta"] = {
        "sglang_import_s": round(t1 - t0, 2), "warmup_s": round(t_warm - t1, 2), "resolve_s": round(t2 - t_warm, 2),
        "warmup_error": warmup_error,
        "total_s": round(time.perf_counter() - t0, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "stubbed_imports": stubbed,
        "auto_map_dropped": auto_map_dropped,
        "stub_uses_during_resolution": sorted(_STUB_USES),
        "platform_facts": facts,
        "device_query_calls": _DEVICE_CALLS,
        "unanswered_cuda_is_available_calls": sorted(set(_TRIPWIRE)),
    }
    if req.get("full"):
        out["resolved"] = resolved
    emit(out)


RESULT_MARKER = "K26_SGLANG_RESOLUTION="


def error_text(exc):
    """SGLang's refusal as an operator reads it: its message, and where SGLang raised it (a bare assert has no
    message: its own line says what it checks)."""
    import traceback

    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if "sglang" in frame.filename]
    where = ""
    if frames:
        frame = frames[-1]
        where = " (%s:%d: %s)" % (frame.filename.split("site-packages/")[-1], frame.lineno, (frame.line or "").strip())
    return "%s: %s%s" % (type(exc).__name__, str(exc) or "(no message)", where)


def emit(result):
    """The answer, on one line of its own after a marker (whatever SGLang printed before it is left behind)."""
    sys.stdout.write("\n" + RESULT_MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # noqa: BLE001  SGLang's own validation errors are answers too
        import traceback

        traceback.print_exc()
        emit({"error": error_text(exc)})
        raise SystemExit(2)
