"""Write the table of SGLang's server options that the simulator builds its parser from.

Run with the interpreter of a real SGLang (scripts/setup_sglang_cpu.sh makes one on CPU):
    .cache/sglang-venv/bin/python scripts/sglang_option_table.py > roles/sglang/files/sglang_simulator/sglang_server_options.json
It reads SGLang's own parser (ServerArgs.add_cli_args): each option's flags, destination, kind of action, type,
nargs, choices, default and constant, in the parser's order, and the phases and keys --cuda-graph-config accepts.
An action or a type it does not know stops it: the simulator must learn it first (roles/sglang/files/
sglang_simulator/options.py, option_types and add_server_options). tests/unit/test_simulator_conformance.py regenerates the table
and fails on any difference from the file.
"""

import argparse
import json
import sys
from importlib.metadata import version

# SGLang's type functions, by module and name -> the simulator's name for the same parsing.
TYPES = {
    ("builtins", "str"): "str",
    ("builtins", "int"): "int",
    ("builtins", "float"): "float",
    ("json", "loads"): "json",
    ("sglang.srt.utils.common", "human_readable_int"): "human_readable_int",
    ("sglang.srt.utils.common", "json_list_type"): "json_list",
    ("sglang.srt.utils.common", "nullable_str"): "nullable_str",
    ("sglang.srt.model_executor.cuda_graph_config", "parse_cuda_graph_backend_arg"): "cuda_graph_backend",
    ("sglang.srt.model_executor.cuda_graph_config", "parse_cuda_graph_config_arg"): "cuda_graph_config",
}

# argparse's and SGLang's action classes -> the simulator's name for the same behaviour.
ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "BooleanOptionalAction": "boolean_optional",
    "DeprecatedStoreTrueAction": "deprecated_store_true",
    "DeprecatedStoreConstAction": "deprecated_store_const",
    "LoRAPathAction": "lora_paths",
}


def type_name(action):
    if action.type is None:
        return None
    key = (getattr(action.type, "__module__", None), getattr(action.type, "__qualname__", None))
    if key not in TYPES:
        sys.exit("unknown type %r of %s: teach the simulator, then add it to TYPES" % (key, action.option_strings))
    return TYPES[key]


def plain(value, what):
    """`value` as JSON can hold it (a set becomes a sorted list); anything else stops the script."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value)
    if isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value)
    except TypeError:
        sys.exit("%s is not plain data: %r" % (what, value))
    return value


def option(action):
    kind = type(action).__name__
    if kind not in ACTIONS:
        sys.exit("unknown action %s of %s: teach the simulator, then add it to ACTIONS" % (kind, action.option_strings))
    entry = {"flags": list(action.option_strings), "dest": action.dest, "action": ACTIONS[kind],
             "type": type_name(action), "nargs": action.nargs, "required": action.required,
             "choices": plain(action.choices, "choices of %s" % action.dest),
             "default": plain(action.default, "default of %s" % action.dest),
             "const": plain(action.const, "const of %s" % action.dest)}
    for extra in ("new_flag", "const_value"):
        if hasattr(action, extra):
            entry[extra] = plain(getattr(action, extra), "%s of %s" % (extra, action.dest))
    return entry


def table():
    from sglang.srt.model_executor import cuda_graph_config
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return {
        "sglang": version("sglang"),
        "cuda_graph_config": {
            "phases": plain(cuda_graph_config.Phase.ALL, "Phase.ALL"),
            "keys": {phase: plain(keys, "keys of %s" % phase)
                     for phase, keys in cuda_graph_config.ALLOWED_KEYS_PER_PHASE.items()},
        },
        "options": [option(action) for action in parser._actions if not isinstance(action, argparse._HelpAction)],
    }


def dumps(data):
    """The table as JSON with one option a line (a new SGLang's changes read as a short diff)."""
    head = {key: value for key, value in data.items() if key != "options"}
    lines = [json.dumps(head)[:-1] + ', "options": [']
    lines += ["  " + json.dumps(entry) + "," for entry in data["options"]]
    lines[-1] = lines[-1][:-1]
    return "\n".join(lines + ["]}"]) + "\n"


if __name__ == "__main__":
    sys.stdout.write(dumps(table()))
