# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The performance model: how long a decode step takes, and how much GPU memory the weights take.

Performance model (CPU mode, ``--sim-tokens-per-second model``): every running request gets one token per decode
step, timed on SGLang 0.5.23's semantics for Kimi K2.6 on 8 GPUs of the RTX PRO 6000 class (PerformanceModel):

- decode is bound by reading weights: a layer costs weight_ms / tp plus request_ms x batch / tp (each request
  activates its own experts), plus the launch cost of a layer (small with decode CUDA graphs, large without), plus
  with tp > 1 the layer's two all-reduces, costed by the link (PCIe, NVLink);
- the pipeline scheduler keeps pp_size + pp-async-batch-depth micro-batch slots (scheduler_pp_mixin.py
  init_pp_loop_state), so with R requests min(R, pp + depth) micro-batches are in flight and a step cycle is the
  longer of one micro-batch's pass through the stages and the last stage's work for all of them; the last stage
  also processes each micro-batch's outputs serially (PP turns the overlap schedule off), and a depth >= 1 lets part
  of that overlap other micro-batches' GPU work (event_loop_pp's docstring); with one request there is nothing to
  overlap, whatever the depth;
- with pp-size 1 the overlap schedule hides the CPU's work behind the GPU's.

The constants are fitted to the published measurements of that machine class (the seed's PP8 runs, SGLang and
vLLM TP8; module_utils/sglang_perf_facts.py MEASUREMENTS, held within 30% in tests/unit/test_simulator_performance.py).
They describe that machine class, not any other.
"""

import math
from dataclasses import dataclass

from .checks import plan_cuda_graphs


GPU_AVAIL_GB = 93.72
CHECKPOINT_GB = 594.0


@dataclass(frozen=True)
class PerformanceModel:
    """How long one decode step takes (the module docstring says what it stands for)."""
    pp_size: int
    async_batch_depth: int
    decode_graphs: bool
    tp_size: int = 1
    link: str = "pcie"

    LAYERS = 61  # Kimi K2.6's decoder layers
    WEIGHT_MS = 0.10  # per layer and step on one GPU: the weights every token needs (attention, shared expert)
    REQUEST_MS = 0.20  # per layer, step and request on one GPU: the experts a request activates
    LAUNCH_MS = {True: 0.059, False: 0.262}  # per layer and step: with decode CUDA graphs / launched eagerly
    # per layer and step with tp > 1: two all-reduces. PCIe fitted to the TP8 rows; the custom all-reduce to the
    # patched SGLang row; NVLink is not in the measurements (an estimate, used only to order layouts).
    ALLREDUCE_MS = {"pcie": 0.097, "pcie-custom-allreduce": 0.066, "nvlink": 0.02}
    OUTPUT_MS = 6.17  # per micro-batch and step on the last stage: output processing, serial with PP
    DEPTH_HIDES = 0.41  # share of it that a depth >= 1 overlaps with other micro-batches (fitted to the seed's C=16)

    @classmethod
    def of(cls, args, link="pcie"):
        return cls(args.pp_size, args.pp_async_batch_depth, plan_cuda_graphs(args)[0], args.tp_size, link)

    def micro_batches(self, running):
        """Micro-batches in flight: SGLang's pp_size + depth slots, as many as there are requests to fill them."""
        if self.pp_size <= 1:
            return 1
        return max(1, min(running, self.pp_size + max(self.async_batch_depth, 0)))

    def layer_ms(self, batch):
        tp = max(self.tp_size, 1)
        allreduce = self.ALLREDUCE_MS[self.link] if tp > 1 else 0.0
        return (self.WEIGHT_MS + self.REQUEST_MS * batch) / tp + self.LAUNCH_MS[self.decode_graphs] + allreduce

    def stage_ms(self, batch):
        return self.LAYERS / max(self.pp_size, 1) * self.layer_ms(batch)

    def step_seconds(self, running):
        running = max(running, 1)
        slots = self.micro_batches(running)
        batch = math.ceil(running / slots)
        stage = self.stage_ms(batch)
        if self.pp_size <= 1:  # the overlap schedule: the CPU prepares the next step while the GPU runs this one
            return max(stage, self.OUTPUT_MS) / 1000
        hidden = self.DEPTH_HIDES if self.async_batch_depth > 0 and slots > 1 else 0.0
        last = stage + self.OUTPUT_MS * (1 - hidden)
        one_pass = (self.pp_size - 1) * stage + last
        return max(one_pass, slots * last) / 1000

    def throughput(self, running):
        """Output tokens per second of all RUNNING requests together."""
        return running / self.step_seconds(running) if running > 0 else 0.0


def weight_gb(args):
    return min(CHECKPOINT_GB / (args.tp_size * args.pp_size), GPU_AVAIL_GB * 0.8)
