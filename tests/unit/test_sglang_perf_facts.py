"""Every SGLang fact in sglang_perf_facts holds in the real SGLang source (the CPU venv's package), and the
computations that follow SGLang's code agree with it."""
import ast
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils import sglang_perf_facts as facts
from sglang_venv import SGLANG_SITE, requires_real_sglang


def function_source(path, name):
    """ast.unparse of the function NAME (Class.method or a plain name) in PATH, and its raw text."""
    text = path.read_text()
    tree = ast.parse(text)
    owner, dummy, method = name.rpartition(".")
    for node in ast.walk(tree):
        if owner and isinstance(node, ast.ClassDef) and node.name == owner:
            found = [item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == method]
            if found:
                return ast.unparse(found[0]), ast.get_source_segment(text, found[0])
        if not owner and isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.unparse(node), ast.get_source_segment(text, node)
    return None, None


def branches(unparsed):
    """The conditions of every if, conditional expression and while in a function's source, each once."""
    found = []
    for node in ast.walk(ast.parse(unparsed)):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)) and ast.unparse(node.test) not in found:
            found.append(ast.unparse(node.test))
    return found


# Each cited function's branches, reviewed for K2.6: what each does to the cited result.
REVIEWED = yaml.safe_load((Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "fact_branches.yml").read_text())
CITED = sorted({(fact.file, fact.function) for fact in facts.SGLANG_FACTS})


def squeeze(text):
    return re.sub(r"\s+", " ", text)


@requires_real_sglang
@pytest.mark.parametrize("fact", facts.SGLANG_FACTS, ids=lambda fact: fact.id)
def test_each_cited_fact_holds_in_the_real_sglang_source(fact):
    path = SGLANG_SITE / "sglang" / fact.file
    assert path.exists(), "%s is gone from sglang: %s" % (fact.file, fact.claim)
    unparsed, raw = function_source(path, fact.function)
    assert unparsed, "%s no longer defines %s: %s" % (fact.file, fact.function, fact.claim)
    for expression in fact.expressions:
        assert expression in unparsed or squeeze(expression) in squeeze(raw), (
            "%s %s no longer has %r, so this may no longer hold: %s"
            % (fact.file, fact.function, expression, fact.claim))


def test_a_fact_that_is_not_there_is_caught(tmp_path):
    """The check above would fail on a changed function: here, min(pp, 1 + depth) instead of the sum."""
    source = tmp_path / "mixin.py"
    source.write_text("class S:\n    def init_pp_loop_state(self):\n"
                      "        self.pp_loop_size = min(get_parallel().pp_size, 1 + get_parallel().pp_async_batch_depth)\n")
    unparsed, _raw = function_source(source, "S.init_pp_loop_state")
    assert facts.SGLANG_FACTS[0].expressions[0] not in unparsed


@requires_real_sglang
@pytest.mark.parametrize("cited", CITED, ids=lambda cited: cited[1])
def test_no_cited_function_has_a_branch_nobody_reviewed_for_k26(cited):
    """The expressions a fact cites can all be there while another branch of the same function changes the result
    for K2.6 (the vision tower's factor did, before issue 51): every branch is listed, with what it does for K2.6."""
    unparsed, dummy = function_source(SGLANG_SITE / "sglang" / cited[0], cited[1])
    reviewed = REVIEWED.get("%s %s" % cited)
    assert reviewed is not None, "no review of %s %s's branches in tests/fixtures/sglang/fact_branches.yml" % cited
    seen = branches(unparsed)
    new = [branch for branch in seen if branch not in reviewed]
    assert not new, ("%s %s has branches nobody reviewed for K2.6 (does each change the cited result? say so in "
                     "tests/fixtures/sglang/fact_branches.yml): %s" % (cited + (new,)))
    gone = [branch for branch in reviewed if branch not in seen]
    assert not gone, "reviewed branches gone from %s %s: %s" % (cited + (gone,))


def test_an_unreviewed_branch_is_caught():
    """The review above fails on a function that gained a branch: here the vision tower's factor, were it new."""
    source = ("def handle_gpu_memory_settings(server_args):\n    if cfg.mem_fraction_static is None:\n"
              "        mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3)\n"
              "        if is_vlm:\n            mem_fraction_static = adjust(mem_fraction_static)\n")
    reviewed = dict(REVIEWED["srt/arg_groups/memory_hook.py handle_gpu_memory_settings"])
    del reviewed["is_vlm"]
    assert [branch for branch in branches(source) if branch not in reviewed] == ["is_vlm"]


def test_kimi_k26_kv_cache_bytes_per_token():
    config = {"text_config": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_hidden_layers": 61}}
    assert facts.mla_kv_bytes_per_token(facts.text_config(config)) == (512 + 64) * 61 * 2 == 70272
    assert facts.mla_kv_bytes_per_token({"num_hidden_layers": 32}) is None


def test_every_measurement_names_its_source_and_the_layout_evidence_exists():
    for row in facts.MEASUREMENTS:
        assert row.source and row.tokens_per_s and row.tp * row.pp == 8
    assert all(facts.measurement(row_id) for row_id in facts.PCIE8_LAYOUT_EVIDENCE)
    best = facts.best_at_one([facts.measurement(row_id) for row_id in facts.PCIE8_LAYOUT_EVIDENCE])
    assert (best.tp, best.pp) == (8, 1)


@requires_real_sglang
@pytest.mark.parametrize("speed_default", rules.SPEED_DEFAULTS, ids=lambda item: item[0])
def test_each_speed_default_is_sglangs_own_and_on(speed_default):
    """K26-SPEED-DEFAULT-OFF's options: each a field of the cited file, a bool whose default is False (the feature
    on), its help the source of what the finding says it turns off."""
    key, dummy, source, dummy = speed_default
    text = (SGLANG_SITE / "sglang" / "srt" / "arg_groups" / "fields" / source).read_text()
    field = re.search(r"^\s*%s: A\[\s*bool,(.*?)\]\s*=\s*(\w+)" % key.replace("-", "_"), text, re.M | re.S)
    assert field, "%s declares no bool field %s" % (source, key)
    assert field.group(2) == "False", "%s defaults to %s in %s" % (key, field.group(2), source)
