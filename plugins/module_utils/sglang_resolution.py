# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run SGLang's own server-argument resolution (sglang_resolver.py, by the Python of SGLang's virtualenv) for an
option mapping and a host's GPU facts, and read its answer. Used by the sglang_resolve module and its tests."""

from __future__ import annotations

import inspect
import json
import os

from ansible_collections.k26.deploy.plugins.module_utils import sglang_args, sglang_options, sglang_resolver

RESULT_MARKER = sglang_resolver.RESULT_MARKER


def resolver_source():
    """The resolver's text, handed to SGLang's interpreter as ``python -c``."""
    return inspect.getsource(sglang_resolver)


def gpu_request(gpu_facts):
    """The resolver's ``gpu`` from nvidia_gpu_facts (the first GPU's name, memory and compute capability, the count),
    or None without a GPU."""
    gpus = (gpu_facts or {}).get("gpus") or []
    if not gpus:
        return None
    first = gpus[0]
    capability = [int(part) for part in str(first.get("compute_capability") or "9.0").split(".")[:2]]
    return {"name": first.get("name") or "NVIDIA GPU", "memory_mib": first.get("memory_total_mib"),
            "capability": capability, "count": int((gpu_facts or {}).get("gpu_count") or len(gpus))}


def has_config(path):
    """Whether a model directory's config.json is on this host."""
    return bool(path) and os.path.isfile(os.path.join(str(path), "config.json"))


def model_dir(options):
    """The model directory the options name, when its config.json is on this host (else None)."""
    path = sglang_options.model_path_of(options)
    return path if has_config(path) else None


def parse_output(rc, out, err):
    """{ok, resolved, error} from the resolver's output."""
    for line in reversed((out or "").splitlines()):
        if line.startswith(RESULT_MARKER):
            answer = json.loads(line[len(RESULT_MARKER):])
            if "error" in answer:
                return {"ok": False, "resolved": None, "error": answer["error"]}
            return {"ok": True, "resolved": answer, "error": None}
    tail = "\n".join((err or out or "").strip().splitlines()[-5:])
    return {"ok": False, "resolved": None, "error": "the resolution did not answer (rc=%s): %s" % (rc, tail)}


def resolve(runner, python, options, gpu_facts, tmpdir=None):
    """SGLang's resolution of ``options`` (secret ones left out: they change no figure) for these GPUs, through
    runner(argv) -> (rc, out, err): {ok, resolved, error, skipped}; skipped names why it did not run."""
    gpu = gpu_request(gpu_facts)
    path = model_dir(options)
    if gpu is None or not gpu.get("memory_mib"):
        return {"ok": True, "resolved": None, "error": None, "skipped": "no GPU in the facts"}
    if path is None:
        return {"ok": True, "resolved": None, "error": None, "skipped": "the model's config.json is not on the host"}
    draft = sglang_options.draft_model_path_of(options)
    if draft and not has_config(draft):  # SGLang reads it while resolving (offline here: nothing is fetched)
        return {"ok": True, "resolved": None, "error": None,
                "skipped": "the draft model's config.json is not on the host (%s)" % draft}
    config = sglang_args.write_private_config(options=sglang_options.without_secrets(options), directory=tmpdir)
    try:
        request = {"model_path": str(path), "argv": ["--config", config], "gpu": gpu}
        rc, out, err = runner([python, "-c", resolver_source(), json.dumps(request)])
    finally:
        os.unlink(config)
    return dict(parse_output(rc, out, err), skipped=None)
