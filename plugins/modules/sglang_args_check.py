#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_args_check: validate SGLang options with SGLang's own parser before a restart."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_args_check
short_description: Check SGLang options with SGLang's own argument parser and config-file merger
description:
  - Writes the options to a private temporary YAML file (mode C(0600), removed afterwards) and reads it the way
    C(python -m sglang.launch_server --config FILE) will at start, with the installed SGLang's own parser
    (C(ServerArgs.add_cli_args)) and config-file merger (C(ConfigArgumentMerger)), run by the Python of SGLang's
    virtualenv.
  - A misspelt or removed option (for instance C(cuda-graph-max-bs), gone since SGLang 0.5.20) fails the task with
    SGLang's own message, before the running service is touched. A key that argparse accepts only as the
    abbreviation of a longer flag passes (SGLang accepts it too) with a warning.
  - With O(simulator) the simulator's C(--sim-check-only) mode is asked instead
    (C(PYTHON SIMULATOR --sim-check-only --config FILE EXTRA...)).
  - Values of secret options (C(api-key), C(admin-api-key), C(ssl-keyfile-password)) never appear in the output.
version_added: "0.1.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  options:
    description:
      - SGLang options as a mapping of option name to value, as rendered into the C(--config) file
        (for example C(pp-size=8), C(disable-decode-cuda-graph=true)).
      - Mutually exclusive with O(config_content).
    type: dict
  config_content:
    description:
      - The exact YAML text of the config file, instead of O(options).
    type: str
  extra_args:
    description:
      - Command-line arguments given after C(--config FILE) (they win over the file).
    type: list
    elements: str
    default: []
  python:
    description:
      - Python of SGLang's virtualenv (the interpreter that runs C(sglang.launch_server)). Required unless
        O(simulator) is given.
    type: path
  simulator:
    description:
      - Path of the SGLang simulator (its package directory, run as C(python DIR)); when given, the simulator's
        C(--sim-check-only) mode checks the options instead of SGLang.
    type: path
  simulator_python:
    description:
      - Interpreter for the simulator; defaults to O(python), then C(/usr/bin/python3).
    type: path
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
  - The check stops after argument parsing; SGLang's post-processing (which inspects the GPU and the model) is not run.
  - SGLang 0.5.23 turns a config key into C(--KEY) as written, so use dashed keys (C(pp-size)); C(pp_size) is refused
    as an unrecognized argument.
"""

EXAMPLES = r"""
- name: Check the rendered options with SGLang itself before restarting
  k26.deploy.sglang_args_check:
    options: "{{ sglang_service_effective_options }}"
    python: /opt/sglang/0.5.23/bin/python

- name: Check the options against the simulator (demo and CI hosts)
  k26.deploy.sglang_args_check:
    options:
      model-path: /models/Kimi-K2.6
      pp-size: 8
    simulator: /opt/sglang/simulator/sglang_simulator
"""

RETURN = r"""
k26_bad_input:
  description: Set when the module fails (SGLang refuses the options, or the interpreter or simulator is missing);
    k26deploy reads it as bad input (exit code 2).
  returned: failure
  type: bool
  sample: true
ok:
  description: Whether SGLang (or the simulator) accepted the options.
  returned: always
  type: bool
error:
  description: >-
    SGLang's own error text, for example C(unrecognized arguments: --pp-async-batch-detph 8) or
    C(ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill);
    V(null) when ok.
  returned: always
  type: str
stage:
  description: Where the check stopped - V(import), V(merge) (config file), V(parse) (argparse), V(run) or V(simulator).
  returned: always
  type: str
sglang_version:
  description: Version of the sglang package that checked the options.
  returned: always
  type: str
  sample: 0.5.23
option_count:
  description: Number of options SGLang's parser knows.
  returned: always
  type: int
parsed:
  description: Options whose parsed value differs from SGLang's default (secrets masked).
  returned: always
  type: dict
abbreviated:
  description: >-
    Flags that SGLang's argparse accepted only as unique prefixes of longer flags (for example
    C(--pp-async-batch-dept) for C(--pp-async-batch-depth)); each also gives a warning.
  returned: always
  type: list
  elements: str
rc:
  description: Exit status of the check process.
  returned: always
  type: int
cmd:
  description: The check command, with the temporary file shown as C(CONFIG.yaml) and the script as C(<script>).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.sglang_args import run_check
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import redact, secret_values, secret_values_in_text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            options=dict(type="dict"),
            config_content=dict(type="str"),
            extra_args=dict(type="list", elements="str", default=[]),
            python=dict(type="path"),
            simulator=dict(type="path"),
            simulator_python=dict(type="path"),
            tmpdir=dict(type="path"),
        ),
        mutually_exclusive=[("options", "config_content")],
        required_one_of=[("options", "config_content"), ("python", "simulator")],
        supports_check_mode=True,
    )
    params = module.params
    secrets = secret_values(params["options"], params["extra_args"]) + secret_values_in_text(params["config_content"])
    for secret in secrets:
        module.no_log_values.add(secret)

    simulator = params["simulator"]
    python = (params["simulator_python"] or params["python"] or "/usr/bin/python3") if simulator else params["python"]
    for path, what, exists in ((python, "interpreter", os.path.isfile), (simulator, "simulator", os.path.exists)):
        if path and not exists(path):
            module.fail_json(msg="%s %s not found" % (what, path), ok=False, error="%s %s not found" % (what, path),
                             k26_bad_input=True)

    def runner(argv):
        return module.run_command(argv, environ_update={"PYTHONUNBUFFERED": "1", "LC_ALL": "C.UTF-8"})

    result, shown = run_check(runner, python, options=params["options"], content=params["config_content"],
                              extra_args=params["extra_args"], simulator=simulator, tmpdir=params["tmpdir"])
    result = redact(result, secrets)
    out = dict(changed=False, cmd=redact(shown, secrets), **result)
    for flag in result.get("abbreviated") or []:
        module.warn("%s is not an SGLang option; argparse accepted it as the abbreviation of a longer flag. "
                    "Spell the option out: the next SGLang release may make it ambiguous." % flag)
    if not result["ok"]:
        module.fail_json(msg="SGLang refuses these options: %s" % result["error"], k26_bad_input=True, **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
