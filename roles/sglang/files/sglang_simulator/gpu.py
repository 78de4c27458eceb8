# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU mode of the SGLang simulator: it touches the GPUs the way SGLang does.

Used by the simulator (lifecycle.py) when the host has an NVIDIA driver and the interpreter has PyTorch with CUDA
(``--sim-gpu auto``), or always (``--sim-gpu on``). Like SGLang's scheduler processes, one process per local
rank (tp-size x pp-size / nnodes of them, rank r on GPU r) does the GPU work while the main process serves HTTP:

* "loading weights": each rank takes ``mem-fraction-static`` of its GPU's total memory (weights, then the
  KV cache pool), as real allocations; where the model directory holds ``*.safetensors`` files the ranks read
  them (each its share of the files, the checkpoint once in all) from disk or the page cache into GPU memory
  through a pinned buffer, so a load costs what reading those bytes costs;
* "capturing CUDA graphs": each rank captures a real CUDA graph of its decode step and replays it (not when the
  configuration disables decode graphs: the step then runs eagerly), after reserving the activation workspace
  SGLang leaves outside mem-fraction-static; a fraction that leaves too little fails here with PyTorch's own
  out-of-memory error, as SGLang does;
* serving: every decode step runs real GPU work on every rank (matrix products on a static input), pipeline
  stages pass activations to the next stage with NCCL send/recv, tensor-parallel ranks of a stage all-reduce.

A rank that fails (CUDA error, NCCL failure, out of memory) prints the real traceback on stderr and exits 1; the
main process then ends with exit code 1, as SGLang does when a scheduler process dies. Loading only PyTorch
inside the rank processes keeps the main process free of CUDA, so the CPU simulator never imports torch.
"""

import datetime
import importlib.util
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass

GIB = 1 << 30
NVIDIA_DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"
# Rows of the static decode input: the tokens of one batch (with 8192 columns and 4 products, about 1 TFLOP a step).
STEP_ROWS = 2048
# Bytes a rank reads from a shard at a time, into a pinned buffer that is then copied to the GPU.
READ_CHUNK = 64 << 20
# How long the main process waits for a rank's answer before it declares the rank hung.
RANK_REPLY_TIMEOUT = 600.0


def host_has_gpu_stack():
    """(True, '') where an NVIDIA driver is loaded and torch is importable; else (False, why not)."""
    if not os.path.exists(NVIDIA_DRIVER_VERSION_FILE):
        return False, f"no NVIDIA driver loaded ({NVIDIA_DRIVER_VERSION_FILE} is missing)"
    if importlib.util.find_spec("torch") is None:
        return False, f"PyTorch is not importable by {sys.executable}"
    return True, ""


@dataclass(frozen=True)
class RankSpec:
    """What one rank process needs; plain data, so that it pickles into a spawned process."""
    local_rank: int
    local_world: int
    pp_rank: int
    tp_rank: int
    tp_size: int
    pp_size: int
    gpu: int
    label: str
    mem_fraction: float
    weight_bytes: int
    activation_bytes: int
    step_dim: int
    step_matmuls: int
    decode_graph: bool
    master_port: int
    shard_files: tuple = ()


def model_shards(model_path):
    """The checkpoint's shard files (``*.safetensors`` in the model directory), sorted; none for a hub id."""
    if not os.path.isdir(model_path):
        return []
    return sorted(os.path.join(model_path, name) for name in os.listdir(model_path) if name.endswith(".safetensors"))


def local_rank_specs(args, settings, decode_graph, weight_bytes):
    """One RankSpec per rank of this node, with a free loopback port for their NCCL rendezvous; each rank reads
    every n-th shard of the model directory."""
    world = args.tp_size * args.pp_size
    per_node = max(world // args.nnodes, 1)
    first = args.node_rank * per_node
    ranks = list(range(first, min(first + per_node, world)))
    port = free_port()
    shards = model_shards(args.model_path)
    specs = []
    for local_rank, rank in enumerate(ranks):
        pp_rank, tp_rank = divmod(rank, args.tp_size)
        specs.append(RankSpec(
            local_rank=local_rank, local_world=len(ranks), pp_rank=pp_rank, tp_rank=tp_rank,
            tp_size=args.tp_size, pp_size=args.pp_size, gpu=local_rank,
            label=(f" PP{pp_rank}" if args.pp_size > 1 else "") + f" TP{tp_rank}",
            mem_fraction=args.mem_fraction_static or 0.85, weight_bytes=weight_bytes,
            activation_bytes=int(settings.gpu_activation_gib * GIB), step_dim=settings.gpu_step_dim,
            step_matmuls=settings.gpu_step_matmuls, decode_graph=decode_graph, master_port=port,
            shard_files=tuple(shards[local_rank::len(ranks)])))
    return specs


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def timestamp():
    return time.strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------- rank process

def rank_main(spec, conn):
    """Entry point of a rank process. Any exception ends it with SGLang's traceback header and exit code 1.

    SIGTERM and SIGINT are ignored: systemd signals every process of the unit at once, and a rank that died of it
    would look like a crash; the main process stops the ranks itself. A main process that is gone (the pipe is
    closed) ends the rank quietly.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    try:
        Rank(spec, conn).run()
    except (EOFError, BrokenPipeError):
        os._exit(0)
    except BaseException:  # noqa: B902 - the process ends either way; the text is the evidence
        sys.stderr.write(f"[{timestamp()}{spec.label}] Scheduler hit an exception: {traceback.format_exc()}")
        sys.stderr.flush()
        os._exit(1)


class Rank:
    """The GPU side of one scheduler process."""

    def __init__(self, spec, conn):
        self.spec = spec
        self.conn = conn
        self.torch = None
        self.dist = None
        self.device = None
        self.held = []          # weights, KV pool, activation workspace: kept for the life of the process
        self.weight = None
        self.static_in = None
        self.static_out = None
        self.graph = None
        self.tp_group = None

    def run(self):
        import torch
        self.torch = torch
        self.report_devices()
        torch.cuda.set_device(self.spec.gpu)
        self.device = torch.device("cuda", self.spec.gpu)
        self.init_distributed()
        self.load()
        self.conn.recv()  # "capture": the main process logged the memory pool
        self.capture()
        self.serve()

    def report_devices(self):
        """What the process sees: CUDA devices through PyTorch, and NVML (rank 0 only)."""
        torch = self.torch
        count = torch.cuda.device_count()
        if not torch.cuda.is_available() or count == 0:
            raise RuntimeError("No CUDA GPUs are available")
        if self.spec.local_rank != 0:
            return
        names = []
        for index in range(count):
            props = torch.cuda.get_device_properties(index)
            names.append(f"{props.name} (cc {props.major}.{props.minor}, {props.total_memory / GIB:.1f} GiB)")
        self.conn.send(("devices", {"cuda": count, "names": names, "nvml": nvml_device_count(),
                                    "torch": torch.__version__, "cuda_runtime": torch.version.cuda}))

    def init_distributed(self):
        if self.spec.local_world == 1:
            return
        import torch.distributed as dist
        self.dist = dist
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{self.spec.master_port}",
                                rank=self.spec.local_rank, world_size=self.spec.local_world,
                                timeout=datetime.timedelta(hours=24), device_id=self.device)
        stages = [list(range(stage * self.spec.tp_size, (stage + 1) * self.spec.tp_size))
                  for stage in range(self.spec.local_world // self.spec.tp_size)]
        for ranks in stages:  # every rank creates every group, in the same order
            group = dist.new_group(ranks)
            if self.spec.local_rank in ranks:
                self.tp_group = group

    def load(self):
        torch = self.torch
        total = torch.cuda.get_device_properties(self.spec.gpu).total_memory
        static = int(total * self.spec.mem_fraction)
        dim = self.spec.step_dim
        self.weight = torch.randn(dim, dim, dtype=torch.bfloat16, device=self.device) * dim ** -0.5
        wanted = sum(os.path.getsize(path) for path in self.spec.shard_files) or self.spec.weight_bytes
        weights = max(min(wanted, static // 2) - self.weight.numel() * 2, 0)
        self.held.append(torch.empty(weights, dtype=torch.uint8, device=self.device))
        read = self.read_shards(self.held[-1])
        free = torch.cuda.mem_get_info(self.spec.gpu)[0]
        self.conn.send(("loaded", {"weights_gb": (weights + self.weight.numel() * 2) / GIB, "avail_gb": free / GIB,
                                   "read_bytes": read}))
        kv = max(static - weights - self.weight.numel() * 2, 0)
        self.held.append(torch.empty(kv, dtype=torch.uint8, device=self.device))
        free = torch.cuda.mem_get_info(self.spec.gpu)[0]
        self.conn.send(("kv", {"kv_gb": kv / GIB, "avail_gb": free / GIB}))

    def read_shards(self, weights):
        """Read this rank's shard files into ``weights`` (wrapping around when they hold more than it does)."""
        if not self.spec.shard_files or weights.numel() == 0:
            return 0
        torch = self.torch
        pinned = torch.empty(READ_CHUNK, dtype=torch.uint8, pin_memory=True)
        view = memoryview(pinned.numpy())
        offset = total = 0
        for path in self.spec.shard_files:
            with open(path, "rb", buffering=0) as handle:
                while True:
                    count = handle.readinto(view)
                    if not count:
                        break
                    total += count
                    done = 0
                    while done < count:
                        piece = min(count - done, weights.numel() - offset)
                        weights[offset:offset + piece].copy_(pinned[done:done + piece])
                        done += piece
                        offset = (offset + piece) % weights.numel()
        torch.cuda.synchronize()
        return total

    def step_compute(self):
        out = self.static_in
        for _step in range(self.spec.step_matmuls):
            out = self.torch.matmul(out, self.weight)
        return out

    def capture(self):
        torch = self.torch
        started = time.monotonic()
        self.held.append(torch.empty(self.spec.activation_bytes, dtype=torch.uint8, device=self.device))
        self.static_in = torch.randn(STEP_ROWS, self.spec.step_dim, dtype=torch.bfloat16, device=self.device)
        if self.spec.decode_graph:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _warm_up in range(3):
                    self.step_compute()
            torch.cuda.current_stream().wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_out = self.step_compute()
            for _replay in range(10):
                self.graph.replay()
        else:
            self.static_out = self.step_compute()
        torch.cuda.synchronize()
        free = torch.cuda.mem_get_info(self.spec.gpu)[0]
        self.conn.send(("captured", {"elapsed": time.monotonic() - started, "graph": self.graph is not None,
                                     "avail_gb": free / GIB}))

    def decode_step(self):
        spec = self.spec
        if spec.pp_rank > 0:
            self.dist.recv(self.static_in, src=spec.local_rank - spec.tp_size)
        if self.graph is not None:
            self.graph.replay()
        else:
            self.static_out = self.step_compute()
        if self.tp_group is not None and spec.tp_size > 1:
            self.dist.all_reduce(self.static_out, group=self.tp_group)
        if spec.local_rank + spec.tp_size < spec.local_world:
            self.dist.send(self.static_out, dst=spec.local_rank + spec.tp_size)
        self.torch.cuda.synchronize()

    def serve(self):
        last_stage_leader = self.spec.local_rank == self.spec.local_world - self.spec.tp_size
        while True:
            message = self.conn.recv()
            if message == "stop":
                return
            self.decode_step()
            if last_stage_leader:
                self.conn.send(("step_done", None))


def nvml_device_count():
    """GPUs NVML lists to this process (the driver's management library, as nvidia-smi uses); None without pynvml."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        return f"NVML error: {exc}"


# --------------------------------------------------------------------------- main process side

class RankFailed(Exception):
    """A rank process ended or stopped answering."""


class GpuRanks:
    """The rank processes of this node, seen from the main process."""

    def __init__(self, specs):
        self.specs = specs
        self.context = multiprocessing.get_context("spawn")
        self.processes = []
        self.conns = []
        self.stopping = False
        self.step_lock = threading.Lock()

    def start(self):
        for spec in self.specs:
            parent, child = self.context.Pipe()
            process = self.context.Process(target=rank_main, args=(spec, child), name=f"scheduler{spec.label}",
                                           daemon=True)
            process.start()
            child.close()
            self.processes.append(process)
            self.conns.append(parent)

    def receive(self, conn, expected, timeout=RANK_REPLY_TIMEOUT):
        """The next message of one rank, which must be EXPECTED; RankFailed when the rank dies or hangs."""
        sentinels = [process.sentinel for process in self.processes]
        deadline = time.monotonic() + timeout
        while True:
            ready = multiprocessing.connection.wait([conn] + sentinels, timeout=max(deadline - time.monotonic(), 0))
            if conn in ready:
                kind, payload = conn.recv()
                if kind != expected:
                    raise RankFailed(f"a scheduler process sent {kind!r} instead of {expected!r}")
                return payload
            if ready:
                raise RankFailed(self.describe_dead())
            if time.monotonic() >= deadline:
                raise RankFailed(f"a scheduler process did not answer within {timeout:.0f} s")

    def gather(self, expected, conns=None):
        return [self.receive(conn, expected) for conn in (conns if conns is not None else self.conns)]

    def devices(self):
        return self.receive(self.conns[0], "devices")

    def broadcast(self, message):
        for conn in self.conns:
            conn.send(message)

    def step(self):
        """One decode step on every rank; returns when the last stage finished it."""
        with self.step_lock:
            self.broadcast("step")
            self.receive(self.conns[len(self.conns) - self.specs[0].tp_size], "step_done")

    def describe_dead(self):
        dead = [f"{process.name} (pid {process.pid}) exited with {process.exitcode}"
                for process in self.processes if process.exitcode is not None]
        return ", ".join(dead) or "a scheduler process died"

    def watch(self, on_death):
        """Call ON_DEATH(description) from a thread as soon as a rank process ends unexpectedly."""
        def wait_for_death():
            multiprocessing.connection.wait([process.sentinel for process in self.processes])
            if not self.stopping:
                on_death(self.describe_dead())
        threading.Thread(target=wait_for_death, name="rank-watch", daemon=True).start()

    def stop(self):
        """Ask every rank to end; kill those that do not within a few seconds (one blocked in NCCL, say)."""
        self.stopping = True
        for conn in self.conns:
            try:
                conn.send("stop")
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for process in self.processes:
            process.join(timeout=max(deadline - time.monotonic(), 0))
        self.kill()

    def kill(self):
        self.stopping = True
        for process in self.processes:
            if process.is_alive():
                process.kill()


class StepEngine:
    """Runs decode steps while requests wait for tokens: every step gives each waiting request one token."""

    def __init__(self, ranks):
        self.ranks = ranks
        self.cond = threading.Condition()
        self.waiting = 0
        self.steps = 0
        self.thread = threading.Thread(target=self.loop, name="decode-steps", daemon=True)

    def start(self):
        self.thread.start()

    def next_token(self):
        """Block until the next decode step has run."""
        with self.cond:
            self.waiting += 1
            target = self.steps + 1
            self.cond.notify_all()  # wakes the step loop when it was idle
            try:
                while self.steps < target:
                    self.cond.wait()
            finally:
                self.waiting -= 1

    def loop(self):
        while True:
            with self.cond:
                while self.waiting == 0:
                    self.cond.wait()
            try:
                self.ranks.step()
            except RankFailed:
                return  # the rank watcher ends the server
            with self.cond:
                self.steps += 1
                self.cond.notify_all()
