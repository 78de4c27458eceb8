"""Probe an SGLang server (or the simulator) from its start to its stop, and print what a client and the package see.

    python3 sglang_probe.py --port 31001 --api-key KEY -- /opt/sglang/venvs/sglang-0.5.23/bin/python \\
        -m sglang.launch_server --config /tmp/probe.yaml

It starts the command, asks the routes the package relies on every 0.2 s while it starts (/health,
/health_generate, /ready, /v1/models, the last with the key), and once /v1/models and the warm-up answer 200 asks
them again, with the key, without it and with a wrong one (and one admin route, also with the admin key, and
whether /server_info shows that key to a holder of the API key); then it sends SIGTERM to the process alone (as the unit's
KillMode=mixed does) and times the stop. It prints one JSON document: per route the sequence of distinct answers
while starting and the answers when ready, the 401 body, the shape of /v1/models, which of the lines the package
reads were printed, the exit status and the seconds the stop took. Timings are left out of what two servers are
compared on (molecule/default: the real SGLang against the simulator, same config).

Only the standard library: it runs on the target, with the system's python3.
"""
import argparse
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROUTES = ("/health", "/health_generate", "/ready", "/v1/models")
# One of SGLang's admin routes (AuthLevel.ADMIN_OPTIONAL), harmless to call: who may flush the cache.
ADMIN_ROUTE = "/flush_cache"
# What the package reads in the output: the launcher masks the first, sglang_ready's progress and the tests read
# the others (SGLang 0.5.23's own words).
LINES = {
    "server_args": "server_args=",
    "uvicorn_running": "Uvicorn running on http",
    "fired_up": "The server is fired up and ready to roll!",
    "sigterm_received": "SIGTERM received",
    "child_crashed": "crashed with exit code",
}
WRONG_KEY = "wrong-key-0123456789abcdef"


def ask(port, path, key=None, timeout=5.0):
    """(status or 'refused', body text)"""
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return "refused", ""


def shape(body):
    """The keys of /v1/models' answer and of its first model, sorted."""
    try:
        data = json.loads(body)
        return {"top": sorted(data), "model": sorted(data["data"][0]) if data.get("data") else []}
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


class Output:
    """The process's merged output, read on a thread."""

    def __init__(self, stream):
        self.lines = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for raw in iter(stream.readline, b""):
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def seen(self):
        return {name: any(marker in line for line in self.lines) for name, marker in LINES.items()}


def starting(port, key, process, deadline):
    """Per route, the distinct answers in order until /v1/models and the warm-up answer 200."""
    sequences = {route: [] for route in ROUTES}

    def sweep():
        answers = {route: ask(port, route, key if route == "/v1/models" else None)[0] for route in ROUTES}
        for route, status in answers.items():
            if not sequences[route] or sequences[route][-1] != status:
                sequences[route].append(status)
        return answers

    while time.monotonic() < deadline and process.poll() is None:
        answers = sweep()
        if answers["/v1/models"] == 200 and 200 in (answers["/ready"], answers["/health_generate"]):
            # the routes are asked one after the other: a server that became ready during the sweep answered the
            # first ones as not ready yet. One more sweep ends every sequence on its answer once ready.
            sweep()
            return sequences, True
        time.sleep(0.2)
    return sequences, False


def when_ready(port, key, admin_key=None):
    result = {}
    for route in ROUTES + (ADMIN_ROUTE,):
        result[route] = {"key": ask(port, route, key)[0], "no_key": ask(port, route)[0],
                         "wrong_key": ask(port, route, WRONG_KEY)[0]}
    if admin_key:
        result[ADMIN_ROUTE]["admin_key"] = ask(port, ADMIN_ROUTE, admin_key)[0]
        result["server_info_shows_the_admin_key"] = admin_key in ask(port, "/server_info", key)[1]
    status, body = ask(port, "/v1/models")
    result["401_body"] = body if status == 401 else None
    result["models_shape"] = shape(ask(port, "/v1/models", key)[1])
    return result


def stop(process, timeout):
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        code = "killed after %ds" % timeout
    return code, round(time.monotonic() - started, 1)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--admin-api-key", help="the admin key the server's config sets, if any")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = Output(process.stdout)
    sequences, ready = starting(args.port, args.api_key, process, started + args.timeout)
    report = {"ready": ready, "seconds_to_ready": round(time.monotonic() - started, 1), "starting": sequences}
    if ready:
        time.sleep(1)  # the lines printed with the first answers
        report["when_ready"] = when_ready(args.port, args.api_key, args.admin_api_key)
    report["exit_status"], report["seconds_to_stop"] = stop(process, 60)
    output.thread.join(timeout=5)
    report["lines"] = output.seen()
    report["last_lines"] = [line for line in output.lines if line.strip()][-5:]
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
