"""nvidia_smi module_utils and the nvidia_gpu_facts module, on recorded and constructed nvidia-smi output.

H200_* strings were recorded on the reference H200 host (driver 580.159.04, CUDA 13.0) on 2026-11-29.
The RTX PRO 6000 case is constructed in the same format (8 cards, compute capability 12.0, 600 W).
"""
import fnmatch
import os
import stat

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import nvidia_smi as smi
from module_runner import run_module

# ---------------------------------------------------------------- recorded on the H200 host
H200_QUERY = ("0, NVIDIA H200, GPU-6c3b4754-af4c-eb9d-d9e6-00f6b9012628, 00000000:00:06.0, 143771, 9.0, "
              "Enabled, 700.00, 580.159.04\n")
H200_FACTS_NOTE_LINE = "NVIDIA H200, 580.159.04, 143771, 9.0, 0, 134.32, 700.00, Enabled, 00000000:00:06.0\n"
H200_SAMPLE = "0, 0, 81.07, 345, 700.00\n"
H200_BANNER = """Sun Nov 29 10:09:12 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |
| N/A   42C    P0             81W /  700W |       0MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""
H200_PROC_VERSION = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
                     "GCC version:  gcc version 15.3.0 (GCC) \n")
H200_NVCC = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
H200_PCI = [("0x10de\n", "0x030200\n")]

# ---------------------------------------------------------------- constructed: 8x RTX PRO 6000 Blackwell (SM120)
RTX_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
RTX_BUS = ["00000000:%02X:00.0" % bus for bus in (0x17, 0x3D, 0x63, 0x89, 0x97, 0xBD, 0xD1, 0xE1)]
RTX_QUERY = "".join(
    "%d, %s, GPU-%08x-1c2d-4e5f-8a9b-0c1d2e3f4a5b, %s, 97887, 12.0, Enabled, 600.00, 580.95.05\n"
    % (i, RTX_NAME, 0x5e1a0000 + i, RTX_BUS[i]) for i in range(8))
RTX_BANNER = H200_BANNER.replace("580.159.04", "580.95.05 ").replace("NVIDIA H200     ", "NVIDIA RTX PRO 6000 Blac...")
RTX_PROC_PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:11:41 UTC 2025\n"
                        "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")

NA_QUERY = "0, NVIDIA H200, GPU-6c3b4754-af4c-eb9d-d9e6-00f6b9012628, 00000000:00:06.0, [N/A], [N/A], [N/A], [N/A], [N/A]\n"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.\n")
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"
OLD_DRIVER_FIELD = 'Field "compute_cap" is not a valid field to query.\n'


class FakeHost(smi.Host):
    """Files and executables from dicts instead of the machine's."""

    def __init__(self, files=None, executables=(), path="/usr/bin:/bin"):
        self.files = dict(files or {})
        self.executables = set(executables)
        self.path = path

    def read(self, path):
        return self.files.get(path)

    def kernel_log(self):  # no /dev/kmsg: the runner's dmesg speaks
        return None

    def exists(self, path):
        return path in self.files or path in self.executables or any(
            f.startswith(path.rstrip("/") + "/") for f in list(self.files) + list(self.executables))

    def is_executable(self, path):
        return path in self.executables

    def glob(self, pattern):
        names = set(self.files) | set(self.executables)
        # directories implied by file paths
        for name in list(names):
            parts = name.split("/")
            for i in range(2, len(parts)):
                names.add("/".join(parts[:i]))
        return sorted(n for n in names if fnmatch.fnmatch(n, pattern) and n.count("/") == pattern.count("/"))

    def environ_path(self):
        return self.path


class FakeRunner:
    """Answers argv by its first matching key: (rc, out, err); records the calls."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        joined = " ".join(argv)
        for key, answer in self.answers:
            if key in joined:
                return answer
        return 127, "", "not found: %s" % joined


def gpu_host(query, banner, proc, pci=(), extra_files=None, executables=("/usr/bin/nvidia-smi",)):
    files = {smi.PROC_DRIVER_VERSION: proc} if proc else {}
    for i, (vendor, pci_class) in enumerate(pci):
        files["/sys/bus/pci/devices/0000:%02x:00.0/vendor" % i] = vendor
        files["/sys/bus/pci/devices/0000:%02x:00.0/class" % i] = pci_class
    files.update(extra_files or {})
    runner = FakeRunner([
        ("--query-gpu=index,name", (0, query, "")),
        ("nvcc --version", (0, H200_NVCC, "")),
        ("/usr/bin/nvidia-smi", (0, banner, "")),
    ])
    return FakeHost(files, executables), runner


# ---------------------------------------------------------------- pure parsing

@pytest.mark.parametrize("raw, kind, expected", [
    ("143771", "int", 143771),
    (" 700.00", "float", 700.0),
    ("9.0", "str", "9.0"),
    ("Enabled", "bool", True),
    ("Disabled", "bool", False),
    ("[N/A]", "float", None),
    ("N/A", "str", None),
    ("[Not Supported]", "int", None),
    ("[Unknown Error]", "bool", None),
    ("", "str", None),
    ("abc", "int", None),
])
def test_parse_value(raw, kind, expected):
    assert smi.parse_value(raw, kind) == expected


def test_h200_query_recorded():
    gpus = smi.parse_gpu_query(H200_QUERY)
    assert gpus == [{
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-6c3b4754-af4c-eb9d-d9e6-00f6b9012628",
        "pci_bus_id": "00000000:00:06.0", "memory_total_mib": 143771, "compute_capability": "9.0",
        "persistence_mode": True, "power_limit_w": 700.0, "driver_version": "580.159.04",
    }]


def test_facts_note_line_with_its_own_field_table():
    fields = (("name", "name", "str"), ("driver_version", "driver_version", "str"),
              ("memory.total", "memory_total_mib", "int"), ("compute_cap", "compute_capability", "str"),
              ("utilization.gpu", "util", "float"), ("power.draw", "power_draw_w", "float"),
              ("power.limit", "power_limit_w", "float"), ("persistence_mode", "persistence_mode", "bool"),
              ("pci.bus_id", "pci_bus_id", "str"))
    (row,) = smi.parse_csv(H200_FACTS_NOTE_LINE, fields)
    assert row["compute_capability"] == "9.0" and row["power_draw_w"] == 134.32 and row["persistence_mode"] is True
    assert row["pci_bus_id"] == "00000000:00:06.0"


def test_rtx_pro_6000_eight_gpus():
    gpus = smi.parse_gpu_query(RTX_QUERY)
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {RTX_NAME}
    assert {g["compute_capability"] for g in gpus} == {"12.0"}
    assert {g["memory_total_mib"] for g in gpus} == {97887}
    assert [g["pci_bus_id"] for g in gpus] == RTX_BUS
    assert len({g["uuid"] for g in gpus}) == 8


def test_na_fields_become_none():
    (gpu,) = smi.parse_gpu_query(NA_QUERY)
    assert gpu["memory_total_mib"] is None and gpu["compute_capability"] is None
    assert gpu["persistence_mode"] is None and gpu["power_limit_w"] is None and gpu["driver_version"] is None


@pytest.mark.parametrize("text", ["", "No devices were found\n", NO_DRIVER])
def test_no_gpu_rows(text):
    assert smi.parse_gpu_query(text) == []


@pytest.mark.parametrize("banner, expected", [
    (H200_BANNER, {"nvidia_smi_version": "580.159.04", "driver_version": "580.159.04", "cuda_driver_version": "13.0"}),
    (RTX_BANNER, {"nvidia_smi_version": "580.95.05", "driver_version": "580.95.05", "cuda_driver_version": "13.0"}),
    ("| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.2     |",
     {"nvidia_smi_version": "535.183.01", "driver_version": "535.183.01", "cuda_driver_version": "12.2"}),
    (NO_DRIVER, {"nvidia_smi_version": None, "driver_version": None, "cuda_driver_version": None}),
])
def test_banner(banner, expected):
    assert smi.parse_banner(banner) == expected


@pytest.mark.parametrize("text, expected", [
    (H200_PROC_VERSION, "open"),
    (RTX_PROC_PROPRIETARY, "proprietary"),
    (None, None),
    ("", None),
])
def test_kernel_module(text, expected):
    assert smi.parse_kernel_module(text) == expected


def test_nvcc_version_recorded():
    assert smi.parse_nvcc_version(H200_NVCC) == ("13.0", "13.0.88")
    assert smi.parse_nvcc_version("bash: nvcc: command not found") == (None, None)


def test_nvswitch_detection():
    h200 = [("0000:00:06.0", "0x10de\n", "0x030200\n")]  # the GPU itself is class 0x0302
    assert smi.nvidia_pci_functions(h200, smi.NVSWITCH_PCI_CLASS_PREFIX) == []
    hgx = h200 + [("0000:%02x:00.0" % i, "0x10de\n", "0x068000\n") for i in range(4)] + [
        ("0000:10:00.0", "0x8086\n", "0x068000\n")]
    assert len(smi.nvidia_pci_functions(hgx, smi.NVSWITCH_PCI_CLASS_PREFIX)) == 4


@pytest.mark.parametrize("rc, out, err, expected", [
    (6, "No devices were found\n", "", "no devices were found"),
    (9, NO_DRIVER, "", "nvidia-smi could not communicate with the NVIDIA driver (driver not loaded?)"),
    (18, MISMATCH, "", "driver/library version mismatch (driver upgraded without reboot?)"),
    (2, "", "weird\n", "nvidia-smi exited with 2: weird"),
])
def test_classify_failure(rc, out, err, expected):
    assert smi.classify_smi_failure(rc, out, err) == expected


def test_version_tuple():
    assert smi.version_tuple("580.65.06") == (580, 65, 6)
    assert smi.version_tuple("580.159.04") > smi.version_tuple("580.65.06")
    assert smi.version_tuple(None) is None


# ---------------------------------------------------------------- gathering with fakes

def test_gather_h200():
    host, runner = gpu_host(H200_QUERY, H200_BANNER, H200_PROC_VERSION, pci=H200_PCI,
                            executables=("/usr/bin/nvidia-smi", "/usr/local/cuda/bin/nvcc"))
    facts = smi.gather_facts(runner, host)
    assert facts["gpu_count"] == 1
    assert facts["gpus"][0]["name"] == "NVIDIA H200" and "driver_version" not in facts["gpus"][0]
    assert facts["driver_version"] == "580.159.04" and facts["cuda_driver_version"] == "13.0"
    assert facts["kernel_module"] == "open"
    assert (facts["nvcc_version"], facts["nvcc_build"], facts["nvcc_path"]) == (
        "13.0", "13.0.88", "/usr/local/cuda/bin/nvcc")
    assert facts["compute_capabilities"] == ["9.0"]
    assert facts["nvswitch_present"] is False and facts["nvidia_smi_error"] is None
    assert facts["fabric_manager"] == {"installed": False, "active": None, "binary": None}


def test_gather_rtx_pro_proprietary_and_nvcc_on_versioned_path():
    host, runner = gpu_host(RTX_QUERY, RTX_BANNER, RTX_PROC_PROPRIETARY,
                            executables=("/usr/bin/nvidia-smi", "/usr/local/cuda-12.8/bin/nvcc",
                                         "/usr/local/cuda-13.0/bin/nvcc"))
    facts = smi.gather_facts(runner, host)
    assert facts["gpu_count"] == 8 and facts["compute_capabilities"] == ["12.0"]
    assert facts["kernel_module"] == "proprietary"
    assert facts["nvcc_path"] == "/usr/local/cuda-13.0/bin/nvcc"  # newest versioned toolkit


def test_gather_no_nvidia_smi_is_a_fact():
    facts = smi.gather_facts(FakeRunner([]), FakeHost())
    assert facts["gpu_count"] == 0 and facts["gpus"] == []
    assert facts["nvidia_smi_error"] == "nvidia-smi not found" and facts["nvidia_smi_path"] is None
    assert facts["kernel_module"] is None and facts["nvcc_version"] is None


@pytest.mark.parametrize("answer, reason", [
    ((6, "No devices were found\n", ""), "no devices were found"),
    ((9, NO_DRIVER, ""), "nvidia-smi could not communicate with the NVIDIA driver (driver not loaded?)"),
])
def test_gather_nvidia_smi_without_gpu(answer, reason):
    host = FakeHost(executables=("/usr/bin/nvidia-smi",))
    facts = smi.gather_facts(FakeRunner([("nvidia-smi", answer)]), host)
    assert facts["gpu_count"] == 0 and facts["nvidia_smi_error"] == reason


def test_gather_old_driver_without_compute_cap_field():
    old_query = "0, Tesla V100-SXM2-32GB, GPU-aaaa, 00000000:00:1E.0, 32768, Enabled, 300.00, 470.256.02\n"
    runner = FakeRunner([
        ("compute_cap", (2, OLD_DRIVER_FIELD, "")),
        ("--query-gpu=index,name", (0, old_query, "")),
        ("/usr/bin/nvidia-smi", (0, "Driver Version: 470.256.02   CUDA Version: 11.4", "")),
    ])
    facts = smi.gather_facts(runner, FakeHost(executables=("/usr/bin/nvidia-smi",)))
    assert facts["gpu_count"] == 1 and facts["gpus"][0]["compute_capability"] is None
    assert facts["gpus"][0]["memory_total_mib"] == 32768 and facts["cuda_driver_version"] == "11.4"


def test_gather_nvswitch_and_fabric_manager():
    pci = H200_PCI * 8 + [("0x10de", "0x068000")] * 4
    host, runner = gpu_host(H200_QUERY * 1, H200_BANNER, H200_PROC_VERSION, pci=pci,
                            extra_files={"/lib/systemd/system/nvidia-fabricmanager.service": "[Unit]\n",
                                         "/run/systemd/system/.keep": ""},
                            executables=("/usr/bin/nvidia-smi", "/usr/bin/nv-fabricmanager", "/usr/bin/systemctl"))
    runner.answers.insert(0, ("is-active nvidia-fabricmanager", (3, "inactive\n", "")))
    facts = smi.gather_facts(runner, host)
    assert facts["nvswitch_present"] is True and facts["nvswitch_count"] == 4
    assert facts["fabric_manager"] == {"installed": True, "active": False, "binary": "/usr/bin/nv-fabricmanager"}


# ---------------------------------------------------------------- sampling

class FakeClock:
    def __init__(self, step_per_call=0.05):
        self.now = 100.0
        self.step = step_per_call

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_sample_h200_load_and_idle_rows():
    clock = FakeClock()
    answers = iter(["0, 0, 81.07, 345, 700.00\n", "0, 100, 690.12, 1530, 700.00\n",
                    "0, 99, 687.74, 1440, 700.00\n", "0, [N/A], [N/A], 1500, 700.00\n"])

    def runner(argv):
        assert "--query-gpu=index,utilization.gpu,power.draw,clocks.sm,power.limit" in argv
        clock.now += 0.05  # nvidia-smi takes a while
        return 0, next(answers), ""

    result = smi.sample(runner, "/usr/bin/nvidia-smi", 2.0, 0.5, clock=clock, sleep=clock.sleep)
    assert result["sample_count"] == 4 and result["errors"] == []
    (gpu,) = result["gpus"]
    assert gpu["samples"] == 4
    assert gpu["utilization_gpu_pct"] == {"mean": 66.33, "min": 0.0, "max": 100.0}
    assert gpu["clocks_sm_mhz"]["min"] == 345.0 and gpu["clocks_sm_mhz"]["max"] == 1530.0
    assert gpu["power_draw_w"]["max"] == 690.12 and gpu["power_limit_w"] == 700.0
    assert gpu["power_draw_pct_of_limit"] == round(100 * (81.07 + 690.12 + 687.74) / 3 / 700, 1)


def test_summarize_only_the_samples_of_the_window():
    rows = smi.parse_csv("0, 0, 80.00, 345, 700.00\n0, 95, 650.00, 1500, 700.00\n0, 90, 640.00, 1500, 700.00\n"
                         "0, 0, 80.00, 345, 700.00\n", smi.SAMPLE_QUERY_FIELDS)
    timed = list(zip((10.0, 11.0, 12.0, 13.0), rows))
    (busy,) = smi.summarize_window(timed, 10.5, 12.5)
    assert busy["samples"] == 2 and busy["utilization_gpu_pct"]["mean"] == 92.5
    assert smi.summarize_window(timed, None, None)[0]["samples"] == 4
    assert smi.summarize_window(timed, 20.0, 21.0)[0]["samples"] == 4  # no sample inside: all of them


def test_summarize_eight_gpus_and_failures():
    rows = smi.parse_csv("".join("%d, 0, 85.00, 345, 600.00\n" % i for i in range(8)) * 3, smi.SAMPLE_QUERY_FIELDS)
    summary = smi.summarize_samples(rows)
    assert [g["index"] for g in summary] == list(range(8))
    assert all(g["samples"] == 3 and g["power_draw_pct_of_limit"] == 14.2 for g in summary)

    clock = FakeClock()
    result = smi.sample(lambda argv: (9, NO_DRIVER, ""), "nvidia-smi", 1.0, 0.5, clock=clock, sleep=clock.sleep)
    assert result["gpus"] == [] and result["errors"][0].startswith("nvidia-smi could not communicate")


# ---------------------------------------------------------------- the module, end to end on a fake nvidia-smi

FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=index,name*) printf '%s' "$K26_QUERY";;
  --query-gpu=index,utilization*) echo "0, 97, 655.5, 1500, 700.00";;
  topo) printf '%s' "$K26_TOPO";;
  nvlink) printf '%s' "$K26_NVLINK";;
  *) printf '%s' "$K26_BANNER";;
esac
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    path = tmp_path / "nvidia-smi"
    path.write_text(FAKE_SMI)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("K26_QUERY", H200_QUERY)
    monkeypatch.setenv("K26_BANNER", H200_BANNER)
    monkeypatch.setenv("K26_TOPO", "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n")
    monkeypatch.setenv("K26_NVLINK", "GPU 0: NVIDIA H200 (UUID: GPU-6c3b4754)\n\t Link 0: <inactive>\n")
    return str(path)


def test_module_facts_and_sampling(fake_smi, capsys):
    from ansible_collections.k26.deploy.plugins.modules import nvidia_gpu_facts

    rc, result = run_module(nvidia_gpu_facts, {"nvidia_smi_path": fake_smi, "sample_seconds": 0.2,
                                               "sample_interval": 0.1}, capsys)
    assert rc == 0 and result["changed"] is False
    assert result["gpu_count"] == 1 and result["cuda_driver_version"] == "13.0"
    assert result["ansible_facts"]["nvidia_gpu"]["gpus"][0]["compute_capability"] == "9.0"
    assert "sampling" not in result["ansible_facts"]["nvidia_gpu"]
    assert result["topology"] == {"links": [["X"]], "numa": [0], "nvlink": [{"index": 0, "links": 1, "active": 0}],
                                  "error": None}
    assert result["sampling"]["gpus"][0]["utilization_gpu_pct"]["mean"] == 97.0


def test_module_without_gpu(tmp_path, capsys, monkeypatch):
    from ansible_collections.k26.deploy.plugins.modules import nvidia_gpu_facts

    monkeypatch.setenv("PATH", str(tmp_path))
    rc, result = run_module(nvidia_gpu_facts, {"sample_seconds": 1}, capsys)
    assert rc == 0 and result["gpu_count"] == 0 and "sampling" not in result
    if not os.path.exists("/usr/bin/nvidia-smi"):
        assert result["nvidia_smi_error"] == result["topology"]["error"] == "nvidia-smi not found"
        assert result["topology"]["links"] == []


# ---------------------------------------------------------------- the loaded kernel module, nvcc and the PCI bus
# (moved here with the parsing the nvidia_cuda role used to do itself: GPU detection has one home)

OPEN_X86 = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:42:33 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
OPEN_ARM = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.159.04  Release Build  "
    "(dvs-builder@U16-T02-35-3)  Thu Nov  6 10:12:01 UTC 2025\n"
)
PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:59 UTC 2025\n"
    "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
)
OLD_OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build\n"


@pytest.mark.parametrize("text, module, version", [
    (OPEN_X86, "open", "580.95.05"),
    (OPEN_ARM, "open", "580.159.04"),
    (H200_PROC_VERSION, "open", "580.159.04"),
    (PROPRIETARY, "proprietary", "580.65.06"),
    (OLD_OPEN, "open", "575.57.08"),
    ("", None, None),
    (None, None, None),
])
def test_kernel_module_and_its_version(text, module, version):
    assert smi.parse_kernel_module(text) == module
    assert smi.parse_kernel_module_version(text) == version


@pytest.mark.parametrize("text, release", [
    (H200_NVCC, ("13.0", "13.0.88")),
    ("Cuda compilation tools, release 12.8, V12.8.93", ("12.8", "12.8.93")),
    ("bash: nvcc: command not found", (None, None)),
    ("", (None, None)),
])
def test_nvcc_release(text, release):
    assert smi.parse_nvcc_version(text) == release


CONTAINER = [  # the CI container: virtio devices only
    ("0000:00:00.0", "0x8086", "0x060000"),
    ("0000:00:01.0", "0x1af4", "0xffff00"),
    ("0000:00:03.0", "0x1af4", "0x020000"),
]
PCIE_BOX = [  # 2x RTX PRO 6000 (3D controller) + their HDMI audio functions + a non-NVIDIA VGA
    ("0000:17:00.0", "0x10de", "0x030200"),
    ("0000:17:00.1", "0x10de", "0x040300"),
    ("0000:3d:00.0", "0x10de", "0x030000"),
    ("0000:03:00.0", "0x1a03", "0x030000"),
]
HGX = [  # 2 GPUs and 2 NVSwitches, one with an upper-case hex value
    ("0000:18:00.0", "0x10de", "0x030200"),
    ("0000:2a:00.0", "0x10de", "0x030200"),
    ("0000:05:00.0", "0x10de", "0x068000"),
    ("0000:06:00.0", "0x10DE", "0x068000\n"),
    ("0000:07:00.0", "0x15b3", "0x068000"),  # a non-NVIDIA bridge of the same class
]


@pytest.mark.parametrize("devices, gpus, nvswitches", [
    (CONTAINER, [], []),
    (PCIE_BOX, ["0000:17:00.0", "0000:3d:00.0"], []),
    (HGX, ["0000:18:00.0", "0000:2a:00.0"], ["0000:05:00.0", "0000:06:00.0"]),
    ([], [], []),
])
def test_gpus_and_nvswitches_on_the_pci_bus(devices, gpus, nvswitches):
    assert smi.nvidia_pci_functions(devices, smi.GPU_PCI_CLASS_PREFIX) == gpus
    assert smi.nvidia_pci_functions(devices, smi.NVSWITCH_PCI_CLASS_PREFIX) == nvswitches


def test_gpus_on_the_bus_without_a_driver():
    files = {}
    for address, vendor, pci_class in PCIE_BOX:
        files["/sys/bus/pci/devices/%s/vendor" % address] = vendor
        files["/sys/bus/pci/devices/%s/class" % address] = pci_class
    facts = smi.gather_facts(FakeRunner([]), FakeHost(files))
    assert facts["pci_gpus"] == ["0000:17:00.0", "0000:3d:00.0"]
    assert facts["gpu_count"] == 0 and facts["kernel_module"] is None  # no driver: nvidia-smi lists nothing


def test_versioned_cuda_toolkits():
    host = FakeHost(executables=("/usr/local/cuda-13.0/bin/nvcc", "/usr/local/cuda-12.8/bin/nvcc"))
    runner = FakeRunner([
        ("cuda-13.0/bin/nvcc --version", (0, H200_NVCC, "")),
        ("cuda-12.8/bin/nvcc --version", (0, "Cuda compilation tools, release 12.8, V12.8.93", "")),
    ])
    facts = smi.gather_facts(runner, host)
    assert facts["cuda_toolkits"] == {
        "13.0": {"home": "/usr/local/cuda-13.0", "nvcc": "/usr/local/cuda-13.0/bin/nvcc", "build": "13.0.88"},
        "12.8": {"home": "/usr/local/cuda-12.8", "nvcc": "/usr/local/cuda-12.8/bin/nvcc", "build": "12.8.93"},
    }


@pytest.mark.parametrize("version, minimum, ok", [
    ("580.65.06", "580.65.06", True), ("580.159.04", "580.65.06", True), ("580.65", "580.65.06", False),
    ("590.44", "580.65.06", True), (None, "580.65.06", False),
])
def test_version_at_least(version, minimum, ok):
    assert smi.version_at_least(version, minimum) is ok
