# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for a deploy's outcome and a host's result (plugins/module_utils/sglang_outcome.py and sglang_result.py
hold the logic)."""

from ansible.errors import AnsibleFilterError
from ansible_collections.k26.deploy.plugins.module_utils import sglang_outcome, sglang_result


def outcome(record, transition, *args, **kwargs):
    """``record`` (the fact sglang_service_outcome, or None) after the transition ``transition``."""
    try:
        return sglang_outcome.transition(record, transition, *args, **kwargs)
    except sglang_outcome.OutcomeError as exc:
        raise AnsibleFilterError(str(exc))


def outcome_result(record, service, extra=None):
    """The host's result from the outcome record and what the role knows of the service."""
    try:
        return sglang_outcome.result(record, service, extra)
    except sglang_result.ResultError as exc:
        raise AnsibleFilterError(str(exc))


def result(fields):
    """``fields`` checked against the schema of a host's result."""
    try:
        return sglang_result.check(fields)
    except sglang_result.ResultError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {
            "sglang_outcome": outcome,
            "sglang_outcome_now": sglang_outcome.current,
            "sglang_outcome_gate_failure": sglang_outcome.gate_failure,
            "sglang_outcome_result": outcome_result,
            "sglang_result": result,
        }
