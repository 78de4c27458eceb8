"""The unit's GPU device access, against recorded /proc/devices layouts of both NVIDIA kernel-module flavours.

The chain under test is the real one: /proc/devices text -> nvidia_gpu_facts' module_utils (device groups and
DeviceAllow entries) -> the sglang_service role's vars and unit template rendered by ansible-playbook -> what
systemd admits when the unit starts, which is emulated here the way systemd does it: every ``char-NAME`` entry
is matched with fnmatch against the names of /proc/devices and admits their majors (src/core/bpf-devices.c).

OPEN_MODULE was recorded on the device tool's H200; PROPRIETARY_MODULE is that host with the proprietary module's
group names instead, and without RDMA.
"""
import fnmatch
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.k26.deploy.plugins.module_utils import nvidia_smi as smi
from ansible_collections.k26.deploy.plugins.module_utils import systemd_unit_values

ROOT = Path(__file__).resolve().parents[2]
RENDER = ROOT / "tests" / "fixtures" / "playbooks" / "render_unit.yml"
ANSIBLE_PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"

# Recorded on the device tool's H200 (driver 580.159.04, open kernel module, InfiniBand verbs loaded), 2026-12-01.
OPEN_MODULE = """Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  4 ttyS
  5 /dev/tty
  5 /dev/console
  5 /dev/ptmx
  7 vcs
 10 misc
 13 input
128 ptm
136 pts
195 nvidia
195 nvidiactl
203 cpu/cpuid
231 infiniband_mad
231 infiniband_verbs
238 nvidia-uvm
239 nvidia-nvswitch
240 nvidia-nvlink
241 nvidia-caps
242 nvidia-caps-imex-channels
243 hidraw
244 infiniband_verbs
245 infiniband_mad
246 macvtap
247 mei
248 bsg
249 watchdog
250 ptp
251 pps
252 dax
253 dimmctl
254 ndctl

Block devices:
  7 loop
253 zram
254 virtblk
"""
# The same host with the proprietary 580 module (it registers major 195 once, as "nvidia-frontend") and no RDMA.
PROPRIETARY_MODULE = "".join(
    line + "\n" for line in OPEN_MODULE.splitlines()
    if not any(name in line for name in ("nvidia", "infiniband"))).replace(
    "128 ptm\n", "128 ptm\n195 nvidia-frontend\n236 nvidia-nvswitch\n237 nvidia-nvlink\n238 nvidia-caps\n239 nvidia-uvm\n")
NO_DRIVER = "".join(line + "\n" for line in PROPRIETARY_MODULE.splitlines() if "nvidia" not in line)
# What the unit allowed before: the proprietary module's names only.
OLD_ENTRIES = ["char-nvidia-frontend rw", "char-nvidia-uvm rw", "char-nvidia-caps rw", "char-nvidia-nvswitch rw",
               "char-nvidia-nvlink rw"]


def majors(layout, prefix):
    return {major for name, major in smi.parse_proc_devices(layout) if name.startswith(prefix)}


def admitted_majors(entries, layout):
    """The majors systemd admits for DeviceAllow=char-GLOB entries, given /proc/devices."""
    devices = smi.parse_proc_devices(layout)
    admitted = set()
    for entry in entries:
        spec = entry.split()[0]
        if spec.startswith("char-"):
            admitted |= {major for name, major in devices if fnmatch.fnmatchcase(name, spec[len("char-"):])}
    return admitted


def render_unit(tmp_path, layout, rdma_cm=False, extra=()):
    """Render the role's unit for a host with this /proc/devices; return its lines."""
    char_devices = smi.parse_proc_devices(layout)
    facts = {"device_groups": smi.device_groups(char_devices),
             "service_device_allow": smi.service_device_allow(char_devices, rdma_cm)}
    dest = tmp_path / "sglang.service"
    facts_file = tmp_path / "facts.json"
    facts_file.write_text(json.dumps({"nvidia_gpu": facts}))
    proc = subprocess.run([str(ANSIBLE_PLAYBOOK), str(RENDER), "-e", "unit_dest=%s" % dest,
                           "-e", "@%s" % facts_file, *extra],
                          cwd=ROOT, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return dest.read_text().splitlines()


def device_allow(lines):
    return [line.split("=", 1)[1] for line in lines if line.startswith("DeviceAllow=")]


@pytest.mark.parametrize("layout, groups", [
    pytest.param(OPEN_MODULE, {"nvidia": 195, "nvidiactl": 195, "nvidia-uvm": 238, "nvidia-nvswitch": 239,
                               "nvidia-nvlink": 240, "nvidia-caps": 241, "nvidia-caps-imex-channels": 242,
                               "infiniband_mad": 245, "infiniband_verbs": 244}, id="open"),
    pytest.param(PROPRIETARY_MODULE, {"nvidia-frontend": 195, "nvidia-nvswitch": 236, "nvidia-nvlink": 237,
                                      "nvidia-caps": 238, "nvidia-uvm": 239}, id="proprietary"),
    pytest.param(NO_DRIVER, {}, id="no driver"),
])
def test_device_groups_from_proc_devices(layout, groups):
    assert smi.device_groups(smi.parse_proc_devices(layout)) == groups


def test_block_devices_are_not_character_devices():
    names = [name for name, dummy in smi.parse_proc_devices(OPEN_MODULE)]
    assert "loop" not in names and "sd" not in names and "nvidia-uvm" in names


@pytest.mark.parametrize("layout", [OPEN_MODULE, PROPRIETARY_MODULE], ids=["open", "proprietary"])
def test_rendered_unit_admits_exactly_the_nvidia_devices(tmp_path, layout):
    lines = render_unit(tmp_path, layout)
    entries = device_allow(lines)
    assert "DevicePolicy=closed" in lines and "PrivateDevices=yes" not in lines
    assert admitted_majors(entries, layout) == majors(layout, "nvidia") | majors(layout, "infiniband_verbs")
    assert 195 in admitted_majors(entries, layout)


def test_the_old_list_shut_the_open_module_out():
    """The regression this file exists for: major 195 (nvidia, nvidiactl, nvidiaN) was never admitted."""
    assert 195 not in admitted_majors(OLD_ENTRIES, OPEN_MODULE)
    assert 195 in admitted_majors(OLD_ENTRIES, PROPRIETARY_MODULE)


def test_rdma_devices_for_nccl_across_nodes(tmp_path):
    entries = device_allow(render_unit(tmp_path, OPEN_MODULE, rdma_cm=True))
    assert entries == ["char-nvidia* rw", "char-infiniband_verbs rw", "/dev/infiniband/rdma_cm rw"]
    assert admitted_majors(entries, OPEN_MODULE) == majors(OPEN_MODULE, "nvidia") | {231, 244}
    assert device_allow(render_unit(tmp_path, PROPRIETARY_MODULE)) == ["char-nvidia* rw"]


def test_no_driver_means_private_devices(tmp_path):
    lines = render_unit(tmp_path, NO_DRIVER)
    assert device_allow(lines) == [] and "PrivateDevices=yes" in lines and "DevicePolicy=closed" in lines


def test_device_access_can_be_refused(tmp_path):
    lines = render_unit(tmp_path, OPEN_MODULE, extra=("-e", "sglang_service_nvidia_devices=false"))
    assert device_allow(lines) == [] and "PrivateDevices=yes" in lines


def test_the_unit_writes_the_hardening_list_the_precompile_gets(tmp_path):
    lines = render_unit(tmp_path, OPEN_MODULE)
    start = lines.index("# (plugins/module_utils/systemd_unit_values.py service_hardening)") + 1
    written = [line.split("=", 1) for line in lines[start:lines.index("[Install]") - 1]]
    defaults = yaml.safe_load((ROOT / "roles" / "sglang_service" / "defaults" / "main.yml").read_text())
    expected = systemd_unit_values.service_hardening(
        ["/var/cache/sglang", "/var/lib/sglang", "/var/cache/sglang/huggingface"], "yes",
        defaults["sglang_service_syscall_deny"], defaults["sglang_service_syscall_allow"], [],
        device_allow(lines))
    assert written == expected and ["PrivateUsers", "yes"] in written and len(device_allow(lines)) > 1
