# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read NVIDIA GPU facts from nvidia-smi, /proc and /sys; sample load. Shared by nvidia_gpu_facts and sglang_preflight.

Parsing is pure (text in, dicts out) so that it can be tested on recorded output. Gathering takes a
``runner`` callable ``runner(argv) -> (rc, stdout, stderr)`` (AnsibleModule.run_command fits) and a small
``host`` object for file-system access, so that it can be tested without a GPU.

No nvidia-smi, no driver, no GPU: gpu_count 0 is a fact, never an exception.
"""

from __future__ import annotations

import csv
import fnmatch
import glob
import os
import re
import time

from ansible_collections.k26.deploy.plugins.module_utils import nvidia_health

# --query-gpu field -> (key in the facts, converter name)
GPU_QUERY_FIELDS = (
    ("index", "index", "int"),
    ("name", "name", "str"),
    ("uuid", "uuid", "str"),
    ("pci.bus_id", "pci_bus_id", "str"),
    ("memory.total", "memory_total_mib", "int"),
    ("compute_cap", "compute_capability", "str"),
    ("persistence_mode", "persistence_mode", "bool"),
    ("power.limit", "power_limit_w", "float"),
    ("driver_version", "driver_version", "str"),
)

SAMPLE_QUERY_FIELDS = (
    ("index", "index", "int"),
    ("utilization.gpu", "utilization_gpu_pct", "float"),
    ("power.draw", "power_draw_w", "float"),
    ("clocks.sm", "clocks_sm_mhz", "float"),
    ("power.limit", "power_limit_w", "float"),
)
SAMPLE_METRICS = ("utilization_gpu_pct", "power_draw_w", "clocks_sm_mhz")

NVIDIA_SMI_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/opt/nvidia/bin")
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
SYS_PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_PCI_VENDOR = "0x10de"
# PCI class 0x03xxxx: display controllers (the GPUs, found without any driver).
GPU_PCI_CLASS_PREFIX = "0x03"
# PCI class 0x0680xx: bridge, "other". NVSwitch chips present themselves with it (HGX/DGX baseboards).
NVSWITCH_PCI_CLASS_PREFIX = "0x0680"
CUDA_TOOLKIT_GLOB = "/usr/local/cuda-*/bin/nvcc"
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"
FABRIC_MANAGER_BINARY = "nv-fabricmanager"
FABRIC_MANAGER_UNIT_DIRS = ("/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")

# Character-device groups, as the kernel registers them in /proc/devices (what systemd's DeviceAllow=char-NAME
# matches, with shell globs, when a unit starts). The NVIDIA driver's names differ by flavour: the open module
# registers "nvidia", "nvidiactl", "nvidia-uvm", "nvidia-caps", ...; the proprietary one "nvidia-frontend",
# "nvidia-uvm", ... Every one of them starts with "nvidia".
PROC_DEVICES = "/proc/devices"
NVIDIA_DEVICE_GROUP_GLOB = "nvidia*"
# RDMA for NCCL across nodes: the verbs devices have a group of their own; rdma_cm is a misc device (major 10,
# shared with unrelated devices), so it is allowed by its path only.
RDMA_DEVICE_GROUP = "infiniband_verbs"
RDMA_DEVICE_DIR = "/dev/infiniband"
RDMA_CM_DEVICE = RDMA_DEVICE_DIR + "/rdma_cm"

# Values nvidia-smi prints when a field has no value on this GPU/driver.
_MISSING = frozenset(("", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]",
                      "[insufficient permissions]", "[gpu is lost]", "[requested functionality has been deprecated]"))


def parse_value(raw, kind):
    """Convert one nvidia-smi CSV cell; every 'no value' spelling becomes None."""
    if raw is None:
        return None
    text = raw.strip()
    if text.lower() in _MISSING or text.startswith("[") and text.endswith("]"):
        return None
    try:
        if kind == "int":
            return int(float(text))
        if kind == "float":
            return float(text)
    except ValueError:
        return None
    if kind == "bool":
        low = text.lower()
        if low in ("enabled", "yes", "on", "true", "1"):
            return True
        if low in ("disabled", "no", "off", "false", "0"):
            return False
        return None
    return text


def parse_csv(text, fields):
    """Parse ``--format=csv,noheader,nounits`` output for the given field table into a list of dicts.

    Lines that do not have one cell per field (messages such as "No devices were found") are skipped.
    """
    rows = []
    lines = [line for line in (text or "").splitlines() if line.strip()]
    for cells in csv.reader(lines, skipinitialspace=True):
        if len(cells) != len(fields):
            continue
        rows.append({key: parse_value(cell, kind) for cell, (_field, key, kind) in zip(cells, fields)})
    return rows


def query_argv(nvidia_smi, fields):
    return [nvidia_smi, "--query-gpu=" + ",".join(field for field, _key, _kind in fields),
            "--format=csv,noheader,nounits"]


def parse_gpu_query(text):
    """Per-GPU facts from the --query-gpu output (GPU_QUERY_FIELDS order), sorted by index."""
    return sorted(parse_csv(text, GPU_QUERY_FIELDS), key=lambda gpu: (gpu["index"] is None, gpu["index"]))


_BANNER_DRIVER = re.compile(r"Driver Version:\s*([0-9][0-9.]*)")
_BANNER_CUDA = re.compile(r"CUDA Version:\s*([0-9][0-9.]*)")
_BANNER_SMI = re.compile(r"NVIDIA-SMI\s+([0-9][0-9.]*)")


def parse_banner(text):
    """Driver and CUDA (driver API) versions from the plain `nvidia-smi` banner; None where absent."""
    text = text or ""
    found = {}
    for key, pattern in (("nvidia_smi_version", _BANNER_SMI), ("driver_version", _BANNER_DRIVER),
                         ("cuda_driver_version", _BANNER_CUDA)):
        match = pattern.search(text)
        found[key] = match.group(1) if match else None
    return found


def parse_kernel_module(text):
    """'open', 'proprietary' or None from /proc/driver/nvidia/version (None: no driver loaded)."""
    if not text or "NVRM" not in text:
        return None
    return "open" if "Open Kernel Module" in text else "proprietary"


_KERNEL_MODULE_VERSION = re.compile(r"NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")


def parse_kernel_module_version(text):
    """'580.159.04' from /proc/driver/nvidia/version; None when no driver is loaded."""
    match = _KERNEL_MODULE_VERSION.search(text or "")
    return match.group(1) if match else None


_NVCC_RELEASE = re.compile(r"release\s+([0-9]+\.[0-9]+)\s*,\s*V([0-9][0-9.]*)")


def parse_nvcc_version(text):
    """('13.0', '13.0.88') from `nvcc --version`; (None, None) when not recognised."""
    match = _NVCC_RELEASE.search(text or "")
    if not match:
        return None, None
    return match.group(1), match.group(2)


# `nvidia-smi topo -m`: how two GPUs are connected, from the best to the worst (nvidia-smi's legend). NV#: # bonded
# NVLinks; PIX: at most one PCIe bridge; PXB: several bridges; PHB: a PCIe host bridge (the CPU); NODE: host bridges
# within a NUMA node; SYS: across NUMA nodes (the inter-socket link, SMP).
PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS")
_TOPO_GPU = re.compile(r"^GPU(\d+)$")
_SGR = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the column names, also into a pipe or file
_COLUMN = re.compile(r"^(GPU\d+|NIC\d+|mlx\w+|CPU)$")
_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*)$")


def parse_topology_matrix(text):
    """``nvidia-smi topo -m`` -> {"links": [[entry, ...], ...] between GPUs ("X" on the diagonal), "numa": [node or
    None per GPU]}, or None when there is no GPU matrix. NIC columns are left out."""
    lines = [line for line in _SGR.sub("", text or "").splitlines() if line.strip()]
    header = next((line for line in lines if _is_topology_header(line.split())), None)
    if header is None:
        return None
    columns = header.split()
    gpu_columns = [i for i, name in enumerate(columns) if _TOPO_GPU.match(name)]
    link_columns = len([name for name in columns if _COLUMN.match(name) and name != "CPU"])
    numa_at = _numa_column(columns, link_columns)
    links, numa = [], []
    for line in lines:
        cells = line.split()
        if line is header or not _TOPO_GPU.match(cells[0]) or len(cells) < 1 + len(gpu_columns):
            continue
        links.append([cells[1 + i] for i in gpu_columns])
        numa.append(_int_or_none(cells[1 + numa_at]) if numa_at is not None and len(cells) > 1 + numa_at else None)
    if not links or any(len(row) != len(links) for row in links):
        return None
    return {"links": links, "numa": numa}


def _is_topology_header(tokens):
    """The column names start with GPU0; a row of the matrix starts with GPUn and a link entry (X on the diagonal)."""
    return tokens[0] == "GPU0" and (len(tokens) == 1 or _COLUMN.match(tokens[1]) is not None)


def _numa_column(columns, link_columns):
    """Index (among a row's cells after its name) of "NUMA Affinity": the link columns, "CPU Affinity", then it."""
    joined = " ".join(columns)
    if "NUMA Affinity" not in joined:
        return None
    return link_columns + 1


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> [{"index", "links", "active"}] per GPU (a link shown <inactive> is not active)."""
    gpus = []
    for line in (text or "").splitlines():
        gpu = _NVLINK_GPU.match(line.strip())
        if gpu:
            gpus.append({"index": int(gpu.group(1)), "links": 0, "active": 0})
            continue
        link = _NVLINK_LINK.match(line)
        if link and gpus:
            gpus[-1]["links"] += 1
            if "inactive" not in link.group(2).lower():
                gpus[-1]["active"] += 1
    return gpus


def gather_topology(runner, nvidia_smi):
    """The GPUs' interconnect as data (see parse_topology_matrix), with each GPU's NVLinks; an "error" instead
    when nvidia-smi could not say."""
    rc, out, err = runner([nvidia_smi, "topo", "-m"])
    matrix = parse_topology_matrix(out) if rc == 0 else None
    if matrix is None:
        return {"links": [], "numa": [], "nvlink": [],
                "error": (err or out or "").strip()[:300] or "nvidia-smi topo -m listed no GPU matrix"}
    rc, out, err = runner([nvidia_smi, "nvlink", "-s"])
    matrix["nvlink"] = parse_nvlink_status(out) if rc == 0 else []
    matrix["error"] = None
    return matrix


def nvidia_pci_functions(pci_devices, class_prefix):
    """Sorted addresses of the NVIDIA PCI functions of a class, from [(address, vendor, class), ...]."""
    return sorted(address for address, vendor, pci_class in pci_devices
                  if (vendor or "").strip().lower() == NVIDIA_PCI_VENDOR
                  and (pci_class or "").strip().lower().startswith(class_prefix))


def classify_smi_failure(rc, out, err):
    """A short, stable reason for an nvidia-smi that answered without GPU rows."""
    text = "%s\n%s" % (out or "", err or "")
    low = text.lower()
    if "no devices were found" in low:
        return "no devices were found"
    if "driver/library version mismatch" in low:
        return "driver/library version mismatch (driver upgraded without reboot?)"
    if "couldn't communicate with the nvidia driver" in low or "could not communicate" in low:
        return "nvidia-smi could not communicate with the NVIDIA driver (driver not loaded?)"
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return "nvidia-smi exited with %s: %s" % (rc, first[:300]) if rc else (first[:300] or None)


def parse_proc_devices(text):
    """[(name, major)] of the character devices in /proc/devices (the block devices are left out)."""
    devices = []
    for line in (text or "").splitlines():
        if line.strip().lower().startswith("block devices"):
            break
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            devices.append((parts[1], int(parts[0])))
    return devices


def device_groups(char_devices):
    """{name: major} of the NVIDIA and RDMA groups among [(name, major)]."""
    return {name: major for name, major in char_devices
            if fnmatch.fnmatchcase(name, NVIDIA_DEVICE_GROUP_GLOB) or name.startswith("infiniband")}


def service_device_allow(char_devices, rdma_cm_present):
    """systemd DeviceAllow= entries that give a service the GPUs (and RDMA) of a host with these devices.

    One glob for the NVIDIA driver: systemd resolves it against /proc/devices when the unit starts, so it admits
    exactly the NVIDIA groups registered then, for the open and the proprietary module alike, and a module loaded
    after this was computed (nvidia-uvm is often loaded on first use) is still covered. Empty without an NVIDIA
    driver: the service then gets PrivateDevices instead.
    """
    names = [name for name, _major in char_devices]
    if not any(fnmatch.fnmatchcase(name, NVIDIA_DEVICE_GROUP_GLOB) for name in names):
        return []
    entries = ["char-%s rw" % NVIDIA_DEVICE_GROUP_GLOB]
    if RDMA_DEVICE_GROUP in names:
        entries.append("char-%s rw" % RDMA_DEVICE_GROUP)
    if rdma_cm_present:
        entries.append("%s rw" % RDMA_CM_DEVICE)
    return entries


def version_tuple(version):
    """'580.65.06' -> (580, 65, 6); None or junk -> None. The one version helper of the collection."""
    if version is None:
        return None
    parts = re.findall(r"\d+", str(version))
    return tuple(int(part) for part in parts) if parts else None


def version_at_least(version, minimum):
    """version >= minimum, numerically and with missing parts as 0 ('580.95' >= '580.65.06'); unknown -> False."""
    have, need = version_tuple(version), version_tuple(minimum)
    if have is None or need is None:
        return False
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def _stats(values):
    if not values:
        return {"mean": None, "min": None, "max": None}
    return {"mean": round(sum(values) / len(values), 2), "min": min(values), "max": max(values)}


def summarize_samples(rows):
    """Per-GPU mean/min/max of SAMPLE_METRICS over sample rows (dicts from SAMPLE_QUERY_FIELDS).

    Missing values ([N/A]) are left out of the statistics; ``samples`` counts the rows seen for the GPU.
    """
    per_gpu = {}
    for row in rows:
        if row.get("index") is None:
            continue
        per_gpu.setdefault(row["index"], []).append(row)
    summary = []
    for index in sorted(per_gpu):
        gpu_rows = per_gpu[index]
        entry = {"index": index, "samples": len(gpu_rows)}
        for metric in SAMPLE_METRICS:
            entry[metric] = _stats([row[metric] for row in gpu_rows if row.get(metric) is not None])
        limits = [row["power_limit_w"] for row in gpu_rows if row.get("power_limit_w")]
        entry["power_limit_w"] = limits[-1] if limits else None
        mean_power = entry["power_draw_w"]["mean"]
        entry["power_draw_pct_of_limit"] = (round(100.0 * mean_power / entry["power_limit_w"], 1)
                                            if mean_power is not None and entry["power_limit_w"] else None)
        summary.append(entry)
    return summary


def summarize_window(timed_rows, start, end):
    """summarize_samples over the (time, row) pairs taken from START to END (Unix times); all of them when the
    window is unknown or holds none (a run shorter than one sampling interval)."""
    inside = [row for taken, row in timed_rows if start is not None and end is not None and start <= taken <= end]
    return summarize_samples(inside or [row for dummy, row in timed_rows])


class Host:
    """File-system access used while gathering; tests substitute a fake."""

    def read(self, path):
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    def exists(self, path):
        return os.path.exists(path)

    def is_executable(self, path):
        return os.path.isfile(path) and os.access(path, os.X_OK)

    def kernel_log(self):
        return nvidia_health.read_kmsg()

    def glob(self, pattern):
        return sorted(glob.glob(pattern))

    def environ_path(self):
        return os.environ.get("PATH", "")


def find_executable(host, name, extra_dirs=()):
    """First executable ``name`` on PATH, then in extra_dirs; None if absent."""
    dirs = [d for d in host.environ_path().split(os.pathsep) if d] + list(extra_dirs)
    seen = set()
    for directory in dirs:
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, name)
        if host.is_executable(candidate):
            return candidate
    return None


def nvcc_dirs(host):
    """/usr/local/cuda/bin first, then /usr/local/cuda-X.Y/bin newest first."""
    versioned = list(host.glob("/usr/local/cuda-*/bin"))
    versioned.sort(key=lambda d: version_tuple(d) or (), reverse=True)
    return ["/usr/local/cuda/bin"] + versioned


def pci_devices(host):
    """[(address, vendor, class)] of every PCI function (readable without any driver, in containers too)."""
    return [(os.path.basename(device), host.read(os.path.join(device, "vendor")),
             host.read(os.path.join(device, "class")))
            for device in host.glob(os.path.join(SYS_PCI_DEVICES, "*"))]


def cuda_toolkits(host, runner):
    """{release: {"home", "nvcc", "build"}} of the versioned toolkits in /usr/local (cuda-13.0 ...)."""
    toolkits = {}
    for nvcc in host.glob(CUDA_TOOLKIT_GLOB):
        rc, out, _err = runner([nvcc, "--version"])
        release, build = parse_nvcc_version(out if rc == 0 else "")
        if release:
            toolkits[release] = {"home": os.path.dirname(os.path.dirname(nvcc)), "nvcc": nvcc, "build": build}
    return toolkits


def fabric_manager_state(host, runner):
    """{'installed': bool, 'active': bool or None (None: no systemctl to ask), 'binary': path or None}."""
    binary = find_executable(host, FABRIC_MANAGER_BINARY, ("/usr/bin", "/usr/sbin"))
    unit = any(host.exists(os.path.join(d, FABRIC_MANAGER_UNIT + ".service")) for d in FABRIC_MANAGER_UNIT_DIRS)
    active = None
    systemctl = find_executable(host, "systemctl", ("/usr/bin", "/bin"))
    if systemctl and host.exists("/run/systemd/system"):
        rc, out, _err = runner([systemctl, "is-active", FABRIC_MANAGER_UNIT])
        active = (out or "").strip() == "active"
    return {"installed": bool(binary or unit), "active": active, "binary": binary}


def empty_facts():
    return {
        "gpu_count": 0,
        "gpus": [],
        "pci_gpus": [],
        "driver_version": None,
        "cuda_driver_version": None,
        "kernel_module": None,
        "kernel_module_version": None,
        "nvcc_version": None,
        "nvcc_build": None,
        "nvcc_path": None,
        "nvidia_smi_path": None,
        "nvidia_smi_error": None,
        "compute_capabilities": [],
        "nvswitch_present": False,
        "nvswitch_count": 0,
        "cuda_toolkits": {},
        "fabric_manager": {"installed": False, "active": None, "binary": None},
        "topology": {"links": [], "numa": [], "nvlink": [], "error": "no GPU"},
        "device_groups": {},
        "service_device_allow": [],
        "kernel_events": [],
        "kernel_log_error": None,
    }


def query_gpus(runner, nvidia_smi):
    """Run the per-GPU query; retry without fields an older driver does not know (compute_cap < 510)."""
    fields = list(GPU_QUERY_FIELDS)
    rc, out, err = runner(query_argv(nvidia_smi, fields))
    if rc != 0 and "compute_cap" in "%s%s" % (out, err) and "not a valid field" in ("%s%s" % (out, err)).lower():
        fields = [f for f in fields if f[0] != "compute_cap"]
        rc, out, err = runner(query_argv(nvidia_smi, fields))
    gpus = sorted(parse_csv(out if rc == 0 else "", fields), key=lambda gpu: (gpu["index"] is None, gpu["index"]))
    for gpu in gpus:
        gpu.setdefault("compute_capability", None)
    return rc, out, err, gpus


def gather_facts(runner, host=None, nvidia_smi=None):
    """All GPU facts of this host. Never raises for a missing driver or GPU."""
    host = host or Host()
    facts = empty_facts()

    proc_version = host.read(PROC_DRIVER_VERSION)
    facts["kernel_module"] = parse_kernel_module(proc_version)
    facts["kernel_module_version"] = parse_kernel_module_version(proc_version)
    facts["cuda_toolkits"] = cuda_toolkits(host, runner)

    nvcc = find_executable(host, "nvcc", nvcc_dirs(host))
    if nvcc:
        rc, out, err = runner([nvcc, "--version"])
        facts["nvcc_path"] = nvcc
        facts["nvcc_version"], facts["nvcc_build"] = parse_nvcc_version(out if rc == 0 else "")

    # PCI functions (present whether or not a driver is loaded) or the driver's per-switch device nodes.
    pci = pci_devices(host)
    facts["pci_gpus"] = nvidia_pci_functions(pci, GPU_PCI_CLASS_PREFIX)
    facts["nvswitch_count"] = max(len(nvidia_pci_functions(pci, NVSWITCH_PCI_CLASS_PREFIX)),
                                  len(host.glob("/dev/nvidia-nvswitch[0-9]*")))
    facts["nvswitch_present"] = facts["nvswitch_count"] > 0
    facts["fabric_manager"] = fabric_manager_state(host, runner)
    char_devices = parse_proc_devices(host.read(PROC_DEVICES))
    facts["device_groups"] = device_groups(char_devices)
    facts["service_device_allow"] = service_device_allow(char_devices, host.exists(RDMA_CM_DEVICE))

    smi = nvidia_smi or find_executable(host, "nvidia-smi", NVIDIA_SMI_DIRS)
    if not smi:
        facts["nvidia_smi_error"] = facts["topology"]["error"] = "nvidia-smi not found"
        return facts
    facts["nvidia_smi_path"] = smi

    rc, out, err, gpus = query_gpus(runner, smi)
    if not gpus:
        facts["nvidia_smi_error"] = classify_smi_failure(rc, out, err) or "nvidia-smi listed no GPU"
        facts["topology"]["error"] = facts["nvidia_smi_error"]
        return facts

    driver_versions = [gpu.pop("driver_version", None) for gpu in gpus]
    facts["gpus"] = gpus
    facts["gpu_count"] = len(gpus)
    facts["driver_version"] = next((v for v in driver_versions if v), None)
    facts["compute_capabilities"] = sorted({gpu["compute_capability"] for gpu in gpus if gpu["compute_capability"]},
                                           key=lambda cc: version_tuple(cc) or ())

    facts["topology"] = gather_topology(runner, smi)
    facts["kernel_events"], facts["kernel_log_error"] = gather_health(runner, smi, gpus, host.kernel_log)
    rc, out, err = runner([smi])
    banner = parse_banner(out if rc == 0 else "")
    facts["cuda_driver_version"] = banner["cuda_driver_version"]
    facts["driver_version"] = facts["driver_version"] or banner["driver_version"]
    return facts


def gather_health(runner, nvidia_smi, gpus, kernel_log=lambda: None):
    """Each GPU's ``health`` (nvidia_health: readings of ``nvidia-smi -q -x``, else of ``nvidia-smi -q``, its kernel
    events since boot, problems, verdict); returns the kernel's NVIDIA events of no listed GPU (NVSwitch SXids) and
    why the kernel log could not be read (None when it could)."""
    rc, out, err = runner([nvidia_smi, "-q", "-x"])
    by_bus = nvidia_health.health_from_xml(out) if rc == 0 else None
    if by_bus is None:
        rc, out, err = runner([nvidia_smi, "-q"])
        by_bus = nvidia_health.health_from_text(out if rc == 0 else "")
    events, log_error = kernel_events(runner, kernel_log)
    claimed = []
    for gpu in gpus:
        bus_id = str(gpu.get("pci_bus_id") or "").upper()
        readings = by_bus.get(bus_id, {})
        mine = [event for event in events if event["kind"] == "Xid" and nvidia_health.same_gpu(event["pci"], bus_id)]
        claimed += mine
        found = nvidia_health.problems(readings, mine)
        gpu["health"] = {"readings": readings, "events": mine, "problems": [list(item) for item in found],
                         "verdict": nvidia_health.verdict(found)}
    return [event for event in events if event not in claimed], log_error


def kernel_events(runner, kernel_log=lambda: None):
    """The NVIDIA events in the kernel log since boot (``kernel_log()``, the ring buffer read record by record; where
    it gives None, dmesg, else the journal's kernel messages)."""
    text = kernel_log()
    if text is not None:
        return nvidia_health.parse_kernel_events(text), None
    rc, out, err = runner(["dmesg", "--notime"])
    if rc != 0:
        rc, out, err = runner(["journalctl", "-k", "-b", "--no-pager", "-o", "cat"])
    if rc != 0:
        return [], (err or out or "exit status %d" % rc).strip()[:300] or "kernel log not readable"
    return nvidia_health.parse_kernel_events(out), None


def sample(runner, nvidia_smi, seconds, interval, clock=time.monotonic, sleep=time.sleep):
    """Query utilization, power and SM clock every ``interval`` s for ``seconds`` s; return the summary.

    One nvidia-smi call per sample (portable, no long-running child to stop); the achieved number of
    samples and duration are returned so that a slow nvidia-smi is visible.
    """
    argv = query_argv(nvidia_smi, SAMPLE_QUERY_FIELDS)
    rows = []
    calls = 0
    failures = []
    start = clock()
    deadline = start + seconds
    while True:
        tick = clock()
        rc, out, err = runner(argv)
        calls += 1
        if rc == 0:
            rows.extend(parse_csv(out, SAMPLE_QUERY_FIELDS))
        elif len(failures) < 3:
            failures.append(classify_smi_failure(rc, out, err))
        next_tick = tick + interval
        if next_tick >= deadline:
            break
        delay = next_tick - clock()
        if delay > 0:
            sleep(delay)
    return {
        "sample_seconds": seconds,
        "sample_interval": interval,
        "sample_count": calls,
        "duration_s": round(clock() - start, 2),
        "errors": failures,
        "gpus": summarize_samples(rows),
    }
