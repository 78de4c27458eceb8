"""The unit tests' fixtures that start the SGLang simulator as a process (the tests of its modules); importing
simulator_process here makes the simulator's package importable by every test module."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# its helpers and those of tests/ (safetensors_shards), for the tests under plugins/ too (ansible-test units)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from simulator_process import FAST, SIMULATOR, Sim, free_port  # noqa: E402


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


@pytest.fixture
def guard_dir(tmp_path):
    """The replica guard installed as roles/sglang_service/tasks/guard.yml installs it: its files in one folder."""
    role = Path(__file__).resolve().parents[2] / "roles" / "sglang_service"
    listed = yaml.safe_load((role / "vars" / "main.yml").read_text())["__sglang_service_guard_files"]
    folder = tmp_path / "guard"
    folder.mkdir()
    for item in listed:
        shutil.copy(item.replace("{{ role_path }}", str(role)), folder)
    return folder
