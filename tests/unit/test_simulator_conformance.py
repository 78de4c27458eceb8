"""The simulator held to the real SGLang 0.5.23, read from the package itself (the CPU venv of
scripts/setup_sglang_cpu.sh), never from memory:

* the same corpus of config files and flags goes to SGLang's own parser and to the simulator's --sim-check-only,
  and both must give the same verdict and the same class of error;
* every option the roles can render is known to both, and the simulator knows exactly SGLang's options (its
  table is regenerated from SGLang's parser and compared);
* the simulator's routes exist in SGLang's HTTP server, and SGLang's own auth decision agrees with the simulator's
  on which of them need the API key;
* the log lines the readiness module, the live view and the benchmarks rely on, as the simulator prints them,
  come from SGLang's own source.
"""
import ast
import json
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import yaml

from ansible_collections.k26.deploy.plugins.module_utils import sglang_args
import sglang_parser
from sglang_venv import SGLANG_PYTHON, SGLANG_SITE, requires_real_sglang

from simulator_process import SIMULATOR
from sglang_simulator import api, log, options, serving

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.sglang_real, requires_real_sglang]

# ---------------------------------------------------------------- verdicts

BASE = {"model-path": "/models/Kimi-K2.6", "served-model-name": "kimi-k2.6", "pp-size": 8,
        "pp-async-batch-depth": 8, "trust-remote-code": True}

# (case, config mapping, extra command-line flags, expected class: None = accepted)
CORPUS = [
    ("the K2.6 profile", BASE, [], None),
    ("profile with metrics and parsers",
     dict(BASE, **{"enable-metrics": True, "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2",
                   "attention-backend": "triton"}), [], None),
    ("a flag wins over the file", BASE, ["--pp-size", "4"], None),
    ("store_true false is left out", dict(BASE, **{"disable-radix-cache": False}), [], None),
    ("decode graph batch sizes as a list", dict(BASE, **{"cuda-graph-bs-decode": [1, 2, 4, 8]}), [], None),
    ("misspelt option in the file", dict(BASE, **{"pp-async-batch-detph": 8}), [], "unrecognized"),
    ("misspelt flag", BASE, ["--tp-sise", "2"], "unrecognized"),
    ("underscore key in the file", dict(BASE, **{"tp_size": 1}), [], "unrecognized"),
    ("simulator knob in the file", dict(BASE, **{"sim-load-seconds": 1}), [], "unrecognized"),
    ("unknown attention backend", dict(BASE, **{"attention-backend": "fa9"}), [], "invalid choice"),
    ("not a number", dict(BASE, **{"tp-size": "two"}), [], "invalid value"),
    ("deprecated flag in the file", dict(BASE, **{"disable-cuda-graph": True}), [], "unsupported config option"),
    ("deprecated dp-attention in the file", dict(BASE, **{"enable-dp-attention": True}), [],
     "unsupported config option"),
    ("deprecated flag on the command line", BASE, ["--disable-cuda-graph"], None),
    ("removed cuda-graph-max-bs", dict(BASE, **{"cuda-graph-max-bs": 256}), [], "ambiguous"),
    ("removed cuda-graph-bs", dict(BASE, **{"cuda-graph-bs": [1, 2]}), [], "ambiguous"),
    ("abbreviated key in the file", dict(BASE, **{"pp-async-batch-dept": 8}), [], None),
    ("abbreviated flag", BASE, ["--mem-fraction-stat", "0.8"], None),
    ("flag without its value", BASE, ["--port"], "expected one argument"),
    # options K2.6 operators set, once refused by a hand-kept simulator table
    ("multithreaded weight loading, as JSON text",
     dict(BASE, **{"model-loader-extra-config": '{"enable_multithread_load": true, "num_threads": 8}'}), [], None),
    ("multithreaded weight loading, as a mapping",
     dict(BASE, **{"model-loader-extra-config": {"enable_multithread_load": True}}), [], None),
    ("overlap schedule off", dict(BASE, **{"disable-overlap-schedule": True}), [], None),
    ("DeepEP all-to-all", dict(BASE, **{"moe-a2a-backend": "deepep"}), [], None),
    ("context length with a suffix", dict(BASE, **{"context-length": "256k", "max-total-tokens": "1Mi"}), [], None),
    ("a graph config per phase", dict(BASE, **{"cuda-graph-config": {"decode": {"backend": "full", "max_bs": 64}}}),
     [], None),
    ("a boolean with its --no- form on the command line", BASE, ["--no-enable-tf32-matmul"], None),
    ("LoRA paths", BASE, ["--lora-paths", "a", '{"lora_name": "b", "lora_path": "/b"}'], None),
    ("unknown quantization", dict(BASE, **{"quantization": "fp9"}), [], "invalid choice"),
    ("unknown KV cache dtype", dict(BASE, **{"kv-cache-dtype": "int3"}), [], "invalid choice"),
    ("unknown all-to-all backend", dict(BASE, **{"moe-a2a-backend": "deepfoo"}), [], "invalid choice"),
    ("IEC suffix with decimals", dict(BASE, **{"context-length": "1.5Ki"}), [], "bad value"),
    ("suffix in the wrong case", dict(BASE, **{"max-total-tokens": "8K"}), [], "bad value"),
    ("retired graph backend", dict(BASE, **{"cuda-graph-backend-decode": "tc_piecewise"}), [], "bad value"),
    ("unknown graph phase", dict(BASE, **{"cuda-graph-config": {"encode": {}}}), [], "bad value"),
    ("unknown graph key", dict(BASE, **{"cuda-graph-config": {"decode": {"max_seq_len": 8}}}), [], "bad value"),
    ("a JSON option that is not JSON", dict(BASE, **{"preferred-sampling-params": "{temperature"}), [],
     "invalid value"),
    ("a boolean with a --no- form in the file", dict(BASE, **{"enable-tf32-matmul": True}), [],
     "unsupported config option"),
    ("deprecated const flag with its value", BASE, ["--monokernel-backend", "amd"], None),
]

ERROR_CLASSES = (
    ("unrecognized", re.compile(r"unrecognized arguments")),
    ("ambiguous", re.compile(r"ambiguous option")),
    ("invalid choice", re.compile(r"invalid choice")),
    ("invalid value", re.compile(r"invalid (int|float|loads) value")),
    ("bad value", re.compile(r"Invalid integer value|Decimals are not allowed|was removed|--cuda-graph-config")),
    ("unsupported config option", re.compile(r"Unsupported config option")),
    ("expected one argument", re.compile(r"expected one argument")),
)


def error_class(result):
    if result["ok"]:
        return None
    return next((name for name, pattern in ERROR_CLASSES if pattern.search(result["error"] or "")),
                "other: %s" % result["error"])


@pytest.mark.parametrize("case, config, flags, expected", CORPUS, ids=[c[0] for c in CORPUS])
def test_same_verdict_as_sglang(case, config, flags, expected, tmp_path):
    real, dummy = sglang_args.run_check(sglang_parser.run, str(SGLANG_PYTHON), options=config, extra_args=flags, tmpdir=str(tmp_path))
    simulated, dummy = sglang_args.run_check(sglang_parser.run, sys.executable, options=config, extra_args=flags,
                                             simulator=str(SIMULATOR), tmpdir=str(tmp_path))
    assert real["sglang_version"] == "0.5.23"
    assert (error_class(real), error_class(simulated)) == (expected, expected), (real["error"], simulated["error"])


# ---------------------------------------------------------------- options

def real_options():
    script = ("import argparse, json; from sglang.srt.server_args import ServerArgs; p = argparse.ArgumentParser();"
              "ServerArgs.add_cli_args(p); print(json.dumps(sorted(o for a in p._actions for o in a.option_strings"
              " if o.startswith('--'))))")
    return set(json.loads(asked(script)))


def asked(script, *args):
    """What SCRIPT prints when run by the real SGLang venv's interpreter (which must succeed)."""
    rc, out, err = sglang_parser.run([str(SGLANG_PYTHON), "-c", script, *args])
    assert rc == 0, err
    return out


def simulator_options():
    parser = options.build_parser({})
    return {o for a in parser._actions for o in a.option_strings
            if o.startswith("--") and not o.startswith("--sim-") and o != "--help"}


def renderable_options():
    """Every option key the sglang_service role can write into the config file itself."""
    role = ROOT / "roles" / "sglang_service"
    (compute,) = [task for task in yaml.safe_load((role / "tasks" / "options.yml").read_text())
                  if "sglang_service_effective_options" in (task.get("ansible.builtin.set_fact") or {})]
    keys = set(compute["vars"]["__sglang_service_base_options"]) | set(compute["vars"]["__sglang_service_derived_options"])
    for profile in (role / "vars" / "profiles").glob("*.yml"):
        named = yaml.safe_load(profile.read_text())
        keys |= set(named.get("__sglang_service_profile_options") or {}) | set(named.get("__sglang_service_profile_recipe") or {})
    return {"--" + key for key in keys | {"api-key"}}


def test_every_renderable_option_is_known_to_both():
    rendered = renderable_options()
    assert len(rendered) > 15
    assert rendered - real_options() == set()
    assert rendered - simulator_options() == set()


def test_the_simulator_knows_exactly_sglangs_options():
    real, simulated = real_options() - {"--help"}, simulator_options()
    assert len(real) > 500
    assert simulated == real, ("only the simulator knows %s; only SGLang knows %s"
                               % (sorted(simulated - real), sorted(real - simulated)))


def test_the_option_table_is_sglangs_own():
    """The table the simulator builds its parser from is what scripts/sglang_option_table.py reads from SGLang's
    parser today: a new SGLang (or a hand edit) shows up here as a difference."""
    table = SIMULATOR / "sglang_server_options.json"
    done = subprocess.run([str(SGLANG_PYTHON), str(ROOT / "scripts" / "sglang_option_table.py")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == table.read_text(), (
        "%s differs from SGLang's parser: run %s scripts/sglang_option_table.py > %s"
        % (table.relative_to(ROOT), SGLANG_PYTHON, table.relative_to(ROOT)))


# ---------------------------------------------------------------- HTTP

def app_routes(decorators):
    """(method, path) of the routes a function's decorators declare on SGLang's app with a literal path."""
    routes = set()
    for decorator in decorators:
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                and getattr(decorator.func.value, "id", None) == "app" and decorator.args
                and isinstance(decorator.args[0], ast.Constant)):
            continue
        kind, path = decorator.func.attr, decorator.args[0].value
        if kind == "api_route":
            methods = next((k.value for k in decorator.keywords if k.arg == "methods"), None)
            routes |= {(m.value, path) for m in methods.elts} if methods else {("GET", path)}
        elif kind in ("get", "post", "put", "delete"):
            routes.add((kind.upper(), path))
    return routes


def auth_level_of(decorators):
    """The AuthLevel member an `@auth_level(AuthLevel.X)` decorator names; NORMAL without one."""
    for decorator in decorators:
        if (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "auth_level"
                and isinstance(decorator.args[0], ast.Attribute)):
            return decorator.args[0].attr
    return "NORMAL"


def real_routes():
    """{(method, path): auth level} of every route SGLang's HTTP server declares with a literal path."""
    tree = ast.parse((SGLANG_SITE / "sglang" / "srt" / "entrypoints" / "http_server.py").read_text())
    return {route: auth_level_of(node.decorator_list) for node in ast.walk(tree)
            for route in app_routes(getattr(node, "decorator_list", []))}


def simulator_api(*flags):
    args, settings = options.parse_args(["--model-path", "m", "--enable-metrics", *flags], {})
    return api.Api(serving.ServerState(args, settings, log.Log()))


def simulator_routes(api):
    return {(method, path) for path, (methods, dummy) in api.routes.items() for method in methods}


def test_simulator_routes_exist_in_sglang():
    routes = simulator_routes(simulator_api())
    metrics = {("GET", "/metrics")}  # mounted by SGLang's Prometheus set-up, not declared as a route
    assert routes - metrics <= set(real_routes()), routes - metrics - set(real_routes())


# Who presents which key, and which keys the server has: (API key, admin key) of the server, the bearer sent.
KEYS = {"api key only": ("k" * 16, None), "api and admin keys": ("k" * 16, "a" * 16), "admin key only": (None, "a" * 16)}
BEARERS = {"none": None, "the api key": "k" * 16, "the admin key": "a" * 16}


@pytest.mark.parametrize("server", KEYS)
def test_which_routes_need_which_key_is_sglangs_decision(server):
    """SGLang's own decide_request_auth (srt/utils/auth.py), at the auth level SGLang's source gives each route,
    against the simulator's answer, for every route the simulator serves and every bearer."""
    api_key, admin_key = KEYS[server]
    levels = real_routes()
    routes = sorted(simulator_routes(simulator_api()) - {("GET", "/metrics")})
    asks = [[method, path, levels[method, path], bearer] for method, path in routes for bearer in BEARERS.values()]
    script = ("import json, sys; from sglang.srt.utils.auth import decide_request_auth, AuthLevel;"
              "keys, asks = json.loads(sys.argv[1]);"
              "print(json.dumps([decide_request_auth(method=m, path=p, authorization_header=b and 'Bearer ' + b,"
              " api_key=keys[0], admin_api_key=keys[1], auth_level=AuthLevel[level]).allowed"
              " for m, p, level, b in asks]))")
    real = json.loads(asked(script, json.dumps([[api_key, admin_key], asks])))
    flags = (["--api-key", api_key] if api_key else []) + (["--admin-api-key", admin_key] if admin_key else [])
    api = simulator_api(*flags)
    simulated = [api.authorized(Namespace(headers={"Authorization": "Bearer " + b} if b else {}), p)
                 for dummy, p, dummy_level, b in asks]
    assert dict(zip(map(str, asks), simulated)) == dict(zip(map(str, asks), real))
    assert levels["GET", "/flush_cache"] == "ADMIN_OPTIONAL" and levels["GET", "/v1/models"] == "NORMAL"


# ---------------------------------------------------------------- log lines

# What the simulator prints (a fragment of its line) -> where SGLang 0.5.23 prints it (a pattern in its source).
RELIED_ON = [
    ("Load weight begin. avail mem=", r'"Load weight begin\. avail mem='),
    ("Loading safetensors checkpoint shards:", r'desc="Loading safetensors checkpoint shards"'),
    ("Load weight end. elapsed=", r'f"Load weight end\. "\s*f"elapsed='),
    ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
     r"is allocated'\}\. dtype: \{self\.dtype\}, \"\s*f\"#tokens: \{num_tokens\}, KV size: "),
    ("Memory pool end. avail mem=", r'f"Memory pool end\. "\s*f"avail mem='),
    ("Capture target decode CUDA graph begin. backend=",
     r'capture_name = f"\{role\} decode"(.|\n)*f"Capture \{capture_name\} \{graph_backend\[model_runner\.device\]\} '
     r'begin\. "\s*f"backend='),
    ("Capturing batches (bs=", r'f"Capturing batches \(\{bs=\} \{avail_mem=:\.2f\} GB\)"'),
    ("Capture target decode CUDA graph end. bs=",
     r'f"Capture \{capture_name\} \{graph_backend\[model_runner\.device\]\} end\. "\s*f"bs='),
    ("max_total_num_tokens=", r'f"max_total_num_tokens=\{self\.max_total_num_tokens\}, "'),
    ("The server is fired up and ready to roll!", r'"The server is fired up and ready to roll!"'),
    # the start-up line that carries the API key: a dict (resolved_dict), which the launcher and readers must mask
    ("server_args={'model_path': ", r'logger\.info\(f"server_args=\{_server_args_for_logging\(server_args\)\}"\)'),
]


def test_relied_on_log_lines_come_from_sglang(tmp_path):
    port = sim_port()
    proc = subprocess.run([sys.executable, str(SIMULATOR), "--model-path", "m", "--port", str(port),
                           "--sim-load-seconds", "0", "--sim-graph-seconds", "0", "--sim-warmup-seconds", "0",
                           "--sim-failure", "crash_after_ready", "--sim-crash-after-seconds", "0"],
                          check=False, capture_output=True, text=True, timeout=60)
    printed = proc.stderr
    source = "\n".join(path.read_text(errors="replace") for path in (SGLANG_SITE / "sglang" / "srt").rglob("*.py"))
    for fragment, pattern in RELIED_ON:
        assert fragment in printed, "the simulator does not print %r" % fragment
        assert re.search(pattern, source), "SGLang 0.5.23 has no %r (%s)" % (fragment, pattern)


def sim_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
