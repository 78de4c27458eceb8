"""GPU-less stand-in for an SGLang server (``python -m sglang.launch_server``).

It is started the way the service starts SGLang 0.5.23::

    sglang_simulator.py --config /etc/sglang/k26.yaml [--flag value ...]

and imitates what a deployment can observe from the outside:

* the options: a YAML ``--config`` file merged like SGLang's ConfigArgumentMerger
  (file first, command-line flags win) and parsed with argparse built from SGLang's own
  option table (sglang_server_options.json beside this file, read from SGLang's parser by
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

GPU mode (sglang_simulator_gpu.py, beside this file): with ``--sim-gpu auto`` where an NVIDIA driver is
loaded and the interpreter has PyTorch, or always with ``on``, one process per local rank takes
mem-fraction-static of its GPU, captures a real CUDA graph, and runs real GPU work for every decode step, with
NCCL between pipeline stages. Without it the simulator never touches a GPU.

Performance model (CPU mode, ``--sim-tokens-per-second model``): every running request gets one token per decode
step, timed on SGLang 0.5.23's semantics for Kimi K2.6 on 8 GPUs of the RTX PRO 6000 class (PerformanceModel):

- decode is bound by reading weights: a layer costs weight_ms / tp plus request_ms x batch / tp (each request
  activates its own experts), plus the launch cost of a layer (small with decode CUDA graphs, large without), plus
  with tp > 1 the layer's two all-reduces, costed by the link (PCIe, NVLink);
- the pipeline scheduler keeps pp_size + pp-async-batch-depth micro-batch slots (scheduler_pp_mixin.py
  init_pp_loop_state), so with R requests min(R, pp + depth) micro-batches are in flight and a step cycle is the
  longer of one micro-batch's pass through the stages and the last stage's work for all of them; the last stage
  also processes each micro-batch's outputs serially (PP turns the overlap schedule off), and a depth >= 1 lets part
  of that overlap other micro-batches' GPU work (event_loop_pp's docstring); with one request there is nothing to
  overlap, whatever the depth;
- with pp-size 1 the overlap schedule hides the CPU's work behind the GPU's.

The constants are fitted to the published measurements of that machine class (the seed's PP8 runs, SGLang and
vLLM TP8; module_utils/sglang_perf_facts.py MEASUREMENTS, held within 30% in tests/unit/test_simulator_performance.py).
They describe that machine class, not any other.

``--sim-check-only`` only parses and validates the options, then exits (0 when valid).

Compile mode (``--sim-compile-deep-gemm``, anywhere in the arguments) stands for SGLang 0.5.23's
``python -m sglang.compile_deep_gemm`` as the deployer runs it (plugins/module_utils/sglang_deepgemm.py)::

    sglang_simulator.py --sim-compile-deep-gemm --config /etc/sglang/k26.yaml --port 41234 --timeout 1800 \
        --host 127.0.0.1

It takes the options of launch mode plus compile_deep_gemm's ``--timeout`` (seconds, default 3600; launch mode
refuses it), less the API keys and TLS options, prints what the real one prints on stdout and starts this file in
launch mode as its server, with CUDA graphs and torch.compile off, the same environment and its own stdout and
stderr. It polls http://host:port/v1/models without a key until 200, sends one /generate request, writes stand-in
kernel files into DeepGEMM's cache (SGLANG_DG_CACHE_DIR, else $SGLANG_CACHE_DIR/deep_gemm, else
~/.cache/sglang/deep_gemm), says "DeepGEMM Kernels compilation finished successfully.", stops the server and exits
0. A /generate that fails ends it with a RuntimeError traceback (exit 1). After --timeout it prints the
TimeoutError traceback and, like the real one, whose server is a non-daemon child process, never exits while its
server lives (a hung server: a hang until a deadline stops it), else exits 1. SIGTERM or SIGINT goes on to the
server, which stops; then the signal's default action ends the process.

Needs only the Python 3.11 standard library, PyYAML and sglang_server_options.json beside it.
"""

import argparse
import contextlib
import hashlib
import hmac
import http.client
import json
import math
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import yaml

VERSION = "0.5.23-simulator"
DEFAULT_CONTEXT_LENGTH = 262144
DEFAULT_MAX_TOKENS = 16  # OpenAI endpoints
DEFAULT_MAX_NEW_TOKENS = 128  # native /generate
DEFAULT_SHARDS = 64
DEFAULT_ARCHITECTURE = "DeepseekV3ForCausalLM"
MAX_BODY_BYTES = 64 * 1024 * 1024
WARMUP_RETRY_SECONDS = 2.0
# --dist-timeout unset: torch.distributed's default timeout of a process group.
DEFAULT_DIST_TIMEOUT = 600
WARMUP_CLIENT = f"127.0.0.1:{40000 + os.getpid() % 20000}"  # the warm-up request's client address
LOAD_STEPS = 8
SITE = "/usr/local/lib/python3.11/dist-packages"

GPU_TOTAL_GIB = 94.97
GPU_AVAIL_GB = 93.72
CHECKPOINT_GB = 594.0

# SGLang 0.5.23's server options (flags, actions, types, choices, defaults), read from its own parser by
# scripts/sglang_option_table.py; the simulator's parser is built from them (build_parser).
OPTION_TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sglang_server_options.json")
FAILURE_MODES = ("none", "crash_loading", "hang_loading", "crash_after_ready", "warmup_fail")
GPU_MODES = ("auto", "on", "off")
NVIDIA_DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

# Probes and scrapes are logged only at --log-level debug (they would flood the journal).
QUIET_PATHS = frozenset({"/health", "/health_generate", "/ready", "/metrics"})
# Like SGLang's API key middleware: these stay open, everything else needs the key.
OPEN_PATH_PREFIXES = ("/health", "/ready", "/metrics")
# Routes SGLang 0.5.23 marks AuthLevel.ADMIN_OPTIONAL (srt/entrypoints/http_server.py) that the simulator serves:
# with an admin key set only that key opens them, with none the API key does (srt/utils/auth.py decide_request_auth).
ADMIN_OPTIONAL_PATHS = ("/flush_cache",)
FLUSHED = ("Cache flushed.\nPlease check backend logs for more details. "
           "(When there are running or waiting requests, the operation will not be performed.)\n")
# What the dummy health server of a node with --node-rank >= 1 answers (200, always).
DUMMY_HEALTH_PATHS = ("/ping", "/health", "/health_generate")

WORDS = ("Kimi", "K2.6", "is", "answering", "from", "the", "SGLang", "simulator,", "one", "token",
         "at", "a", "time,", "without", "a", "GPU.")


# --------------------------------------------------------------------------- logging

class Log:
    """SGLang-style lines on stderr: thread-safe, one flushed line at a time."""

    def __init__(self, level="info", stream=None):
        self.threshold = LOG_LEVELS.get(str(level).lower(), LOG_LEVELS["info"])
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()

    def enabled(self, level):
        return LOG_LEVELS[level] >= self.threshold

    def raw(self, text, level="info"):
        """Write TEXT as it is (tqdm bars, tracebacks, uvicorn lines)."""
        if not self.enabled(level):
            return
        with self._lock:
            self.stream.write(text if text.endswith("\n") else text + "\n")
            self.stream.flush()

    def line(self, message, level="info", rank=""):
        """A ``[YYYY-mm-dd HH:MM:SS PP0 TP0] message`` line."""
        label = "ERROR: " if level == "error" else ""
        self.raw(f"[{timestamp()}{rank}] {label}{message}", level)

    def info(self, message, rank=""):
        self.line(message, "info", rank)

    def warning(self, message, rank=""):
        self.line(message, "warning", rank)

    def error(self, message, rank=""):
        self.line(message, "error", rank)

    def uvicorn(self, message, level="info"):
        """A uvicorn line as SGLang logs it: ``[YYYY-mm-dd HH:MM:SS] INFO:     message``."""
        self.raw(f"[{timestamp()}] {level.upper() + ':':<10}{message}", level)


def timestamp():
    return time.strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------- options

class ConfigError(Exception):
    """The --config file cannot be used (reported like an argparse error, exit 2)."""


def split_config_option(argv):
    """Return (config path or None, argv without --config FILE)."""
    path, rest, i = None, [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--config" or arg.startswith("--config="):
            if path is not None:
                raise ConfigError("only one --config file may be given")
            if arg == "--config":
                if i + 1 >= len(argv):
                    raise ConfigError("argument --config: expected one argument")
                path, i = argv[i + 1], i + 2
            else:
                path, i = arg.split("=", 1)[1], i + 1
            continue
        rest.append(arg)
        i += 1
    return path, rest


def load_config_file(path):
    """Read the YAML mapping of options (an empty file is an empty mapping)."""
    if not path.endswith((".yaml", ".yml")):
        raise ConfigError(f"config file must be YAML (.yaml or .yml): {path}")
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"error parsing YAML config file {path}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must contain a mapping of options, "
                          f"not {type(data).__name__}")
    return data


def config_keys(action):
    """The keys a config file may use for ACTION: its dest and every long flag, with underscores."""
    return {action.dest} | {option[2:].replace("-", "_") for option in action.option_strings if option.startswith("--")}


def config_to_args(config, parser):
    """Turn the mapping into command-line arguments the way SGLang 0.5.23's ConfigArgumentMerger does.

    A key becomes ``--KEY`` exactly as written (so ``tp_size`` is an unrecognized ``--tp_size``, and a unique
    prefix is an abbreviation that argparse accepts); store_true options: true -> bare flag, false -> left out;
    other booleans -> ``--key true|false``; lists -> the flag followed by each item; mappings -> JSON; scalars ->
    ``--key value``. Options of other kinds (the deprecated store_true flags) are refused in the file.
    """
    store_true = {key for action in parser._actions if isinstance(action, argparse._StoreTrueAction)
                  for key in config_keys(action)}
    single_value = (argparse._StoreTrueAction, argparse._StoreAction)
    unsupported = {key: action for action in parser._actions
                   if action.option_strings and not isinstance(action, single_value)
                   and action.nargs is not None and action.dest not in ("help", "config")
                   for key in config_keys(action)}
    args = []
    for key, value in config.items():
        if not isinstance(key, str) or not key.strip("-_"):
            raise ConfigError(f"config file: option names must be strings, got {key!r}")
        key_norm = key.replace("-", "_")
        if key_norm in unsupported:
            raise ConfigError(f"Unsupported config option '{key_norm}' with action "
                              f"'{unsupported[key_norm].__class__.__name__}'")
        if key.strip("-") in ("config", "help", "h"):
            raise ConfigError(f"Unsupported config option '{key}' in the config file")
        if key_norm.startswith("sim_"):
            raise ConfigError(f"unrecognized arguments: --{key} (simulator knobs are SGLANG_SIM_* "
                              "environment variables; SGLang rejects them in its config)")
        args.extend(option_to_args("--" + key, value, key_norm in store_true))
    return args


def option_to_args(flag, value, is_store_true):
    if isinstance(value, bool):
        if is_store_true:
            return [flag] if value else []
        return [flag, str(value).lower()]
    if isinstance(value, (int, float, str)):
        return [flag, str(value)]
    if isinstance(value, list):
        if not all(isinstance(item, (int, float, str)) and not isinstance(item, bool) for item in value):
            raise ConfigError(f"config file: {flag[2:]}: list items must be numbers or strings")
        return [flag, *(str(item) for item in value)] if value else []
    if isinstance(value, dict):
        return [flag, json.dumps(value)]
    raise ConfigError(f"config file: {flag[2:]}: unsupported value {value!r} "
                      f"({type(value).__name__}); remove the key to get the default")


def non_negative_float(text):
    value = float(text)
    if value < 0 or math.isnan(value):
        raise ValueError(text)
    return value


def tokens_per_second(text):
    return text if text == "model" else non_negative_float(text)


def yes_no(text):
    value = str(text).strip().lower()
    if value not in ("1", "0", "true", "false", "yes", "no"):
        raise ValueError(text)
    return value in ("1", "true", "yes")


def positive_int(text):
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


# SGLang 0.5.23's type functions, imitated under their own names (argparse names a ValueError's type by its
# function's name: "invalid int value", "invalid loads value" for json.loads).
def human_readable_int(value):
    """An integer, or a number with an SI suffix (k, M, G, T; decimals allowed) or an IEC one (Ki, Mi, Gi, Ti)."""
    value = value.strip()
    match = HUMAN_READABLE_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in IEC_SUFFIXES:
            if "." in number:
                raise argparse.ArgumentTypeError(f"Decimals are not allowed with IEC suffixes like '{suffix}'.")
            return int(number) * IEC_SUFFIXES[suffix]
        return int(Decimal(number) * SI_SUFFIXES[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes "
                                         "(1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive.")


HUMAN_READABLE_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")
SI_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
IEC_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def json_list_type(value):
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.")


def nullable_str(value):
    return None if not value or value == "None" else value


def parse_cuda_graph_backend_arg(raw):
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def cuda_graph_config_type(phases, keys):
    """--cuda-graph-config: a JSON object of phase -> settings, each phase and key one SGLang knows."""
    def parse_cuda_graph_config_arg(raw):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}")
        if not isinstance(parsed, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
        for phase, settings in parsed.items():
            if str(phase) not in phases:
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config: unknown phase '{phase}', expected one of {phases}")
            if not isinstance(settings, dict):
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}")
            if "backend" in settings:
                parse_cuda_graph_backend_arg(settings["backend"])
            unknown = [key for key in settings if key not in keys[str(phase)]]
            if unknown:
                raise argparse.ArgumentTypeError(f"--cuda-graph-config['{phase}']: unknown key '{unknown[0]}', "
                                                 f"expected one of {keys[str(phase)]}")
        return {str(phase): dict(settings) for phase, settings in parsed.items()}
    return parse_cuda_graph_config_arg


class DeprecatedStoreTrueAction(argparse.Action):
    """A deprecated flag that still stores True on the command line (SGLang 0.5.23's action of the same name);
    config files refuse it."""

    def __init__(self, option_strings, dest, nargs=0, const=True, default=False, **kwargs):
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


class DeprecatedStoreConstAction(argparse.Action):
    """A deprecated flag that stores a fixed value of its replacement (SGLang 0.5.23's action of the same name)."""

    def __init__(self, option_strings, dest, const_value=None, nargs=0, default=None, **kwargs):
        self.const_value = const_value
        super().__init__(option_strings, dest, nargs=nargs, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const_value)


class LoRAPathAction(argparse.Action):
    """--lora-paths: names or paths, or JSON objects with lora_name and lora_path (SGLang 0.5.23's action)."""

    def __call__(self, parser, namespace, values, option_string=None):
        paths = []
        for value in values or []:
            value = value.strip()
            if value.startswith("{") and value.endswith("}"):
                entry = json.loads(value)
                if "lora_path" not in entry or "lora_name" not in entry:
                    parser.error(f"{value!r} looks like a JSON str, but it does not contain 'lora_name' and "
                                 "'lora_path' keys.")
                paths.append(entry)
            else:
                paths.append(value)
        setattr(namespace, self.dest, paths)


def load_option_table(path=OPTION_TABLE_FILE):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def option_types(table):
    """The table's type names -> the functions that parse them."""
    graphs = table["cuda_graph_config"]
    return {"str": str, "int": int, "float": float, "json": json.loads, "human_readable_int": human_readable_int,
            "json_list": json_list_type, "nullable_str": nullable_str,
            "cuda_graph_backend": parse_cuda_graph_backend_arg,
            "cuda_graph_config": cuda_graph_config_type(graphs["phases"], graphs["keys"])}


def add_server_options(parser, table):
    """Every SGLang 0.5.23 option, as its own parser defines it (the table), with its names and defaults."""
    types = option_types(table)
    for option in table["options"]:
        flags, action = option["flags"], option["action"]
        settings = {"dest": option["dest"], "default": option["default"]}
        if option["required"]:
            settings["required"] = True
        if action == "store_true":
            parser.add_argument(*flags, action="store_true", **settings)
        elif action == "boolean_optional":
            parser.add_argument(*[flag for flag in flags if not flag.startswith("--no-")],
                                action=argparse.BooleanOptionalAction, **settings)
        elif action == "deprecated_store_true":
            parser.add_argument(*flags, action=DeprecatedStoreTrueAction, **settings)
        elif action == "deprecated_store_const":
            parser.add_argument(*flags, action=DeprecatedStoreConstAction, const_value=option["const_value"],
                                nargs=option["nargs"], choices=option["choices"], **settings)
        elif action in ("store", "lora_paths"):
            parser.add_argument(*flags, action=LoRAPathAction if action == "lora_paths" else "store",
                                type=types[option["type"]] if option["type"] else None, nargs=option["nargs"],
                                choices=option["choices"], **settings)
        else:
            raise ValueError(f"{OPTION_TABLE_FILE}: unknown action {action!r} of {flags}")


# (flag, environment variable, default, type, help)
SIM_KNOBS = (
    ("--sim-load-seconds", "SGLANG_SIM_LOAD_SECONDS", "3.0", non_negative_float, "weight loading time"),
    ("--sim-load-hold-file", "SGLANG_SIM_LOAD_HOLD_FILE", "", str,
     "loading goes on (port closed) until this file exists"),
    ("--sim-graph-seconds", "SGLANG_SIM_GRAPH_SECONDS", "1.0", non_negative_float,
     "CUDA graph capture time (0 when graphs are disabled)"),
    ("--sim-warmup-seconds", "SGLANG_SIM_WARMUP_SECONDS", "1.0", non_negative_float, "warm-up time"),
    ("--sim-warmup-hold-file", "SGLANG_SIM_WARMUP_HOLD_FILE", "", str,
     "the warm-up goes on (HTTP up, /health 503) until this file exists"),
    ("--sim-tokens-per-second", "SGLANG_SIM_TOKENS_PER_SECOND", "model", tokens_per_second,
     "generation speed per request (0: no delay)"),
    ("--sim-health-generate-seconds", "SGLANG_SIM_HEALTH_GENERATE_SECONDS", "1.0", non_negative_float,
     "time /health_generate takes once warm"),
    ("--sim-failure", "SGLANG_SIM_FAILURE", "none", str, "one of: " + ", ".join(FAILURE_MODES)),
    ("--sim-crash-after-seconds", "SGLANG_SIM_CRASH_AFTER_SECONDS", "2.0", non_negative_float,
     "seconds after ready before crash_after_ready crashes"),
    ("--sim-without-ready", "SGLANG_SIM_WITHOUT_READY", "no", yes_no,
     "answer /ready with 404, as SGLang 0.5.18 and older do (readiness then needs /health_generate)"),
    ("--sim-gpu", "SGLANG_SIM_GPU", "auto", str, "GPU mode, one of: " + ", ".join(GPU_MODES)),
    ("--sim-gpu-activation-gib", "SGLANG_SIM_GPU_ACTIVATION_GIB", "2.0", non_negative_float,
     "GPU mode: activation workspace reserved beyond mem-fraction-static"),
    ("--sim-gpu-step-dim", "SGLANG_SIM_GPU_STEP_DIM", "8192", positive_int, "GPU mode: decode step matrix size"),
    ("--sim-gpu-step-matmuls", "SGLANG_SIM_GPU_STEP_MATMULS", "4", positive_int,
     "GPU mode: matrix products per decode step and rank"),
    ("--sim-compile-poll-seconds", "SGLANG_SIM_COMPILE_POLL_SECONDS", "1.0", non_negative_float,
     "compile mode: seconds between two polls of /v1/models (compile_deep_gemm: 10)"),
    ("--sim-compile-safety-seconds", "SGLANG_SIM_COMPILE_SAFETY_SECONDS", "1.0", non_negative_float,
     "compile mode: the sleep 'for safety' before the server is stopped (compile_deep_gemm: 10)"),
)


@dataclass(frozen=True)
class SimSettings:
    """The simulator-only knobs."""
    load_seconds: float
    load_hold_file: str
    graph_seconds: float
    warmup_seconds: float
    warmup_hold_file: str
    tokens_per_second: object  # "model" or a float
    health_generate_seconds: float
    failure: str
    crash_after_seconds: float
    without_ready: bool
    gpu: str
    gpu_activation_gib: float
    gpu_step_dim: int
    gpu_step_matmuls: int
    compile_poll_seconds: float
    compile_safety_seconds: float
    check_only: bool


def build_parser(environ, compile_deep_gemm=False):
    # argparse accepts a unique prefix of a flag, as in SGLang; the simulator knows SGLang's flags and its own
    # --sim-* knobs, so an abbreviation resolves as in SGLang (tests/unit/test_simulator_conformance.py).
    parser = argparse.ArgumentParser(description="GPU-less SGLang simulator (launch_server options).")
    add_server_options(parser, load_option_table())
    if compile_deep_gemm:  # compile_deep_gemm's own option (CompileArgs); launch_server refuses it
        parser.add_argument("--timeout", type=int, default=COMPILE_TIMEOUT,
                            help="compile mode: seconds to wait for the server")
    sim = parser.add_argument_group("simulator knobs (defaults from SGLANG_SIM_* environment variables)")
    for flag, env, default, kind, help_text in SIM_KNOBS:
        # A string default goes through TYPE, so a bad environment value is an argparse error.
        sim.add_argument(flag, type=kind, default=environ.get(env) or default, help=f"{help_text} ({env})")
    sim.add_argument("--sim-check-only", action="store_true",
                     help="only parse and validate the options, then exit")
    return parser


def parse_args(argv, environ, compile_deep_gemm=False):
    """Merge the config file and the flags; return (server args namespace, SimSettings).

    COMPILE_DEEP_GEMM: compile_deep_gemm's parser, with its --timeout (left in the namespace)."""
    parser = build_parser(environ, compile_deep_gemm)
    try:
        config_path, cli_args = split_config_option(argv)
        config_args = config_to_args(load_config_file(config_path), parser) if config_path else []
    except ConfigError as exc:
        parser.error(str(exc))
    args = parser.parse_args(config_args + cli_args)
    del args.config  # not a ServerArgs field
    for name, choices in (("failure", FAILURE_MODES), ("gpu", GPU_MODES)):
        if getattr(args, "sim_" + name) not in choices:
            parser.error(f"argument --sim-{name}: invalid choice: {getattr(args, 'sim_' + name)!r} "
                         f"(choose from {', '.join(choices)})")
    settings = SimSettings(**{name[4:]: getattr(args, name) for name in list(vars(args))
                              if name.startswith("sim_")})
    for name in [name for name in vars(args) if name.startswith("sim_")]:
        delattr(args, name)
    args.served_model_name = args.served_model_name or args.model_path
    args.tokenizer_path = args.tokenizer_path or args.model_path
    return args, settings


def server_args_dict(args):
    """The server args as SGLang 0.5.23's resolved_dict(): /server_info returns them to any caller with the API key,
    the key itself included (srt/utils/common.py build_server_info)."""
    return dict(vars(args))


def format_server_args(args):
    """The server args as SGLang 0.5.23 logs them at start (srt/entrypoints/engine.py: ``server_args={dict}``): the
    API key in clear text, like the real server, so that what reads the journal is tested against the real exposure."""
    return repr(server_args_dict(args))


# --------------------------------------------------------------------------- start-up plan

class Fatal(Exception):
    """The process ends with exit code 1 after printing this text (a traceback)."""


class ShutdownRequested(BaseException):
    """Raised in the main thread by the SIGTERM/SIGINT handler."""

    def __init__(self, signame):
        super().__init__(signame)
        self.signame = signame


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


def inspect_model(path):
    """(number of safetensors shards, architecture) from a local checkpoint, else defaults."""
    shards, architecture = DEFAULT_SHARDS, DEFAULT_ARCHITECTURE
    if os.path.isdir(path):
        count = sum(1 for name in os.listdir(path) if name.endswith(".safetensors"))
        shards = count or shards
        try:
            with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
                architecture = (json.load(handle).get("architectures") or [architecture])[0]
        except (OSError, ValueError, AttributeError, IndexError, TypeError):
            pass
    return shards, architecture


def progress_line(done, total, elapsed):
    """A tqdm line as SGLang prints it while loading the checkpoint."""
    def clock(seconds):
        return "%02d:%02d" % divmod(int(seconds), 60)
    if done and elapsed > 0:
        rate = done / elapsed
        timing = f"{clock(elapsed)}<{clock((total - done) / rate)}, {rate:5.2f}it/s"
    else:
        timing = f"{clock(elapsed)}<?, ?it/s"
    percent = int(100 * done / total)
    return f"Loading safetensors checkpoint shards: {percent:3d}% Completed | {done}/{total} [{timing}]"


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


# --------------------------------------------------------------------------- serving state

@dataclass(frozen=True)
class PerformanceModel:
    """How long one decode step takes (the module docstring says what it stands for)."""
    pp_size: int
    async_batch_depth: int
    decode_graphs: bool
    tp_size: int = 1
    link: str = "pcie"

    LAYERS = 61  # Kimi K2.6's decoder layers
    WEIGHT_MS = 0.10  # per layer and step on one GPU: the weights every token needs (attention, shared expert)
    REQUEST_MS = 0.20  # per layer, step and request on one GPU: the experts a request activates
    LAUNCH_MS = {True: 0.059, False: 0.262}  # per layer and step: with decode CUDA graphs / launched eagerly
    # per layer and step with tp > 1: two all-reduces. PCIe fitted to the TP8 rows; the custom all-reduce to the
    # patched SGLang row; NVLink is not in the measurements (an estimate, used only to order layouts).
    ALLREDUCE_MS = {"pcie": 0.097, "pcie-custom-allreduce": 0.066, "nvlink": 0.02}
    OUTPUT_MS = 6.17  # per micro-batch and step on the last stage: output processing, serial with PP
    DEPTH_HIDES = 0.41  # share of it that a depth >= 1 overlaps with other micro-batches (fitted to the seed's C=16)

    @classmethod
    def of(cls, args, link="pcie"):
        return cls(args.pp_size, args.pp_async_batch_depth, plan_cuda_graphs(args)[0], args.tp_size, link)

    def micro_batches(self, running):
        """Micro-batches in flight: SGLang's pp_size + depth slots, as many as there are requests to fill them."""
        if self.pp_size <= 1:
            return 1
        return max(1, min(running, self.pp_size + max(self.async_batch_depth, 0)))

    def layer_ms(self, batch):
        tp = max(self.tp_size, 1)
        allreduce = self.ALLREDUCE_MS[self.link] if tp > 1 else 0.0
        return (self.WEIGHT_MS + self.REQUEST_MS * batch) / tp + self.LAUNCH_MS[self.decode_graphs] + allreduce

    def stage_ms(self, batch):
        return self.LAYERS / max(self.pp_size, 1) * self.layer_ms(batch)

    def step_seconds(self, running):
        running = max(running, 1)
        slots = self.micro_batches(running)
        batch = math.ceil(running / slots)
        stage = self.stage_ms(batch)
        if self.pp_size <= 1:  # the overlap schedule: the CPU prepares the next step while the GPU runs this one
            return max(stage, self.OUTPUT_MS) / 1000
        hidden = self.DEPTH_HIDES if self.async_batch_depth > 0 and slots > 1 else 0.0
        last = stage + self.OUTPUT_MS * (1 - hidden)
        one_pass = (self.pp_size - 1) * stage + last
        return max(one_pass, slots * last) / 1000

    def throughput(self, running):
        """Output tokens per second of all RUNNING requests together."""
        return running / self.step_seconds(running) if running > 0 else 0.0


class Metrics:
    """Counters and gauges behind /metrics (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.running = 0
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0

    def start(self, prompt_tokens):
        with self._lock:
            self.running += 1
            self.requests += 1
            self.prompt_tokens += prompt_tokens

    def token(self):
        with self._lock:
            self.generation_tokens += 1

    def finish(self):
        with self._lock:
            self.running -= 1

    def render(self, model_name, throughput):
        escaped = model_name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        label = f'{{model_name="{escaped}"}}'
        with self._lock:
            rows = (
                ("num_running_reqs", "gauge", "The number of running requests.", self.running),
                ("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", 0),
                ("token_usage", "gauge", "The token usage.", 0.01 * self.running),
                ("gen_throughput", "gauge", "The generation throughput (token/s).", throughput),
                ("num_requests_total", "counter", "Number of requests processed.", self.requests),
                ("prompt_tokens_total", "counter", "Number of prefill tokens processed.", self.prompt_tokens),
                ("generation_tokens_total", "counter", "Number of generation tokens processed.",
                 self.generation_tokens),
            )
        out = []
        for name, kind, help_text, value in rows:
            out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} {kind}",
                    f"sglang:{name}{label} {float(value)}"]
        return "\n".join(out) + "\n"


class ServerState:
    """What the HTTP handlers need to know about the server."""

    def __init__(self, args, settings, log):
        self.args = args
        self.settings = settings
        self.log = log
        self.status = "Starting"  # -> "Up" after warm-up
        self.metrics = Metrics()
        self.engine = None  # GPU mode: the decode-step engine that paces tokens
        self.model = PerformanceModel.of(args)
        self.created = int(time.time())

    @property
    def warm(self):
        return self.status == "Up"

    def next_token(self):
        """Wait as long as one decode step takes for a running request."""
        speed = self.settings.tokens_per_second
        if self.engine is not None:
            self.engine.next_token()
        elif speed == "model":
            time.sleep(self.model.step_seconds(self.metrics.running))
        elif speed > 0:
            time.sleep(1.0 / speed)

    def throughput(self):
        """Output tokens per second now (the gen_throughput gauge)."""
        speed = self.settings.tokens_per_second
        running = self.metrics.running
        if self.engine is not None:
            return 0.0  # GPU mode runs as fast as the GPU does; the figure is not known here
        return self.model.throughput(running) if speed == "model" else speed * running


class HttpError(Exception):
    """Answer STATUS with an SGLang/OpenAI error body."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def count_words(value):
    """Approximate prompt tokens: words of strings, ids of token lists, texts of messages and parts."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        if value and all(isinstance(item, int) for item in value):
            return len(value)
        return sum(count_words(item) for item in value)
    if isinstance(value, dict):
        return count_words(value.get("content")) + count_words(value.get("text"))
    return 0


def token_text(index):
    word = WORDS[index % len(WORDS)]
    return word if index == 0 else " " + word


def usage(prompt_tokens, completion_tokens):
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class Api:
    """Routes and endpoints; HANDLER arguments are Handler instances (the transport)."""

    def __init__(self, state):
        self.state = state
        self.args = state.args
        self.log = state.log
        self.dummy = self.args.node_rank >= 1
        self.routes = {
            "/v1/models": (("GET",), self.models),
            "/model_info": (("GET",), self.model_info),
            "/get_model_info": (("GET",), self.model_info),
            "/server_info": (("GET",), self.server_info),
            "/get_server_info": (("GET",), self.server_info),
            "/health": (("GET",), self.health),
            "/health_generate": (("GET",), self.health_generate),
            "/ready": (("GET",), self.ready),
            "/v1/completions": (("POST",), self.completions),
            "/v1/chat/completions": (("POST",), self.chat_completions),
            "/generate": (("POST",), self.generate),
            "/flush_cache": (("GET", "POST"), self.flush_cache),
        }
        if self.args.enable_metrics:
            self.routes["/metrics"] = (("GET",), self.metrics)

    # ---- dispatch

    def handle(self, handler, method):
        path = urlsplit(handler.path).path
        try:
            body = handler.read_body()
            if self.dummy:
                return self.dummy_health(handler, method, path)
            if not self.authorized(handler, path):
                return handler.send_json(401, {"error": "Unauthorized"})
            route = self.routes.get(path)
            if route is None:
                return handler.send_json(404, {"detail": "Not Found"})
            if method not in route[0]:
                return handler.send_json(405, {"detail": "Method Not Allowed"})
            route[1](handler, body)
        except HttpError as exc:
            handler.send_json(exc.status, {"object": "error", "message": exc.message,
                                           "type": "BadRequestError", "param": None, "code": exc.status})
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
            self.log.line(f"client {handler.client_address[0]} went away during {path}", "debug")
        except Exception as exc:  # a simulator bug: say so in one line, answer 500, keep serving
            handler.close_connection = True
            self.log.error(f"simulator error while serving {method} {path}: {exc!r}")
            try:
                handler.send_json(500, {"detail": "Internal Server Error"})
            except OSError:
                pass

    def dummy_health(self, handler, method, path):
        """Nodes with --node-rank >= 1 run SGLang's dummy health server: 200 on its health paths, whatever the
        state of the instance (rank 0 serves the API)."""
        if method == "GET" and path in DUMMY_HEALTH_PATHS:
            return handler.send_empty(200)
        return handler.send_json(404, {"detail": "Not Found"})

    def authorized(self, handler, path):
        if path.startswith(OPEN_PATH_PREFIXES):
            return True
        key = self.args.api_key
        if path in ADMIN_OPTIONAL_PATHS:
            key = getattr(self.args, "admin_api_key", None) or key
        if not key:
            return True
        given = handler.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode("utf-8"), f"Bearer {key}".encode("utf-8"))

    # ---- information

    def models(self, handler, body):
        handler.send_json(200, {"object": "list", "data": [{
            "id": self.args.served_model_name,
            "object": "model",
            "created": self.state.created,
            "owned_by": "sglang",
            "root": self.args.served_model_name,  # as 0.5.23 answers (seen): the served name, not the path
            "parent": None,
            "max_model_len": self.context_length(),
        }]})

    def model_info(self, handler, body):
        handler.send_json(200, {
            "model_path": self.args.model_path,
            "tokenizer_path": self.args.tokenizer_path,
            "is_generation": True,
            "served_model_name": self.args.served_model_name,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
        })

    def server_info(self, handler, body):
        info = server_args_dict(self.args)
        info.update(version=VERSION, simulator=True, internal_states=[{
            "status": self.state.status,
            "last_gen_throughput": round(self.state.throughput(), 2),
            "memory_usage": {"weight": round(weight_gb(self.args), 2), "graph": 0.85},
        }])
        handler.send_json(200, info)

    def metrics(self, handler, body):
        text = self.state.metrics.render(self.args.served_model_name, self.state.throughput())
        handler.send_bytes(200, text.encode("utf-8"), "text/plain; version=0.0.4; charset=utf-8")

    # ---- health

    def flush_cache(self, handler, body):
        """SGLang's radix-cache flush: nothing to flush here, the same answer."""
        handler.send_bytes(200, FLUSHED.encode("utf-8"), "text/plain; charset=utf-8")

    def health(self, handler, body):
        handler.send_empty(200 if self.state.warm else 503)

    def health_generate(self, handler, body):
        if not self.state.warm:
            return handler.send_empty(503)
        time.sleep(self.state.settings.health_generate_seconds)
        handler.send_empty(200)

    def ready(self, handler, body):
        if self.state.settings.without_ready:  # SGLang 0.5.18 and older have no /ready
            return handler.send_json(404, {"detail": "Not Found"})
        handler.send_empty(200 if self.state.warm else 503)

    # ---- generation

    def context_length(self):
        return self.args.context_length or DEFAULT_CONTEXT_LENGTH

    def completions(self, handler, body):
        request = json_object(body)
        if "prompt" not in request:
            raise HttpError(400, "prompt is required")
        self.openai_generation(handler, request, count_words(request["prompt"]), chat=False)

    def chat_completions(self, handler, body):
        request = json_object(body)
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HttpError(400, "messages must be a non-empty list")
        self.openai_generation(handler, request, count_words(messages), chat=True)

    def openai_generation(self, handler, request, prompt_tokens, chat):
        prompt_tokens = max(prompt_tokens, 1)
        keys = ("max_completion_tokens", "max_tokens") if chat else ("max_tokens",)
        max_tokens = self.max_tokens(request, keys, DEFAULT_MAX_TOKENS, prompt_tokens)
        reply = OpenAIReply(request, chat, self.args.served_model_name)
        with Generation(self.state, prompt_tokens) as generation:
            if not request.get("stream"):
                text = "".join(generation.tokens(max_tokens))
                return handler.send_json(200, reply.full(text, usage(prompt_tokens, max_tokens)))
            handler.start_stream()
            for index, token in enumerate(generation.tokens(max_tokens)):
                handler.send_event(json.dumps(reply.chunk(index, token, last=index == max_tokens - 1)))
            if (request.get("stream_options") or {}).get("include_usage"):
                handler.send_event(json.dumps(reply.usage_chunk(usage(prompt_tokens, max_tokens))))
            handler.send_event("[DONE]")
            handler.end_stream()

    def generate(self, handler, body):
        """SGLang's native API: {"text": ..., "sampling_params": {"max_new_tokens": N}, "stream": bool}."""
        request = json_object(body)
        prompt = request.get("text", request.get("input_ids"))
        if prompt is None or (isinstance(prompt, list) and prompt and not isinstance(prompt[0], int)):
            raise HttpError(400, "give one prompt as text or input_ids (batches are not simulated)")
        prompt_tokens = max(count_words(prompt), 1)
        params = request.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise HttpError(400, "sampling_params must be an object")
        max_new = self.max_tokens(params, ("max_new_tokens",), DEFAULT_MAX_NEW_TOKENS, prompt_tokens)
        rid = uuid.uuid4().hex
        started = time.monotonic()

        def payload(text, count):
            return {"text": text, "output_ids": list(range(count)), "meta_info": {
                "id": rid,
                "finish_reason": {"type": "length", "length": max_new} if count == max_new else None,
                "prompt_tokens": prompt_tokens, "completion_tokens": count, "cached_tokens": 0,
                "e2e_latency": round(time.monotonic() - started, 4)}}

        with Generation(self.state, prompt_tokens) as generation:
            if not request.get("stream"):
                return handler.send_json(200, payload("".join(generation.tokens(max_new)), max_new))
            handler.start_stream()
            text = ""
            for index, token in enumerate(generation.tokens(max_new)):
                text += token
                handler.send_event(json.dumps(payload(text, index + 1)))
            handler.send_event("[DONE]")
            handler.end_stream()

    def max_tokens(self, request, keys, default, prompt_tokens):
        value, key = default, keys[-1]
        for key in keys:
            if request.get(key) is not None:
                value = request[key]
                break
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise HttpError(400, f"{key} must be a non-negative integer")
        if prompt_tokens + value > self.context_length():
            raise HttpError(400, f"Requested token count exceeds the model's maximum context length of "
                                 f"{self.context_length()} tokens. You requested a total of "
                                 f"{prompt_tokens + value} tokens: {prompt_tokens} tokens from the input "
                                 f"and {value} tokens for the completion.")
        return value


def json_object(body):
    try:
        request = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HttpError(400, f"invalid JSON body: {exc}") from exc
    if not isinstance(request, dict):
        raise HttpError(400, "the JSON body must be an object")
    return request


class OpenAIReply:
    """Response and stream-chunk shapes for /v1/completions and /v1/chat/completions."""

    def __init__(self, request, chat, served_model_name):
        self.chat = chat
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = request.get("model") or served_model_name

    def _envelope(self, kind, choices, usage_value):
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model,
                "choices": choices, "usage": usage_value}

    def full(self, text, usage_value):
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "reasoning_content": None,
                                              "tool_calls": None}}
        else:
            choice = {"index": 0, "text": text}
        choice.update(logprobs=None, finish_reason="length", matched_stop=None)
        return self._envelope("chat.completion" if self.chat else "text_completion", [choice], usage_value)

    def chunk(self, index, token, last):
        if self.chat:
            delta = {"role": "assistant", "content": token} if index == 0 else {"content": token}
            choice = {"index": 0, "delta": delta}
        else:
            choice = {"index": 0, "text": token}
        choice.update(logprobs=None, finish_reason="length" if last else None, matched_stop=None)
        return self._envelope(self.kind_chunk, [choice], None)

    def usage_chunk(self, usage_value):
        return self._envelope(self.kind_chunk, [], usage_value)

    @property
    def kind_chunk(self):
        return "chat.completion.chunk" if self.chat else "text_completion"


class Generation:
    """One simulated request: metrics, a prefill log line, tokens at the configured speed."""

    def __init__(self, state, prompt_tokens):
        self.state = state
        self.prompt_tokens = prompt_tokens

    def __enter__(self):
        metrics = self.state.metrics
        metrics.start(self.prompt_tokens)
        self.state.log.info(f"Prefill batch, #new-seq: 1, #new-token: {self.prompt_tokens}, "
                            f"#cached-token: 0, token usage: 0.00, #running-req: {metrics.running - 1}, "
                            "#queue-req: 0",
                            rank=rank_label(self.state.args, 0, 0))
        return self

    def __exit__(self, *exc_info):
        self.state.metrics.finish()
        return False

    def tokens(self, count):
        for index in range(count):
            self.state.next_token()
            self.state.metrics.token()
            yield token_text(index)


# --------------------------------------------------------------------------- HTTP transport

class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 transport with keep-alive; the logic lives in Api."""

    protocol_version = "HTTP/1.1"

    def setup(self):
        # HTTPS: the TLS handshake runs here, in the request's thread, not in the accepting loop.
        if hasattr(self.request, "do_handshake"):
            self.request.do_handshake()
        super().setup()

    server_version = "uvicorn"
    sys_version = ""

    def do_GET(self):
        self.server.api.handle(self, "GET")

    def do_POST(self):
        self.server.api.handle(self, "POST")

    def do_PUT(self):
        self.server.api.handle(self, "PUT")

    def do_DELETE(self):
        self.server.api.handle(self, "DELETE")

    def read_body(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            raise HttpError(400, "invalid Content-Length")
        return self.rfile.read(length) if length else b""

    def send_bytes(self, status, data, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status, payload):
        # compact, as SGLang's FastAPI/orjson responses are (seen: {"error":"Unauthorized"})
        self.send_bytes(status, json.dumps(payload, separators=(",", ":")).encode("utf-8"), "application/json")

    def send_empty(self, status):
        self.send_bytes(status, b"", "text/plain; charset=utf-8")

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, data):
        payload = f"data: {data}\n\n".encode("utf-8")
        self.wfile.write(b"%X\r\n%s\r\n" % (len(payload), payload))

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")

    def log_request(self, code="-", size="-"):
        """uvicorn's access line; health probes and scrapes only at debug level."""
        path = urlsplit(self.path).path
        level = "debug" if path in QUIET_PATHS else "info"
        phrase = self.responses.get(code, ("",))[0] if isinstance(code, int) else ""
        client = "%s:%s" % self.client_address[:2]
        self.server.api.log.uvicorn(f'{client} - "{self.requestline}" {code} {phrase}'.rstrip(), level)

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        self.server.api.log.uvicorn(format % args, "debug")


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 2048  # uvicorn's backlog; the default 5 resets benchmark connections

    def __init__(self, address, api):
        self.api = api
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)

    def handle_error(self, request, client_address):
        """A client that does not speak TLS to an HTTPS port, or that hung up, is no server error."""
        if isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            return
        super().handle_error(request, client_address)


# --------------------------------------------------------------------------- multi-node

RENDEZVOUS_RETRY_SECONDS = 0.5
SHUTDOWN_MESSAGE = b"shutdown\n"


def split_dist_init_addr(value):
    """--dist-init-addr HOST:PORT ([V6]:PORT too) as (host, port)."""
    host, sep, port = (value or "").rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise Fatal(f"ValueError: --dist-init-addr must be HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


class Rendezvous:
    """The multi-node start-up (--nnodes > 1), standing in for torch.distributed's store and NCCL's connections.

    Rank 0 listens on the port of --dist-init-addr and waits up to --dist-timeout for the other nnodes - 1 ranks;
    each of them connects and keeps its connection open. A connection that closes is a peer that died: rank 0 then
    ends itself as SGLang 0.5.23 does when a scheduler hits an exception (SIGKILL), and a rank >= 1 that loses
    rank 0 exits 1. On shutdown rank 0 sends every peer the ShutdownReq broadcast; a rank >= 1 told to stop waits
    for that broadcast, as SGLang's ranks >= 1 do."""

    def __init__(self, args, log, label):
        self.args, self.log, self.label = args, log, label
        self.host, self.port = split_dist_init_addr(args.dist_init_addr)
        self.timeout = args.dist_timeout or DEFAULT_DIST_TIMEOUT
        self.peers = {}
        self.stopping = threading.Event()
        self.released = threading.Event()  # a rank >= 1: the broadcast came or rank 0 is gone

    def join(self):
        self.log.info("Init parallel begin.", rank=self.label)
        started = time.perf_counter()
        if self.args.node_rank == 0:
            self.accept_peers()
        else:
            self.connect_to_rank0()
        self.log.info(f"Init parallel ends. elapsed={time.perf_counter() - started:.2f} s", rank=self.label)

    def accept_peers(self):
        expected = self.args.nnodes - 1
        listener = socket.create_server(("", self.port), reuse_port=False, backlog=expected)
        deadline = time.monotonic() + self.timeout
        with listener:
            while len(self.peers) < expected:
                listener.settimeout(max(deadline - time.monotonic(), 0.01))
                try:
                    conn, address = listener.accept()
                except socket.timeout:
                    raise Fatal(f"[{timestamp()}{self.label}] RuntimeError: Timed out after {self.timeout} seconds "
                                f"waiting for clients. {len(self.peers) + 1}/{expected + 1} clients joined.")
                rank = int(conn.makefile("rb").readline().split()[-1])
                self.peers[rank] = conn
                self.log.info(f"node_rank {rank} joined from {address[0]}", rank=self.label)
        for rank, conn in self.peers.items():
            self.watch(conn, lambda rank=rank: self.peer_died(rank))

    def connect_to_rank0(self):
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn = socket.create_connection((self.host, self.port), timeout=2)
                break
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise Fatal(f"[{timestamp()}{self.label}] torch.distributed.DistStoreError: Timed out after "
                                f"{self.timeout} seconds connecting to {self.host}:{self.port} ({exc})")
                time.sleep(RENDEZVOUS_RETRY_SECONDS)
        conn.settimeout(None)
        conn.sendall(f"rank {self.args.node_rank}\n".encode())
        self.peers[0] = conn
        self.watch(conn, self.rank0_gone)

    def watch(self, conn, gone):
        def read_until_closed():
            data = b""
            try:
                while chunk := conn.recv(64):
                    data += chunk
            except OSError:
                pass
            self.released.set()
            if SHUTDOWN_MESSAGE in data:
                return self.shutdown_received()
            if not self.stopping.is_set():
                gone()
        with stop_signals_blocked():
            threading.Thread(target=read_until_closed, name="rendezvous", daemon=True).start()

    def peer_died(self, rank):
        """Rank 0 when a rank >= 1 went away: what SGLang's scheduler does when a collective fails."""
        self.log.error(f"Scheduler hit an exception: Traceback (most recent call last):\n"
                       f"RuntimeError: [Rank 0] NCCL communicator was aborted: the connection to node_rank {rank} "
                       f"was closed by the peer (its process exited)", rank=self.label)
        os.kill(os.getpid(), signal.SIGKILL)

    def rank0_gone(self):
        self.log.error(f"RuntimeError: the connection to rank 0 at {self.host}:{self.port} was closed: rank 0 exited "
                       f"without a ShutdownReq broadcast", rank=self.label)
        os._exit(1)

    def shutdown_received(self):
        self.log.info("Received the rank-0 ShutdownReq broadcast; exiting.", rank=self.label)
        os._exit(0)

    def shutdown(self):
        """Rank 0: broadcast ShutdownReq. A rank >= 1: wait for rank 0's broadcast (or for rank 0 to be gone)."""
        self.stopping.set()
        if self.args.node_rank == 0:
            for conn in self.peers.values():
                try:
                    conn.sendall(SHUTDOWN_MESSAGE)
                    conn.close()
                except OSError:
                    pass
        elif self.peers:
            self.log.info(f"SIGTERM received on node_rank {self.args.node_rank}; waiting for the rank-0 ShutdownReq "
                          "broadcast...", rank=self.label)
            self.released.wait()


# --------------------------------------------------------------------------- lifecycle

def sleep_forever():
    while True:
        time.sleep(3600)


def weight_gb(args):
    return min(CHECKPOINT_GB / (args.tp_size * args.pp_size), GPU_AVAIL_GB * 0.8)


class Simulator:
    """The start-up sequence and the life of the process, run in the main thread."""

    def __init__(self, args, settings, log):
        self.args = args
        self.settings = settings
        self.log = log
        self.state = ServerState(args, settings, log)
        self.leads = []
        self.architecture = DEFAULT_ARCHITECTURE
        self.avail_gb = GPU_AVAIL_GB
        self.kv_tokens = 0
        self.server = None
        self.server_thread = None
        self.gpu = None  # GPU mode: the rank processes (sglang_simulator_gpu.GpuRanks)
        self.rendezvous = None  # multi-node: the connections between the nodes
        self.dying = threading.Lock()

    def labels(self):
        return [rank_label(self.args, pp_rank, tp_rank) for pp_rank, tp_rank in self.leads]

    def scheduler_crash(self, traceback):
        """The Fatal that ends the process when a scheduler process dies with TRACEBACK."""
        return Fatal(f"[{timestamp()}{self.labels()[0]}] {traceback}\n[{timestamp()}] Received sigquit "
                     "from a child process. It usually means the child failed.")

    def run(self):
        """Start up and serve; returns only by exception (Fatal, ShutdownRequested)."""
        self.log.info(f"server_args={format_server_args(self.args)}")
        for note in check_server_args(self.args):
            self.log.warning(note)
        decode, prefill, notes, infos = plan_cuda_graphs(self.args)
        for note in notes:
            self.log.warning(note)
        for info in infos:
            self.log.info(info)
        self.leads = local_rank_leads(self.args)
        self.check_model_path()
        if self.args.nnodes > 1:
            self.rendezvous = Rendezvous(self.args, self.log, self.labels()[0])
            self.rendezvous.join()
        self.start_gpu(decode)
        self.load_weights()
        self.allocate_memory_pool()
        if decode or prefill:
            self.capture_cuda_graphs(decode, prefill)
        elif self.gpu:
            self.gpu_call(self.gpu.gather, "captured")
        self.start_http_server()
        if self.gpu:
            self.start_step_engine()
        if self.args.node_rank == 0:
            self.warm_up()
        self.serve()

    # ---- GPU mode

    def start_gpu(self, decode_graph):
        """Start the rank processes of GPU mode (sglang_simulator_gpu.py); nothing in CPU mode."""
        mode = self.settings.gpu
        if mode == "off" or (mode == "auto" and not os.path.exists(NVIDIA_DRIVER_VERSION_FILE)):
            return
        import sglang_simulator_gpu as gpu  # beside this file; imports torch only in the rank processes
        usable, why_not = gpu.host_has_gpu_stack()
        if not usable:
            if mode == "auto":
                return
            raise Fatal(f"--sim-gpu on: {why_not}")
        self.gpu = gpu.GpuRanks(gpu.local_rank_specs(self.args, self.settings, decode_graph,
                                                     int(weight_gb(self.args) * 1e9)))
        self.gpu.start()
        with stop_signals_blocked():
            self.gpu.watch(self.rank_died)
        seen = self.gpu_call(self.gpu.devices)
        self.log.info(f"GPU mode: CUDA sees {seen['cuda']} device(s): {'; '.join(seen['names'])}. "
                      f"NVML sees {seen['nvml']}. torch {seen['torch']}, CUDA runtime {seen['cuda_runtime']}.")

    def gpu_call(self, function, *args):
        """FUNCTION(*ARGS) on the rank processes; a rank that died or hangs ends the server."""
        import sglang_simulator_gpu as gpu
        try:
            return function(*args)
        except gpu.RankFailed as failure:
            self.rank_died(str(failure))

    def rank_died(self, description):
        """What SGLang does when a scheduler process dies: say so, end the other ranks, exit 1."""
        if not self.dying.acquire(blocking=False):
            sleep_forever()  # another thread is already ending the process
        self.log.raw(f"[{timestamp()}] Received sigquit from a child process. It usually means the child failed. "
                     f"({description})", "error")
        self.gpu.kill()
        os._exit(1)

    def start_step_engine(self):
        import sglang_simulator_gpu as gpu
        self.state.engine = gpu.StepEngine(self.gpu)
        with stop_signals_blocked():
            self.state.engine.start()

    def stop_gpu(self):
        if self.gpu:
            self.gpu.stop()

    def check_model_path(self):
        path = self.args.model_path
        if os.path.isabs(path) and not os.path.exists(path):
            time.sleep(min(0.5, self.settings.load_seconds))
            raise self.scheduler_crash(missing_model_error(path))

    def load_weights(self):
        shards, self.architecture = inspect_model(self.args.model_path)
        for label in self.labels():
            self.log.info(f"Load weight begin. avail mem={GPU_AVAIL_GB:.2f} GB", rank=label)
        stop_step = {"crash_loading": 3, "hang_loading": 4}.get(self.settings.failure)
        started = time.monotonic()
        self.log.raw(progress_line(0, shards, 0))
        for step in range(1, LOAD_STEPS + 1):
            time.sleep(self.settings.load_seconds / LOAD_STEPS)
            if step == stop_step and self.settings.failure == "crash_loading":
                raise self.scheduler_crash(out_of_memory_error())
            if step == stop_step:
                sleep_forever()  # hang_loading: no more progress, port stays closed
            self.log.raw(progress_line(shards * step // LOAD_STEPS, shards, time.monotonic() - started))
        wait_for_file(self.settings.load_hold_file)
        weights = weight_gb(self.args)
        self.avail_gb -= weights
        measured = [(label, self.avail_gb, weights) for label in self.labels()]
        if self.gpu:
            measured = [(spec.label, done["avail_gb"], done["weights_gb"])
                        for spec, done in zip(self.gpu.specs, self.gpu_call(self.gpu.gather, "loaded"))]
            self.avail_gb = min(row[1] for row in measured)
        elapsed = time.monotonic() - started
        for label, avail_gb, usage_gb in measured:
            self.log.info(f"Load weight end. elapsed={elapsed:.2f} s, type={self.architecture}, "
                          f"avail mem={avail_gb:.2f} GB, mem usage={usage_gb:.2f} GB.",
                          rank=label)

    def allocate_memory_pool(self):
        weights = weight_gb(self.args)
        fraction = self.args.mem_fraction_static or 0.85
        kv_gb = max(GPU_AVAIL_GB * fraction - weights, 1.0)
        self.avail_gb -= kv_gb
        measured = [(label, kv_gb, self.avail_gb) for label in self.labels()]
        if self.gpu:
            measured = [(spec.label, pool["kv_gb"], pool["avail_gb"])
                        for spec, pool in zip(self.gpu.specs, self.gpu_call(self.gpu.gather, "kv"))]
            self.avail_gb = min(row[2] for row in measured)
            self.gpu.broadcast("capture")
        self.kv_tokens = int(measured[0][1] * 1024 ** 3 / (70272 * 2 / max(self.args.tp_size, 1)))
        for label, pool_gb, avail_gb in measured:
            self.log.info(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {self.kv_tokens}, "
                          f"KV size: {pool_gb:.2f} GB",
                          rank=label)
            self.log.info(f"Memory pool end. avail mem={avail_gb:.2f} GB", rank=label)

    def capture_cuda_graphs(self, decode, prefill):
        """SGLang 0.5.23's capture: the decode graph over a range of batch sizes, then the prefill graph."""
        phases = [phase for phase, on in (("decode", decode), ("prefill", prefill)) if on]
        for phase in phases:
            self.capture_phase(phase, self.settings.graph_seconds / len(phases))
        if self.gpu:
            captured = self.gpu_call(self.gpu.gather, "captured")
            self.avail_gb = min(done["avail_gb"] for done in captured)

    def capture_phase(self, phase, seconds):
        backend = getattr(self.args, f"cuda_graph_backend_{phase}") or ("full" if phase == "decode" else "breakable")
        detail = "num_tokens_per_req=1" if phase == "decode" else "num_tokens=8192"
        for label in self.labels():
            self.log.info(f"Capture target {phase} CUDA graph begin. backend={backend}, {detail}, "
                          f"avail mem={self.avail_gb:.2f} GB", rank=label)
        started = time.monotonic()
        max_bs = (self.args.cuda_graph_max_bs_decode if phase == "decode" else self.args.cuda_graph_max_bs_prefill) or 256
        batch_sizes = sorted({max_bs, max(max_bs // 2, 1), max(max_bs // 4, 1), 8, 4, 2, 1}, reverse=True)
        total = len(batch_sizes)
        for done, bs in enumerate(batch_sizes, start=1):
            time.sleep(seconds / total)
            self.log.raw(f"Capturing batches (bs={bs} avail_mem={self.avail_gb - 0.1 * done:.2f} GB): "
                         f"{100 * done // total:3d}%| {done}/{total}")
        self.avail_gb -= 0.85 / 2
        elapsed = time.monotonic() - started
        for label in self.labels():
            self.log.info(f"Capture target {phase} CUDA graph end. bs={batch_sizes[::-1]}, elapsed={elapsed:.2f} s, "
                          f"mem usage={0.85 / 2:.2f} GB, avail mem={self.avail_gb:.2f} GB.", rank=label)

    def start_http_server(self):
        host, port = self.args.host, self.args.port
        if self.args.node_rank == 0:
            args = self.args
            self.log.info(f"max_total_num_tokens={self.kv_tokens}, "
                          f"chunked_prefill_size={args.chunked_prefill_size or 8192}, max_prefill_tokens=16384, "
                          f"max_running_requests={args.max_running_requests or 256}, "
                          f"context_len={args.context_length or DEFAULT_CONTEXT_LENGTH}, "
                          f"available_gpu_mem={self.avail_gb:.2f} GB", rank=self.labels()[0])
        else:
            self.log.info(f"Dummy health check server started in background thread at {host}:{port}")
        try:
            self.server = SimHTTPServer((host, port), Api(self.state))
        except OSError as exc:
            raise Fatal(f"[{timestamp()}] ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
                        f"({host!r}, {port}): {(exc.strerror or str(exc)).lower()}") from exc
        try:
            self.serve_tls()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a bad certificate or key
            raise Fatal(f"[{timestamp()}] ERROR:    {type(exc).__name__}: {exc}") from exc
        self.server_thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                              name="http-server", daemon=True)
        with stop_signals_blocked():  # its request threads inherit the mask
            self.server_thread.start()
        shown_host = f"[{host}]" if ":" in host else host
        self.log.uvicorn(f"Started server process [{os.getpid()}]")
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        scheme = "https" if self.args.ssl_certfile else "http"
        self.log.uvicorn(f"Uvicorn running on {scheme}://{shown_host}:{port} (Press CTRL+C to quit)")

    def serve_tls(self):
        """--ssl-certfile and --ssl-keyfile: HTTPS only, as uvicorn serves SGLang."""
        if not (self.args.ssl_certfile and self.args.ssl_keyfile):
            return
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.args.ssl_certfile, self.args.ssl_keyfile, password=self.args.ssl_keyfile_password)
        if self.args.ssl_ca_certs:
            context.load_verify_locations(self.args.ssl_ca_certs)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)

    def warm_up(self):
        time.sleep(self.settings.warmup_seconds)
        wait_for_file(self.settings.warmup_hold_file)
        if self.settings.failure == "warmup_fail":
            self.fail_warm_up_forever()
        if self.state.engine is not None:
            self.state.engine.next_token()  # the warm-up generation runs a real decode step
        self.log.uvicorn(f'{WARMUP_CLIENT} - "GET /model_info HTTP/1.1" 200 OK')
        self.log.info("Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
                      "#running-req: 0, #queue-req: 0", rank=self.labels()[0])
        self.log.uvicorn(f'{WARMUP_CLIENT} - "POST /generate HTTP/1.1" 200 OK')
        self.state.status = "Up"
        self.log.info("The server is fired up and ready to roll!")

    def fail_warm_up_forever(self):
        attempt = 0
        while True:
            attempt += 1
            self.log.error(f"Warmup request failed (attempt {attempt}): 500 Internal Server Error: "
                           "RuntimeError: CUDA error: unspecified launch failure")
            time.sleep(WARMUP_RETRY_SECONDS)

    def serve(self):
        if self.settings.failure != "crash_after_ready":
            sleep_forever()
        time.sleep(self.settings.crash_after_seconds)
        raise self.scheduler_crash(illegal_memory_access_error())

    def shutdown(self, signame):
        if signame == "SIGTERM":  # SGLang 0.5.23's own words (srt/entrypoints/http_server.py), seen on the real server
            self.log.info("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
            self.log.info("Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].")
        else:
            self.log.info(f"Received {signame}, shutting down.")
        if self.rendezvous:
            self.rendezvous.shutdown()
        self.stop_gpu()
        if self.server_thread is None:
            return
        self.log.uvicorn("Shutting down")
        self.server.shutdown()  # serve_forever polls every 0.1 s
        self.server.server_close()
        self.log.uvicorn("Waiting for application shutdown.")
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn(f"Finished server process [{os.getpid()}]")


# --------------------------------------------------------------------------- compile mode

COMPILE_FLAG = "--sim-compile-deep-gemm"
COMPILE_TIMEOUT = 3600  # compile_deep_gemm's --timeout default (CompileArgs.timeout)
# Left out of the compile's server. This stands for the deployer's wrapper (plugins/module_utils/sglang_deepgemm.py
# COMPILE_SCRIPT), which drops them before it runs the real compile_deep_gemm: its poll sends no key and speaks
# plain HTTP.
COMPILE_DROPPED_OPTIONS = ("api_key", "admin_api_key", "ssl_certfile", "ssl_keyfile", "ssl_keyfile_password",
                           "ssl_ca_certs")
# Where the server listens and how long it waits change no kernel (the kernels' name leaves them out).
KERNEL_NEUTRAL_OPTIONS = ("host", "port", "watchdog_timeout")
COMPILE_BEGIN = ("Begin DeepGEMM Kernels compilation...\n"
                 "It may take a long time and timeout maybe raised while the compilation is still in progress.\n"
                 "Just feel free to restart the command until the compilation is fully finished.\n")
SYNC_REQUEST = {"input_ids": [0, 1, 2, 3], "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
SYNC_REQUEST_SECONDS = 600  # compile_deep_gemm's timeout of the sync request
# compile_deep_gemm polls without a timeout (a server that takes the connection and never answers hangs it);
# this one gives up on a poll after this long and polls again.
POLL_REQUEST_SECONDS = 10
SERVER_STOP_SECONDS = 30  # a server still running this long after SIGTERM is killed


def print_now(text):
    print(text, flush=True)


def parse_compile_args(argv, environ):
    """Compile mode's options: launch mode's plus --timeout, less the key and TLS options.

    Returns (server args namespace, SimSettings, timeout)."""
    args, settings = parse_args([word for word in argv if word != COMPILE_FLAG], environ, compile_deep_gemm=True)
    timeout = args.timeout
    del args.timeout  # not a ServerArgs field
    for name in COMPILE_DROPPED_OPTIONS:
        setattr(args, name, None)
    return args, settings, timeout


def compile_server_args(args, timeout):
    """What compile_deep_gemm changes in the options (its compile_server_args): no CUDA graphs, no torch.compile, a
    watchdog that outlives the compilation, its own warm-up."""
    args.enable_torch_compile = False
    graphs = dict(args.cuda_graph_config or {})
    for phase in ("decode", "prefill"):
        graphs[phase] = dict(graphs.get(phase) or {}, backend="disabled")
        setattr(args, f"cuda_graph_backend_{phase}", "disabled")  # what the simulator's plan_cuda_graphs reads
    args.cuda_graph_config = graphs
    args.watchdog_timeout = timeout
    args.warmups = "compile-deep-gemm"
    print_now("Disable CUDA Graph and Torch Compile to save time...")


def server_flags(args, parser):
    """ARGS as command-line flags that parse back to them: each option that differs from its default, once."""
    flags, seen = [], set()
    for action in parser._actions:
        if not action.option_strings or action.dest in seen or not hasattr(args, action.dest):
            continue
        if isinstance(action, DeprecatedStoreConstAction):
            continue  # its dest is the option it replaces, which says it better
        seen.add(action.dest)
        value = getattr(args, action.dest)
        if value != action.default:
            flags.extend(option_flags(action, value))
    return flags


def option_flags(action, value):
    flag = action.option_strings[0]
    if isinstance(action, argparse.BooleanOptionalAction):
        return [flag if value else "--no-" + flag[2:]]
    if action.nargs == 0:  # store_true and the deprecated store_true
        return [flag] if value else []
    if action.nargs in ("+", "*"):
        return [flag, *(option_text(action, item) for item in value)]
    return [f"{flag}={option_text(action, value)}"]  # "=": a value that starts with "-" stays a value


def option_text(action, value):
    if action.type in (json.loads, json_list_type) or isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def knob_flags(settings):
    """SETTINGS as --sim-* flags (the server would read the same environment, but not the compile's flags)."""
    flags = []
    for knob in SIM_KNOBS:
        flag = knob[0]
        value = getattr(settings, flag[len("--sim-"):].replace("-", "_"))
        flags.append(f"{flag}={knob_text(value)}")
    return flags


def knob_text(value):
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def deep_gemm_cache_dir(environ):
    """Where SGLang 0.5.23 has DeepGEMM put its kernels: SGLANG_DG_CACHE_DIR, else $SGLANG_CACHE_DIR/deep_gemm, else
    ~/.cache/sglang/deep_gemm."""
    cache_dir = environ.get("SGLANG_CACHE_DIR") or os.path.expanduser("~/.cache/sglang")
    return environ.get("SGLANG_DG_CACHE_DIR") or os.path.join(cache_dir, "deep_gemm")


def write_simulated_kernels(args, environ):
    """A stand-in for the kernels DeepGEMM compiles, where it keeps them (cache/kernel.NAME.HASH/kernel.cubin);
    the same options give the same name. Returns the kernel file's path."""
    options = {name: value for name, value in server_args_dict(args).items() if name not in KERNEL_NEUTRAL_OPTIONS}
    digest = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
    kernel_dir = os.path.join(deep_gemm_cache_dir(environ), "cache", f"kernel.sim_fp8_gemm_nt.{digest}")
    os.makedirs(kernel_dir, exist_ok=True)
    path = os.path.join(kernel_dir, "kernel.cubin")
    with open(path, "wb") as handle:
        handle.write(b"sglang_simulator: a stand-in for a DeepGEMM kernel\n")
    return path


def compile_traceback(lineno, code, error):
    """A traceback of compile_deep_gemm.py that ends in launch_server_process_and_send_one_request at LINENO."""
    return traceback_text([
        ("sglang/compile_deep_gemm.py", 240, "<module>", "run_compile(server_args, compile_args)"),
        ("sglang/compile_deep_gemm.py", 216, "run_compile",
         "proc = launch_server_process_and_send_one_request(server_args, compile_args)"),
        ("sglang/compile_deep_gemm.py", lineno, "launch_server_process_and_send_one_request", code),
    ], error)


def http_request(host, port, method, path, body=None, timeout=POLL_REQUEST_SECONDS):
    """(status, body bytes) of one plain-HTTP request without an API key, as compile_deep_gemm sends them."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json; charset=utf-8"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class DeepGemmCompilation:
    """compile_deep_gemm's run: a server in a child process (this file in launch mode), one request, the kernels."""

    def __init__(self, args, settings, timeout, environ):
        self.args = args
        self.settings = settings
        self.timeout = timeout
        self.environ = environ
        self.server = None  # subprocess.Popen

    def run(self):
        """The exit code. After a timeout it returns only once the server has ended (the real one waits for its
        non-daemon server process at exit)."""
        try:
            check_server_args(self.args)  # compile_deep_gemm builds ServerArgs before it starts anything
        except Fatal as fatal:
            sys.stderr.write(f"{fatal}\n")
            return 1
        print_now(COMPILE_BEGIN)
        self.start_server()
        try:
            synced = self.poll_until_synced()
        except Fatal as fatal:
            self.stop_server()
            sys.stderr.write(f"{fatal}\n")
            return 1
        if not synced:
            return self.time_out()
        write_simulated_kernels(self.args, self.environ)
        print_now("\nDeepGEMM Kernels compilation finished successfully.")
        time.sleep(self.settings.compile_safety_seconds)
        self.stop_server()
        return 0

    def server_argv(self):
        parser = build_parser(self.environ)
        return [sys.executable, os.path.abspath(__file__), *server_flags(self.args, parser),
                *knob_flags(self.settings)]

    def start_server(self):
        self.server = subprocess.Popen(self.server_argv(), env=dict(self.environ))

    def poll_until_synced(self):
        """Poll /v1/models until it answers 200, then send the sync request: True once that answered 200, False
        when --timeout passed first. Raises Fatal (a RuntimeError traceback) when it answered something else."""
        started = time.monotonic()
        while time.monotonic() - started < self.timeout:
            try:
                if self.request("GET", "/v1/models")[0] == 200:
                    self.sync()
                    return True
            except (OSError, http.client.HTTPException, ValueError):
                pass  # requests' errors, a reply that is not JSON among them: poll again
            time.sleep(self.settings.compile_poll_seconds)
        return False

    def sync(self):
        status, body = self.request("POST", "/generate", SYNC_REQUEST, timeout=SYNC_REQUEST_SECONDS)
        if status != 200:
            error = json.loads(body)
            raise Fatal(compile_traceback(164, 'raise RuntimeError(f"Sync request failed: {error}")',
                                          f"RuntimeError: Sync request failed: {error}"))

    def request(self, method, path, body=None, timeout=POLL_REQUEST_SECONDS):
        return http_request(self.args.host, self.args.port, method, path, body, timeout)

    def time_out(self):
        sys.stderr.write(compile_traceback(177, "raise TimeoutError(",
                                           "TimeoutError: DeepGEMM Kernels compilation timeout.\n\n"
                                           "Feel free and please restart the command.") + "\n")
        self.server.wait()  # a hung server: forever, until the deployer's deadline stops the whole unit
        return 1

    def stop_server(self, signum=signal.SIGTERM):
        """SIGNUM to the server, then wait for it (it stops at once: exit 0 on SIGTERM); killed if it does not."""
        if self.server is None or self.server.poll() is not None:
            return
        self.server.send_signal(signum)
        try:
            self.server.wait(SERVER_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


def compile_deep_gemm(argv, environ):
    """Compile mode (--sim-compile-deep-gemm): python -m sglang.compile_deep_gemm. Returns the exit code."""
    args, settings, timeout = parse_compile_args(argv, environ)
    if settings.check_only:
        return check_only(args, Log(args.log_level))
    compile_server_args(args, timeout)
    compilation = DeepGemmCompilation(args, settings, timeout, environ)
    try:
        return compilation.run()
    except ShutdownRequested as stop:
        signum = signal.Signals[stop.signame]
        compilation.stop_server(signum)
        signal.signal(signum, signal.SIG_DFL)  # then end as the signal ends a Python process that does not catch it
        os.kill(os.getpid(), signum)
        return 128 + signum
    finally:
        compilation.stop_server()


# --------------------------------------------------------------------------- main

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def wait_for_file(path):
    """Return once PATH exists (at once when PATH is empty): a hold knob's phase lasts until a test releases it."""
    while path and not os.path.exists(path):
        time.sleep(0.2)


def ignore_stop_signals():
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def stop_signals_blocked():
    """Threads started inside block SIGTERM and SIGINT, so the kernel hands those to the main thread.

    Python runs signal handlers in the main thread only, and only when it runs bytecode: a stop signal that the
    kernel gives another thread leaves the main thread asleep in sleep_forever() and the stop unanswered. Child
    processes are never started inside: they would inherit the mask through exec."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def install_signal_handlers():
    """SIGTERM/SIGINT raise ShutdownRequested in the main thread (once)."""
    def handler(signum, frame):
        ignore_stop_signals()
        raise ShutdownRequested(signal.Signals(signum).name)
    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)


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


def main(argv=None, environ=None):
    install_signal_handlers()
    argv = sys.argv[1:] if argv is None else argv
    environ = os.environ if environ is None else environ
    if COMPILE_FLAG in argv:
        return compile_deep_gemm(argv, environ)
    args, settings = parse_args(argv, environ)
    log = Log(args.log_level)
    if settings.check_only:
        return check_only(args, log)
    simulator = Simulator(args, settings, log)
    try:
        simulator.run()
    except ShutdownRequested as stop:
        simulator.shutdown(stop.signame)
        return 0
    except Fatal as fatal:
        ignore_stop_signals()
        log.raw(str(fatal), "error")
        simulator.stop_gpu()
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ShutdownRequested:  # a signal before the simulator took over (e.g. while parsing)
        sys.exit(0)
