#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_preflight: evaluate the Kimi K2.6 preflight rules on the target."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Check a host and an SGLang option set for Kimi K2.6 before anything is changed
description:
  - Gathers what the rules need on the target (GPU facts through nvidia-smi unless given, the model directory's
    existence and size, free disk for the caches) and evaluates the rules of C(k26_preflight_rules), for example
    CUDA graphs disabled, a layout that fights the GPUs' interconnect, tp x pp not matching the GPUs, an attention
    backend that does not run on the GPU architecture, a model larger than the GPU memory budget, a driver too
    old for CUDA 13 or Fabric Manager missing on an NVSwitch system.
  - Returns every finding as data - a stable id, a severity, a message that says what happens, the fix, and the
    evidence (the options and facts the rule read) - errors first.
  - Also turns into findings SGLang's own verdict on the options (the result of M(k26.deploy.sglang_args_check), when given),
    variables that carry one of the roles' prefixes but that no role or play knows (a typo), and an interpreter too
    old for SGLang.
  - Fails when any finding has severity V(error); warnings explain and let the play continue, unless O(strict).
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
  environment:
    description:
      - The service's SGLang environment variables (C(SGLANG_*) names of C(sglang_service_environment) to values), for
        the rules that SGLang's own gates decide (for example C(SGLANG_ENABLE_PP_SPEC)).
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
      - GPU facts from M(k26.deploy.nvidia_gpu_facts) (C(ansible_facts.nvidia_gpu)) to use instead of asking nvidia-smi again.
    type: dict
  layout:
    description:
      - The layout the C(sglang_service) role chose (its fact C(sglang_service_layout) - C(tp_size), C(pp_size),
        C(source), C(interconnect), C(reason)), shown as the finding C(K26-LAYOUT).
      - Sizes whose C(source) is V(inventory), or any sizes without O(layout), are checked against the GPUs'
        interconnect (C(K26-LAYOUT-TOPOLOGY)).
    type: dict
  tune_report:
    description:
      - The last C(k26deploy tune) report for this host (its JSON file's content; the CLI passes the newest one of
        the inventory as C(k26_preflight_tune_report)). The row whose variables the options match is compared with
        the winner (C(K26-TUNED)), a warning when it was measured 10% or more slower.
    type: dict
  severity_overrides:
    description:
      - Rule id to V(error), V(warning), V(info) or V(off), for example V(K26-CUDA-GRAPH-OFF=error), or
        V(K26-DRIVER-TOO-OLD=warning) when the driver role is about to upgrade the driver.
      - The module's action plugin puts the inventory variable C(k26_preflight_severity_overrides) on top of these,
        so that every command (deploy, preflight, status) applies the operator's overrides the same way.
    type: dict
    default: {}
  strict:
    description:
      - Every warning is an error.
    type: bool
    default: false
  args_check:
    description:
      - The registered result of M(k26.deploy.sglang_args_check) on the same options; its verdict becomes findings
        (V(K26-SGLANG-REFUSES), V(K26-SGLANG-ABBREVIATION)).
    type: dict
  resolution:
    description:
      - The registered result of M(k26.deploy.sglang_resolve) on the same options. The memory rules
        (V(K26-KV-CACHE), V(K26-MODEL-TOO-LARGE), V(K26-CUDA-GRAPH-PARTIAL)) reason from the figures SGLang itself
        resolved (C(mem_fraction_static), the largest decode CUDA graph); without them they say the figures wait for
        SGLang (this collection keeps no copy of its estimates). SGLang refusing the options is
        V(K26-SGLANG-RESOLUTION).
    type: dict
  rules:
    description:
      - The ids of the rules to evaluate (by default every rule), or a group's name. V(memory) is the rules that
        reason from SGLang's resolved figures, which the deploy evaluates again once SGLang is on the host. An
        unknown id or group is refused.
    type: list
    elements: str
  variables:
    description:
      - Names of the variables set for this host (for example from the C(ansible.builtin.varnames) lookup).
        Those with a prefix of the roles (C(sglang_), C(nvidia_cuda_), C(k26_)) that are not in
        O(known_variables) are findings V(K26-UNKNOWN-VARIABLE) naming the closest known variable.
    type: list
    elements: str
  known_variables:
    description:
      - Every variable the roles and plays read.
    type: list
    elements: str
    default: []
  python_interpreter:
    description:
      - Interpreter SGLang (or the simulator) runs with or whose virtualenv is built from, a path or a name on
        E(PATH). Its version is checked against SGLang's Requires-Python.
    type: str
  python_variable:
    description:
      - Name of the variable that selects O(python_interpreter), for the fix.
    type: str
  python_package:
    description:
      - Package that provides O(python_interpreter) and that the sglang role installs; a missing interpreter is
        then a note, not an error.
    type: str
  python_hint:
    description:
      - Where such an interpreter comes from on this distribution, for the fix.
    type: str
  sglang_venv_python:
    description:
      - Interpreter of an installed SGLang virtualenv; its SGLang's Requires-Python is used when present.
    type: path
  sglang_version:
    description:
      - The SGLang version the host is to run (the C(sglang) role's C(sglang_version)); without an installed SGLang,
        the release this collection is checked against gives the Requires-Python, and the result says which.
    type: str
extends_documentation_fragment:
  - k26.deploy.attributes
  - k26.deploy.attributes.reads_only
seealso:
  - module: k26.deploy.nvidia_gpu_facts
  - module: k26.deploy.sglang_args_check
"""

EXAMPLES = r"""
- name: Preflight checks for the Kimi K2.6 service
  k26.deploy.sglang_preflight:
    options: "{{ sglang_service_effective_options }}"
    expected_gpus: 8
    cache_dir: /var/cache/sglang
    min_cache_free_gb: 50
  register: preflight

- name: Preflight on a simulator host, CUDA graphs off treated as an error
  k26.deploy.sglang_preflight:
    options:
      model-path: /models/Kimi-K2.6
      tp-size: 8
    simulator: true
    check_model: false
    severity_overrides:
      K26-CUDA-GRAPH-OFF: error
"""

RETURN = r"""
k26_bad_input:
  description: Set when the module fails (an error finding, or an unknown rule id or severity); k26deploy reads it as
    bad input (exit code 2).
  returned: failure
  type: bool
  sample: true
findings:
  description: The findings, errors first, then warnings, then notes.
  returned: always
  type: list
  elements: dict
  contains:
    id:
      description: Stable rule id.
      type: str
      returned: always
      sample: K26-CUDA-GRAPH-OFF
    severity:
      description: V(error), V(warning) or V(info).
      type: str
      returned: always
    title:
      description: What the rule checks.
      type: str
      returned: always
    message:
      description: What happens.
      type: str
      returned: always
    fix:
      description: What to change.
      type: str
      returned: always
    evidence:
      description: The options and facts the rule read, by name.
      type: dict
      returned: always
lines:
  description: One line per finding - severity, id, message and fix - errors first.
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
  description: The GPU facts the rules saw (see M(k26.deploy.nvidia_gpu_facts)).
  returned: always
  type: dict
model:
  description:
    - Model directory facts (path, exists, is_dir, has_config, size_bytes, hub_id, files, config); V(null) when not
      checked.
    - C(draft) holds the same facts of the speculative draft model (C(speculative-draft-model-path)), when set.
    - C(config) is what the rules read of the model's C(config.json) (its quantization, and under C(kv) the MLA fields
      the KV cache rule reads, kv_lora_rank, qk_rope_head_dim, num_hidden_layers and max_position_embeddings), or
      V(null).
    - C(files) is the number of files and a digest of their names and sizes, compared across the nodes of a
      multi-node instance.
  returned: always
  type: dict
cache:
  description: Cache directory facts (path, checked_path, free_bytes, min_free_bytes); V(null) without O(cache_dir).
  returned: always
  type: dict
python:
  description: What was found about O(python_interpreter) (interpreter, version, requires, minimum); V(null) without it.
  returned: always
  type: dict
strict:
  description: Whether warnings were made errors.
  returned: always
  type: bool
"""

import hashlib
import json
import os
import re
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_version import SGLANG_REQUIRES_PYTHON, SGLANG_VERSION
from ansible_collections.k26.deploy.plugins.module_utils.k26_preflight_rules import (
    ERROR,
    INFO,
    RULE_GROUPS,
    RULE_IDS,
    SEVERITIES,
    SEVERITY_OFF,
    WARNING,
    args_check_findings,
    build_context,
    by_severity,
    count,
    evaluate,
    format_finding,
    resolution_findings,
    select_rules,
    strict,
    unknown_variable_findings,
)
from ansible_collections.k26.deploy.plugins.module_utils.nvidia_smi import gather_facts
from ansible_collections.k26.deploy.plugins.module_utils.sglang_deepgemm import deciding_config
from ansible_collections.k26.deploy.plugins.module_utils.sglang_perf_facts import kv_config
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import (
    draft_model_path_of, model_path_of, secret_values)


def directory_files(path):
    """(bytes, files) of the regular files under path: file symlinks followed (Hugging Face cache), each inode
    counted once in the bytes; files is a sorted list of (path relative to ``path``, size)."""
    total = 0
    seen = set()
    files = []
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
            if not entry.is_file(follow_symlinks=True):
                continue
            files.append((os.path.relpath(entry.path, path), info.st_size))
            key = (info.st_dev, info.st_ino)
            if key not in seen:
                seen.add(key)
                total += info.st_size
    return total, sorted(files)


def files_digest(files):
    """A short digest of (name, size) pairs: equal on two nodes that hold the same checkpoint, without reading it."""
    text = "".join("%s\0%d\n" % (name, size) for name, size in files)
    return "%d files, sha256 %s" % (len(files), hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])


def model_facts(path):
    if not path:
        return None
    if not os.path.isabs(path) and not os.path.exists(path):
        return {"path": path, "hub_id": True, "exists": None, "is_dir": None, "has_config": None, "size_bytes": None,
                "files": None}
    exists = os.path.exists(path)
    is_dir = os.path.isdir(path)
    size, files = directory_files(path) if is_dir else (None, None)
    has_config = is_dir and os.path.isfile(os.path.join(path, "config.json"))
    return {
        "path": path,
        "hub_id": False,
        "exists": exists,
        "is_dir": is_dir,
        "has_config": has_config,
        "size_bytes": size,
        "files": files_digest(files) if is_dir else None,
        "config": read_model_config(os.path.join(path, "config.json")) if has_config else None,
    }


def read_model_config(path):
    """What the rules read of a model's config.json (sglang_deepgemm.deciding_config, and the KV cache's fields
    under ``kv``: sglang_perf_facts.kv_config), None when unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    return dict(deciding_config(config), kv=kv_config(config))


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


VERSION_PROBE = "import platform; print(platform.python_version())"
REQUIRES_PROBE = "import importlib.metadata as m; print(m.metadata('sglang').get('Requires-Python') or '')"


def probe(module, interpreter, code):
    """stdout of `interpreter -c code`, or None when the interpreter is missing or fails."""
    path = interpreter if os.path.isabs(interpreter) else module.get_bin_path(interpreter)
    if not path or not os.path.exists(path):
        return None
    rc, out, _err = module.run_command([path, "-c", code])
    return out.strip() if rc == 0 else None


def pinned_source(version):
    """Where the Requires-Python of an SGLang not yet installed comes from."""
    if version in (None, SGLANG_VERSION):
        return "sglang %s (pinned)" % SGLANG_VERSION
    return ("sglang %s, the release this collection is checked against (sglang_version is %s, whose own is known "
            "once it is installed)" % (SGLANG_VERSION, version))


def python_facts(module, params):
    """The interpreter's version against SGLang's Requires-Python (the installed package's, else the pinned one's)."""
    interpreter = params["python_interpreter"]
    if not interpreter:
        return None
    requires, source = SGLANG_REQUIRES_PYTHON, pinned_source(params["sglang_version"])
    if params["sglang_venv_python"]:
        installed = probe(module, params["sglang_venv_python"], REQUIRES_PROBE)
        if installed:
            requires, source = installed, "installed sglang in %s" % params["sglang_venv_python"]
    minimum = re.search(r">=\s*([0-9.]+)", requires)
    return {"interpreter": interpreter, "version": probe(module, interpreter, VERSION_PROBE), "requires": requires,
            "requires_source": source, "minimum": minimum.group(1) if minimum else "3.11",
            "variable": params["python_variable"], "installable": bool(params["python_package"]),
            "package": params["python_package"], "hint": params["python_hint"]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            options=dict(type="dict", default={}),
            environment=dict(type="dict", default={}),
            expected_gpus=dict(type="int"),
            check_model=dict(type="bool", default=True),
            model_path=dict(type="path"),
            cache_dir=dict(type="path"),
            min_cache_free_gb=dict(type="float", default=20),
            simulator=dict(type="bool", default=False),
            min_driver_version=dict(type="str", default="580.65.06"),
            mla=dict(type="bool", default=True),
            gpu_facts=dict(type="dict"),
            layout=dict(type="dict"),
            tune_report=dict(type="dict"),
            severity_overrides=dict(type="dict", default={}),
            strict=dict(type="bool", default=False),
            args_check=dict(type="dict"),
            resolution=dict(type="dict"),
            rules=dict(type="list", elements="str"),
            variables=dict(type="list", elements="str"),
            known_variables=dict(type="list", elements="str", default=[]),
            python_interpreter=dict(type="str"),
            python_variable=dict(type="str"),
            python_package=dict(type="str"),
            python_hint=dict(type="str"),
            sglang_venv_python=dict(type="path"),
            sglang_version=dict(type="str"),
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
                         % (", ".join(bad), ", ".join(RULE_IDS), ", ".join(SEVERITIES + (SEVERITY_OFF,))),
                         k26_bad_input=True)

    rules, unknown_rules = select_rules(params["rules"])
    if unknown_rules:
        module.fail_json(msg="rules: unknown rule id(s) or group(s) %s (rules: %s; groups: %s)"
                         % (", ".join(unknown_rules), ", ".join(RULE_IDS), ", ".join(sorted(RULE_GROUPS))),
                         k26_bad_input=True)

    gpu = params["gpu_facts"]
    if not gpu or "gpu_count" not in gpu:
        gpu = gather_facts(lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}))

    model = None
    if params["check_model"]:
        model = model_facts(params["model_path"] or model_path_of(params["options"]))
        if model is None:
            model = {"path": None, "hub_id": False, "exists": False, "is_dir": False, "has_config": False,
                     "size_bytes": None}
        draft = draft_model_path_of(params["options"])
        if draft:
            model["draft"] = model_facts(draft)

    cache = cache_facts(params["cache_dir"], params["min_cache_free_gb"])
    python = python_facts(module, params)
    ctx = build_context(params["options"], gpu=gpu, simulator=params["simulator"],
                        expected_gpus=params["expected_gpus"], model=model, cache=cache,
                        min_driver_version=params["min_driver_version"], mla=params["mla"], python=python,
                        layout=params["layout"], tune=params["tune_report"], environment=params["environment"],
                        resolution=params["resolution"])
    findings = evaluate(ctx, rules=rules, severity_overrides=overrides)
    findings += args_check_findings(params["args_check"] or {})
    findings += resolution_findings(params["resolution"])
    if params["variables"] is not None:
        findings += unknown_variable_findings(params["variables"], params["known_variables"])
    if params["strict"]:
        findings = strict(findings)
    findings = by_severity(findings)
    result = dict(
        changed=False,
        strict=params["strict"],
        python=python,
        findings=findings,
        lines=[format_finding(f) for f in findings],
        error_count=count(findings, ERROR),
        warning_count=count(findings, WARNING),
        info_count=count(findings, INFO),
        rules=[rule.id for rule in rules],
        gpu=gpu,
        model=model,
        cache=cache,
    )
    if result["error_count"]:
        module.fail_json(msg="preflight found %d error(s): %s" % (
            result["error_count"], ", ".join(f["id"] for f in findings if f["severity"] == ERROR)),
            k26_bad_input=True, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
