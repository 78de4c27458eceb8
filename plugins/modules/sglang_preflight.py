#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module sglang_preflight: evaluate the Kimi K2.6 preflight rules on the target."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Check a host and an SGLang option set for Kimi K2.6 before anything is changed
description:
  - Gathers what the rules need on the target (GPU facts through nvidia-smi unless given, the model directory's
    existence and size, free disk for the caches) and evaluates the rules of C(k26_preflight_rules), for example
    CUDA graphs disabled, C(pp-async-batch-depth) below C(pp-size), tp x pp not matching the GPUs, an attention
    backend that does not run on the GPU architecture, a model larger than the GPU memory budget, a driver too
    old for CUDA 13 or Fabric Manager missing on an NVSwitch system.
  - Returns every finding with a stable id, a severity and a message that says what happens and what to change.
  - Fails when any finding has severity V(error); warnings explain and let the play continue.
  - On a simulator host (O(simulator=true)) the GPU rules report V(info) instead of errors.
version_added: "0.1.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  options:
    description:
      - SGLang options as a mapping of option name to value (C(pp-size) or C(pp_size) spelling).
    type: dict
    default: {}
  expected_gpus:
    description:
      - Number of GPUs this host must have; a different count is an error.
    type: int
  check_model:
    description:
      - Check that the model directory exists, has a C(config.json), and fits the GPU memory budget.
    type: bool
    default: true
  model_path:
    description:
      - Model directory to check; defaults to the C(model-path) option.
    type: path
  cache_dir:
    description:
      - Directory of SGLang's persistent caches; its file system (or that of its nearest existing parent)
        must have O(min_cache_free_gb) free.
    type: path
  min_cache_free_gb:
    description:
      - Free space wanted for the caches, in GiB.
    type: float
    default: 20
  simulator:
    description:
      - The host runs the SGLang simulator and has no GPU; the GPU rules report V(info).
    type: bool
    default: false
  min_driver_version:
    description:
      - Lowest acceptable NVIDIA driver (CUDA 13.0 GA needs 580.65.06).
    type: str
    default: "580.65.06"
  mla:
    description:
      - The model uses multi-head latent attention (Kimi K2.x does); selects the attention-backend table.
    type: bool
    default: true
  gpu_facts:
    description:
      - GPU facts from M(nvidia_gpu_facts) (C(ansible_facts.nvidia_gpu)) to use instead of asking nvidia-smi again.
    type: dict
  severity_overrides:
    description:
      - Rule id to V(error), V(warning), V(info) or V(off), for example V(K26-CUDA-GRAPH-OFF=error), or
        V(K26-DRIVER-TOO-OLD=warning) when the driver role is about to upgrade the driver.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reads only; runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing to compare.
seealso:
  - module: nvidia_gpu_facts
  - module: sglang_args_check
"""

EXAMPLES = r"""
- name: Preflight checks for the Kimi K2.6 service
  sglang_preflight:
    options: "{{ sglang_service_effective_options }}"
    expected_gpus: 8
    cache_dir: /var/cache/sglang
    min_cache_free_gb: 50
  register: preflight

- name: Preflight on a simulator host, CUDA graphs off treated as an error
  sglang_preflight:
    options:
      model-path: /models/Kimi-K2.6
      pp-size: 8
      pp-async-batch-depth: 8
    simulator: true
    check_model: false
    severity_overrides:
      K26-CUDA-GRAPH-OFF: error
"""

RETURN = r"""
findings:
  description: The findings, in rule order.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Stable rule id.
      type: str
      returned: always
      sample: K26-PP-ASYNC-DEPTH
    severity:
      description: V(error), V(warning) or V(info).
      type: str
      returned: always
    title:
      description: What the rule checks.
      type: str
      returned: always
    message:
      description: What happens and what to change.
      type: str
      returned: always
lines:
  description: One line per finding - severity, id, message.
  returned: always
  type: list
  elements: str
error_count:
  description: Number of error findings.
  returned: always
  type: int
warning_count:
  description: Number of warning findings (C(warnings) is a key Ansible reserves for module warnings).
  returned: always
  type: int
info_count:
  description: Number of info findings.
  returned: always
  type: int
rules:
  description: Ids of the rules that were evaluated.
  returned: always
  type: list
  elements: str
gpu:
  description: The GPU facts the rules saw (see M(nvidia_gpu_facts)).
  returned: always
  type: dict
model:
  description: Model directory facts (path, exists, is_dir, has_config, size_bytes, hub_id); V(null) when not checked.
  returned: always
  type: dict
cache:
  description: Cache directory facts (path, checked_path, free_bytes, min_free_bytes); V(null) without O(cache_dir).
  returned: always
  type: dict
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.k26_preflight_rules import (
    ERROR,
    INFO,
    RULE_IDS,
    SEVERITIES,
    SEVERITY_OFF,
    WARNING,
    build_context,
    count,
    evaluate,
    format_finding,
    normalize_key,
)
from ansible.module_utils.nvidia_smi import gather_facts
from ansible.module_utils.sglang_args import secret_values


def directory_size(path):
    """Bytes of the regular files under path; file symlinks followed (Hugging Face cache), each inode once."""
    total = 0
    seen = set()
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=True)
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if key in seen or not entry.is_file(follow_symlinks=True):
                continue
            seen.add(key)
            total += info.st_size
    return total


def model_facts(path):
    if not path:
        return None
    if not os.path.isabs(path) and not os.path.exists(path):
        return {"path": path, "hub_id": True, "exists": None, "is_dir": None, "has_config": None, "size_bytes": None}
    exists = os.path.exists(path)
    is_dir = os.path.isdir(path)
    return {
        "path": path,
        "hub_id": False,
        "exists": exists,
        "is_dir": is_dir,
        "has_config": is_dir and os.path.isfile(os.path.join(path, "config.json")),
        "size_bytes": directory_size(path) if is_dir else None,
    }


def cache_facts(path, min_free_gb):
    if not path:
        return None
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe.rstrip("/")) or "/"
        if parent == probe:
            break
        probe = parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = None
    return {"path": path, "checked_path": probe, "free_bytes": free, "min_free_bytes": int(min_free_gb * (1 << 30))}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            options=dict(type="dict", default={}),
            expected_gpus=dict(type="int"),
            check_model=dict(type="bool", default=True),
            model_path=dict(type="path"),
            cache_dir=dict(type="path"),
            min_cache_free_gb=dict(type="float", default=20),
            simulator=dict(type="bool", default=False),
            min_driver_version=dict(type="str", default="580.65.06"),
            mla=dict(type="bool", default=True),
            gpu_facts=dict(type="dict"),
            severity_overrides=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for secret in secret_values(params["options"]):
        module.no_log_values.add(secret)

    overrides = {str(k): str(v).lower() for k, v in params["severity_overrides"].items()}
    bad = sorted("%s: %s" % (k, v) for k, v in overrides.items()
                 if k not in RULE_IDS or v not in SEVERITIES + (SEVERITY_OFF,))
    if bad:
        module.fail_json(msg="severity_overrides: unknown rule id or severity: %s (rules: %s; severities: %s)"
                         % (", ".join(bad), ", ".join(RULE_IDS), ", ".join(SEVERITIES + (SEVERITY_OFF,))))

    gpu = params["gpu_facts"]
    if not gpu or "gpu_count" not in gpu:
        gpu = gather_facts(lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}))

    model = None
    if params["check_model"]:
        options = params["options"] or {}
        path = params["model_path"] or next(
            (v for k, v in options.items() if normalize_key(k) in ("model-path", "model")), None)
        model = model_facts(path)
        if model is None:
            model = {"path": None, "hub_id": False, "exists": False, "is_dir": False, "has_config": False,
                     "size_bytes": None}

    cache = cache_facts(params["cache_dir"], params["min_cache_free_gb"])
    ctx = build_context(params["options"], gpu=gpu, simulator=params["simulator"],
                        expected_gpus=params["expected_gpus"], model=model, cache=cache,
                        min_driver_version=params["min_driver_version"], mla=params["mla"])
    findings = evaluate(ctx, severity_overrides=overrides)
    result = dict(
        changed=False,
        findings=findings,
        lines=[format_finding(f) for f in findings],
        error_count=count(findings, ERROR),
        warning_count=count(findings, WARNING),
        info_count=count(findings, INFO),
        rules=list(RULE_IDS),
        gpu=gpu,
        model=model,
        cache=cache,
    )
    if result["error_count"]:
        module.fail_json(msg="preflight found %d error(s): %s" % (
            result["error_count"], ", ".join(f["id"] for f in findings if f["severity"] == ERROR)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
