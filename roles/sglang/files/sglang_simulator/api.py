# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTTP API: SGLang's routes and endpoints, its API key checks and error bodies."""

import hmac
import json
import os
import time
import uuid
from urllib.parse import urlsplit

from . import VERSION
from .options import server_args_dict
from .performance import weight_gb
from .serving import Generation, OpenAIReply, count_words, usage


DEFAULT_CONTEXT_LENGTH = 262144
DEFAULT_MAX_TOKENS = 16  # OpenAI endpoints
DEFAULT_MAX_NEW_TOKENS = 128  # native /generate
# Like SGLang's API key middleware: these stay open, everything else needs the key.
# SGLang's /health_generate gives up after this many seconds (its environment variable, default 20)
HEALTH_CHECK_TIMEOUT = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT") or 20)
OPEN_PATH_PREFIXES = ("/health", "/ready", "/metrics")
# Routes SGLang 0.5.23 marks AuthLevel.ADMIN_OPTIONAL (srt/entrypoints/http_server.py) that the simulator serves:
# with an admin key set only that key opens them, with none the API key does (srt/utils/auth.py decide_request_auth).
ADMIN_OPTIONAL_PATHS = ("/flush_cache",)
FLUSHED = ("Cache flushed.\nPlease check backend logs for more details. "
           "(When there are running or waiting requests, the operation will not be performed.)\n")
# What the dummy health server of a node with --node-rank >= 1 answers (200, always).
DUMMY_HEALTH_PATHS = ("/ping", "/health", "/health_generate")


class HttpError(Exception):
    """Answer STATUS with an SGLang/OpenAI error body."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class Api:
    """Routes and endpoints; HANDLER arguments are Handler instances (the transport)."""

    def __init__(self, state):
        self.state = state
        self.args = state.args
        self.log = state.log
        self.dummy = self.args.node_rank >= 1
        self.routes = {
            "/v1/models": (("GET",), self.models),
            "/model_info": (("GET",), self.model_info),
            "/get_model_info": (("GET",), self.model_info),
            "/server_info": (("GET",), self.server_info),
            "/get_server_info": (("GET",), self.server_info),
            "/health": (("GET",), self.health),
            "/health_generate": (("GET",), self.health_generate),
            "/ready": (("GET",), self.ready),
            "/v1/completions": (("POST",), self.completions),
            "/v1/chat/completions": (("POST",), self.chat_completions),
            "/generate": (("POST",), self.generate),
            "/flush_cache": (("GET", "POST"), self.flush_cache),
        }
        if self.args.enable_metrics:
            self.routes["/metrics"] = (("GET",), self.metrics)

    # ---- dispatch

    def handle(self, handler, method):
        path = urlsplit(handler.path).path
        try:
            body = handler.read_body()
            if self.dummy:
                return self.dummy_health(handler, method, path)
            if not self.authorized(handler, path):
                return handler.send_json(401, {"error": "Unauthorized"})
            route = self.routes.get(path)
            if route is None:
                return handler.send_json(404, {"detail": "Not Found"})
            if method not in route[0]:
                return handler.send_json(405, {"detail": "Method Not Allowed"})
            route[1](handler, body)
        except HttpError as exc:
            handler.send_json(exc.status, {"object": "error", "message": exc.message,
                                           "type": "BadRequestError", "param": None, "code": exc.status})
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
            self.log.line(f"client {handler.client_address[0]} went away during {path}", "debug")
        except Exception as exc:  # a simulator bug: say so in one line, answer 500, keep serving
            handler.close_connection = True
            self.log.error(f"simulator error while serving {method} {path}: {exc!r}")
            try:
                handler.send_json(500, {"detail": "Internal Server Error"})
            except OSError:
                pass

    def dummy_health(self, handler, method, path):
        """Nodes with --node-rank >= 1 run SGLang's dummy health server: 200 on its health paths, whatever the
        state of the instance (rank 0 serves the API)."""
        if method == "GET" and path in DUMMY_HEALTH_PATHS:
            return handler.send_empty(200)
        return handler.send_json(404, {"detail": "Not Found"})

    def authorized(self, handler, path):
        if path.startswith(OPEN_PATH_PREFIXES):
            return True
        key = self.args.api_key
        if path in ADMIN_OPTIONAL_PATHS:
            key = getattr(self.args, "admin_api_key", None) or key
        if not key:
            return True
        given = handler.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode("utf-8"), f"Bearer {key}".encode("utf-8"))

    # ---- information

    def models(self, handler, body):
        handler.send_json(200, {"object": "list", "data": [{
            "id": self.args.served_model_name,
            "object": "model",
            "created": self.state.created,
            "owned_by": "sglang",
            "root": self.args.served_model_name,  # as 0.5.23 answers (seen): the served name, not the path
            "parent": None,
            "max_model_len": self.context_length(),
        }]})

    def model_info(self, handler, body):
        handler.send_json(200, {
            "model_path": self.args.model_path,
            "tokenizer_path": self.args.tokenizer_path,
            "is_generation": True,
            "served_model_name": self.args.served_model_name,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
        })

    def server_info(self, handler, body):
        info = server_args_dict(self.args)
        info.update(version=VERSION, simulator=True, internal_states=[{
            "status": self.state.status,
            "last_gen_throughput": round(self.state.throughput(), 2),
            "memory_usage": {"weight": round(weight_gb(self.args), 2), "graph": 0.85},
        }])
        handler.send_json(200, info)

    def metrics(self, handler, body):
        text = self.state.metrics.render(self.args.served_model_name, self.state.throughput())
        handler.send_bytes(200, text.encode("utf-8"), "text/plain; version=0.0.4; charset=utf-8")

    # ---- health

    def flush_cache(self, handler, body):
        """SGLang's radix-cache flush: nothing to flush here, the same answer."""
        handler.send_bytes(200, FLUSHED.encode("utf-8"), "text/plain; charset=utf-8")

    def health(self, handler, body):
        handler.send_empty(200 if self.state.warm else 503)

    def health_generate(self, handler, body):
        """SGLang's: a one-token generation; 503 when none came within SGLANG_HEALTH_CHECK_TIMEOUT, and /ready
        answers 503 from then on until a health check succeeds again."""
        if not self.state.warm:
            return handler.send_empty(503)
        if self.state.wait_while_hung(limit=HEALTH_CHECK_TIMEOUT):
            self.state.health_failed = True
            return handler.send_empty(503)
        time.sleep(self.state.settings.health_generate_seconds)
        self.state.health_failed = False
        handler.send_empty(200)

    def ready(self, handler, body):
        if self.state.settings.without_ready:  # SGLang 0.5.18 and older have no /ready
            return handler.send_json(404, {"detail": "Not Found"})
        handler.send_empty(200 if self.state.warm and not self.state.health_failed else 503)

    # ---- generation

    def context_length(self):
        return self.args.context_length or DEFAULT_CONTEXT_LENGTH

    def completions(self, handler, body):
        request = json_object(body)
        if "prompt" not in request:
            raise HttpError(400, "prompt is required")
        self.openai_generation(handler, request, count_words(request["prompt"]), chat=False)

    def chat_completions(self, handler, body):
        request = json_object(body)
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HttpError(400, "messages must be a non-empty list")
        self.openai_generation(handler, request, count_words(messages), chat=True)

    def openai_generation(self, handler, request, prompt_tokens, chat):
        prompt_tokens = max(prompt_tokens, 1)
        keys = ("max_completion_tokens", "max_tokens") if chat else ("max_tokens",)
        max_tokens = self.max_tokens(request, keys, DEFAULT_MAX_TOKENS, prompt_tokens)
        reply = OpenAIReply(request, chat, self.args.served_model_name)
        with Generation(self.state, prompt_tokens) as generation:
            if not request.get("stream"):
                text = "".join(generation.tokens(max_tokens))
                return handler.send_json(200, reply.full(text, usage(prompt_tokens, max_tokens)))
            handler.start_stream()
            for index, token in enumerate(generation.tokens(max_tokens)):
                handler.send_event(json.dumps(reply.chunk(index, token, last=index == max_tokens - 1)))
            if (request.get("stream_options") or {}).get("include_usage"):
                handler.send_event(json.dumps(reply.usage_chunk(usage(prompt_tokens, max_tokens))))
            handler.send_event("[DONE]")
            handler.end_stream()

    def generate(self, handler, body):
        """SGLang's native API: {"text": ..., "sampling_params": {"max_new_tokens": N}, "stream": bool}."""
        request = json_object(body)
        prompt = request.get("text", request.get("input_ids"))
        if prompt is None or (isinstance(prompt, list) and prompt and not isinstance(prompt[0], int)):
            raise HttpError(400, "give one prompt as text or input_ids (batches are not simulated)")
        prompt_tokens = max(count_words(prompt), 1)
        params = request.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise HttpError(400, "sampling_params must be an object")
        max_new = self.max_tokens(params, ("max_new_tokens",), DEFAULT_MAX_NEW_TOKENS, prompt_tokens)
        rid = uuid.uuid4().hex
        started = time.monotonic()

        def payload(text, count):
            return {"text": text, "output_ids": list(range(count)), "meta_info": {
                "id": rid,
                "finish_reason": {"type": "length", "length": max_new} if count == max_new else None,
                "prompt_tokens": prompt_tokens, "completion_tokens": count, "cached_tokens": 0,
                "e2e_latency": round(time.monotonic() - started, 4)}}

        with Generation(self.state, prompt_tokens) as generation:
            if not request.get("stream"):
                return handler.send_json(200, payload("".join(generation.tokens(max_new)), max_new))
            handler.start_stream()
            text = ""
            for index, token in enumerate(generation.tokens(max_new)):
                text += token
                handler.send_event(json.dumps(payload(text, index + 1)))
            handler.send_event("[DONE]")
            handler.end_stream()

    def max_tokens(self, request, keys, default, prompt_tokens):
        value, key = default, keys[-1]
        for key in keys:
            if request.get(key) is not None:
                value = request[key]
                break
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise HttpError(400, f"{key} must be a non-negative integer")
        if prompt_tokens + value > self.context_length():
            raise HttpError(400, f"Requested token count exceeds the model's maximum context length of "
                                 f"{self.context_length()} tokens. You requested a total of "
                                 f"{prompt_tokens + value} tokens: {prompt_tokens} tokens from the input "
                                 f"and {value} tokens for the completion.")
        return value


def json_object(body):
    try:
        request = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HttpError(400, f"invalid JSON body: {exc}") from exc
    if not isinstance(request, dict):
        raise HttpError(400, "the JSON body must be an object")
    return request
