# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup plugin sglang_benchmark_baselines: each host's benchmark baseline, read from the controller's results."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_benchmark_baselines
short_description: Each replica's benchmark baseline, from the results k26deploy bench keeps on the controller
description:
  - Reads the sweep results (JSON) that M(k26.deploy.sglang_benchmark_record) wrote to O(results_dir) on the
    controller and returns, for each host named, its baseline (the newest sweep that did not fail its gate) at its
    highest concurrency that served without errors.
  - The C(sglang_monitoring) role turns these into Prometheus series that the alert C(K26ThroughputBelowBenchmark)
    compares each server's throughput with.
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  _terms:
    description: The inventory names of the hosts (as the results name them); lists are flattened.
    type: list
    elements: str
    required: true
  results_dir:
    description: The directory of the results on the controller (the C(sglang_benchmark) role's C(sglang_benchmark_results_dir)).
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Show each replica's baseline
  ansible.builtin.debug:
    msg: "{{ lookup('k26.deploy.sglang_benchmark_baselines', groups['sglang_servers'],
                    results_dir=lookup('ansible.builtin.env', 'HOME') ~ '/.local/share/k26deploy/benchmarks') }}"
"""

RETURN = r"""
_value:
  description:
    - One mapping of host to its baseline, C(time), C(file), C(config_hash), C(concurrency) and
      C(output_tokens_per_second), or to null where the host has no baseline yet.
  type: list
  elements: dict
"""

from ansible.module_utils.common.collections import is_sequence
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.lookup import LookupBase
from ansible_collections.k26.deploy.plugins.module_utils.sglang_benchmark_report import (
    monitoring_baseline,
    read_sweeps,
)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        hosts = [to_text(host) for term in terms for host in (term if is_sequence(term) else [term])]
        sweeps = read_sweeps(self.get_option("results_dir"))
        return [{host: monitoring_baseline(host, sweeps) for host in hosts}]
