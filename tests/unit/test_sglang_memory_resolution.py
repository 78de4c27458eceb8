"""Issue 51: the memory preflight reasons from is SGLang's own. The sglang_resolve module runs SGLang 0.5.23's own
server-argument resolution (plugins/module_utils/sglang_resolver.py, which answers SGLang's device questions with the
GPU facts given, and nothing else) with the CPU venv's SGLang, for a Kimi K2.6-shaped config.json without weights;
the K26-KV-CACHE finding carries the mem-fraction-static SGLang resolved, to the third decimal. K2.6 is a multimodal
architecture to SGLang (configs/model_config.py), so its estimate includes the vision tower's factor
(arg_groups/memory_hook.py adjust_mem_fraction_for_vlm); the same model as a text-only architecture gets SGLang's
other number. Where SGLang is not installed yet, preflight has no figure of its own (no copy of SGLang's estimate):
the finding says the KV cache is sized once SGLang resolves it, which the deploy does after installing SGLang and
before the start (test_the_deploy_checks_the_memory_with_sglangs_figures_before_the_start)."""
import json
import sys
from pathlib import Path

import pytest
import yaml

from k26deploy.results import EXIT_BAD_INPUT, EXIT_OK
from k26deploy.runner import PlaybookRun

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils import sglang_perf_facts as facts
from ansible_collections.k26.deploy.plugins.modules import sglang_resolve
from module_runner import run_module
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

ROOT = Path(__file__).resolve().parents[2]
K26_CONFIG = ROOT / "tests" / "fixtures" / "models" / "kimi-k2.6" / "config.json"
H200 = {"name": "NVIDIA H200", "memory_mib": 143771, "capability": [9, 0], "count": 8}
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "capability": [9, 0], "count": 8}
GIB = 1 << 30
PRO6000 = {"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "memory_mib": 97887, "capability": [12, 0],
           "count": 8}


def sglang_resolves(capsys, model_dir, gpu, **options):
    """The sglang_resolve module's result for this model on 8 of these GPUs, with the CPU venv's SGLang."""
    options = dict({"model-path": str(model_dir), "tp-size": 8, "trust-remote-code": True}, **options)
    rc, result = run_module(sglang_resolve, {"options": options, "python": str(SGLANG_PYTHON),
                                             "gpu_facts": gpu_facts(gpu)}, capsys)
    assert rc == 0, result
    return result


def model_dir(tmp_path, name, text_only=False):
    """A model directory with K2.6's config.json (no weights); text_only: its language model alone, as a DeepSeek-V3
    architecture with K2.6's quantisation (the shape of Kimi K2's text-only checkpoints)."""
    config = json.loads(K26_CONFIG.read_text())
    if text_only:
        config = dict(config["text_config"], quantization_config=config["quantization_config"])
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    return directory, config


def gpu_facts(gpu):
    """nvidia_gpu_facts' shape, as much as the memory rules read."""
    capability = "%d.%d" % tuple(gpu["capability"])
    return {"gpu_count": gpu["count"], "compute_capabilities": [capability],
            "gpus": [{"index": i, "name": gpu["name"], "memory_total_mib": gpu["memory_mib"],
                      "compute_capability": capability} for i in range(gpu["count"])]}


def kv_finding(config, options=None, resolution=None, draft_size=None, gpu=None):
    """K26-KV-CACHE for a 590 GB model of this config.json on 8 of these GPUs (H200 by default) with these options,
    with SGLang's resolution or (None) before it; draft_size: a draft model's directory of that size."""
    model = {"path": "/models/k26", "exists": True, "is_dir": True, "has_config": True, "size_bytes": 590 * 10 ** 9,
             "config": {"kv": facts.kv_config(config)}}
    if draft_size is not None:
        model["draft"] = {"path": "/models/draft", "exists": True, "size_bytes": draft_size}
    ctx = rules.build_context(dict({"tp-size": 8, "model-path": "/models/k26"}, **(options or {})),
                              gpu=gpu_facts(gpu or H200), model=model, resolution=resolution)
    (finding,) = [f for f in rules.evaluate(ctx) if f["id"] == "K26-KV-CACHE"]
    return finding


def preflight_fraction(config, gpu, resolution=None):
    """The mem-fraction-static the K26-KV-CACHE finding states for this config.json on 8 of these GPUs."""
    finding = kv_finding(config, resolution=resolution, gpu=gpu)
    return finding["evidence"]["fraction"], finding


@pytest.mark.sglang_real
@requires_real_sglang
@pytest.mark.parametrize("gpu", [H200], ids=["H200"])  # H100: the deploy's check below, through the role
def test_k26s_finding_carries_the_fraction_sglang_resolves(capsys, tmp_path, gpu):
    directory, config = model_dir(tmp_path, "k26")
    resolution = sglang_resolves(capsys, directory, gpu)
    assert resolution["ok"] and resolution["resolved"]["model"]["is_multimodal"] is True
    resolved = resolution["resolved"]["mem_fraction_static"]
    ours, finding = preflight_fraction(config, gpu, resolution)
    assert ours == round(resolved, 4)
    assert "SGLang's own resolution on this host, a multimodal model" in finding["evidence"]["fraction source"]


def test_before_sglang_resolves_the_kv_cache_is_not_sized():
    """SGLang not installed yet: no estimate of the collection's own, the finding says when the figure comes."""
    fraction, finding = preflight_fraction(json.loads(K26_CONFIG.read_text()), H200)
    assert fraction is None and finding["evidence"]["tokens"] is None and finding["severity"] == "info"
    assert finding["message"].startswith("KV cache not sized yet: mem-fraction-static is not known before SGLang's "
                                         "own resolution")


@pytest.mark.sglang_real
@requires_real_sglang
def test_options_sglang_refuses_while_resolving_them_are_an_error_finding(capsys, tmp_path):
    directory, dummy = model_dir(tmp_path, "k26")
    resolution = sglang_resolves(capsys, directory, H200, **{"attn-dp-size": 3})
    assert resolution["ok"] is False and "tp_size % cfg.attn_dp_size == 0" in resolution["error"]
    (found,) = rules.resolution_findings(resolution)
    assert (found["id"], found["severity"]) == ("K26-SGLANG-RESOLUTION", "error") and "parallel_hook.py" in found["message"]


def test_nothing_runs_without_a_gpu_or_the_models_config(capsys, tmp_path):
    rc, result = run_module(sglang_resolve, {"options": {"model-path": str(tmp_path)}, "python": "/bin/sh",
                                             "gpu_facts": gpu_facts(H200)}, capsys)
    assert rc == 0 and result["skipped"] == "the model's config.json is not on the host" and result["ok"]
    rc, result = run_module(sglang_resolve, {"options": {"model-path": str(tmp_path)}, "python": "/bin/sh",
                                             "gpu_facts": {"gpu_count": 0, "gpus": []}}, capsys)
    assert result["skipped"] == "no GPU in the facts"
    rc, result = run_module(sglang_resolve, {"options": {}, "python": str(tmp_path / "none"),
                                             "gpu_facts": gpu_facts(H200)}, capsys)
    assert result["skipped"].startswith("SGLang is not installed on the host yet")


@pytest.mark.sglang_real
@requires_real_sglang
def test_k26s_kv_cache_is_sized_with_the_vision_factor_and_a_text_model_gets_sglangs_other_number(capsys, tmp_path):
    """Without the factor the finding promised about 3x the KV cache on 8x RTX PRO 6000: SGLang's fraction for K2.6
    is 0.758 there, for the same language model as a text-only architecture 0.833 (static - weights: 0.758 x 95.6
    GiB - 68.7 GiB against 0.833 x 95.6 GiB - 68.7 GiB)."""
    k26_dir, k26_config = model_dir(tmp_path, "k26")
    text_dir, text_config = model_dir(tmp_path, "k2-text", text_only=True)
    fraction, finding = preflight_fraction(k26_config, PRO6000, sglang_resolves(capsys, k26_dir, PRO6000))
    text_fraction, text_finding = preflight_fraction(text_config, PRO6000, sglang_resolves(capsys, text_dir, PRO6000))
    assert (round(fraction, 3), round(text_fraction, 3)) == (0.758, 0.833)
    assert text_finding["evidence"]["tokens"] > 2.5 * finding["evidence"]["tokens"]
    assert text_finding["evidence"]["fraction source"].startswith("SGLang's own resolution on this host (")


EAGLE3 = {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
          "speculative-num-draft-tokens": 4}


def eagle3_draft_dir(tmp_path, size_bytes=0):
    """A draft model directory shaped as the cookbook's lightseekorg/kimi-k2.6-eagle3.1-mla (one MLA decoder layer
    with K2.6's attention sizes, served by SGLang 0.5.23 as Eagle3DeepseekV2ForCausalLM); no weights but a file of
    size_bytes."""
    text = json.loads(K26_CONFIG.read_text())["text_config"]
    config = {key: text[key] for key in ("hidden_size", "intermediate_size", "kv_lora_rank", "q_lora_rank",
                                         "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "num_attention_heads",
                                         "num_key_value_heads", "vocab_size", "max_position_embeddings", "rope_theta",
                                         "rms_norm_eps", "rope_scaling")}
    config.update(architectures=["Eagle3DeepseekV2ForCausalLM"], model_type="deepseek_v3", num_hidden_layers=1,
                  torch_dtype="bfloat16")
    directory = tmp_path / "kimi-k2.6-eagle3.1-mla"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.mark.sglang_real
@requires_real_sglang
def test_the_eagle3_drafts_layers_and_weights_come_out_of_the_kv_cache_as_sglang_counts_them(capsys, tmp_path):
    """SGLang 0.5.23 adds the draft's layers to each token's KV cell (DefaultPoolConfigurator, the draft's layer
    count from the model runner's resolve_spec_aux_hidden_state_config): the resolver asks SGLang, and the finding
    counts 61 + 1 layers a token and the draft's weights."""
    directory, config = model_dir(tmp_path, "k26")
    draft = eagle3_draft_dir(tmp_path)
    resolution = sglang_resolves(capsys, directory, H200,
                                 **dict(EAGLE3, **{"speculative-draft-model-path": str(draft)}))
    assert resolution["ok"], resolution
    assert resolution["resolved"]["draft"] == {"algorithm": "EAGLE3", "kv_layers": 1, "sized_with_target_layers": True,
                                               "architectures": ["Eagle3DeepseekV2ForCausalLM"]}
    assert resolution["resolved"]["model"]["num_hidden_layers"] == 61
    options = dict(EAGLE3, **{"speculative-draft-model-path": "/models/draft"})
    plain = kv_finding(config, {}, sglang_resolves(capsys, directory, H200))["evidence"]
    with_draft = kv_finding(config, options, resolution, draft_size=3 * GIB)["evidence"]
    assert with_draft["KV bytes per token per GPU"] == plain["KV bytes per token per GPU"] * 62 // 61
    assert with_draft["draft KV layers per token"] == 1 and "SGLang's own resolution" in with_draft["draft source"]
    assert with_draft["draft weights per GPU"] == rules.gib(3 * GIB / 8)
    assert with_draft["tokens"] < plain["tokens"] * 61 / 62


def test_a_draft_nobody_resolved_is_said_to_be_left_out():
    """Without SGLang's resolution (not installed yet, the draft not staged) the draft is not guessed: the finding
    says what it leaves out."""
    config = json.loads(K26_CONFIG.read_text())
    options = dict(EAGLE3, **{"speculative-draft-model-path": "/models/draft", "mem-fraction-static": 0.9})
    evidence = kv_finding(config, options)["evidence"]
    assert evidence["draft KV layers per token"] is None
    assert evidence["draft source"].startswith("the draft model's KV cache and weights are not counted")
    assert "draft source" not in kv_finding(config, {"mem-fraction-static": 0.9})["evidence"]


def test_the_resolution_waits_for_the_drafts_config(capsys, tmp_path):
    """SGLang reads the draft's config.json while it resolves: without it on the host nothing runs (a fetch would be
    needed; the resolution runs offline)."""
    directory, dummy = model_dir(tmp_path, "k26")
    rc, result = run_module(sglang_resolve, {"options": {"model-path": str(directory),
                                                         "speculative-draft-model-path": "lightseekorg/x"},
                                             "python": "/bin/sh", "gpu_facts": gpu_facts(H200)}, capsys)
    assert rc == 0 and result["skipped"] == "the draft model's config.json is not on the host (lightseekorg/x)"


def test_a_draft_sglang_could_not_read_is_said_to_be_left_out_with_sglangs_words():
    """The resolver's draft answer is an error when SGLang cannot read the draft: not counted, and said so."""
    config = json.loads(K26_CONFIG.read_text())
    resolution = {"ok": True, "resolved": {"draft": {"error": "OSError: no config.json in /models/draft"}}}
    evidence = kv_finding(config, dict(EAGLE3, **{"speculative-draft-model-path": "/models/draft",
                                                  "mem-fraction-static": 0.9}), resolution)["evidence"]
    assert evidence["draft KV layers per token"] is None
    assert "did not run (OSError: no config.json in /models/draft)" in evidence["draft source"]


def test_a_draft_sglang_sizes_apart_adds_no_target_layers():
    """DFLASH drafts get a pool of their own in SGLang (not the target's cells): nothing added here, and said so."""
    config = json.loads(K26_CONFIG.read_text())
    resolution = {"ok": True, "resolved": {"draft": {"algorithm": "DFLASH", "kv_layers": None,
                                                     "sized_with_target_layers": False, "architectures": []}}}
    evidence = kv_finding(config, {"speculative-algorithm": "DFLASH", "speculative-draft-model-path": "/models/d",
                                   "mem-fraction-static": 0.9}, resolution)["evidence"]
    assert evidence["draft KV layers per token"] == 0
    assert evidence["draft source"] == "DFLASH: SGLang sizes its draft's cache apart from the target's cells (not counted here)"


def deploy_check(tmp_path, gpu, options):
    """(exit code, the host's message, the role's task results by name) of roles/sglang_service/tasks/sglang_check.yml
    run on this controller with the CPU venv's SGLang, for 8 of these GPUs."""
    tmp_path.mkdir()
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    results = {}

    def keep(event):
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed"):
            results[data.get("task")] = data.get("res") or {}
        return True

    run = PlaybookRun("sglang_check.yml", project_dir=ROOT / "tests" / "fixtures" / "playbooks",
                      private_data_dir=tmp_path / "pdd", inventory=str(inventory), event_callback=keep,
                      extra_vars={"k26_test_gpu_facts": gpu_facts(gpu), "k26_test_options": options,
                                  "k26_test_sglang_python": str(SGLANG_PYTHON)},
                      envvars={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    result = run.execute()
    host = result.hosts.get("localhost")
    return result.exit_code, host.msg if host else "", results


def weights(directory, size_bytes):
    """A sparse weights file of that size next to the model's config.json (nothing is read from it)."""
    with open(directory / "model-00001-of-00001.safetensors", "wb") as handle:
        handle.truncate(size_bytes)


@pytest.mark.sglang_real
@requires_real_sglang
def test_the_deploy_checks_the_memory_with_sglangs_figures_before_the_start(tmp_path):
    """On a bare host preflight has no SGLang to resolve with; the deploy checks once the sglang role installed it,
    before the running service is touched. 590 GB of K2.6 on 8x H100 80GB: within their whole memory, so preflight
    lets it pass, but SGLang's own fraction for a multimodal model there leaves too little, and the deploy stops as bad
    input with SGLang's figure. On 8x H200 the same passes, the KV cache sized in tokens."""
    directory, config = model_dir(tmp_path, "k26")
    weights(directory, 590 * 10 ** 9)
    options = {"model-path": str(directory), "tp-size": 8, "trust-remote-code": True}
    bare = rules.build_context(options, gpu=gpu_facts(H100), model={
        "path": str(directory), "exists": True, "is_dir": True, "has_config": True, "size_bytes": 590 * 10 ** 9,
        "config": {"kv": facts.kv_config(config)}})
    assert [f["id"] for f in rules.evaluate(bare) if f["severity"] == "error"] == []

    code, msg, dummy = deploy_check(tmp_path / "h100", H100, options)
    assert code == EXIT_BAD_INPUT, msg
    assert msg.startswith("SGLang's own figures for localhost rule this configuration out: ERROR"), msg
    assert "K26-MODEL-TOO-LARGE: model %s is 549.5 GiB but the weights may use only" % directory in msg
    assert "x mem-fraction-static 0.7269 (SGLang's own resolution on this host, a multimodal model to it" in msg

    code, msg, results = deploy_check(tmp_path / "h200", H200, options)
    assert code == EXIT_OK, msg
    checked = results["Stop on what SGLang's figures rule out (before the running service is touched)"]["msg"]
    assert "K26-KV-CACHE: KV cache for about" in checked and "SGLang's own resolution on this host" in checked
