"""The simulator's HTTP API (api.py): routes, the API key, OpenAI and native generation, errors."""

import json
from concurrent.futures import ThreadPoolExecutor

from simulator_process import API_KEY, READY_LINE, sse_events
from sglang_simulator import api, log, options, serving


class FakeHandler:
    """What Api needs of the transport: the request (path, headers, body) and what it answered."""

    def __init__(self, path, body=b"", headers=None):
        self.path, self.body, self.headers = path, body, headers or {}
        self.client_address = ("127.0.0.1", 1234)
        self.close_connection = False
        self.sent = []

    def read_body(self):
        return self.body

    def send_json(self, status, payload):
        self.sent.append((status, payload))

    def send_empty(self, status):
        self.sent.append((status, None))

    def send_bytes(self, status, data, content_type):
        self.sent.append((status, data.decode()))


def make_api(*flags):
    args, settings = options.parse_args(["--model-path", "/models/k26", "--sim-tokens-per-second", "0", *flags], {})
    return api.Api(serving.ServerState(args, settings, log.Log("error")))


def answer(the_api, method, path, body=None, key=None):
    handler = FakeHandler(path, b"" if body is None else json.dumps(body).encode(),
                          {"Authorization": "Bearer " + key} if key else {})
    the_api.handle(handler, method)
    return handler.sent[-1]


# ---------------------------------------------------------------- in-process

def test_unknown_paths_and_methods_are_fastapis_answers():
    the_api = make_api()
    assert answer(the_api, "GET", "/no/such/path") == (404, {"detail": "Not Found"})
    assert answer(the_api, "POST", "/v1/models") == (405, {"detail": "Method Not Allowed"})
    assert answer(the_api, "GET", "/metrics")[0] == 404  # only with --enable-metrics


def test_the_admin_key_alone_opens_flush_cache():
    the_api = make_api("--api-key", "user-key-1", "--admin-api-key", "admin-key-1")
    assert answer(the_api, "POST", "/flush_cache", key="user-key-1") == (401, {"error": "Unauthorized"})
    assert answer(the_api, "POST", "/flush_cache", key="admin-key-1")[0] == 200
    assert answer(the_api, "GET", "/v1/models", key="admin-key-1")[0] == 401
    assert answer(the_api, "GET", "/health")[0] == 503  # open, and not warm yet


def test_too_many_tokens_is_a_bad_request_in_openais_shape():
    the_api = make_api("--context-length", "100")
    status, body = answer(the_api, "POST", "/v1/completions", {"prompt": "a b c", "max_tokens": 98})
    assert status == 400 and body["object"] == "error" and body["code"] == 400
    assert body["message"].startswith("Requested token count exceeds the model's maximum context length of 100 tokens")
    assert answer(the_api, "POST", "/v1/completions", {"prompt": "a", "max_tokens": -1})[1]["message"] == (
        "max_tokens must be a non-negative integer")
    assert answer(the_api, "POST", "/generate", {"text": ["a", "b"]})[0] == 400


def test_generate_answers_sglangs_native_shape():
    status, body = answer(make_api(), "POST", "/generate", {"text": "one two", "sampling_params": {"max_new_tokens": 3}})
    assert status == 200 and body["output_ids"] == [0, 1, 2]
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    assert body["meta_info"]["prompt_tokens"] == 2 and body["meta_info"]["completion_tokens"] == 3


def test_a_node_rank_above_0_serves_only_the_dummy_health():
    the_api = make_api("--nnodes", "2", "--node-rank", "1", "--pp-size", "2")
    assert answer(the_api, "GET", "/ping") == (200, None) and answer(the_api, "GET", "/health") == (200, None)
    assert answer(the_api, "GET", "/v1/models") == (404, {"detail": "Not Found"})


def test_a_simulator_bug_is_a_500_and_one_line(monkeypatch):
    the_api = make_api()
    monkeypatch.setattr(the_api, "routes", {"/v1/models": (("GET",), lambda handler, body: 1 / 0)})
    assert answer(the_api, "GET", "/v1/models") == (500, {"detail": "Internal Server Error"})


def test_server_info_says_it_is_the_simulator():
    status, info = answer(make_api(), "GET", "/server_info")
    assert status == 200 and info["simulator"] is True and info["version"] == api.VERSION
    assert info["internal_states"][0]["status"] == "Starting"


# ---------------------------------------------------------------- as a process


def test_api_key_guards_the_api_only(start_sim):
    sim = start_sim(config={"api-key": API_KEY})
    sim.wait_for(READY_LINE)
    assert sim.get("/v1/models")[0] == 401
    status, dummy, body = sim.get("/v1/models", key="wrong")
    assert status == 401 and json.loads(body) == {"error": "Unauthorized"}
    assert sim.get("/v1/models", key=API_KEY)[0] == 200
    assert sim.get("/server_info")[0] == 401
    info = json.loads(sim.get("/server_info", key=API_KEY)[2])
    assert info["api_key"] == API_KEY  # as SGLang 0.5.23: holders of the key can read it there
    assert sim.get("/health")[0] == 200 and sim.get("/ready")[0] == 200
    # Like SGLang 0.5.23, the start-up server_args line carries the key; readers of the journal must redact it.
    assert "'api_key': %r" % API_KEY in sim.stderr


def test_streaming_chat_completion(start_sim):
    sim = start_sim()
    sim.wait_port()
    status, headers, body = sim.post("/v1/chat/completions", {
        "model": "k26", "messages": [{"role": "user", "content": "Say hello to the cluster"}],
        "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True},
    })
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    tokens, usage_chunk = chunks[:-1], chunks[-1]
    assert len(tokens) == 5
    assert all(chunk["object"] == "chat.completion.chunk" and chunk["choices"][0]["delta"]["content"]
               for chunk in tokens)
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}


def test_non_streaming_usage_and_errors(start_sim):
    sim = start_sim("--enable-metrics")
    sim.wait_port()
    status, dummy, body = sim.post("/v1/completions", {"prompt": "one two three four", "max_tokens": 7})
    reply = json.loads(body)
    assert status == 200 and reply["object"] == "text_completion"
    assert len(reply["choices"][0]["text"].split()) == 7
    assert reply["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}
    reply = json.loads(sim.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})[2])
    assert reply["choices"][0]["message"]["role"] == "assistant"
    assert reply["usage"]["completion_tokens"] == 16
    assert sim.post("/v1/completions", b'{"prompt": ')[0] == 400
    assert sim.get("/no/such/path")[0] == 404
    metrics = sim.get("/metrics")[2].decode()
    assert "sglang:generation_tokens_total" in metrics and "sglang:num_running_reqs" in metrics


def test_many_concurrent_requests(start_sim):
    sim = start_sim(env={"SGLANG_SIM_TOKENS_PER_SECOND": "50"})
    sim.wait_port()
    with ThreadPoolExecutor(max_workers=100) as pool:
        replies = list(pool.map(lambda dummy: sim.post("/v1/completions", {"prompt": "x", "max_tokens": 10}),
                                range(100)))
    assert [status for status, dummy, dummy in replies] == [200] * 100
