#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_resolve: SGLang's own resolution of its server arguments for this host's GPUs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_resolve
short_description: Resolve SGLang's server arguments with SGLang's own code for this host's GPUs, without starting it
description:
  - Runs the installed SGLang's own resolution (C(prepare_server_args) then C(resolve_once), what C(sglang serve)
    runs before any worker starts) with the Python of SGLang's virtualenv, for the options given and the model's
    C(config.json) on the host, and reports the numbers SGLang would use, C(mem_fraction_static) (a multimodal
    model's vision-tower factor included), C(chunked_prefill_size), C(max_running_requests), the attention
    backends, the CUDA graphs' largest batches, and who decided each.
  - SGLang's questions about the device (its memory, its compute capability, its platform) are answered from
    O(gpu_facts) (C(nvidia_gpu_facts)), so that nothing touches the GPUs a running server holds; nothing else is
    answered for SGLang.
  - SGLang refusing the options while it resolves them (for example EAGLE3 with pipeline parallelism) is a result
    (RV(ok) false with SGLang's message), not a failure of the module.
  - Secret options are left out of what SGLang is given (they change no figure).
version_added: "0.1.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  options:
    description:
      - SGLang options as a mapping of option name to value (the service's effective options); C(model-path) names
        the model directory whose C(config.json) is read.
    type: dict
    required: true
  python:
    description:
      - Python of SGLang's virtualenv. When it is not there (SGLang not installed yet) nothing runs and RV(skipped)
        says so.
    type: path
    required: true
  gpu_facts:
    description:
      - The host's C(nvidia_gpu) facts; the first GPU's name, memory and compute capability and the GPU count answer
        SGLang's device questions. Without a GPU nothing runs.
    type: dict
    required: true
  timeout:
    description:
      - Seconds the resolution may take.
    type: int
    default: 300
  tmpdir:
    description:
      - Directory for the temporary config file (default the system's temporary directory).
    type: path
attributes:
  check_mode:
    description: Changes nothing, so it runs in check mode too.
extends_documentation_fragment:
  - k26.deploy.attributes
notes:
  - Takes a few seconds (SGLang imports its model registry); preflight runs it where SGLang is installed.
"""

EXAMPLES = r"""
- name: What SGLang would resolve for the service's options on these GPUs
  k26.deploy.sglang_resolve:
    options: "{{ sglang_service_effective_options }}"
    python: /opt/sglang/0.5.23/bin/python
    gpu_facts: "{{ ansible_facts['nvidia_gpu'] }}"
  register: resolution
"""

RETURN = r"""
ok:
  description: Whether SGLang resolved the options (V(false) - it refused them, RV(error) says why).
  returned: always
  type: bool
skipped:
  description:
    - Why nothing ran (no GPU, SGLang not installed, the model's or the speculative draft's C(config.json) not on the
      host), V(null) when it ran.
  returned: always
  type: str
error:
  description: SGLang's own message when it refused the options, or why the resolution did not answer.
  returned: always
  type: str
resolved:
  description:
    - What SGLang resolved - C(mem_fraction_static), C(chunked_prefill_size), C(max_running_requests),
      C(attention_backend), C(cuda_graph) (per phase its backend and largest batch), C(model) (architectures,
      C(is_multimodal), the vision tower, C(num_hidden_layers)), C(draft) (with speculative decoding, the layers of
      the target's KV cache its draft adds to each token, C(kv_layers), as SGLang's model runner reads them from the
      draft's config, or C(error)), C(sources) (which of SGLang's steps decided each), and C(_meta) (timings, the
      device questions SGLang asked).
  returned: when it ran and SGLang resolved the options
  type: dict
  sample:
    mem_fraction_static: 0.806
    chunked_prefill_size: 8192
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import secret_values
from ansible_collections.k26.deploy.plugins.module_utils.sglang_resolution import resolve


def main():
    module = AnsibleModule(
        argument_spec=dict(
            options=dict(type="dict", required=True),
            python=dict(type="path", required=True),
            gpu_facts=dict(type="dict", required=True),
            timeout=dict(type="int", default=300),
            tmpdir=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for secret in secret_values(params["options"]):
        module.no_log_values.add(secret)
    if not os.path.isfile(params["python"]):
        module.exit_json(changed=False, ok=True, resolved=None, error=None,
                         skipped="SGLang is not installed on the host yet (%s)" % params["python"])

    deadline = module.get_bin_path("timeout")

    def runner(argv):
        bounded = [deadline, "--kill-after=10", str(params["timeout"])] + argv if deadline else argv
        return module.run_command(bounded, environ_update={"PYTHONUNBUFFERED": "1", "LC_ALL": "C.UTF-8"})

    result = resolve(runner, params["python"], params["options"], params["gpu_facts"], tmpdir=params["tmpdir"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
