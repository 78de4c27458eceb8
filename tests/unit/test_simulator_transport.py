"""The HTTP/1.1 transport the simulator serves its API over (transport.py)."""

import http.client
import io
import json
import socket
import threading

import pytest

from simulator_process import READY_LINE, sse_events
from sglang_simulator import api, log, options, serving, transport


@pytest.fixture
def served():
    """(port, log stream) of an in-process HTTP server over the API of a simulator that is not warm yet."""
    args, settings = options.parse_args(["--model-path", "m", "--sim-tokens-per-second", "0"], {})
    stream = io.StringIO()
    state = serving.ServerState(args, settings, log.Log("info", stream))
    server = transport.SimHTTPServer(("127.0.0.1", 0), api.Api(state))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.server_address[1], stream
    server.shutdown()
    server.server_close()


def test_keep_alive_compact_json_and_uvicorns_name(served):
    port, dummy = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for dummy_round in range(2):  # the same connection twice: HTTP/1.1 keep-alive
            conn.request("GET", "/v1/models")
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200 and response.getheader("Server").startswith("uvicorn")
            assert response.getheader("Content-Type") == "application/json" and body.startswith(b'{"object":"list",')
    finally:
        conn.close()


def test_the_access_log_leaves_probes_out_at_info_level(served):
    port, stream = served
    for path in ("/health", "/v1/models"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", path)
        conn.getresponse().read()
        conn.close()
    logged = stream.getvalue()
    assert '"GET /v1/models HTTP/1.1" 200 OK' in logged and "INFO:     127.0.0.1:" in logged
    assert "/health" not in logged


def test_a_bad_content_length_is_a_400_and_ends_the_connection(served):
    port, dummy = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n")
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 400 ") and b'"message":"invalid Content-Length"' in received


def test_a_stream_is_chunked_server_sent_events(served):
    port, dummy = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/generate", body=json.dumps({"text": "hi", "stream": True,
                                                           "sampling_params": {"max_new_tokens": 2}}))
        response = conn.getresponse()
        assert response.getheader("Transfer-Encoding") == "chunked"
        assert response.getheader("Content-Type") == "text/event-stream"
        events = sse_events(response.read())
    finally:
        conn.close()
    assert events[-1] == "[DONE]" and [json.loads(event)["text"] for event in events[:-1]] == ["Kimi", "Kimi K2.6"]


# ---------------------------------------------------------------- as a process


def test_debug_log_level_logs_probes(start_sim):
    sim = start_sim("--log-level", "debug")
    sim.wait_for(READY_LINE)
    assert sim.get("/health")[0] == 200
    sim.wait_for('"GET /health HTTP/1.1" 200 OK')
