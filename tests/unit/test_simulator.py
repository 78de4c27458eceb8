"""The SGLang simulator, for real: started as a process on a free loopback port, checked over HTTP."""
import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

SIMULATOR = Path(__file__).resolve().parents[2] / "roles" / "sglang" / "files" / "sglang_simulator"
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


@pytest.fixture
def model_dir(tmp_path):
    path = tmp_path / "Kimi-K2.6"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": ["KimiK2ForCausalLM"]}))
    return path


@pytest.fixture
def start_sim(tmp_path, model_dir):
    """start_sim(*flags, config=None, env=None, model=True) -> Sim; every process is killed afterwards."""
    procs = []

    def start(*flags, config=None, env=None, model=True):
        port = free_port()
        argv = [sys.executable, str(SIMULATOR)]
        if config is not None:
            config_path = tmp_path / f"sglang-{len(procs)}.yaml"
            config_path.write_text(yaml.safe_dump(config) if isinstance(config, dict) else config)
            argv += ["--config", str(config_path)]
        if model:
            argv += ["--model-path", str(model_dir)]
        if "--port" not in flags:
            argv += ["--port", str(port)]
        else:
            port = int(flags[flags.index("--port") + 1])
        argv += list(flags)
        stderr_path = tmp_path / f"stderr-{len(procs)}.log"
        full_env = {"PATH": "/usr/bin:/bin", **FAST, **(env or {})}
        with open(stderr_path, "w") as stderr:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, env=full_env)
        procs.append(proc)
        return Sim(proc, port, stderr_path)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        if proc.stdout:
            proc.stdout.close()


def sse_events(body):
    return [part[len("data: "):] for part in body.decode().split("\n\n") if part.startswith("data: ")]


# ---------------------------------------------------------------- options


def test_config_file_merges_and_cli_wins(start_sim):
    port = free_port()
    sim = start_sim("--port", str(port), "--tp-size", "2", config={
        "served-model-name": "kimi-k2.6", "port": free_port(), "tp-size": 8, "trust-remote-code": True,
        "disable-radix-cache": False, "enable-metrics": True,
    })
    sim.wait_port()
    status, dummy, body = sim.get("/v1/models")
    assert status == 200
    assert json.loads(body)["data"][0]["id"] == "kimi-k2.6"
    info = json.loads(sim.get("/server_info")[2])
    assert info["port"] == port and info["tp_size"] == 2
    assert info["trust_remote_code"] is True and info["disable_cuda_graph"] is False
    assert info["simulator"] is True and info["version"].endswith("-simulator")


@pytest.mark.parametrize("flags, config, message", [
    (["--cuda-graph-max-bs", "64"], None, "ambiguous option: --cuda-graph-max-bs could match"),
    ([], {"cuda-graph-max-bs": 64}, "ambiguous option: --cuda-graph-max-bs could match"),
    ([], {"tp_size": 8}, "unrecognized arguments: --tp_size 8"),
    ([], {"disable-cuda-graph": True},
     "Unsupported config option 'disable_cuda_graph' with action 'DeprecatedStoreTrueAction'"),
    ([], "- just\n- a list\n", "must contain a mapping"),
    ([], {"served-model-name": None}, "unsupported value"),
    (["--attention-backend", "cutlass_mla"], None, "invalid choice"),
])
def test_bad_options_fail_like_argparse(start_sim, flags, config, message):
    sim = start_sim(*flags, config=config)
    assert sim.wait_exit() == 2
    assert "usage:" in sim.stderr and message in sim.stderr


def test_check_args_only_parses(start_sim):
    sim = start_sim("--sim-check-only", "--tp-size", "8", config={"served-model-name": "k26"})
    assert sim.wait_exit() == 0
    assert "'served_model_name': 'k26'" in sim.proc.stdout.read().decode()
    assert not port_open(sim.port)


def test_unsupported_layout_fails_with_assertion(start_sim):
    sim = start_sim("--tp-size", "3", "--nnodes", "2")
    assert sim.wait_exit() == 1
    assert "AssertionError" in sim.stderr


def test_missing_absolute_model_path_exits_1(start_sim, tmp_path):
    sim = start_sim("--model-path", str(tmp_path / "absent"), model=False)
    assert sim.wait_exit() == 1
    assert "Can't load the configuration of" in sim.stderr


# ---------------------------------------------------------------- start-up


def test_port_closed_while_loading_then_models_answer(start_sim):
    sim = start_sim(env={"SGLANG_SIM_LOAD_SECONDS": "1.0"})
    sim.wait_for("Load weight begin")
    assert not port_open(sim.port)
    sim.wait_port()
    sim.wait_for("Uvicorn running on")  # logged just after the bind
    stderr = sim.stderr
    assert "Load weight end" in stderr and "Capture target decode CUDA graph end" in stderr
    assert stderr.index("Capture target decode CUDA graph end") < stderr.index("Uvicorn running on")
    assert json.loads(sim.get("/v1/models")[2])["data"][0]["id"].endswith("Kimi-K2.6")


def test_health_is_503_until_warm_then_200(start_sim, tmp_path):
    hold = tmp_path / "release-warm-up"  # the warm-up lasts until the checks below are done, however slow
    sim = start_sim(env={"SGLANG_SIM_WARMUP_SECONDS": "0", "SGLANG_SIM_WARMUP_HOLD_FILE": str(hold)})
    sim.wait_port()
    assert sim.get("/v1/models")[0] == 200
    for path in ("/health", "/health_generate", "/ready"):
        assert sim.get(path)[0] == 503, path
    assert sim.post("/v1/completions", {"prompt": "early", "max_tokens": 2})[0] == 200  # as in SGLang
    assert READY_LINE not in sim.stderr
    hold.touch()
    sim.wait_for(READY_LINE)
    for path in ("/health", "/health_generate", "/ready"):
        assert sim.get(path)[0] == 200, path
    assert '"GET /health' not in sim.stderr  # probes are not logged at info level
    assert '"GET /v1/models HTTP/1.1" 200 OK' in sim.stderr


def test_debug_log_level_logs_probes(start_sim):
    sim = start_sim("--log-level", "debug")
    sim.wait_for(READY_LINE)
    assert sim.get("/health")[0] == 200
    sim.wait_for('"GET /health HTTP/1.1" 200 OK')


def test_disabled_graphs_warn_and_skip_capture(start_sim):
    sim = start_sim("--attention-backend", "torch_native")
    sim.wait_for(READY_LINE)
    assert "Cuda graph is disabled because of using torch native attention backend" in sim.stderr
    assert "CUDA graph begin" not in sim.stderr


def test_sigterm_shuts_down_cleanly_with_exit_0(start_sim):
    sim = start_sim()
    sim.wait_for(READY_LINE)
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit() == 0
    shutdown = ["SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
                "Gracefully exiting...", "Shutting down", "Application shutdown complete.", "Finished server process"]
    positions = [sim.stderr.index(line) for line in shutdown]
    assert positions == sorted(positions), sim.stderr[-2000:]


# ---------------------------------------------------------------- API


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


def thread_stop_masks(pid):
    """{thread name: True when it blocks both SIGTERM and SIGINT} for every thread of PID but the main one."""
    stop_bits = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
    masks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines())
        except FileNotFoundError:  # a request thread that ended meanwhile
            continue
        if int(task.name) != pid:
            masks[f"{status['Name']} ({task.name})"] = int(status["SigBlk"], 16) & stop_bits == stop_bits
    return masks


def start_instance(start_sim, *flags):
    """Rank 0 and rank 1 of a two-node instance that meet on a free loopback port."""
    common = ("--nnodes", "2", "--pp-size", "2", "--dist-init-addr", "127.0.0.1:%d" % free_port()) + flags
    return start_sim(*common, "--node-rank", "0"), start_sim(*common, "--node-rank", "1")


def test_node_rank_1_joins_rank_0_and_serves_only_a_dummy_health(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank0.wait_for(READY_LINE)
    rank1.wait_port()
    assert [rank1.get(path)[0] for path in ("/ping", "/health", "/health_generate")] == [200, 200, 200]
    assert rank1.get("/v1/models")[0] == 404 and rank0.get("/v1/models")[0] == 200
    assert "PP1 TP0] Load weight begin" in rank1.stderr and "PP0 TP0" not in rank1.stderr
    assert READY_LINE not in rank1.stderr and "Init parallel ends. elapsed=" in rank1.stderr
    assert "node_rank 1 joined from 127.0.0.1" in rank0.stderr
    # a stop signal the kernel gave another thread would never wake the main one (seen once in CI)
    for sim in (rank0, rank1):
        masks = thread_stop_masks(sim.proc.pid)
        assert len(masks) >= 2 and all(masks.values()), masks


def test_rank_0_ends_itself_when_rank_1_dies_as_nccl_would(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank0.wait_for(READY_LINE)
    rank1.proc.kill()
    assert rank0.wait_exit() == -signal.SIGKILL
    assert "Scheduler hit an exception" in rank0.stderr and "node_rank 1 was closed" in rank0.stderr


def test_rank_1_exits_1_when_rank_0_dies(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank1.wait_port()
    rank0.proc.kill()
    assert rank1.wait_exit() == 1
    assert "rank 0 exited without a ShutdownReq broadcast" in rank1.stderr


def test_rank_1_told_to_stop_waits_for_rank_0s_shutdown_broadcast(start_sim):
    rank0, rank1 = start_instance(start_sim)
    rank0.wait_for(READY_LINE)
    rank1.wait_port()
    rank1.proc.send_signal(signal.SIGTERM)
    rank1.wait_for("SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast")
    assert rank1.proc.poll() is None
    rank0.proc.send_signal(signal.SIGTERM)
    assert rank0.wait_exit() == 0 and rank1.wait_exit() == 0
    # rank 1 ended on the broadcast, which only rank 0's stop sends: it waited for it
    assert "Received the rank-0 ShutdownReq broadcast" in rank1.stderr


def test_rank_0_gives_up_after_dist_timeout_naming_who_joined(start_sim):
    sim = start_sim("--nnodes", "2", "--node-rank", "0", "--pp-size", "2",
                    "--dist-init-addr", "127.0.0.1:%d" % free_port(), "--dist-timeout", "1")
    assert sim.wait_exit() == 1
    assert "Timed out after 1 seconds waiting for clients. 1/2 clients joined." in sim.stderr
    assert not port_open(sim.port)


# ---------------------------------------------------------------- failure modes


def test_crash_loading_exits_1_without_opening_the_port(start_sim):
    sim = start_sim(env={"SGLANG_SIM_FAILURE": "crash_loading"})
    seen_open = False
    while sim.proc.poll() is None:
        seen_open = seen_open or port_open(sim.port)
        time.sleep(0.02)
    assert sim.proc.returncode == 1 and not seen_open
    assert "torch.OutOfMemoryError: CUDA out of memory" in sim.stderr


def test_hang_loading_keeps_port_closed_and_obeys_sigterm(start_sim):
    sim = start_sim("--sim-failure", "hang_loading")
    sim.wait_for("Completed")
    time.sleep(0.6)
    assert sim.proc.poll() is None and not port_open(sim.port)
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit(2) == 0


def test_crash_after_ready_exits_1_after_serving(start_sim):
    sim = start_sim(env={"SGLANG_SIM_FAILURE": "crash_after_ready"})
    sim.wait_for(READY_LINE)
    assert sim.get("/v1/models")[0] == 200
    assert sim.wait_exit() == 1
    assert "illegal memory access" in sim.stderr
    assert not port_open(sim.port)


def test_warmup_fail_never_becomes_healthy(start_sim):
    sim = start_sim(env={"SGLANG_SIM_FAILURE": "warmup_fail", "SGLANG_SIM_WARMUP_SECONDS": "0.1"})
    sim.wait_port()
    sim.wait_for("Warmup request failed")
    assert sim.get("/v1/models")[0] == 200
    assert sim.get("/health")[0] == 503 and sim.get("/ready")[0] == 503
    assert sim.proc.poll() is None and READY_LINE not in sim.stderr
