"""The life of the simulator's server process (lifecycle.py): start-up phases, readiness, stop, failure modes."""

import json
import signal
import time

from simulator_process import READY_LINE, port_open
from sglang_simulator import lifecycle


# ---------------------------------------------------------------- in-process

def test_the_checkpoint_gives_the_shards_and_the_architecture(tmp_path):
    for index in range(3):
        (tmp_path / ("model-%05d-of-00003.safetensors" % (index + 1))).write_bytes(b"x")
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]}))
    assert lifecycle.inspect_model(str(tmp_path)) == (3, "KimiK25ForConditionalGeneration")
    assert lifecycle.inspect_model("moonshotai/Kimi-K2.6") == (lifecycle.DEFAULT_SHARDS, lifecycle.DEFAULT_ARCHITECTURE)


def test_loading_progress_is_a_tqdm_line():
    assert lifecycle.progress_line(0, 64, 0) == (
        "Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]")
    assert lifecycle.progress_line(32, 64, 10) == (
        "Loading safetensors checkpoint shards:  50% Completed | 32/64 [00:10<00:10,  3.20it/s]")


def test_a_hold_file_holds_until_it_exists(tmp_path):
    started = time.monotonic()
    lifecycle.wait_for_file("")
    assert time.monotonic() - started < 0.1
    (tmp_path / "go").touch()
    lifecycle.wait_for_file(str(tmp_path / "go"))


# ---------------------------------------------------------------- as a process


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
