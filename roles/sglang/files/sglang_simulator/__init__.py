# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU-less stand-in for an SGLang server (``python -m sglang.launch_server``).

It is started the way the service starts SGLang 0.5.23::

    python sglang_simulator --config /etc/sglang/k26.yaml [--flag value ...]

and imitates what a deployment can observe from the outside:

* the options: a YAML ``--config`` file merged like SGLang's ConfigArgumentMerger
  (file first, command-line flags win) and parsed with argparse built from SGLang's own
  option table (sglang_server_options.json in this package, read from SGLang's parser by
  scripts/sglang_option_table.py): every option, choice, type and default is SGLang's, so
  a config fails or passes exactly as with SGLang (usage, "unrecognized arguments", exit 2);
* the start-up: SGLang-like log lines on stderr, the port CLOSED while weights load
  and CUDA graphs are captured, then an HTTP server where /v1/models, /model_info
  and /server_info answer at once while /health, /health_generate and /ready answer
  503 until warm-up ends ("The server is fired up and ready to roll!");
* the API: OpenAI completions and chat completions (streaming or not), /generate,
  /metrics (with --enable-metrics), Bearer API key, and on nodes with
  --node-rank >= 1 only a dummy /ping, /health and /health_generate;
* multi-node (--nnodes > 1): rank 0 waits at --dist-init-addr for the other ranks
  and ends itself when one of them dies, as NCCL would (Rendezvous);
* failures: crash or hang while loading, a crash after ready, a warm-up that never
  succeeds; and a prompt, clean exit (0) on SIGTERM or SIGINT.

It never loads a model: never use it for real traffic.

Simulator-only knobs are environment variables (real SGLang would reject them in the
config file), each also accepted as a command-line flag:

    SGLANG_SIM_LOAD_SECONDS             --sim-load-seconds             3.0  weight loading
    SGLANG_SIM_LOAD_HOLD_FILE           --sim-load-hold-file           (none) loading goes on until this
                                                                            file exists (tests: a load that
                                                                            lasts exactly as long as they need)
    SGLANG_SIM_WARMUP_HOLD_FILE         --sim-warmup-hold-file         (none) the same for the warm-up
    SGLANG_SIM_GRAPH_SECONDS            --sim-graph-seconds            1.0  CUDA graph capture
    SGLANG_SIM_WARMUP_SECONDS           --sim-warmup-seconds           1.0  warm-up request
    SGLANG_SIM_TOKENS_PER_SECOND        --sim-tokens-per-second        model: the performance model below;
                                        a number: that speed per request (0: no delay)
    SGLANG_SIM_HEALTH_GENERATE_SECONDS  --sim-health-generate-seconds  1.0  /health_generate once warm
    SGLANG_SIM_HANG_FILE                --sim-hang-file                (none) once warm, the scheduler hangs
                                                                            while this file exists: HTTP answers,
                                                                            no token is made, /health_generate
                                                                            fails after SGLANG_HEALTH_CHECK_TIMEOUT
                                                                            (20 s) and /ready says 503 after it
    SGLANG_SIM_FAILURE                  --sim-failure                  none, crash_loading,
                                        hang_loading, crash_after_ready, warmup_fail
    SGLANG_SIM_CRASH_AFTER_SECONDS      --sim-crash-after-seconds      2.0  for crash_after_ready
    SGLANG_SIM_WITHOUT_READY            --sim-without-ready            no   /ready answers 404 (SGLang <= 0.5.18)
    SGLANG_SIM_GPU                      --sim-gpu                      auto, on or off (below)
    SGLANG_SIM_GPU_ACTIVATION_GIB       --sim-gpu-activation-gib       2.0  GPU memory beyond mem-fraction-static
    SGLANG_SIM_GPU_STEP_DIM             --sim-gpu-step-dim             8192 decode step: matrix size
    SGLANG_SIM_GPU_STEP_MATMULS         --sim-gpu-step-matmuls         4    decode step: products per rank
    SGLANG_SIM_COMPILE_POLL_SECONDS     --sim-compile-poll-seconds     1.0  compile mode: between two polls of
                                                                            /v1/models (the real one: 10)
    SGLANG_SIM_COMPILE_SAFETY_SECONDS   --sim-compile-safety-seconds   1.0  compile mode: the sleep "for safety"
                                                                            before the server is stopped (real: 10)

GPU mode (gpu.py): with ``--sim-gpu auto`` where an NVIDIA driver is
loaded and the interpreter has PyTorch, or always with ``on``, one process per local rank takes
mem-fraction-static of its GPU, captures a real CUDA graph, and runs real GPU work for every decode step, with
NCCL between pipeline stages. Without it the simulator never touches a GPU.

Performance model (CPU mode, ``--sim-tokens-per-second model``): every running request gets one token per decode
step, timed on SGLang 0.5.23's semantics for Kimi K2.6 on 8 GPUs of the RTX PRO 6000 class (performance.py says
how, and what the constants are fitted to).

``--sim-check-only`` only parses and validates the options, then exits (0 when valid).

Compile mode (``--sim-compile-deep-gemm``, anywhere in the arguments) stands for SGLang 0.5.23's
``python -m sglang.compile_deep_gemm`` (compile_mode.py says how).

The modules, each with its tests in tests/unit/test_simulator_<module>.py: options (the parser, from
sglang_server_options.json), checks (SGLang's checks and error texts), performance, serving (metrics, pacing), api
(routes), transport (HTTP), signals, rendezvous (multi-node), lifecycle (start-up, life, main), compile_mode, gpu
and log; __main__ runs it. VERSION below is the one home of the simulator's version.

Needs only the Python 3.11 standard library, PyYAML and sglang_server_options.json in this package.
"""

VERSION = "0.5.23-simulator"
