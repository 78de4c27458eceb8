#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_gpu_facts: NVIDIA GPU facts of the target, and optional load sampling."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: Gather NVIDIA GPU, driver, CUDA and NVSwitch facts, and optionally sample GPU load
description:
  - Reads C(nvidia-smi) (per-GPU query and banner), C(/proc/driver/nvidia/version), C(/proc/devices), C(nvcc --version),
    C(/sys/bus/pci/devices) and the Fabric Manager service on the target.
  - A host without C(nvidia-smi), without a loaded driver or without GPUs is reported with RV(gpu_count=0)
    and a reason in RV(nvidia_smi_error); that is a fact, not a failure.
  - With O(sample_seconds) above zero it also samples GPU utilization, power draw and SM clock per GPU
    and returns mean, min and max in RV(sampling).
  - Facts are returned in C(ansible_facts.nvidia_gpu) too.
version_added: "0.1.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  sample_seconds:
    description:
      - Sample utilization, power draw and SM clock for this many seconds. V(0) gathers facts only.
    type: float
    default: 0
  sample_interval:
    description:
      - Seconds between two samples (one C(nvidia-smi --query-gpu) call each).
    type: float
    default: 0.5
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). Searched on E(PATH), then in C(/usr/bin), C(/usr/local/bin), C(/usr/local/nvidia/bin)
        and C(/opt/nvidia/bin) when not given.
    type: path
attributes:
  facts:
    support: full
    description: Sets C(ansible_facts.nvidia_gpu).
extends_documentation_fragment:
  - k26.deploy.attributes
  - k26.deploy.attributes.reads_only
notes:
  - NVSwitch is detected from PCI functions of vendor C(0x10de) and class C(0x0680xx), or from
    C(/dev/nvidia-nvswitchN) device nodes. Fabric Manager counts as installed when C(nv-fabricmanager) or the
    C(nvidia-fabricmanager) unit exists; RV(fabric_manager.active) is V(null) where systemd is not running.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  k26.deploy.nvidia_gpu_facts:
  register: gpu

- name: Show the GPUs
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia_gpu.gpu_count }} x {{ ansible_facts.nvidia_gpu.gpus | map(attribute='name') | unique | join(', ') }}"

- name: Sample GPU load for 10 seconds, twice a second
  k26.deploy.nvidia_gpu_facts:
    sample_seconds: 10
    sample_interval: 0.5
  register: gpu_load

- name: Fail when the GPUs idle during a benchmark
  ansible.builtin.assert:
    that: gpu_load.sampling.gpus | map(attribute='utilization_gpu_pct.mean') | min > 50
"""

RETURN = r"""
gpu_count:
  description: Number of GPUs nvidia-smi lists; V(0) without driver or GPU.
  returned: always
  type: int
  sample: 8
gpus:
  description: One entry per GPU, sorted by index. Fields nvidia-smi reports as C([N/A]) are V(null).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: GPU index.
      type: int
      returned: always
    name:
      description: Product name.
      type: str
      returned: always
      sample: NVIDIA H200
    uuid:
      description: GPU UUID.
      type: str
      returned: always
    pci_bus_id:
      description: PCI bus id.
      type: str
      returned: always
      sample: "00000000:00:06.0"
    memory_total_mib:
      description: Total memory in MiB.
      type: int
      returned: always
      sample: 143771
    compute_capability:
      description: Compute capability as a string (V(null) on drivers older than 510).
      type: str
      returned: always
      sample: "9.0"
    persistence_mode:
      description: Whether persistence mode is enabled.
      type: bool
      returned: always
    power_limit_w:
      description: Power limit in watts.
      type: float
      returned: always
      sample: 700.0
    health:
      description:
        - The GPU's health, from C(nvidia-smi -q -x) (else C(nvidia-smi -q)) and the kernel's NVIDIA events since
          boot (C(/dev/kmsg) read record by record, else C(dmesg), else the journal's kernel messages).
        - C(readings) (uncorrectable ECC errors, volatile and aggregate; pending retired pages and remapped rows; a
          failed remapping; the driver's recovery action; reset required; hardware slowdowns active now), C(events)
          (this GPU's Xid lines, each with its meaning and NVIDIA's immediate action from the Xid catalog),
          C(problems) (V([severity, text]) pairs) and C(verdict) (V(error) for a GPU that needs a reset or a reboot,
          V(warning), V(info), or V(null) when healthy).
      type: dict
      returned: when nvidia-smi lists the GPU
      sample: {"readings": {"ecc_uncorrectable_volatile": 0, "remapped_rows_pending": false, "slowdown": []},
               "events": [], "problems": [], "verdict": null}
kernel_events:
  description: NVIDIA events in the kernel log that belong to no listed GPU (NVSwitch SXids, a GPU gone from the bus).
  returned: always
  type: list
  elements: dict
kernel_log_error:
  description: Why the kernel log could not be read for GPU events (V(null) when it could).
  returned: always
  type: str
driver_version:
  description: NVIDIA driver version.
  returned: always
  type: str
  sample: "580.159.04"
cuda_driver_version:
  description: Highest CUDA version the driver supports (nvidia-smi banner "CUDA Version").
  returned: always
  type: str
  sample: "13.0"
kernel_module:
  description: V(open) or V(proprietary) kernel module from C(/proc/driver/nvidia/version); V(null) when no driver is loaded.
  returned: always
  type: str
  sample: open
kernel_module_version:
  description: Version of the loaded kernel module (C(/proc/driver/nvidia/version)); V(null) when no driver is loaded.
  returned: always
  type: str
  sample: "580.159.04"
pci_gpus:
  description: PCI addresses of the NVIDIA GPUs on the bus, found without any driver (display class C(0x03xxxx)).
  returned: always
  type: list
  elements: str
  sample: ["0000:00:06.0"]
cuda_toolkits:
  description: The versioned CUDA toolkits in C(/usr/local) by release, each with C(home), C(nvcc) and C(build).
  returned: always
  type: dict
  sample: {"13.0": {"home": "/usr/local/cuda-13.0", "nvcc": "/usr/local/cuda-13.0/bin/nvcc", "build": "13.0.88"}}
nvcc_version:
  description: CUDA toolkit release of the first C(nvcc) found (E(PATH), then C(/usr/local/cuda*/bin)).
  returned: always
  type: str
  sample: "13.0"
nvcc_build:
  description: Full nvcc build version.
  returned: always
  type: str
  sample: "13.0.88"
nvcc_path:
  description: Path of the C(nvcc) that was asked.
  returned: always
  type: str
nvidia_smi_path:
  description: Path of the C(nvidia-smi) that was used; V(null) when none was found.
  returned: always
  type: str
nvidia_smi_error:
  description: Why no GPU was listed (no nvidia-smi, driver not loaded, no devices, version mismatch); V(null) when GPUs were found.
  returned: always
  type: str
compute_capabilities:
  description: Distinct compute capabilities of the GPUs, ascending.
  returned: always
  type: list
  elements: str
  sample: ["9.0"]
nvswitch_present:
  description: Whether NVSwitch chips are present.
  returned: always
  type: bool
nvswitch_count:
  description: Number of NVSwitch PCI functions or device nodes found.
  returned: always
  type: int
fabric_manager:
  description: NVIDIA Fabric Manager state.
  returned: always
  type: dict
  contains:
    installed:
      description: C(nv-fabricmanager) or its systemd unit exists.
      type: bool
      returned: always
    active:
      description: The C(nvidia-fabricmanager) unit is active; V(null) when systemd is not running.
      type: bool
      returned: always
    binary:
      description: Path of C(nv-fabricmanager).
      type: str
      returned: always
topology:
  description:
    - How the GPUs are connected, from C(nvidia-smi topo -m) and C(nvidia-smi nvlink -s); the C(sglang_service) role
      chooses tensor or pipeline parallel from it.
  returned: always
  type: dict
  contains:
    links:
      description:
        - The GPU-to-GPU matrix, one row per GPU in index order; V(X) on the diagonal, V(NV<n>) for n bonded NVLinks,
          otherwise the PCIe path (V(PIX), V(PXB), V(PHB), V(NODE), or V(SYS) across NUMA nodes). Empty when unknown.
      type: list
      elements: list
      returned: always
    numa:
      description: Each GPU's NUMA node (V(null) where nvidia-smi prints N/A).
      type: list
      elements: int
      returned: always
    nvlink:
      description: Per GPU, its C(index), the NVLinks it has (C(links)) and how many are up (C(active)).
      type: list
      elements: dict
      returned: always
    error:
      description: Why the topology is unknown (no nvidia-smi, no GPU, no matrix), or V(null).
      type: str
      returned: always
device_groups:
  description: >-
    The NVIDIA and RDMA character-device groups registered in C(/proc/devices), name to major number
    (C(nvidia), C(nvidiactl), C(nvidia-uvm) with the open kernel module; C(nvidia-frontend) with the proprietary one).
  returned: always
  type: dict
  sample: {"nvidia": 195, "nvidiactl": 195, "nvidia-uvm": 238, "nvidia-caps": 241}
service_device_allow:
  description:
    - systemd C(DeviceAllow=) entries that give a service these GPUs (and RDMA devices for NCCL across nodes),
      for the open and the proprietary kernel module alike; empty where no NVIDIA driver is loaded.
  returned: always
  type: list
  elements: str
  sample: ["char-nvidia* rw", "char-infiniband_verbs rw", "/dev/infiniband/rdma_cm rw"]
sampling:
  description: Load samples per GPU; only when O(sample_seconds) is above zero and a GPU was found.
  returned: when sample_seconds > 0 and gpu_count > 0
  type: dict
  contains:
    sample_seconds:
      description: Requested sampling duration.
      type: float
      returned: always
    sample_interval:
      description: Requested interval.
      type: float
      returned: always
    sample_count:
      description: Number of nvidia-smi queries made (raw samples per GPU).
      type: int
      returned: always
    duration_s:
      description: Wall time the sampling took.
      type: float
      returned: always
    errors:
      description: Up to three reasons for failed queries.
      type: list
      elements: str
      returned: always
    gpus:
      description: >-
        Per GPU - C(index), C(samples), C(utilization_gpu_pct), C(power_draw_w), C(clocks_sm_mhz) (each a dict of
        C(mean), C(min), C(max)), C(power_limit_w) and C(power_draw_pct_of_limit).
      type: list
      elements: dict
      returned: always
ansible_facts:
  description: The same facts (without RV(sampling)) under C(nvidia_gpu).
  returned: always
  type: dict
  contains:
    nvidia_gpu:
      description: The facts above.
      type: dict
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.nvidia_smi import gather_facts, sample


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sample_seconds=dict(type="float", default=0),
            sample_interval=dict(type="float", default=0.5),
            nvidia_smi_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    seconds = module.params["sample_seconds"]
    interval = module.params["sample_interval"]
    if seconds < 0 or interval <= 0:
        module.fail_json(msg="sample_seconds must be >= 0 and sample_interval > 0",
                         sample_seconds=seconds, sample_interval=interval)

    def runner(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    facts = gather_facts(runner, nvidia_smi=module.params["nvidia_smi_path"])
    result = dict(changed=False, ansible_facts={"nvidia_gpu": dict(facts)}, **facts)
    if seconds > 0 and facts["gpu_count"] > 0:
        result["sampling"] = sample(runner, facts["nvidia_smi_path"], seconds, interval)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
