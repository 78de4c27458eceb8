"""K26-TUNED: what k26deploy tune measured, said of the configuration preflight and status look at (the rows'
variables against the effective SGLang options), and the action plugin that hands a report only to the hosts it
measured (that one in tests/unit/plugins/action/test_sglang_preflight.py)."""
from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils import sglang_tune_evidence as evidence

# the seed's machine class: tp8 measured against pp8 at one request (figures of sglang_perf_facts' measurements)
REPORT = {
    "time": "2026-12-05T01:00:00Z", "objective": "c1", "unit": "tok/s of one request alone", "winner": "tp8pp1",
    "hosts": ["gpu-1"],
    "file": "/home/op/.local/share/k26deploy/tune/tune-2026-12-05T010000Z.json",
    "rows": [
        {"name": "tp1pp8", "extra_vars": {"sglang_service_tp_size": 1, "sglang_service_pp_size": 8}, "ok": True,
         "score": 35.6, "score_level": 1},
        {"name": "tp4pp2", "extra_vars": {"sglang_service_tp_size": 4, "sglang_service_pp_size": 2}, "ok": False,
         "score": None, "score_level": None},
        {"name": "tp8pp1", "extra_vars": {"sglang_service_tp_size": 8, "sglang_service_pp_size": 1}, "ok": True,
         "score": 73.7, "score_level": 1},
        {"name": "tp8-graphs-off", "extra_vars": {"sglang_service_tp_size": 8,
                                                  "sglang_service_options": {"disable_cuda_graph": True}},
         "ok": True, "score": 70.0, "score_level": 1},
    ],
}


def tuned(options, report=None):
    """K26-TUNED of the options against REPORT, or against ``report`` ({}: none)."""
    context = rules.build_context(options, tune=REPORT if report is None else report)
    found = [f for f in rules.evaluate(context) if f["id"] == "K26-TUNED"]
    return found[0] if found else None


def test_a_configuration_measured_slower_than_the_winner_is_a_warning_with_both_figures():
    finding = tuned({"tp-size": 1, "pp-size": 8})
    assert finding["severity"] == "warning"
    assert finding["message"] == ("k26deploy tune on 2026-12-05T01:00:00Z measured this configuration (tp1pp8) at "
                                  "35.6 tok/s of one request alone, 2.07x slower than tp8pp1 (73.7)")
    assert "sglang_service_pp_size=1, sglang_service_tp_size=8" in finding["fix"]
    assert finding["evidence"]["tune.report"] == REPORT["file"] and finding["evidence"]["tune.ratio"] == 2.07


def test_the_winner_itself_and_one_within_ten_percent_are_information():
    best = tuned({"tp-size": 8})  # pp-size 1 is SGLang's default
    assert best["severity"] == "info" and "measured this configuration (tp8pp1) best: 73.7" in best["message"]
    close = tuned({"tp-size": 8, "disable-cuda-graph": "true"})
    assert close["severity"] == "info" and "1.05x slower than tp8pp1" in close["message"]
    assert close["fix"].startswith("nothing to do: within 10%")


def test_a_configuration_that_failed_to_serve_there_is_a_warning():
    finding = tuned({"tp-size": 4, "pp-size": 2})
    assert finding["severity"] == "warning" and "(tp4pp2) as failing" in finding["message"]


def test_a_configuration_that_is_none_of_the_candidates_names_the_winner_and_how_to_compare():
    finding = tuned({"tp-size": 2, "pp-size": 4})
    assert finding["severity"] == "info"
    assert "measured tp8pp1 best (73.7 tok/s of one request alone)" in finding["message"]
    assert "none of its candidates" in finding["message"] and "k26deploy tune" in finding["fix"]


def test_rows_whose_variables_are_not_options_never_match_and_no_report_says_nothing():
    assert evidence.option_settings({"sglang_service_environment": {"X": 1}}) is None
    assert evidence.option_settings({"sglang_service_options": {"cuda_graph_max_bs_decode": 512}}) == \
        {"cuda-graph-max-bs-decode": 512}
    assert tuned({"tp-size": 1, "pp-size": 8}, report={}) is None
    nothing = dict(REPORT, winner=None)
    assert tuned({"tp-size": 1}, report=nothing)["severity"] == "info"


def test_the_rule_s_warning_is_overridable_like_every_rule():
    findings = rules.evaluate(rules.build_context({"tp-size": 1, "pp-size": 8}, tune=REPORT),
                              severity_overrides={"K26-TUNED": "error"})
    assert [f["severity"] for f in findings if f["id"] == "K26-TUNED"] == ["error"]
