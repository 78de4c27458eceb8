# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTTP/1.1 transport (and HTTPS) the API is served over, with uvicorn's access lines."""

import json
import socket
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .api import HttpError


MAX_BODY_BYTES = 64 * 1024 * 1024
# Probes and scrapes are logged only at --log-level debug (they would flood the journal).
QUIET_PATHS = frozenset({"/health", "/health_generate", "/ready", "/metrics"})


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 transport with keep-alive; the logic lives in Api."""

    protocol_version = "HTTP/1.1"

    def setup(self):
        # HTTPS: the TLS handshake runs here, in the request's thread, not in the accepting loop.
        if hasattr(self.request, "do_handshake"):
            self.request.do_handshake()
        super().setup()

    server_version = "uvicorn"
    sys_version = ""

    def do_GET(self):
        self.server.api.handle(self, "GET")

    def do_POST(self):
        self.server.api.handle(self, "POST")

    def do_PUT(self):
        self.server.api.handle(self, "PUT")

    def do_DELETE(self):
        self.server.api.handle(self, "DELETE")

    def read_body(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            raise HttpError(400, "invalid Content-Length")
        return self.rfile.read(length) if length else b""

    def send_bytes(self, status, data, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status, payload):
        # compact, as SGLang's FastAPI/orjson responses are (seen: {"error":"Unauthorized"})
        self.send_bytes(status, json.dumps(payload, separators=(",", ":")).encode("utf-8"), "application/json")

    def send_empty(self, status):
        self.send_bytes(status, b"", "text/plain; charset=utf-8")

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_event(self, data):
        payload = f"data: {data}\n\n".encode("utf-8")
        self.wfile.write(b"%X\r\n%s\r\n" % (len(payload), payload))

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")

    def log_request(self, code="-", size="-"):
        """uvicorn's access line; health probes and scrapes only at debug level."""
        path = urlsplit(self.path).path
        level = "debug" if path in QUIET_PATHS else "info"
        phrase = self.responses.get(code, ("",))[0] if isinstance(code, int) else ""
        client = "%s:%s" % self.client_address[:2]
        self.server.api.log.uvicorn(f'{client} - "{self.requestline}" {code} {phrase}'.rstrip(), level)

    def log_message(self, format, *args):  # noqa: A002 - BaseHTTPRequestHandler's signature
        self.server.api.log.uvicorn(format % args, "debug")


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 2048  # uvicorn's backlog; the default 5 resets benchmark connections

    def __init__(self, address, api):
        self.api = api
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)

    def handle_error(self, request, client_address):
        """A client that does not speak TLS to an HTTPS port, or that hung up, is no server error."""
        if isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            return
        super().handle_error(request, client_address)
