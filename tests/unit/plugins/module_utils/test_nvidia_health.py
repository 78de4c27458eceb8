"""nvidia_health: a GPU's health from recorded `nvidia-smi -q -x` and `nvidia-smi -q` output and kernel lines
(tests/fixtures/nvidia)."""
import os
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils import nvidia_health as health
from ansible_collections.k26.deploy.plugins.module_utils import nvidia_smi as smi

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia"
H200_BUS = "00000000:00:06.0"


def fixture(name):
    return (FIXTURES / name).read_text()


def test_the_real_h200_reads_healthy():
    trees = health.parse_smi_q(fixture("h200-nvidia-smi-q.txt"))
    assert list(trees) == [H200_BUS]
    readings = health.gpu_health(trees[H200_BUS])
    assert readings == {"ecc_uncorrectable_volatile": 0, "ecc_uncorrectable_aggregate": 0,
                        "retired_pages_pending": None,  # N/A: Hopper remaps rows instead
                        "remapped_rows_pending": False, "remapping_failed": False, "recovery_action": "None",
                        "reset_required": None, "drain_and_reset_recommended": None, "slowdown": []}
    assert health.problems(readings) == [] and health.verdict([]) is None


def test_a_gpu_that_needs_a_reset_is_an_error_with_each_reason():
    readings = health.gpu_health(health.parse_smi_q(fixture("h200-nvidia-smi-q-sick.txt"))[H200_BUS])
    found = health.problems(readings)
    assert health.verdict(found) == "error"
    texts = " | ".join(what for dummy, what in found)
    assert "GPU reset before the GPU is used again (GPU Recovery Action: Reset)" in texts
    assert "a remapped row is pending" in texts and "2 uncorrectable ECC errors since the driver loaded" in texts
    assert ("warning", "the hardware slows the GPU down now: HW Slowdown") in found


H100_XML = "h100-nvidia-smi-q-x.xml"


def test_the_xml_and_the_text_of_the_same_h100_read_alike_and_healthy():
    """Both recorded on the device's H100 by the GPU proof (driver 580.159.04), one after the other."""
    xml, text = health.health_from_xml(fixture(H100_XML)), health.health_from_text(fixture("h100-nvidia-smi-q.txt"))
    assert xml == text and list(xml) == [H200_BUS]
    assert xml[H200_BUS]["remapped_rows_pending"] is False and xml[H200_BUS]["ecc_uncorrectable_volatile"] == 0
    assert health.problems(xml[H200_BUS]) == []
    assert health.health_from_xml(fixture("h100-nvidia-smi-q.txt")) is None   # not XML: the text is read instead
    assert health.health_from_xml("<other/>") is None


def sick_xml(path, value):
    """The recorded H100 XML with one element set (made where the driver left it out: gpu_reset_status)."""
    root = ElementTree.fromstring(fixture(H100_XML))
    gpu = root.find("gpu")
    parent = gpu
    for tag in path.split("/"):
        child = parent.find(tag)
        if child is None:
            child = ElementTree.SubElement(parent, tag)
        parent = child
    parent.text = value
    return ElementTree.tostring(root, encoding="unicode")


@pytest.mark.parametrize("path, value, severity, said", [
    ("gpu_recovery_action", "Reset", "error", "GPU reset before the GPU is used again (GPU Recovery Action: Reset)"),
    ("gpu_recovery_action", "Drain P2P", "warning", "the driver asks for Drain P2P"),
    ("gpu_reset_status/reset_required", "Yes", "error", "the GPU requires a reset"),
    ("gpu_reset_status/drain_and_reset_recommended", "Yes", "warning", "recommends draining and resetting"),
    ("remapped_rows/remapped_row_pending", "Yes", "error", "a remapped row is pending"),
    ("remapped_rows/remapped_row_failure", "Yes", "error", "row remapping failed"),
    ("retired_pages/pending_blacklist", "Yes", "error", "a retired page is pending"),
    ("ecc_errors/volatile/dram_uncorrectable", "2", "error", "2 uncorrectable ECC errors since the driver loaded"),
    ("ecc_errors/volatile/sram_uncorrectable_secded", "1", "error", "1 uncorrectable ECC errors"),
    ("clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown", "Active", "warning",
     "slows the GPU down now: HW Thermal Slowdown"),
    ("clocks_throttle_reasons/clocks_throttle_reason_hw_slowdown", "Active", "warning",  # an older driver's name
     "slows the GPU down now: HW Slowdown"),
], ids=lambda value: str(value)[:40])
def test_each_health_branch_of_the_xml(path, value, severity, said):
    readings = health.health_from_xml(sick_xml(path, value))[H200_BUS]
    found = health.problems(readings)
    assert [(level, what) for level, what in found if said in what] == [(severity, next(
        what for dummy, what in found if said in what))], found
    assert health.verdict(found) == severity


def test_the_facts_read_the_xml_and_fall_back_to_the_text():
    def runner(xml):
        def run(argv):
            if argv[1:] == ["-q", "-x"]:
                return (0, xml, "") if xml else (2, "", "Invalid combination of input arguments")
            if argv[1:] == ["-q"]:
                return 0, fixture("h100-nvidia-smi-q.txt"), ""
            return 1, "", "no kernel log here"
        return run
    for xml, verdict in ((sick_xml("remapped_rows/remapped_row_pending", "Yes"), "error"), (None, None)):
        gpus = [{"index": 0, "pci_bus_id": H200_BUS}]
        smi.gather_health(runner(xml), "/usr/bin/nvidia-smi", gpus)
        assert gpus[0]["health"]["verdict"] == verdict and gpus[0]["health"]["readings"]


def test_kernel_lines_give_each_event_its_meaning_action_and_severity():
    events = health.parse_kernel_events(fixture("kernel-xid.txt"))
    assert [(e["kind"], e["code"], e["severity"]) for e in events] == [
        ("Xid", 63, "error"), ("Xid", 79, "error"), ("SXid", 12028, "warning")]
    fell = events[1]
    assert fell["meaning"] == "GPU has fallen off the bus" and fell["action"] == "RESTART_BM"
    assert health.describe(fell) == "Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) on 0000:00:06"
    assert health.same_gpu(fell["pci"], H200_BUS) and not health.same_gpu(events[0]["pci"], H200_BUS)
    unknown = health.parse_kernel_events("NVRM: Xid (PCI:0000:3b:00): 999, something new")[0]
    assert unknown["severity"] == "error" and "not in the catalog" in unknown["meaning"]
    assert health.parse_kernel_events("NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception")[0]["severity"] == "warning"


def test_only_a_kernel_message_that_begins_with_the_driver_s_words_is_an_event():
    """A mount error quoting "NVRM: Xid" (any user can cause one) is another driver's message, not an Xid."""
    quoted = [line for line in fixture("kernel-xid.txt").splitlines() if "-fs (loop" in line]
    assert len(quoted) == 2 and health.parse_kernel_events("\n".join(quoted)) == []
    assert health.events_since("\n".join(quoted), 0.0) == []
    # the same message as journalctl -k prints it (short format), as dmesg prints it, and bare
    for line in ("Dec 06 12:00:01 gpu7 kernel: NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
                 "[ 12.5] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
                 "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception"):
        assert [event["code"] for event in health.parse_kernel_events(line)] == [13], line
    for spoof in ("Dec 06 12:00:01 gpu7 kernel: EXT4-fs (loop0): NVRM: Xid (PCI:0000:3b:00): 79",
                  "EXT4-fs (loop0): label x kernel: NVRM: Xid (PCI:0000:3b:00): 79"):
        assert health.parse_kernel_events(spoof) == [], spoof


def test_the_facts_give_each_gpu_its_health_and_its_own_kernel_events():
    gpus = [{"index": 0, "pci_bus_id": H200_BUS}]

    def runner(argv):
        if argv[-1] == "-q":
            return 0, fixture("h200-nvidia-smi-q.txt"), ""
        if argv[0] == "dmesg":
            return 0, fixture("kernel-xid.txt"), ""
        return 127, "", "not found"
    others, log_error = smi.gather_health(runner, "/usr/bin/nvidia-smi", gpus)
    assert log_error is None
    assert [e["code"] for e in gpus[0]["health"]["events"]] == [79]  # the Xid 63 and the SXid are other devices'
    assert [e["code"] for e in others] == [63, 12028]
    assert gpus[0]["health"]["verdict"] == "error"
    assert gpus[0]["health"]["problems"] == [["error", "Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) "
                                                       "on 0000:00:06"]]


# A mount error whose file name holds a newline and the driver's words, as /dev/kmsg gives the record (the kernel
# escapes the newline) and as dmesg prints it (unescaped: two lines, the second one the driver's to a parser).
PLANTED = b"3,812,98765432,-;EXT4-fs (loop0): bad name x\\x0aNVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off\n"
DRIVER = b"4,813,98765500,-;NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:06.0\n"


def test_a_record_of_the_kernel_is_one_line_and_a_planted_newline_no_event():
    assert health.kmsg_line(DRIVER) == "[   98.765500] NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception"
    assert health.kmsg_line(b"no record") is None and health.kmsg_line(b"4,1,x,-;text") is None
    records = "\n".join(health.kmsg_line(record) for record in (PLANTED, DRIVER))
    assert [event["code"] for event in health.parse_kernel_events(records)] == [13]
    as_dmesg_prints_it = "EXT4-fs (loop0): bad name x\nNVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off"
    assert [event["code"] for event in health.parse_kernel_events(as_dmesg_prints_it)] == [79]  # the old reading


def test_the_facts_read_the_ring_buffer_record_by_record_before_dmesg():
    gpus = [{"index": 0, "pci_bus_id": H200_BUS}]
    asked = []

    def runner(argv):
        asked.append(argv[0])
        return (0, fixture("h200-nvidia-smi-q.txt"), "") if argv[-1] == "-q" else (0, fixture("kernel-xid.txt"), "")
    others, log_error = smi.gather_health(runner, "/usr/bin/nvidia-smi", gpus,
                                          lambda: "\n".join(health.kmsg_line(r) for r in (PLANTED, DRIVER)))
    assert log_error is None and others == [] and "dmesg" not in asked
    assert [e["code"] for e in gpus[0]["health"]["events"]] == [13]


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="this machine's kernel log is not readable here")
def test_this_machines_ring_buffer_reads_as_dmesg_lines():
    text = health.read_kmsg()
    assert text is not None and all(re.match(r"^\[\s*\d+\.\d{6}\] ", line) for line in text.splitlines())
    assert health.read_kmsg("/nonexistent/kmsg") is None


def test_a_kernel_log_that_cannot_be_read_is_said_not_guessed():
    gpus = [{"index": 0, "pci_bus_id": H200_BUS}]
    others, log_error = smi.gather_health(lambda argv: (1, "", "dmesg: read kernel buffer failed: Operation not "
                                                               "permitted"), "/usr/bin/nvidia-smi", gpus)
    assert others == [] and "Operation not permitted" in log_error
    assert gpus[0]["health"] == {"readings": {}, "events": [], "problems": [], "verdict": None}


def ctx_with(problems, verdict):
    gpu = {"gpu_count": 1, "gpus": [{"index": 0, "pci_bus_id": H200_BUS, "name": "NVIDIA H200",
                                     "memory_total_mib": 143771, "compute_capability": "9.0",
                                     "health": {"problems": problems, "verdict": verdict}}],
           "driver_version": "580.159.04", "cuda_driver_version": "13.0", "kernel_module": "open"}
    return rules.build_context({"tp-size": 1, "pp-size": 1}, gpu=gpu, expected_gpus=1)


def test_preflight_refuses_a_gpu_that_needs_a_reset_and_warns_on_a_slowdown():
    def finding(ctx, overrides=None):
        return {f["id"]: f for f in rules.evaluate(ctx, severity_overrides=overrides)}.get("K26-GPU-HEALTH")
    fatal = finding(ctx_with([["error", "Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM) on 0000:00:06"]],
                             "error"))
    assert fatal["severity"] == "error" and "GPU 0 (00000000:00:06.0): Xid 79" in fatal["message"]
    assert "nvidia-smi -r" in fatal["fix"]
    slow = finding(ctx_with([["warning", "the hardware slows the GPU down now: HW Slowdown"]], "warning"))
    assert slow["severity"] == "warning"
    assert finding(ctx_with([], None)) is None
    overridden = finding(ctx_with([["error", "Xid 79"]], "error"), {"K26-GPU-HEALTH": "warning"})
    assert overridden["severity"] == "warning"
