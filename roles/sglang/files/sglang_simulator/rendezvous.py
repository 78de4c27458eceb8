# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Multi-node (--nnodes > 1): the ranks meet at --dist-init-addr and watch each other."""

import os
import signal
import socket
import threading
import time

from .checks import Fatal
from .log import timestamp
from .signals import stop_signals_blocked


# --dist-timeout unset: torch.distributed's default timeout of a process group.
DEFAULT_DIST_TIMEOUT = 600
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
