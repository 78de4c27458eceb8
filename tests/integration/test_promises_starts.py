"""What a start costs and needs, each shown by a real run against real systemd in a container: the start-up
timeline and its finding, DeepGEMM's kernels precompiled before the start that needs them, the model's files staged
and verified before anything restarts (the helpers: promise_host.py; the fixtures: conftest.py)."""

import hashlib
import json
import os

import pytest

import k26deploy
from harness import key_of
from promise_host import UNIT, cli, keys_in_artifacts, managed_files
from safetensors_shards import shard_bytes

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- start-up timeline

PHASES = ["weights_loaded", "kv_cache_allocated", "graphs_captured", "warmed_up", "ready"]


def test_every_start_reports_its_timeline_and_a_slower_one_is_a_finding(changes, tmp_path):
    box, inventory, runs = changes
    kept = {"sglang_service_startup_dir": str(tmp_path / "startups"), "sglang_service_startup_slower_min_seconds": 2}
    first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "startup-first",
                             extra_vars=dict(kept, sglang_service_environment={"SGLANG_SIM_LOAD_SECONDS": 0.5}))
    assert first.exit_code == 0, first.to_json()
    startup = first.hosts[box.name].startup
    assert startup["invocation"] == box.invocation() and startup["findings"] == [] and startup["last_good"] is None
    phases = startup["phases"]  # the simulator's lines, each where SGLang 0.5.23 logs it
    assert list(phases) == PHASES and sorted(phases.values()) == list(phases.values()), phases
    slower = dict(kept, sglang_service_environment={"SGLANG_SIM_LOAD_SECONDS": 6})
    rc, out, err = cli(runs, "startup-slower", "deploy", "-i", inventory, "-e", json.dumps(slower))
    assert rc == 0, err
    assert "start-up (seconds from the process start): weights " in out
    assert "WARNING K26-START-SLOWER: loading the weights took" in out, out
    # nothing changed: the same start, not counted again; status shows the newest start kept
    rc, out, err = cli(runs, "startup-status", "status", "-i", inventory, "--json", "-e", json.dumps(kept))
    assert rc == 0, err
    shown = json.loads(out)["hosts"][box.name]["startup"]
    assert shown["invocation"] == box.invocation() and shown["phases"]["weights_loaded"] > phases["weights_loaded"] + 4
    assert [r["invocation"] for r in json.loads((tmp_path / "startups" / ("%s.json" % box.name)).read_text())] == [
        startup["invocation"], shown["invocation"]]


# ---------------------------------------------------------------- DeepGEMM's kernels, precompiled

PRECOMPILE = {"sglang_service_deepgemm_precompile": "always", "sglang_service_deepgemm_precompile_timeout": 15}
DEEP_GEMM_DIR = "/var/cache/sglang/sglang-0.5.23-cpu/deep_gemm"


def test_kernels_are_precompiled_before_the_start_that_needs_them_and_a_failed_precompile_is_rolled_back(changes):
    # The simulator's compile mode stands for `python -m sglang.compile_deep_gemm` (which needs a GPU): a whole
    # server on a loopback port, polled until it serves, then a request; "kernels" in the DeepGEMM cache.
    box, inventory, runs = changes
    box.systemctl("stop", "dbus.socket", "dbus.service")  # as on a host without a D-Bus daemon: systemctl only
    try:
        precompile_and_fail_one(box, inventory, runs)
    finally:
        box.systemctl("start", "dbus.socket")


def precompile_and_fail_one(box, inventory, runs):
    before = box.invocation()
    first = dict(PRECOMPILE, sglang_service_environment={"K26_TEST_PRECOMPILE": "1"})
    rc, out, err = cli(runs, "precompile-first", "deploy", "-i", inventory, "--json", "-e", json.dumps(first))
    assert rc == 0, err
    host = json.loads(out)["hosts"][box.name]
    precompile = host["precompile"]
    assert host["ready"] and box.invocation() != before and precompile["seconds"] > 0, precompile
    record = "/var/lib/k26deploy/deepgemm/sglang/%s.json" % precompile["key"]
    assert box.exec("stat -c %U:%a " + record).stdout.split() == ["root:644"]
    # ran as the service's user with its environment file: the kernels are the service's, in this release's cache
    kernels = box.exec("find %s -type f -printf '%%u %%p\\n'" % DEEP_GEMM_DIR).stdout.split("\n")
    assert kernels[0].startswith("sglang %s/" % DEEP_GEMM_DIR), kernels
    journal = box.exec("journalctl -o cat --no-pager -u %s" % precompile["unit"]).stdout
    assert "DeepGEMM Kernels compilation finished successfully." in journal and key_of(inventory) not in journal
    # the same configuration again: nothing to compile, nothing restarts
    again = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "precompile-again", extra_vars=first)
    assert again.exit_code == 0 and again.hosts[box.name].precompile is None, again.to_json()
    assert box.invocation() == json.loads(out)["hosts"][box.name]["unit_state"]["InvocationID"]
    # a change of the kernels (chunked-prefill-size) whose precompile fails: the server was stopped for it, so the
    # previous configuration is restored and serves again; no record for the failed configuration
    served_files = managed_files(box)
    failing = dict(PRECOMPILE, sglang_service_options={"chunked-prefill-size": 4096},
                   sglang_service_environment={"K26_TEST_PRECOMPILE": "1", "SGLANG_SIM_FAILURE": "crash_loading"})
    rc, out, err = cli(runs, "precompile-failed", "deploy", "-i", inventory, "--json", "-e", json.dumps(failing))
    assert rc == 1, out
    host = json.loads(out)["hosts"][box.name]
    assert (host["reason"], host["rolled_back"]) == ("precompile_timeout", True), host
    assert "did not finish within its timeout of 15s" in host["msg"], host["msg"]
    assert "TimeoutError: DeepGEMM Kernels compilation timeout." in host["journal_excerpt"]
    assert managed_files(box) == served_files and box.systemctl("is-active", "--quiet", UNIT, check=False).returncode == 0
    assert box.exec("ls /var/lib/k26deploy/deepgemm/sglang").stdout.split() == ["%s.json" % precompile["key"]]


# ---------------------------------------------------------------- the model's files

MODEL_DIR = "/srv/models/k26-test"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


def controller_model(root):
    """A model directory on the controller: config, index and two shards of random bytes."""
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"]}))
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": SHARDS[0], "b": SHARDS[1]}}))
    for name in SHARDS:
        (root / name).write_bytes(shard_bytes(os.urandom(1 << 20)))
    return root


def test_the_model_is_staged_and_verified_before_anything_restarts(changes, tmp_path):
    box, inventory, runs = changes
    source = controller_model(tmp_path / "model")
    staged = {"sglang_service_model_path": MODEL_DIR, "sglang_model_source": "controller",
              "sglang_model_controller_path": str(source)}
    first = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "model-staged", extra_vars=staged)
    assert first.exit_code == 0, first.to_json()
    model = first.hosts[box.name].model
    assert model["ready"] is True and (model["files"], model["shards"]) == (4, 2), model
    assert model["prewarm"]["state"] == "done" and model["prewarm"]["bytes"] == model["total_bytes"], model
    manifest = json.loads(box.exec("cat /var/lib/k26deploy/models/srv_models_k26-test.json").stdout)
    assert manifest["files"][SHARDS[0]]["sha256"] == hashlib.sha256((source / SHARDS[0]).read_bytes()).hexdigest()
    # one byte changes and the mtime is put back: only a hash can tell (verify always), against the manifest's
    shard = "%s/%s" % (MODEL_DIR, SHARDS[0])
    box.exec("cp -p {0} /tmp/k26-ref && printf X | dd of={0} bs=1 seek=1000 conv=notrunc status=none && "
             "touch -r /tmp/k26-ref {0}".format(shard))
    before = (managed_files(box), box.invocation())
    verified = dict(staged, sglang_model_source="path", sglang_model_verify="always",
                    sglang_service_environment={"K26_TEST_CHANGE": "1"})
    bad = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "model-corrupt", extra_vars=verified)
    assert bad.exit_code == 1 and (managed_files(box), box.invocation()) == before, bad.to_json()
    assert "%s: changed since the manifest: sha256 differs" % SHARDS[0] in json.dumps(bad.to_dict()), bad.to_json()
    # an interrupted copy is found without a hash, and a shard gone
    box.exec("truncate -s 4096 %s/%s && rm %s/config.json" % (MODEL_DIR, SHARDS[1], MODEL_DIR))
    cut = k26deploy.deploy(inventory=inventory, private_data_dir=runs / "model-cut",
                           extra_vars=dict(verified, sglang_model_verify="size"))
    assert cut.exit_code == 1 and (managed_files(box), box.invocation()) == before, cut.to_json()
    said = json.dumps(cut.to_dict())
    assert "%s: truncated: 4096 of the " % SHARDS[1] in said and "config.json missing" in said, said


def test_the_key_is_in_no_artifact_of_any_run(served):
    assert keys_in_artifacts(served) == []
