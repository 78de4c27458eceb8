"""A fleet for tests and benchmarks: replica containers and a router container on a podman network of their own,
deployed by one deploy_k26.yml run, and requests sent through the router from inside its container."""

import collections
import contextlib
import json
import os
import subprocess
import threading
import time

import yaml

from harness import ROOT, demo_inventory, podman_network, systemd_container, wheelhouse

ROUTER_DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_router" / "defaults" / "main.yml").read_text())
ROUTER_PACKAGE = "%s==%s" % (ROUTER_DEFAULTS["sglang_router_package"], ROUTER_DEFAULTS["sglang_router_version"])
ROUTER_URL = "http://127.0.0.1:%d" % ROUTER_DEFAULTS["sglang_router_port"]
ADMIN_KEY_FILE = "%s/admin_key" % ROUTER_DEFAULTS["sglang_router_config_dir"]


@contextlib.contextmanager
def fleet_containers(prefix, replicas, inventory_dir, router_vars=None, quick_start=True, environment=None):
    """`replicas` replica containers and one router container on a network of their own, and an inventory for them
    in `inventory_dir` (demo_inventory's quick_start and environment): yields (replica containers, router container,
    inventory path)."""
    tag = os.getpid()
    with contextlib.ExitStack() as stack:
        network = stack.enter_context(podman_network("%s-net-%d" % (prefix, tag)))
        boxes = [stack.enter_context(systemd_container("%s-replica-%s-%d" % (prefix, chr(97 + n), tag),
                                                       network=network)) for n in range(replicas)]
        router = stack.enter_context(systemd_container("%s-router-%d" % (prefix, tag), network=network))
        settings = {"sglang_router_wheelhouse": str(wheelhouse(ROUTER_PACKAGE)), "sglang_router_policy": "round_robin",
                    "sglang_router_ready_timeout": 120}
        settings.update(router_vars or {})
        inventory = demo_inventory(boxes[0], inventory_dir, *boxes[1:], routers=[router], router_vars=settings,
                                   quick_start=quick_start, environment=environment)
        yield boxes, router, inventory


def chat(router, key, content, max_tokens=8, url=ROUTER_URL, max_seconds=60):
    """One chat completion through the router (or the server at `url`), from inside its container: (status, body).
    A request not answered within `max_seconds` is status 0 (curl's own deadline: never left hanging)."""
    body = json.dumps({"model": "kimi-k2.6", "messages": [{"role": "user", "content": content}],
                       "max_tokens": max_tokens})
    out = router.exec("curl -s -m %d -w '\\n%%{http_code}' -H 'Authorization: Bearer %s' -H 'Content-Type: "
                      "application/json' -d '%s' %s/v1/chat/completions" % (max_seconds, key, body, url),
                      check=False, timeout=max_seconds + 30).stdout
    text, dummy, status = out.rpartition("\n")
    return int(status or 0), text


def admin_key_of(router):
    """The router's control-plane key, which the sglang_router role generated on its host."""
    return router.exec("cat %s" % ADMIN_KEY_FILE).stdout.strip()


def router_workers(router):
    """The router's workers: URL -> healthy (asked with its control-plane key)."""
    body = router.exec("curl -s -H \"Authorization: Bearer $(cat %s)\" %s/workers" % (ADMIN_KEY_FILE, ROUTER_URL)).stdout
    return {worker["url"]: worker["is_healthy"] for worker in json.loads(body)["workers"]}


class RequestStream:
    """Chat requests through the router, `parallel` at a time, until stopped: the status codes seen, and each
    request's (monotonic start, status). A request not answered within `max_seconds` counts as failed (status 0),
    as does one whose exec failed: every request sent is counted."""

    def __init__(self, router, key, parallel=1, max_tokens=32, max_seconds=60):
        self.router, self.key, self.max_tokens, self.max_seconds = router, key, max_tokens, max_seconds
        self.codes = collections.Counter()
        self.requests = []
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for dummy in range(parallel)]

    def run(self):
        while not self.stopped.is_set():
            started = time.monotonic()
            try:
                status = chat(self.router, self.key, "a steady stream", max_tokens=self.max_tokens,
                              max_seconds=self.max_seconds)[0]
            except Exception:  # pylint: disable=broad-except
                # a request that could not even be sent failed
                status = 0
            self.codes[status] += 1
            self.requests.append((started, status))

    @property
    def sent(self):
        return sum(self.codes.values())

    @property
    def failed(self):
        return self.sent - self.codes[200]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=self.max_seconds + 60)


# Run inside the router's container: its list of workers every 0.2 s, one JSON line [monotonic time, [URLs]] each,
# until /tmp/k26-workers.stop exists. The containers share the host's kernel, so the times compare with systemd's
# monotonic timestamps of the replicas' restarts.
SAMPLER = (ROOT / "molecule" / "fleet" / "files" / "sample_workers.py").read_text()


class WorkerSamples:
    """The router's workers sampled from inside its container while the block runs: `samples` afterwards (asked with
    the router's control-plane key)."""

    def __init__(self, router):
        self.router, self.samples = router, []
        self.process = None

    def __enter__(self):
        self.router.exec("rm -f /tmp/k26-workers.stop")
        self.process = subprocess.Popen(["podman", "exec", self.router.name, "python3", "-c", SAMPLER, ROUTER_URL,
                                         ADMIN_KEY_FILE, "/tmp/k26-workers.stop"], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc):
        self.router.exec("touch /tmp/k26-workers.stop")
        out = self.process.communicate(timeout=60)[0]
        self.samples = [json.loads(line) for line in out.splitlines() if line.strip()]


def restart_times(replica):
    """The replica's service: its InvocationID and systemd's monotonic timestamps of its last stop and start."""
    shown = replica.exec("systemctl show sglang.service -p InvocationID -p InactiveEnterTimestampMonotonic "
                         "-p ExecMainStartTimestampMonotonic").stdout
    return dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
