#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_benchmark_record: keep a benchmark sweep on the controller and say what it means."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_benchmark_record
short_description: Keep a benchmark sweep as JSON, Markdown and PNG, compare it with the last one, diagnose and gate
description:
  - Meant to run on the controller (C(delegate_to) localhost) with the result of M(k26.deploy.sglang_benchmark).
  - The newest earlier result of the same host in O(results_dir) that did not fail its gate is the baseline; the
    change of each level's tok/s against it is reported in percent.
  - Diagnosis lines come from the preflight rules on the configuration (CUDA graphs off for every batch or for the
    batches beyond the largest graph, a layout that fights the GPUs' interconnect) and from
    what only a run shows (GPUs far below their power limit, throughput flat from concurrency 8, errors, JIT
    compilation in the journal), each with its evidence and the change that fixes it.
  - With O(gate) set and a baseline present, a level whose output tok/s fell by more than O(gate) percent fails the
    gate; the module reports it (RV(gate)) and leaves failing to the caller, which rolls back.
  - Writes C(HOST-TIME-HASH.json), C(.md) and C(.png) (tok/s and GPU utilization against concurrency; needs
    matplotlib on the controller, else no plot and a warning).
version_added: "0.3.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  host:
    description: The host the sweep measured (names the files and finds the baseline).
    type: str
    required: true
  sweep:
    description: The registered result of M(k26.deploy.sglang_benchmark) (its C(levels), C(journal_lines), ...).
    type: dict
    required: true
  options:
    description: The SGLang options the service ran with, without secrets (diagnosis and configuration hash).
    type: dict
    default: {}
  topology:
    description:
      - How the host's GPUs are connected (the C(topology) of M(k26.deploy.nvidia_gpu_facts)); a tensor or pipeline
        parallel layout that fights it is diagnosed. Without it the layout is not judged.
    type: dict
  results_dir:
    description: Directory on the controller for the results (created).
    type: path
    required: true
  gate:
    description: Largest loss of a level's output tok/s against the baseline, in percent, that still passes.
    type: float
  plot:
    description: Draw the PNG.
    type: bool
    default: true
attributes:
  check_mode:
    description: Compares and diagnoses, writes nothing.
extends_documentation_fragment:
  - k26.deploy.attributes
"""

EXAMPLES = r"""
- name: Keep the sweep and compare it with the last one of this host
  k26.deploy.sglang_benchmark_record:
    host: "{{ inventory_hostname }}"
    sweep: "{{ sweep }}"
    options: "{{ config | k26.deploy.sglang_without_secrets }}"
    results_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.local/share/k26deploy/benchmarks"
    gate: 10
  delegate_to: localhost
  register: report
"""

RETURN = r"""
files:
  description: The files written (keys C(json), C(markdown), C(png); C(png) null without a plot).
  returned: success
  type: dict
baseline:
  description: The baseline's time, configuration hash and file, or null on a host's first sweep.
  returned: success
  type: dict
changes:
  description: Per level and figure, before, after and the change in percent.
  returned: success
  type: list
  elements: dict
diagnosis:
  description: Diagnosis lines, each with C(id), C(message), C(fix) and C(evidence).
  returned: success
  type: list
  elements: dict
gate:
  description: C(enabled), C(passed) (null without gate or baseline) and C(msg).
  returned: success
  type: dict
lines:
  description: One line per level and per diagnosis, for people.
  returned: success
  type: list
  elements: str
config_hash:
  description: Short hash of the configuration (secrets left out).
  returned: success
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils import sglang_benchmark_report as report
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import without_secrets


def gate_verdict(gate, baseline, changes):
    if gate is None:
        return {"enabled": False, "passed": None, "msg": "no gate set"}
    if baseline is None:
        return {"enabled": True, "passed": None, "msg": "no baseline yet: this sweep becomes the baseline"}
    passed, msg = report.gate(changes, gate)
    return {"enabled": True, "passed": passed, "msg": msg}


def plot(sweep, path):
    """tok/s (left) and mean GPU utilization (right) against concurrency; the baseline's tok/s dashed."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    levels = sweep["levels"]
    figure, throughput_axis = pyplot.subplots(figsize=(7, 4.2))
    concurrency = [level["concurrency"] for level in levels]
    throughput_axis.plot(concurrency, [level.get("output_tokens_per_second") for level in levels], "o-",
                         label="output tok/s")
    baseline = report.by_concurrency((sweep.get("baseline") or {}).get("levels"))
    if baseline:
        throughput_axis.plot(sorted(baseline), [baseline[c].get("output_tokens_per_second") for c in sorted(baseline)],
                             "o--", color="grey", label="baseline tok/s")
    throughput_axis.set_xlabel("concurrency")
    throughput_axis.set_ylabel("output tok/s")
    throughput_axis.set_xscale("log", base=2)
    utilization = [report.mean_utilization(level) for level in levels]
    if any(value is not None for value in utilization):
        utilization_axis = throughput_axis.twinx()
        utilization_axis.plot(concurrency, utilization, "s:", color="tab:red", label="GPU utilization %")
        utilization_axis.set_ylabel("mean GPU utilization %")
        utilization_axis.set_ylim(0, 100)
        utilization_axis.legend(loc="lower right")
    throughput_axis.legend(loc="upper left")
    throughput_axis.set_title("%s, %s (config %s)" % (sweep["host"], sweep["time"], sweep["config_hash"]))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def write(module, sweep, stem):
    os.makedirs(module.params["results_dir"], exist_ok=True)
    files = {"json": stem + ".json", "markdown": stem + ".md", "png": None}
    with open(files["json"], "w") as handle:
        json.dump(dict(sweep, baseline=report.baseline_reference(sweep.get("baseline"))), handle, indent=1)
    with open(files["markdown"], "w") as handle:
        handle.write(report.markdown(sweep))
    if module.params["plot"]:
        try:
            plot(sweep, stem + ".png")
            files["png"] = stem + ".png"
        except ImportError:
            module.warn("matplotlib is not installed on the controller: no plot")
    return files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            sweep=dict(type="dict", required=True),
            options=dict(type="dict", default={}),
            topology=dict(type="dict"),
            results_dir=dict(type="path", required=True),
            gate=dict(type="float"),
            plot=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["gate"] is not None and params["gate"] < 0:
        module.fail_json(msg="gate is a loss in percent, 0 or more; got %r" % params["gate"])
    measured = params["sweep"]
    options = without_secrets(params["options"])
    sweep = {
        "host": params["host"],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(measured.get("started") or time.time())),
        "config_hash": report.config_hash(options),
        "options": options,
        "tool": measured.get("tool") or "aiperf",
        "duration": measured.get("duration"),
        "levels": measured.get("levels") or [],
        "journal_lines": measured.get("journal_lines") or [],
        "topology": params["topology"],
        "decode_graph_max_bs": measured.get("decode_graph_max_bs"),
    }
    sweep["baseline"] = report.pick_baseline(params["host"], report.read_sweeps(params["results_dir"]))
    sweep["changes"] = report.changes(sweep["levels"], (sweep["baseline"] or {}).get("levels"))
    sweep["diagnosis"] = report.diagnosis(sweep)
    sweep["gate"] = gate_verdict(params["gate"], sweep["baseline"], sweep["changes"])
    stem = os.path.join(params["results_dir"], report.result_stem(sweep["host"], sweep["time"], sweep["config_hash"]))
    files = {"json": stem + ".json", "markdown": stem + ".md", "png": None} if module.check_mode else write(
        module, sweep, stem)
    baseline = {key: sweep["baseline"].get(key) for key in ("time", "config_hash", "file")} if sweep["baseline"] else None
    module.exit_json(changed=not module.check_mode, files=files, baseline=baseline,
                     changes=sweep["changes"], diagnosis=sweep["diagnosis"], gate=sweep["gate"],
                     lines=report.summary_lines(sweep), config_hash=sweep["config_hash"])


if __name__ == "__main__":
    main()
