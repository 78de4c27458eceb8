"""The SGLang simulator's compile mode (compile_mode.py, --sim-compile-deep-gemm), the stand-in for SGLang 0.5.23's
``python -m sglang.compile_deep_gemm``: run for real as a process on a free loopback port, its server a child
process."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from simulator_process import SIMULATOR, free_port, port_open, wait_until
from sglang_simulator import compile_mode, options

FAST = {
    "SGLANG_SIM_LOAD_SECONDS": "0.2",
    "SGLANG_SIM_WARMUP_SECONDS": "0.1",
    "SGLANG_SIM_TOKENS_PER_SECOND": "500",
    "SGLANG_SIM_COMPILE_POLL_SECONDS": "0.1",
    "SGLANG_SIM_COMPILE_SAFETY_SECONDS": "0",
}
API_KEY = "k26-compile-secret-7d2e"
DISABLE = "Disable CUDA Graph and Torch Compile to save time..."
BEGIN = ("Begin DeepGEMM Kernels compilation...\n"
         "It may take a long time and timeout maybe raised while the compilation is still in progress.\n"
         "Just feel free to restart the command until the compilation is fully finished.\n")
FINISHED = "\nDeepGEMM Kernels compilation finished successfully."
TIMEOUT_ERROR = "TimeoutError: DeepGEMM Kernels compilation timeout.\n\nFeel free and please restart the command."


def group_cmdlines(pgid):
    """{pid: command line} of the live processes in process group PGID."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if entry.isdigit() and int(fields[2]) == pgid and fields[0] != "Z":
            found[int(entry)] = cmdline
    return found


def kernel_files(cache_dir):
    return sorted(cache_dir.rglob("kernel.cubin"))


class Compile:
    """One compile process (the leader of its own process group); its stdout and stderr go to one file."""

    def __init__(self, proc, port, output_path):
        self.proc = proc
        self.port = port
        self.output_path = output_path

    @property
    def output(self):
        return self.output_path.read_text()

    def wait(self, timeout=20.0):
        return self.proc.wait(timeout)

    def servers(self):
        """The command lines of the processes it started (its server)."""
        return [cmdline for pid, cmdline in group_cmdlines(self.proc.pid).items() if pid != self.proc.pid]


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "dg-cache"


@pytest.fixture
def start_compile(tmp_path, cache_dir):
    """start_compile(*flags, config=None, env=None, compile_mode=True) -> Compile; every process group is killed
    afterwards."""
    procs = []

    def start(*flags, config=None, env=None, compile_mode=True, port=None):
        port = port or free_port()
        config_path = tmp_path / f"sglang-{len(procs)}.yaml"
        config_path.write_text(yaml.safe_dump(dict({"model-path": "some/model", "port": port}, **(config or {}))))
        argv = [sys.executable, str(SIMULATOR), *(["--sim-compile-deep-gemm"] if compile_mode else []),
                "--config", str(config_path), "--host", "127.0.0.1", *flags]
        output_path = tmp_path / f"output-{len(procs)}.log"
        full_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SGLANG_DG_CACHE_DIR": str(cache_dir),
                    **FAST, **(env or {})}
        with open(output_path, "w") as output:
            proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, env=full_env,
                                    start_new_session=True)
        procs.append(proc)
        return Compile(proc, port, output_path)

    yield start
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


def test_it_compiles_writes_kernels_into_the_deep_gemm_cache_and_stops_its_server(start_compile, cache_dir):
    job = start_compile("--timeout", "30")
    assert job.wait() == 0, job.output
    output = job.output
    assert DISABLE in output and BEGIN in output and FINISHED in output
    assert output.index(BEGIN) < output.index(FINISHED)
    assert "CUDA graph begin" not in output  # its server captures no CUDA graph
    kernels = kernel_files(cache_dir)
    assert len(kernels) == 1 and kernels[0].parent.parent == cache_dir / "cache"
    assert kernels[0].parent.name.startswith("kernel.sim_fp8_gemm_nt.") and kernels[0].stat().st_size > 0
    assert not port_open(job.port) and group_cmdlines(job.proc.pid) == {}  # the server is gone


def test_the_api_keys_and_tls_are_left_out_and_never_on_a_command_line(start_compile, tmp_path):
    hold = tmp_path / "loaded"
    config = {"api-key": API_KEY, "admin-api-key": API_KEY + "-admin",
              "ssl-certfile": str(tmp_path / "missing.crt"), "ssl-keyfile": str(tmp_path / "missing.key")}
    job = start_compile("--timeout", "30", config=config,
                        env={"SGLANG_DG_CACHE_DIR": "", "SGLANG_CACHE_DIR": str(tmp_path / "sglang-cache"),
                             "SGLANG_SIM_LOAD_HOLD_FILE": str(hold)})
    assert wait_until(job.servers), job.output
    server = job.servers()[0]
    assert "--cuda-graph-backend-decode=disabled" in server and "--cuda-graph-backend-prefill=disabled" in server
    assert "--timeout" not in server and "--sim-compile-deep-gemm" not in server
    assert not any(API_KEY in cmdline or "--ssl" in cmdline for cmdline in group_cmdlines(job.proc.pid).values())
    hold.touch()
    assert job.wait() == 0, job.output
    assert API_KEY not in job.output and FINISHED in job.output
    assert len(kernel_files(tmp_path / "sglang-cache" / "deep_gemm")) == 1


def test_a_server_that_crashes_while_loading_times_out_and_exits_1(start_compile, cache_dir):
    job = start_compile("--timeout", "3", env={"SGLANG_SIM_FAILURE": "crash_loading"})
    assert job.wait() == 1, job.output
    assert TIMEOUT_ERROR in job.output
    assert "Traceback (most recent call last):" in job.output and FINISHED not in job.output
    assert kernel_files(cache_dir) == []


def test_a_hung_server_hangs_the_compile_after_its_timeout_until_sigterm(start_compile, cache_dir):
    job = start_compile("--timeout", "2", env={"SGLANG_SIM_FAILURE": "hang_loading"})
    assert wait_until(lambda: TIMEOUT_ERROR in job.output, timeout=10), job.output
    time.sleep(2)
    assert job.proc.poll() is None and job.servers(), job.output  # the real one waits for its non-daemon server
    job.proc.send_signal(signal.SIGTERM)  # a deadline: on to the server, then the compile ends by the signal
    assert job.wait(10) == -signal.SIGTERM
    assert wait_until(lambda: group_cmdlines(job.proc.pid) == {}, timeout=5), job.output
    assert kernel_files(cache_dir) == []


class FailingGenerate(BaseHTTPRequestHandler):
    """Whatever holds the port answers the poll: /v1/models 200, /generate 500."""

    def do_GET(self):
        self.reply(200, {"object": "list", "data": []})

    def do_POST(self):
        self.reply(500, {"object": "error", "message": "boom"})

    def reply(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        pass


def test_a_failed_sync_request_is_a_runtime_error_and_exits_1(start_compile, cache_dir):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FailingGenerate)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        job = start_compile("--timeout", "30", port=server.server_address[1])
        assert job.wait() == 1, job.output
    finally:
        server.shutdown()
        server.server_close()
    assert "RuntimeError: Sync request failed: {'object': 'error', 'message': 'boom'}" in job.output
    assert kernel_files(cache_dir) == [] and group_cmdlines(job.proc.pid) == {}


def test_timeout_is_an_option_of_compile_mode_only(start_compile):
    launch = start_compile("--timeout", "5", "--sim-check-only", compile_mode=False)
    assert launch.wait() == 2 and "unrecognized arguments: --timeout 5" in launch.output
    checked = start_compile("--timeout", "5", "--sim-check-only")
    assert checked.wait() == 0 and "OK: the options parse" in checked.output


def test_the_servers_flags_parse_back_to_the_compiles_options(tmp_path, capsys):
    """Every kind of option survives the trip to the server's command line; the key and the TLS password do not."""
    config = tmp_path / "sglang.yaml"
    config.write_text(yaml.safe_dump({
        "model-path": "/models/Kimi-K2.6", "tp-size": 2, "mem-fraction-static": 0.8, "enable-metrics": True,
        "cuda-graph-bs-decode": [1, 2, 4], "context-length": "128k",
        "preferred-sampling-params": {"temperature": 0.6, "top_p": True},
        "cuda-graph-config": {"decode": {"max_bs": 64}}, "json-model-override-args": '{"rope_scaling": null}',
        "api-key": API_KEY, "ssl-keyfile-password": API_KEY}))
    argv = ["--config", str(config), "--sim-compile-deep-gemm", "--timeout", "1800", "--disable-cuda-graph",
            "--no-enable-tf32-matmul", "--monokernel-backend", "amd", "--served-model-name=-k26",
            '--sidecar-args=["--a", 1]', "--lora-paths", "a=/lora/a", '{"lora_name": "b", "lora_path": "/lora/b"}']
    args, settings, timeout = compile_mode.parse_compile_args(argv, {})
    compile_mode.compile_server_args(args, timeout)
    assert capsys.readouterr().out == DISABLE + "\n"
    flags = compile_mode.server_flags(args, options.build_parser({}))
    reparsed, reparsed_settings = options.parse_args(flags + compile_mode.knob_flags(settings), {})
    assert vars(reparsed) == vars(args) and reparsed_settings == settings
    assert timeout == 1800 and args.api_key is None and args.ssl_keyfile_password is None
    assert not any(API_KEY in flag for flag in flags)
    assert args.cuda_graph_config == {"decode": {"max_bs": 64, "backend": "disabled"},
                                      "prefill": {"backend": "disabled"}}


def test_deep_gemm_keeps_its_kernels_where_sglang_points_it():
    assert compile_mode.deep_gemm_cache_dir({"SGLANG_DG_CACHE_DIR": "/dg", "SGLANG_CACHE_DIR": "/c"}) == "/dg"
    assert compile_mode.deep_gemm_cache_dir({"SGLANG_CACHE_DIR": "/c"}) == "/c/deep_gemm"
    assert compile_mode.deep_gemm_cache_dir({}) == os.path.expanduser("~/.cache/sglang/deep_gemm")


def test_the_same_options_name_the_same_kernels_wherever_the_server_listens(tmp_path):
    args = options.parse_args(["--model-path", "m", "--tp-size", "2"], {})[0]
    environ = {"SGLANG_DG_CACHE_DIR": str(tmp_path)}
    first = compile_mode.write_simulated_kernels(args, environ)
    args.port, args.host = 1, "0.0.0.0"
    assert compile_mode.write_simulated_kernels(args, environ) == first
    args.tp_size = 4
    assert compile_mode.write_simulated_kernels(args, environ) != first


def test_its_server_is_this_package_in_launch_mode():
    args, settings, timeout = compile_mode.parse_compile_args(["--model-path", "m", "--sim-compile-deep-gemm"], {})
    argv = compile_mode.DeepGemmCompilation(args, settings, timeout, {}).server_argv()
    assert argv[:3] == [sys.executable, str(SIMULATOR), "--model-path=m"]
    assert compile_mode.COMPILE_FLAG not in argv
