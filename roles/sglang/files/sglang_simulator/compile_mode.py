# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compile mode (``--sim-compile-deep-gemm``, anywhere in the arguments) stands for SGLang 0.5.23's
``python -m sglang.compile_deep_gemm`` as the deployer runs it (plugins/module_utils/sglang_deepgemm.py)::

    python sglang_simulator --sim-compile-deep-gemm --config /etc/sglang/k26.yaml --port 41234 --timeout 1800 \
        --host 127.0.0.1

It takes the options of launch mode plus compile_deep_gemm's ``--timeout`` (seconds, default 3600; launch mode
refuses it), less the API keys and TLS options, prints what the real one prints on stdout and starts this package in
launch mode as its server, with CUDA graphs and torch.compile off, the same environment and its own stdout and
stderr. It polls http://host:port/v1/models without a key until 200, sends one /generate request, writes stand-in
kernel files into DeepGEMM's cache (SGLANG_DG_CACHE_DIR, else $SGLANG_CACHE_DIR/deep_gemm, else
~/.cache/sglang/deep_gemm), says "DeepGEMM Kernels compilation finished successfully.", stops the server and exits
0. A /generate that fails ends it with a RuntimeError traceback (exit 1). After --timeout it prints the
TimeoutError traceback and, like the real one, whose server is a non-daemon child process, never exits while its
server lives (a hung server: a hang until a deadline stops it), else exits 1. SIGTERM or SIGINT goes on to the
server, which stops; then the signal's default action ends the process.
"""

import argparse
import hashlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time

from .checks import Fatal, check_only, check_server_args, traceback_text
from .log import Log
from .options import SIM_KNOBS, DeprecatedStoreConstAction, build_parser, json_list_type, parse_args, server_args_dict
from .signals import ShutdownRequested


COMPILE_FLAG = "--sim-compile-deep-gemm"
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
    """compile_deep_gemm's run: a server in a child process (this package in launch mode), one request, the kernels."""

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
        return [sys.executable, os.path.dirname(os.path.abspath(__file__)), *server_flags(self.args, parser),
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
