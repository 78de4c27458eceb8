"""The SGLang simulator as a process, for the tests of its modules: started on a free loopback port with fast phases
(conftest.py's fixture start_sim), checked over HTTP. Importing this module makes the simulator's package
(roles/sglang/files/sglang_simulator) importable; conftest.py imports it before any test module."""
import http.client
import json
import socket
import sys
import time
from pathlib import Path


FILES = Path(__file__).resolve().parents[2] / "roles" / "sglang" / "files"
SIMULATOR = FILES / "sglang_simulator"
if str(FILES) not in sys.path:
    sys.path.insert(0, str(FILES))
FAST = {
    "SGLANG_SIM_LOAD_SECONDS": "0.3",
    "SGLANG_SIM_GRAPH_SECONDS": "0.1",
    "SGLANG_SIM_WARMUP_SECONDS": "0.3",
    "SGLANG_SIM_HEALTH_GENERATE_SECONDS": "0.05",
    "SGLANG_SIM_TOKENS_PER_SECOND": "500",
    "SGLANG_SIM_CRASH_AFTER_SECONDS": "0.5",
}
READY_LINE = "The server is fired up and ready to roll!"
API_KEY = "k26-test-secret-5f1c"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port):
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


class Sim:
    """One simulator process; its stderr goes to a file so that it never blocks."""

    def __init__(self, proc, port, stderr_path):
        self.proc = proc
        self.port = port
        self.stderr_path = stderr_path

    @property
    def stderr(self):
        return self.stderr_path.read_text()

    def wait_for(self, text, timeout=10.0):
        assert wait_until(lambda: text in self.stderr, timeout), f"{text!r} not logged:\n{self.stderr}"

    def wait_port(self, timeout=10.0):
        assert wait_until(lambda: port_open(self.port), timeout), f"port never opened:\n{self.stderr}"

    def wait_exit(self, timeout=10.0):
        return self.proc.wait(timeout)

    def request(self, method, path, body=None, key=None, timeout=10.0):
        """Return (status, headers, body bytes)."""
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, body, **kwargs):
        return self.request("POST", path, body=body, **kwargs)


def sse_events(body):
    return [part[len("data: "):] for part in body.decode().split("\n\n") if part.startswith("data: ")]
