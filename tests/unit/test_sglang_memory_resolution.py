"""Issue 51: the memory preflight reasons from is SGLang's own. SGLang 0.5.23 resolves its server arguments here,
on the CPU (tests/sglang_resolve.py answers its device questions with the GPU facts given, and nothing else), for a
Kimi K2.6-shaped config.json without weights; the K26-KV-CACHE finding must carry the mem-fraction-static SGLang
resolved, to the third decimal. K2.6 is a multimodal architecture to SGLang (configs/model_config.py), so its
estimate includes the vision tower's factor (arg_groups/memory_hook.py adjust_mem_fraction_for_vlm); the same
model as a text-only architecture gets SGLang's other number."""
import json
import subprocess
from pathlib import Path

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils import sglang_perf_facts as facts
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

ROOT = Path(__file__).resolve().parents[2]
K26_CONFIG = ROOT / "tests" / "fixtures" / "models" / "kimi-k2.6" / "config.json"
RESOLVER = ROOT / "tests" / "sglang_resolve.py"
H200 = {"name": "NVIDIA H200", "memory_mib": 143771, "capability": [9, 0], "count": 8}
H100 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "capability": [9, 0], "count": 8}
GIB = 1 << 30


def sglang_resolves(model_dir, gpu, *argv):
    """What SGLang 0.5.23 resolves for this model and GPU (tests/sglang_resolve.py's JSON)."""
    request = {"model_path": str(model_dir), "argv": ["--tp-size", "8", "--trust-remote-code", *argv], "gpu": gpu}
    done = subprocess.run([str(SGLANG_PYTHON), str(RESOLVER)], input=json.dumps(request), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


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


def preflight_fraction(config, gpu):
    """The mem-fraction-static the K26-KV-CACHE finding states for this config.json on 8 of these GPUs."""
    model = {"path": "/models/k26", "exists": True, "is_dir": True, "has_config": True, "size_bytes": 590 * 10 ** 9,
             "config": {"kv": facts.kv_config(config), "vision": facts.vision_tower(config)}}
    ctx = rules.build_context({"tp-size": 8, "model-path": "/models/k26"}, gpu=gpu_facts(gpu), model=model)
    (finding,) = [f for f in rules.evaluate(ctx) if f["id"] == "K26-KV-CACHE"]
    return finding["evidence"]["fraction"], finding


@pytest.mark.sglang_real
@requires_real_sglang
@pytest.mark.parametrize("gpu", [H200, H100], ids=["H200", "H100"])
def test_k26s_finding_carries_the_fraction_sglang_resolves(tmp_path, gpu):
    directory, config = model_dir(tmp_path, "k26")
    resolved = sglang_resolves(directory, gpu)["mem_fraction_static"]
    ours, finding = preflight_fraction(config, gpu)
    assert round(ours, 3) == round(resolved, 3)
    assert "vision tower (27 layers x 1152" in finding["evidence"]["fraction source"]


@pytest.mark.sglang_real
@requires_real_sglang
def test_the_same_model_served_as_text_gets_sglangs_other_number(tmp_path):
    directory, config = model_dir(tmp_path, "k2-text", text_only=True)
    resolved = sglang_resolves(directory, H200)["mem_fraction_static"]
    ours, finding = preflight_fraction(config, H200)
    assert round(ours, 3) == round(resolved, 3) == 0.886
    assert finding["evidence"]["fraction source"] == "SGLang's own estimate"


def test_k26s_kv_cache_is_sized_with_the_vision_factor():
    """Without the factor the finding promised about 3x the KV cache on 8x RTX PRO 6000: (static - weights) shrinks
    from 0.833 x 95.6 GiB - 68.7 GiB to 0.758 x 95.6 GiB - 68.7 GiB."""
    config = json.loads(K26_CONFIG.read_text())
    assert facts.vision_tower(config) == [27, 1152] and round(facts.vlm_factor([27, 1152]), 4) == 0.9097
    pro6000 = {"name": "NVIDIA RTX PRO 6000 Blackwell", "memory_mib": 97887, "capability": [12, 0], "count": 8}
    fraction, finding = preflight_fraction(config, pro6000)
    assert round(fraction, 3) == 0.758
    text_only = rules.kv_cache_budget(rules.build_context(
        {"tp-size": 8, "model-path": "/models/k26"}, gpu=gpu_facts(pro6000),
        model={"path": "/models/k26", "exists": True, "is_dir": True, "has_config": True, "size_bytes": 590 * 10 ** 9,
               "config": {"kv": facts.kv_config(config)}}))
    assert text_only["tokens"] > 2.5 * finding["evidence"]["tokens"]
