"""The K2.6 profiles as the sglang_service role computes them (its "options" entry point, run on the controller by
ansible-runner: tests/fixtures/playbooks/effective_options.yml), and SGLang 0.5.23's own parser on what they give:
kimi_k26, and the recipes of SGLang's Kimi K2.6 cookbook on top of it, kimi_k26_latency (EAGLE3, its draft) and
kimi_k26_throughput (attention data parallel)."""
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.k26.deploy.plugins.module_utils import sglang_args
import sglang_parser
from k26deploy.results import EXIT_BAD_INPUT, EXIT_OK
from k26deploy.runner import PlaybookRun
from sglang_venv import SGLANG_PYTHON
from sglang_venv import requires_real_sglang as real

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "roles" / "sglang_service" / "vars" / "profiles"
DRAFT = "/models/kimi-k2.6-eagle3.1-mla"
BASE = {"sglang_service_model_path": "/models/Kimi-K2.6", "sglang_service_tp_size": 8, "sglang_service_pp_size": 1,
        "ansible_python_interpreter": sys.executable}


def effective_options(tmp_path, **variables):
    """(exit code, the role's sglang_service_effective_options, the run's message on failure)."""
    run = PlaybookRun("effective_options.yml", project_dir=ROOT / "tests" / "fixtures" / "playbooks",
                      private_data_dir=tmp_path / "pdd", inventory="localhost,", extra_vars=dict(BASE, **variables),
                      event_callback=lambda event: True,
                      # the checkout's collection (ansible.cfg: .collections), not one installed elsewhere
                      envvars={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    result = run.execute()
    host = result.hosts.get("localhost")
    return result.exit_code, (result.set_stats or {}).get("effective_options"), host.msg if host else ""


def kimi_k26_options():
    return yaml.safe_load((PROFILES / "kimi_k26.yml").read_text())["__sglang_service_profile_options"]


def test_the_latency_profile_is_kimi_k26_with_the_cookbooks_eagle3(tmp_path):
    code, options, msg = effective_options(tmp_path, sglang_service_profile="kimi_k26_latency",
                                           sglang_service_speculative_draft_model_path=DRAFT)
    assert code == EXIT_OK, msg
    assert kimi_k26_options().items() <= options.items()
    assert {key: options.get(key) for key in ("speculative-algorithm", "speculative-num-steps",
                                              "speculative-eagle-topk", "speculative-num-draft-tokens",
                                              "speculative-draft-model-path")} == {
        "speculative-algorithm": "EAGLE3", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4, "speculative-draft-model-path": DRAFT}
    assert "attn-dp-size" not in options


def test_the_throughput_profile_gives_each_tensor_parallel_gpu_an_attention_dp_rank(tmp_path):
    code, options, msg = effective_options(tmp_path, sglang_service_profile="kimi_k26_throughput",
                                           sglang_service_tp_size=4, sglang_service_pp_size=2)
    assert code == EXIT_OK, msg
    assert kimi_k26_options().items() <= options.items()
    assert options["attn-dp-size"] == 4 and "speculative-algorithm" not in options


def test_a_speculative_profile_without_its_draft_is_refused_before_anything_changes(tmp_path):
    code, options, msg = effective_options(tmp_path, sglang_service_profile="kimi_k26_latency")
    assert code == EXIT_BAD_INPUT and options is None
    assert "speculative-algorithm EAGLE3 needs a draft model" in msg


@pytest.mark.sglang_real
@real
@pytest.mark.parametrize("profile, parsed", [
    ("kimi_k26", {"tp_size": 8, "speculative_algorithm": None, "attn_dp_size": None}),
    ("kimi_k26_latency", {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                          "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                          "speculative_draft_model_path": DRAFT}),
    ("kimi_k26_throughput", {"tp_size": 8, "attn_dp_size": 8}),
])
def test_sglangs_own_parser_takes_each_profile(tmp_path, profile, parsed):
    code, options, msg = effective_options(tmp_path, sglang_service_profile=profile,
                                           sglang_service_speculative_draft_model_path=DRAFT)
    assert code == EXIT_OK, msg
    result, dummy = sglang_args.run_check(sglang_parser.run, str(SGLANG_PYTHON), options=options,
                                          tmpdir=str(tmp_path))
    assert result["ok"] is True, result
    assert {key: result["parsed"].get(key) for key in parsed} == parsed
