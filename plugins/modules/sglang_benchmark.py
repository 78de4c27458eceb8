#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_benchmark: a concurrency sweep against an SGLang endpoint, with GPU sampling per level."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_benchmark
short_description: Measure an SGLang endpoint at several concurrency levels, sampling the GPUs during each
description:
  - Runs NVIDIA AIPerf (C(aiperf profile)) once per concurrency level against the endpoint, on the host that serves
    it so that the network is not measured, with fixed input and output lengths and streaming.
  - While a level runs, samples every GPU's utilization, power and SM clock with C(nvidia-smi) (nothing on hosts
    without one); a level's figures are those of the samples taken while its requests ran (AIPerf's start and end
    are left out).
  - Returns per level output tok/s, per-request tok/s, request throughput, TTFT, TPOT and ITL p50/p90/p99, errors
    and goodput, and the service's journal lines of the benchmark's time (secrets masked).
  - The API key reaches AIPerf on its standard input and is added to its arguments inside its own process, so it
    shows neither in a process list nor in the process's environment (C(/proc/PID/environ)).
  - Changes nothing on the host; in check mode it measures nothing.
version_added: "0.3.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  url:
    description: Base URL of the OpenAI-compatible endpoint (no C(/v1)).
    type: str
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  tokenizer:
    description: Directory of a Hugging Face tokenizer for AIPerf's prompts (the model directory on real hosts).
    type: path
    required: true
  aiperf:
    description: The C(aiperf) executable inside its virtualenv; its C(python) beside it runs AIPerf.
    type: path
    required: true
  levels:
    description: Concurrency levels, in the order they run.
    type: list
    elements: int
    default: [1, 8, 16, 32]
  input_tokens:
    description: Prompt length of every request, in tokens.
    type: int
    default: 256
  output_tokens:
    description: Output length of every request, in tokens (C(ignore_eos) keeps it exact).
    type: int
    default: 128
  requests_per_concurrency:
    description: Requests of a level per unit of its concurrency.
    type: int
    default: 4
  min_requests:
    description: Requests of a level at least.
    type: int
    default: 8
  duration:
    description:
      - Seconds each level sends requests for (responses within AIPerf's grace period count); 0 sends
        O(requests_per_concurrency) requests per unit of concurrency instead.
    type: int
    default: 0
  slos:
    description:
      - Service-level objectives for goodput, in milliseconds, keys C(ttft_ms) and C(tpot_ms). Empty, no goodput.
    type: dict
    default: {}
  api_key:
    description: The endpoint's API key (empty, none).
    type: str
    default: ""
  ca_path:
    description: CA bundle that signed an https endpoint's certificate.
    type: path
  unit:
    description: The service whose journal lines of the benchmark's time are returned (empty, none).
    type: str
    default: ""
  gpu_sample_interval:
    description: Seconds between two GPU samples during a level.
    type: float
    default: 1.0
  level_timeout:
    description: Seconds a level may take before it counts as failed.
    type: int
    default: 1800
  workdir:
    description:
      - Where AIPerf's artifacts of each level are written (a fresh directory under it per run).
      - Made root's alone (0700); one that exists and is not a directory of this user's (another user made it first
        in C(/var/tmp), a link) fails the sweep before anything runs.
    type: path
    default: /var/tmp/k26-benchmark
attributes:
  check_mode:
    description: Measures nothing and changes nothing.
extends_documentation_fragment:
  - k26.deploy.attributes
notes:
  - AIPerf counts output tokens from the server's usage (C(--use-server-token-count)).
"""

EXAMPLES = r"""
- name: Benchmark the endpoint at concurrency 1, 8 and 16
  k26.deploy.sglang_benchmark:
    url: http://127.0.0.1:30000
    model: kimi-k2.6
    tokenizer: /models/Kimi-K2.6
    aiperf: /opt/aiperf/venvs/aiperf-0.13.0/bin/aiperf
    levels: [1, 8, 16]
    api_key: "{{ sglang_service_api_key }}"
    unit: sglang.service
  register: sweep
"""

RETURN = r"""
levels:
  description: One entry per level, in the order run (see module_utils/sglang_benchmark_aiperf.py for the fields).
  returned: success
  type: list
  elements: dict
  sample: [{"concurrency": 1, "output_tokens_per_second": 35.2, "per_request_tokens_per_second": 35.6,
            "requests_per_second": 0.27, "ttft_ms": {"p50": 31.0, "p90": 35.1, "p99": 40.2},
            "tpot_ms": {"p50": 28.1, "p90": 28.4, "p99": 28.9}, "itl_ms": {"p50": 28.0, "p90": 28.6, "p99": 29.3},
            "errors": 0, "requests": 8, "goodput_requests_per_second": 0.27, "gpus": []}]
journal_lines:
  description: The unit's journal lines while the sweep ran, secrets masked (empty without O(unit)).
  returned: success
  type: list
  elements: str
tool:
  description: The load generator and its version.
  returned: success
  type: str
  sample: aiperf 0.13.0
started:
  description: When the sweep began (Unix time).
  returned: success
  type: float
duration:
  description: Seconds the sweep took.
  returned: success
  type: float
decode_graph_max_bs:
  description:
    - The largest decode batch the server captured a CUDA graph for, as its C(/server_info) says (SGLang's own
      resolution), or null when it does not say; decode batches beyond it are diagnosed.
  returned: success
  type: int
  sample: 512
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url
from ansible_collections.k26.deploy.plugins.module_utils import nvidia_smi
from ansible_collections.k26.deploy.plugins.module_utils.k26_files import private_directory
from ansible_collections.k26.deploy.plugins.module_utils.sglang_benchmark_aiperf import (
    EXPORT_FILE,
    LAUNCH_CODE,
    aiperf_argv,
    failed_level,
    level_record,
    profiling_window,
    requests_of,
    server_decode_graph_max_bs,
)
from ansible_collections.k26.deploy.plugins.module_utils.sglang_options import redact, redact_log_line

JOURNAL_MAX_LINES = 2000


class GpuSampler:
    """nvidia-smi every interval from start() until stop(), each sample with its time: the GPUs during a level."""

    def __init__(self, module, interval):
        self.module = module
        self.interval = interval
        self.smi = module.get_bin_path("nvidia-smi")
        self.done = threading.Event()
        self.timed_rows = []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        argv = nvidia_smi.query_argv(self.smi, nvidia_smi.SAMPLE_QUERY_FIELDS)
        while not self.done.is_set():
            taken = time.time()
            rc, out, dummy = self.module.run_command(argv)
            if rc == 0:
                self.timed_rows.extend((taken, row) for row in nvidia_smi.parse_csv(out, nvidia_smi.SAMPLE_QUERY_FIELDS))
            self.done.wait(self.interval)

    def summary(self, window):
        return nvidia_smi.summarize_window(self.timed_rows, *window) if self.timed_rows else []

    def __enter__(self):
        if self.smi:
            self.thread.start()
        return self

    def __exit__(self, *exc_info):
        self.done.set()
        if self.smi:
            self.thread.join(timeout=30)
        return False


def aiperf_environment(params):
    env = dict(os.environ)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # any value makes AIPerf refuse a local tokenizer path
        env.pop(name, None)
    if params["ca_path"]:
        env["SSL_CERT_FILE"] = params["ca_path"]
    return env


def run_level(module, concurrency, workdir):
    params = module.params
    requests = requests_of(concurrency, params["requests_per_concurrency"], params["min_requests"])
    artifacts = os.path.join(workdir, "concurrency-%d" % concurrency)
    argv = aiperf_argv(params["aiperf"], params["url"], params["model"], params["tokenizer"], concurrency, requests,
                       params["input_tokens"], params["output_tokens"], artifacts, slos=params["slos"],
                       duration=params["duration"])
    python = os.path.join(os.path.dirname(params["aiperf"]), "python")
    with GpuSampler(module, params["gpu_sample_interval"]) as sampler:
        try:
            # not run_command: a level must end at its timeout, and AIPerf needs variables removed from its environment
            done = subprocess.run([python, "-c", LAUNCH_CODE] + argv[1:], env=aiperf_environment(params),  # pylint: disable=ansible-bad-function
                                  input=params["api_key"] + "\n", capture_output=True, text=True,
                                  timeout=params["level_timeout"], check=False)
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            output = "timed out after %ds" % params["level_timeout"]
    export_path = os.path.join(artifacts, EXPORT_FILE)
    if not os.path.exists(export_path):
        record = failed_level(concurrency, requests, sampler.summary((None, None)))
        record["aiperf_output"] = redact(output.splitlines()[-20:], [params["api_key"]] if params["api_key"] else [])
        return record
    with open(export_path) as handle:
        export = json.load(handle)
    return level_record(concurrency, export, sampler.summary(profiling_window(export)))


def journal_since(module, unit, started):
    if not unit:
        return []
    rc, out, err = module.run_command(["journalctl", "-u", unit, "--since", "@%d" % int(started), "--no-pager",
                                       "-o", "cat", "-n", str(JOURNAL_MAX_LINES)])
    secrets = [module.params["api_key"]] if module.params["api_key"] else []
    return redact([redact_log_line(line) for line in out.splitlines()], secrets) if rc == 0 else []


def server_decode_graph(module):
    """The server's largest decode CUDA graph from its /server_info (asked with the API key), or None."""
    params = module.params
    headers = {"Authorization": "Bearer %s" % params["api_key"]} if params["api_key"] else {}
    response, info = fetch_url(module, params["url"].rstrip("/") + "/server_info", headers=headers, timeout=30,
                               ca_path=params["ca_path"])
    if info.get("status") != 200 or response is None:
        return None
    try:
        return server_decode_graph_max_bs(json.loads(response.read()))
    except ValueError:
        return None


def check_params(module):
    params = module.params
    if not params["levels"] or min(params["levels"]) < 1:
        module.fail_json(msg="levels must list concurrencies of 1 or more, got %r" % (params["levels"],))
    if params["duration"] < 0:
        module.fail_json(msg="duration must be 0 (a request count per level) or more seconds, got %r" % params["duration"])
    for name in ("input_tokens", "output_tokens", "requests_per_concurrency", "min_requests", "level_timeout"):
        if params[name] < 1:
            module.fail_json(msg="%s must be at least 1, got %r" % (name, params[name]))
    if not os.access(params["aiperf"], os.X_OK):
        module.fail_json(msg="AIPerf is not installed at %s (the sglang_benchmark role installs it)" % params["aiperf"])
    if not any(os.path.exists(os.path.join(params["tokenizer"], name))
               for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        module.fail_json(msg="%s holds no Hugging Face tokenizer (tokenizer.json, tokenizer_config.json or "
                             "tokenizer.model): point sglang_benchmark_tokenizer at one" % params["tokenizer"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            tokenizer=dict(type="path", required=True),
            aiperf=dict(type="path", required=True),
            levels=dict(type="list", elements="int", default=[1, 8, 16, 32]),
            input_tokens=dict(type="int", default=256, no_log=False),
            output_tokens=dict(type="int", default=128, no_log=False),
            requests_per_concurrency=dict(type="int", default=4),
            min_requests=dict(type="int", default=8),
            duration=dict(type="int", default=0),
            slos=dict(type="dict", default={}),
            api_key=dict(type="str", default="", no_log=True),
            ca_path=dict(type="path"),
            unit=dict(type="str", default=""),
            gpu_sample_interval=dict(type="float", default=1.0),
            level_timeout=dict(type="int", default=1800),
            workdir=dict(type="path", default="/var/tmp/k26-benchmark"),
        ),
        supports_check_mode=True,
    )
    check_params(module)
    if module.check_mode:
        module.exit_json(changed=False, levels=[], journal_lines=[], tool="", started=time.time(), duration=0.0,
                         decode_graph_max_bs=None)
    started = time.time()
    problem = private_directory(module.params["workdir"])
    if problem:
        module.fail_json(msg="workdir: %s" % problem)
    workdir = tempfile.mkdtemp(prefix="sweep-", dir=module.params["workdir"])
    try:
        levels = [run_level(module, concurrency, workdir) for concurrency in module.params["levels"]]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rc, version, err = module.run_command([os.path.join(os.path.dirname(module.params["aiperf"]), "python"), "-c",
                                           "from importlib.metadata import version; print(version('aiperf'))"])
    module.exit_json(changed=False, levels=levels, journal_lines=journal_since(module, module.params["unit"], started),
                     tool="aiperf %s" % (version.strip() if rc == 0 else "?"), started=started,
                     duration=round(time.time() - started, 1), decode_graph_max_bs=server_decode_graph(module))


if __name__ == "__main__":
    main()
