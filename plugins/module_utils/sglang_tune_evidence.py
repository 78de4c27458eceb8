# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What ``k26deploy tune`` measured on this host, said of the configuration it is about to serve.

A tune report (src/k26deploy/tune.py, in the form its ``latest_report`` hands on) holds a row per candidate: its
variables and its score (output tok/s for the report's objective, whose words are the report's ``unit``), and the
winner. Preflight finds the row whose variables the host's effective
SGLang options match and compares its score with the winner's: a configuration measured slower than another one
is the silent throughput loss this package exists to name, with the figures and the day they were measured.

Pure logic: the report and the effective options in, a verdict out (k26_preflight_rules' K26-TUNED).
"""

from __future__ import annotations

from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import as_bool, option_key

#: the candidate variables that set an SGLang option directly (the layout), and the option each sets
SIZE_VARIABLES = {"sglang_service_tp_size": "tp-size", "sglang_service_pp_size": "pp-size"}
#: the candidate variable whose entries are SGLang options themselves
OPTIONS_VARIABLE = "sglang_service_options"
#: a configuration measured at least this many times slower than the winner is worth a warning
SLOWER_RATIO = 1.1


def _same(wanted, present):
    if isinstance(wanted, bool) or isinstance(present, bool):
        return as_bool(wanted) == as_bool(present)
    return str(wanted) == str(present)


def option_settings(extra_vars):
    """A candidate's variables as {option: value}, or None when one of them is not an SGLang option (a row that
    preflight cannot match against the options: its environment, its profile, ...)."""
    settings = {}
    for name, value in (extra_vars or {}).items():
        if name in SIZE_VARIABLES:
            settings[SIZE_VARIABLES[name]] = value
        elif name == OPTIONS_VARIABLE and isinstance(value, dict):
            settings.update({option_key(key): item for key, item in value.items()})
        else:
            return None
    return settings


def matches(settings, options):
    """Whether the effective options (keys in the dashed spelling) hold every setting; sizes default to 1."""
    for key, wanted in settings.items():
        present = options.get(key, 1 if key in SIZE_VARIABLES.values() else None)
        if not _same(wanted, present):
            return False
    return True


def measured_row(report, options):
    """The report's row that the options match; where several do (tp8pp1, and tp8pp1 with graphs off, both match
    graphs off), the one that names the most of the options set, the first of equals; or None."""
    found = None
    for row in report.get("rows") or []:
        settings = option_settings(row.get("extra_vars"))
        if settings is None or not matches(settings, options):
            continue
        named = len([key for key in settings if key in options])
        if found is None or named > found[0]:
            found = (named, row)
    return found[1] if found else None


def _variables(row):
    return ", ".join("%s=%s" % (name, value) for name, value in sorted((row.get("extra_vars") or {}).items()))


def verdict(report, options):
    """(slower, message, fix, evidence) for the options against the report, or None when there is no report.

    ``slower`` is True when the configuration was measured SLOWER_RATIO or more below the winner."""
    if not report or not report.get("rows"):
        return None
    rows = {row.get("name"): row for row in report["rows"]}
    best = rows.get(report.get("winner"))
    worth = report.get("unit") or "tok/s"
    when = "k26deploy tune on %s" % report.get("time", "?")
    evidence = {"tune.report": report.get("file"), "tune.time": report.get("time"),
                "tune.objective": report.get("objective"), "tune.winner": report.get("winner")}
    if best is None or not best.get("score"):
        return False, "%s found no candidate that served" % when, "nothing to do", evidence
    here = measured_row(report, options)
    if here is None:
        return (False, "%s measured %s best (%.1f %s); this configuration is none of its candidates (%s)"
                % (when, best["name"], best["score"], worth, ", ".join(sorted(rows))),
                "to compare this configuration too, run k26deploy tune with it among the candidates", evidence)
    evidence["tune.configured"] = here.get("name")
    if here is best:
        return (False, "%s measured this configuration (%s) best: %.1f %s" % (when, best["name"], best["score"], worth),
                "nothing to do", evidence)
    if not here.get("ok") or not here.get("score"):
        return (True, "%s measured this configuration (%s) as failing; %s served %.1f %s"
                % (when, here["name"], best["name"], best["score"], worth),
                "set the winner's variables (%s)" % _variables(best), evidence)
    ratio = best["score"] / here["score"]
    slower = ratio >= SLOWER_RATIO
    return (slower, "%s measured this configuration (%s) at %.1f %s, %.2fx slower than %s (%.1f)"
            % (when, here["name"], here["score"], worth, ratio, best["name"], best["score"]),
            ("set the winner's variables (%s), or run k26deploy tune again if the model, SGLang or the GPUs "
             "changed since" % _variables(best)) if slower else "nothing to do: within %.0f%% of the winner"
            % ((SLOWER_RATIO - 1) * 100), dict(evidence, **{"tune.ratio": round(ratio, 2)}))
