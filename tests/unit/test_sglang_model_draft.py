"""The sglang_model role stages and verifies a speculative decoding draft (the kimi_k26_latency profile's EAGLE3
draft) like the model, before it, each against a manifest of its own: run on the controller by ansible-runner
(tests/fixtures/playbooks/stage_models.yml), two directories already in place (source path)."""
import json
import os
import sys
from pathlib import Path

import yaml

from k26deploy.results import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from k26deploy.runner import PlaybookRun
from safetensors_shards import shard_bytes

ROOT = Path(__file__).resolve().parents[2]


def model_dir(path, architecture, data):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    (path / "model.safetensors").write_bytes(shard_bytes(data))
    return path


def stage(tmp_path, extra_vars=None, **host_vars):
    """(exit code, sglang_model_state, sglang_model_draft_state, the host's message) of one run."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": dict({
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "sglang_model_manifest_dir": str(tmp_path / "manifests"), "sglang_model_prewarm": "off"}, **host_vars)}}}))
    run = PlaybookRun("stage_models.yml", project_dir=ROOT / "tests" / "fixtures" / "playbooks",
                      private_data_dir=tmp_path / "pdd", inventory=str(inventory), extra_vars=extra_vars or {},
                      event_callback=lambda event: True, envvars={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    result = run.execute()
    stats = result.set_stats or {}
    host = result.hosts.get("localhost")
    return result.exit_code, stats.get("model"), stats.get("draft"), host.msg if host else ""


def test_the_draft_is_staged_and_verified_like_the_model_each_with_its_manifest(tmp_path):
    model = model_dir(tmp_path / "Kimi-K2.6", "KimiK25ForConditionalGeneration", b"w" * 4096)
    draft = model_dir(tmp_path / "kimi-k2.6-eagle3.1-mla", "Eagle3DeepseekV2ForCausalLM", b"d" * 1024)
    code, state, draft_state, msg = stage(tmp_path, sglang_model_path=str(model), sglang_model_draft_path=str(draft))
    assert code == EXIT_OK, msg
    assert (state["path"], state["ready"], state["shards"]) == (str(model), True, 1)
    assert (draft_state["path"], draft_state["ready"], draft_state["shards"]) == (str(draft), True, 1)
    assert state["digest"] != draft_state["digest"]
    assert len(os.listdir(tmp_path / "manifests")) == 2


def test_a_draft_file_changed_at_the_same_size_fails_the_host(tmp_path):
    model = model_dir(tmp_path / "Kimi-K2.6", "KimiK25ForConditionalGeneration", b"w" * 4096)
    draft = model_dir(tmp_path / "kimi-k2.6-eagle3.1-mla", "Eagle3DeepseekV2ForCausalLM", b"d" * 1024)
    assert stage(tmp_path, sglang_model_path=str(model), sglang_model_draft_path=str(draft))[0] == EXIT_OK
    config = draft / "config.json"
    config.write_text(config.read_text().replace("Eagle3", "Eagle4"))  # the same size, a new mtime
    code, state, draft_state, msg = stage(tmp_path, sglang_model_path=str(model), sglang_model_draft_path=str(draft))
    assert code == EXIT_FAILED and state is None
    assert str(draft) in msg and "config.json" in msg


def test_a_model_setting_given_as_an_extra_variable_is_refused_with_a_draft(tmp_path):
    model = model_dir(tmp_path / "Kimi-K2.6", "KimiK25ForConditionalGeneration", b"w" * 4096)
    draft = model_dir(tmp_path / "kimi-k2.6-eagle3.1-mla", "Eagle3DeepseekV2ForCausalLM", b"d" * 1024)
    code, state, draft_state, msg = stage(tmp_path, extra_vars={"sglang_model_path": str(model)},
                                          sglang_model_draft_path=str(draft))
    assert code == EXIT_BAD_INPUT and not (tmp_path / "manifests").exists()
    assert "an extra variable (-e) wins over them" in msg
