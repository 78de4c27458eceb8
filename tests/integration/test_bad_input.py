"""deploy_k26.yml refuses bad input with a clear message before anything on the host changes."""

import os

import pytest
import yaml

from harness import ROOT, SystemdContainer, demo_inventory, run_playbook, task_results

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A fresh container nothing was deployed to, and an inventory with the demo's settings for it."""
    box = SystemdContainer("k26-it-input-%d" % os.getpid())
    inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
    try:
        yield box, inventory
    finally:
        box.remove()


CASES = {
    "pp_size does not divide the GPUs": ({"sglang_service_pp_size": 3}, "pp-size 3 does not divide the 8 GPUs"),
    "tp x pp larger than the GPUs": ({"sglang_service_tp_size": 2}, "needs 16 GPUs per node but the node has 8"),
    "unknown attention backend": ({"sglang_service_attention_backend": "fa9"},
                                  "sglang_service_attention_backend must be one of"),
    "port out of range": ({"sglang_service_port": 70000}, "port 70000 is out of range"),
    "missing model path": ({"sglang_service_model_path": ""}, "no model path"),
    "public bind without a key": ({"sglang_service_api_key": ""}, "no API key is set"),
    "option SGLang does not know": ({"sglang_service_options": {"cuda-graph-max-bs": 256}}, "cuda-graph-max-bs"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_before_any_change(bare, case, tmp_path):
    box, inventory = bare
    extra, message = CASES[case]
    extra_file = tmp_path / "extra.yml"
    extra_file.write_text(yaml.safe_dump(extra))
    before = box.exec("find /etc /opt /var/lib/sglang /var/cache/sglang -xdev -newer /etc/hostname 2>/dev/null | sort").stdout
    rc, data = run_playbook(str(ROOT / "deploy_k26.yml"), str(inventory), extra_args=["-e", "@%s" % extra_file])
    assert rc != 0
    failed = [res for _, res in task_results(data, box.name) if res.get("failed")]
    assert failed, "no task failed for %s" % case
    assert message in failed[0]["msg"], failed[0]["msg"]
    assert data["stats"][box.name]["changed"] == 0
    after = box.exec("find /etc /opt /var/lib/sglang /var/cache/sglang -xdev -newer /etc/hostname 2>/dev/null | sort").stdout
    assert after == before, "files changed on the host"
    assert box.exec("id sglang", check=False).returncode != 0
