# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The start-up sequence and the life of the server process, and main()."""

import json
import os
import ssl
import sys
import threading
import time

from .api import DEFAULT_CONTEXT_LENGTH, Api
from .checks import (Fatal, check_only, check_server_args, illegal_memory_access_error, local_rank_leads,
                     missing_model_error, out_of_memory_error, plan_cuda_graphs, rank_label)
from .compile_mode import COMPILE_FLAG, compile_deep_gemm
from .log import Log, timestamp
from .options import format_server_args, parse_args
from .performance import GPU_AVAIL_GB, weight_gb
from .rendezvous import Rendezvous
from .serving import ServerState
from .signals import ShutdownRequested, ignore_stop_signals, install_signal_handlers, stop_signals_blocked
from .transport import SimHTTPServer


DEFAULT_SHARDS = 64
DEFAULT_ARCHITECTURE = "DeepseekV3ForCausalLM"
WARMUP_RETRY_SECONDS = 2.0
WARMUP_CLIENT = f"127.0.0.1:{40000 + os.getpid() % 20000}"  # the warm-up request's client address
LOAD_STEPS = 8
NVIDIA_DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"


def sleep_forever():
    while True:
        time.sleep(3600)


def wait_for_file(path):
    """Return once PATH exists (at once when PATH is empty): a hold knob's phase lasts until a test releases it."""
    while path and not os.path.exists(path):
        time.sleep(0.2)


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
        self.gpu = None  # GPU mode: the rank processes (gpu.GpuRanks)
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
        """Start the rank processes of GPU mode (gpu.py); nothing in CPU mode."""
        mode = self.settings.gpu
        if mode == "off" or (mode == "auto" and not os.path.exists(NVIDIA_DRIVER_VERSION_FILE)):
            return
        from . import gpu  # imports torch only in the rank processes
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
        from . import gpu
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
        from . import gpu
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
