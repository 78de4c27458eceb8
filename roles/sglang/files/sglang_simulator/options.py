# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang 0.5.23's options: the --config file merged as SGLang merges it, an argparse parser built from SGLang's
own option table (sglang_server_options.json, beside this file) and the simulator's own --sim-* knobs."""

import argparse
import json
import math
import os
import re
from dataclasses import dataclass
from decimal import Decimal

import yaml


# SGLang 0.5.23's server options (flags, actions, types, choices, defaults), read from its own parser by
# scripts/sglang_option_table.py; the simulator's parser is built from them (build_parser).
OPTION_TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sglang_server_options.json")
FAILURE_MODES = ("none", "crash_loading", "hang_loading", "crash_after_ready", "warmup_fail")
GPU_MODES = ("auto", "on", "off")


COMPILE_TIMEOUT = 3600  # compile_deep_gemm's --timeout default (CompileArgs.timeout)


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
    ("--sim-hang-file", "SGLANG_SIM_HANG_FILE", "", str,
     "once warm, the scheduler hangs while this file exists: HTTP answers, no token is made"),
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
    hang_file: str
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
