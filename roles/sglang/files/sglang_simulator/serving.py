# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serving state behind the HTTP API: metrics, token pacing and one simulated generation."""

import threading
import os
import time
import uuid

from .checks import rank_label
from .performance import PerformanceModel


WORDS = ("Kimi", "K2.6", "is", "answering", "from", "the", "SGLang", "simulator,", "one", "token",
         "at", "a", "time,", "without", "a", "GPU.")


class Metrics:
    """Counters and gauges behind /metrics (thread-safe), as SGLang 0.5.23 keeps them: the KV tokens in use move with
    every token the scheduler makes; generation_tokens_total counts a request's tokens when it finishes
    (srt/observability/metrics_collector.py, observe_one_finished_request)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.running = 0
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.used_tokens = 0

    def start(self, prompt_tokens):
        with self._lock:
            self.running += 1
            self.requests += 1
            self.prompt_tokens += prompt_tokens
            self.used_tokens += prompt_tokens

    def token(self):
        with self._lock:
            self.used_tokens += 1

    def finish(self, prompt_tokens=0, generated=0):
        with self._lock:
            self.running -= 1
            self.generation_tokens += generated
            self.used_tokens -= prompt_tokens + generated

    def render(self, model_name, throughput):
        escaped = model_name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        label = f'{{model_name="{escaped}"}}'
        with self._lock:
            rows = (
                ("num_running_reqs", "gauge", "The number of running requests.", self.running),
                ("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", 0),
                ("num_used_tokens", "gauge", "The number of used tokens.", self.used_tokens),
                ("token_usage", "gauge", "The token usage.", 0.01 * self.running),
                ("gen_throughput", "gauge", "The generation throughput (token/s).", throughput),
                ("num_requests_total", "counter", "Number of requests processed.", self.requests),
                ("prompt_tokens_total", "counter", "Number of prefill tokens processed.", self.prompt_tokens),
                ("generation_tokens_total", "counter", "Number of generation tokens processed.",
                 self.generation_tokens),
            )
        out = []
        for name, kind, help_text, value in rows:
            out += [f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} {kind}",
                    f"sglang:{name}{label} {float(value)}"]
        return "\n".join(out) + "\n"


class ServerState:
    """What the HTTP handlers need to know about the server."""

    def __init__(self, args, settings, log):
        self.args = args
        self.settings = settings
        self.log = log
        self.status = "Starting"  # -> "Up" after warm-up
        self.health_failed = False  # a /health_generate failed (SGLang's /ready then answers 503)
        self.metrics = Metrics()
        self.engine = None  # GPU mode: the decode-step engine that paces tokens
        self.model = PerformanceModel.of(args)
        self.created = int(time.time())

    @property
    def warm(self):
        return self.status == "Up"

    def hung(self):
        """Whether the scheduler hangs now (the hang knob's file exists)."""
        return bool(self.settings.hang_file) and os.path.exists(self.settings.hang_file)

    def wait_while_hung(self, limit=None):
        """Block while the scheduler hangs, at most ``limit`` seconds; whether it still hangs."""
        deadline = None if limit is None else time.monotonic() + limit
        while self.hung():
            if deadline is not None and time.monotonic() >= deadline:
                return True
            time.sleep(0.1)
        return False

    def next_token(self):
        """Wait as long as one decode step takes for a running request (and while the scheduler hangs)."""
        self.wait_while_hung()
        speed = self.settings.tokens_per_second
        if self.engine is not None:
            self.engine.next_token()
        elif speed == "model":
            time.sleep(self.model.step_seconds(self.metrics.running))
        elif speed > 0:
            time.sleep(1.0 / speed)

    def throughput(self):
        """Output tokens per second now (the gen_throughput gauge)."""
        speed = self.settings.tokens_per_second
        running = self.metrics.running
        if self.engine is not None:
            return 0.0  # GPU mode runs as fast as the GPU does; the figure is not known here
        return self.model.throughput(running) if speed == "model" else speed * running


def count_words(value):
    """Approximate prompt tokens: words of strings, ids of token lists, texts of messages and parts."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        if value and all(isinstance(item, int) for item in value):
            return len(value)
        return sum(count_words(item) for item in value)
    if isinstance(value, dict):
        return count_words(value.get("content")) + count_words(value.get("text"))
    return 0


def token_text(index):
    word = WORDS[index % len(WORDS)]
    return word if index == 0 else " " + word


def usage(prompt_tokens, completion_tokens):
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class OpenAIReply:
    """Response and stream-chunk shapes for /v1/completions and /v1/chat/completions."""

    def __init__(self, request, chat, served_model_name):
        self.chat = chat
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = request.get("model") or served_model_name

    def _envelope(self, kind, choices, usage_value):
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model,
                "choices": choices, "usage": usage_value}

    def full(self, text, usage_value):
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "reasoning_content": None,
                                              "tool_calls": None}}
        else:
            choice = {"index": 0, "text": text}
        choice.update(logprobs=None, finish_reason="length", matched_stop=None)
        return self._envelope("chat.completion" if self.chat else "text_completion", [choice], usage_value)

    def chunk(self, index, token, last):
        if self.chat:
            delta = {"role": "assistant", "content": token} if index == 0 else {"content": token}
            choice = {"index": 0, "delta": delta}
        else:
            choice = {"index": 0, "text": token}
        choice.update(logprobs=None, finish_reason="length" if last else None, matched_stop=None)
        return self._envelope(self.kind_chunk, [choice], None)

    def usage_chunk(self, usage_value):
        return self._envelope(self.kind_chunk, [], usage_value)

    @property
    def kind_chunk(self):
        return "chat.completion.chunk" if self.chat else "text_completion"


class Generation:
    """One simulated request: metrics, a prefill log line, tokens at the configured speed."""

    def __init__(self, state, prompt_tokens):
        self.state = state
        self.prompt_tokens = prompt_tokens
        self.generated = 0

    def __enter__(self):
        # a hung scheduler takes in no request: it waits, and nothing the scheduler reports (running and queued
        # requests, KV tokens in use) moves meanwhile, as with SGLang's
        self.state.wait_while_hung()
        metrics = self.state.metrics
        metrics.start(self.prompt_tokens)
        self.state.log.info(f"Prefill batch, #new-seq: 1, #new-token: {self.prompt_tokens}, "
                            f"#cached-token: 0, token usage: 0.00, #running-req: {metrics.running - 1}, "
                            "#queue-req: 0",
                            rank=rank_label(self.state.args, 0, 0))
        return self

    def __exit__(self, *exc_info):
        self.state.metrics.finish(self.prompt_tokens, self.generated)
        return False

    def tokens(self, count):
        for index in range(count):
            self.state.next_token()
            self.state.metrics.token()
            self.generated += 1
            yield token_text(index)
