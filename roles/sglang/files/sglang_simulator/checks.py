# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang's own checks of the options and its error texts (tracebacks as SGLang prints them), the ranks' layout,
and --sim-check-only."""

import argparse

from .options import format_server_args


SITE = "/usr/local/lib/python3.11/dist-packages"
GPU_TOTAL_GIB = 94.97


class Fatal(Exception):
    """The process ends with exit code 1 after printing this text (a traceback)."""


def traceback_text(frames, error, header="Traceback (most recent call last):"):
    """A Python-style traceback from (file under site-packages, line, function, code) frames."""
    lines = [header]
    for path, lineno, function, code in frames:
        lines.append(f'  File "{SITE}/{path}", line {lineno}, in {function}')
        lines.append(f"    {code}")
    return "\n".join(lines + [error])


def check_server_args(args):
    """Validate like ServerArgs.__post_init__; raise Fatal or return warning texts."""
    sizes_ok = min(args.tp_size, args.pp_size, args.nnodes) >= 1
    checks = (  # (holds, the assert statement, message)
        (sizes_ok, "assert min(self.tp_size, self.pp_size, self.nnodes) >= 1, (",
         "tp_size, pp_size and nnodes must be at least 1"),
        (sizes_ok and 0 <= args.node_rank < args.nnodes, "assert 0 <= self.node_rank < self.nnodes, (",
         "node_rank must be in [0, nnodes)"),
        (sizes_ok and (args.tp_size * args.pp_size) % args.nnodes == 0,
         "assert (self.tp_size * self.pp_size) % self.nnodes == 0, (",
         "tp_size * pp_size must be divisible by nnodes"),
    )
    for holds, statement, message in checks:
        if not holds:
            raise Fatal(traceback_text([
                ("sglang/launch_server.py", 24, "<module>",
                 "server_args = prepare_server_args(sys.argv[1:])"),
                ("sglang/srt/server_args.py", 4803, "prepare_server_args",
                 "return ServerArgs.from_cli_args(raw_args)"),
                ("sglang/srt/server_args.py", 716, "__post_init__", "self._handle_parallelism()"),
                ("sglang/srt/server_args.py", 1391, "_handle_parallelism", statement),
            ], f"AssertionError: {message} (tp_size={args.tp_size}, pp_size={args.pp_size}, "
               f"nnodes={args.nnodes}, node_rank={args.node_rank})"))
    notes = []
    if args.enable_dp_attention:
        notes.append("--enable-dp-attention is deprecated; use --attn-dp-size instead.")
    if args.pp_size > 1:
        notes.append("Pipeline parallelism is incompatible with overlap schedule.")
        if args.speculative_algorithm:
            notes.append("Speculative decoding with pipeline parallelism is restricted; "
                         "set SGLANG_ENABLE_PP_SPEC=1 to force it.")
    dflash_shape = (args.speculative_num_steps, args.speculative_eagle_topk)
    if args.speculative_algorithm == "DFLASH" and dflash_shape != (1, 1):
        notes.append("DFLASH only supports speculative_num_steps=1 and speculative_eagle_topk=1; "
                     "overriding them.")
        args.speculative_num_steps = args.speculative_eagle_topk = 1
    return notes


def plan_cuda_graphs(args):
    """Return (decode graphs on, prefill graphs on, warning texts, info texts) like SGLang's hooks."""
    decode = prefill = True
    notes = []
    automatic = (
        (args.attention_backend == "torch_native",
         "Cuda graph is disabled because of using torch native attention backend"),
        (args.attention_backend == "flex_attention",
         "Cuda graph is disabled because of using torch Flex Attention backend"),
        (args.enable_mis, "CUDA graph is disabled because --enable-mis is set."),
    )
    for applies, text in automatic:
        if applies:
            notes.append(text)
            decode = prefill = False
    if args.disable_cuda_graph:
        notes.append("'--disable-cuda-graph' is deprecated and will be removed in a future release. "
                     "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.")
        decode = prefill = False
    if args.disable_decode_cuda_graph or args.cuda_graph_backend_decode == "disabled":
        decode = False
    if args.disable_prefill_cuda_graph or args.cuda_graph_backend_prefill == "disabled":
        prefill = False
    infos = []
    if prefill and args.pp_size > 1 and args.cuda_graph_backend_prefill is None:
        infos.append("Disabling breakable prefill CUDA graph by default for pipeline parallelism. "
                     "Set --cuda-graph-backend-prefill=breakable to opt in.")
        prefill = False
    return decode, prefill, notes, infos


def local_rank_leads(args):
    """[(pp_rank, tp_rank)]: the first TP rank of each pipeline rank on this node."""
    world = args.tp_size * args.pp_size
    per_node = max(world // args.nnodes, 1)
    first = args.node_rank * per_node
    leads = {}
    for rank in range(first, min(first + per_node, world)):
        pp_rank, tp_rank = divmod(rank, args.tp_size)
        leads.setdefault(pp_rank, tp_rank)
    return sorted(leads.items())


def rank_label(args, pp_rank, tp_rank):
    return (f" PP{pp_rank}" if args.pp_size > 1 else "") + f" TP{tp_rank}"


def missing_model_error(path):
    return traceback_text([
        ("sglang/srt/managers/scheduler.py", 3112, "run_scheduler_process",
         "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
        ("sglang/srt/configs/model_config.py", 1057, "from_server_args", "return ModelConfig("),
        ("sglang/srt/utils/hf_transformers_utils.py", 402, "get_config",
         "config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code, **kwargs)"),
        ("transformers/configuration_utils.py", 785, "_get_config_dict",
         "raise EnvironmentError("),
    ], f"OSError: Can't load the configuration of '{path}'. If you were trying to load it from the Hub, "
       f"make sure you don't have a local directory with the same name. Otherwise, make sure '{path}' "
       "is the correct path to a directory containing a config.json file",
       header="Scheduler hit an exception: Traceback (most recent call last):")


def out_of_memory_error():
    return traceback_text([
        ("sglang/srt/managers/scheduler.py", 3112, "run_scheduler_process",
         "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
        ("sglang/srt/model_executor/model_runner.py", 402, "initialize", "self.load_model()"),
        ("sglang/srt/model_loader/loader.py", 651, "load_model", "self.load_weights_and_postprocess("),
        ("sglang/srt/layers/moe/fused_moe_triton/layer.py", 588, "weight_loader",
         "expert_data.copy_(loaded_weight)"),
    ], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
       f"of {GPU_TOTAL_GIB:.2f} GiB of which 1.27 GiB is free. Including non-PyTorch memory, this process "
       "has 93.68 GiB memory in use. Of the allocated memory 91.80 GiB is allocated by PyTorch, and "
       "1.09 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
       "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
       header="Scheduler hit an exception: Traceback (most recent call last):")


def illegal_memory_access_error():
    return traceback_text([
        ("sglang/srt/managers/scheduler.py", 3135, "run_scheduler_process", "scheduler.event_loop_normal()"),
        ("sglang/srt/managers/scheduler.py", 1021, "event_loop_normal", "result = self.run_batch(batch)"),
        ("sglang/srt/model_executor/model_runner.py", 2317, "forward", "output = self._forward_raw("),
    ], "RuntimeError: CUDA error: an illegal memory access was encountered\n"
       "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
       "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
       "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
       header="Scheduler hit an exception: Traceback (most recent call last):")


def check_only(args, log):
    """--sim-check-only: validate the options, say so (the API key masked); returns the exit code."""
    try:
        check_server_args(args)
    except Fatal as fatal:
        log.raw(str(fatal), "error")
        return 1
    shown = argparse.Namespace(**dict(vars(args), api_key="********" if args.api_key else None))
    print(f"OK: the options parse (server_args={format_server_args(shown)})")
    return 0
