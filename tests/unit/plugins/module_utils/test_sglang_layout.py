"""The layout decision (sglang_layout) and the topology parsers it reads (nvidia_smi), on the interconnects of
tests/unit/topologies.py."""
import pytest

from ansible_collections.k26.deploy.plugins.module_utils import nvidia_smi as smi
from ansible_collections.k26.deploy.plugins.module_utils import k26_preflight_rules as rules
from ansible_collections.k26.deploy.plugins.module_utils import sglang_layout as layout
import topologies as t


ALL = [t.NVSWITCH8, t.PCIE8, t.PCIE8_2NUMA, t.BRIDGED_PAIRS8, t.SINGLE, t.RECORDED_H100_NVSWITCH8,
       t.RECORDED_RTX4090_2NUMA8, t.RECORDED_RTX4090_PCIE5, t.RECORDED_NV12_PAIR, t.RECORDED_RTX_PRO_6000_2NUMA8,
       t.RECORDED_RTX_PRO_6000_SWITCHES8]
ALL_IDS = ["nvswitch8", "pcie8", "pcie8-2numa", "bridged-pairs8", "single", "recorded-h100-nvswitch8",
           "recorded-4090-2numa8", "recorded-4090-pcie5", "recorded-nv12-pair", "recorded-rtx-pro-6000-2numa8",
           "recorded-rtx-pro-6000-switches8"]


@pytest.mark.parametrize("topo", ALL, ids=ALL_IDS)
@pytest.mark.parametrize("render", [t.topo_m_text, t.topo_m_aligned], ids=["tabs", "pasted"])
def test_topo_m_parses_to_the_matrix_and_numa_nodes(topo, render):
    parsed = smi.parse_topology_matrix(render(topo))
    assert parsed == {"links": topo["links"], "numa": topo["numa"]}


# Recorded on the reference H200 host (one GPU; driver 580, CUDA 13.0) on 2026-12-03 into a file: nvidia-smi
# underlines the column names even there. `nvidia-smi nvlink -s` printed nothing on that host.
H200_TOPO_M = ("\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
               "GPU0\t X \t0-15\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n"
               "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
               "  NV#  = Connection traversing a bonded set of # NVLinks\n")


def test_the_h200_hosts_own_topo_m():
    topology = dict(smi.parse_topology_matrix(H200_TOPO_M), nvlink=smi.parse_nvlink_status(""), error=None)
    assert topology == {"links": [["X"]], "numa": [0], "nvlink": [], "error": None}
    assert layout.choose(topology, 1)["reason"] == "one GPU"


def test_topo_m_without_a_gpu_matrix_is_none():
    assert smi.parse_topology_matrix("") is None
    assert smi.parse_topology_matrix("NVIDIA-SMI has failed because it couldn't communicate with the driver.") is None


def test_topo_m_leaves_nic_columns_and_rows_out():
    text = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNV18\tPXB\t0-47\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tSYS\t48-95\t1\t\tN/A\n"
            "NIC0\tPXB\tSYS\t X \t\t\t\t\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
    assert smi.parse_topology_matrix(text) == {"links": [["X", "NV18"], ["NV18", "X"]], "numa": [0, 1]}


def test_nvlink_status_counts_links_and_inactive_ones():
    text = ("GPU 0: NVIDIA H200 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
            "GPU 1: NVIDIA H200 (UUID: GPU-b)\n\t Link 0: 26.562 GB/s\n")
    assert smi.parse_nvlink_status(text) == [{"index": 0, "links": 2, "active": 1}, {"index": 1, "links": 1, "active": 1}]
    assert smi.parse_nvlink_status("") == []


@pytest.mark.parametrize("topo, gpus, nnodes, tp, pp, kind, words", [
    (t.NVSWITCH8, 8, 1, 8, 1, layout.NVLINK, "all 8 GPUs joined by NVLink (NV18): tensor parallel"),
    (t.PCIE8, 8, 1, 8, 1, layout.PCIE, "share PCIe only (no NVLink): tensor parallel across 8 of them"),
    (t.PCIE8_2NUMA, 8, 1, 8, 1, layout.PCIE, "tensor parallel"),
    (t.PCIE8, 6, 1, 2, 3, layout.PCIE, "tensor parallel across 2 of them"),
    (t.BRIDGED_PAIRS8, 8, 1, 8, 1, layout.PARTIAL,
     "no published measurement of this class was found, so tensor parallel across 8 of them"),
    (t.NVSWITCH8, 8, 2, 8, 2, layout.NVLINK, "pipeline parallel across the 2 nodes (the network between them carries "
     "one hand-over a stage instead of two all-reduces a layer): no published Kimi K2.x measurement compares it with "
     "tensor parallel across the nodes; k26deploy tune -i INVENTORY --layouts tp8pp2,tp16pp1 measures both"),
    (t.NVSWITCH8, 4, 1, 4, 1, layout.NVLINK, "all 4 GPUs"),
    (t.SINGLE, 1, 1, 1, 1, layout.SINGLE, "one GPU"),
], ids=["nvswitch8", "pcie8", "pcie8-2numa", "pcie-6-of-8", "bridged-pairs8", "nvswitch8-2nodes", "nvswitch-4-of-8",
        "single"])
def test_auto_chooses_from_the_interconnect(topo, gpus, nnodes, tp, pp, kind, words):
    chosen = layout.choose(topo, gpus, nnodes)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["interconnect"], chosen["source"]) == (
        tp, pp, kind, layout.SOURCE_TOPOLOGY)
    assert words in chosen["reason"]


@pytest.mark.parametrize("topo, gpus, tp, pp, kind", [
    (t.RECORDED_H100_NVSWITCH8, 8, 8, 1, layout.NVLINK),
    (t.RECORDED_RTX4090_2NUMA8, 8, 8, 1, layout.PCIE),
    (t.RECORDED_RTX4090_PCIE5, 4, 4, 1, layout.PCIE),
    (t.RECORDED_RTX4090_PCIE5, 5, 1, 5, layout.PCIE),
    (t.RECORDED_RTX_PRO_6000_2NUMA8, 8, 8, 1, layout.PCIE),
    (t.RECORDED_RTX_PRO_6000_SWITCHES8, 8, 8, 1, layout.PCIE),
    (t.RECORDED_NV12_PAIR, 2, 2, 1, layout.NVLINK),
], ids=["h100-nvswitch8", "4090-2numa8", "4090-pcie5-4", "4090-pcie5-5", "rtx-pro-6000-2numa8",
        "rtx-pro-6000-switches8", "nv12-pair"])
def test_the_recorded_machines_get_the_layout_of_their_interconnect(topo, gpus, tp, pp, kind):
    chosen = layout.choose(topo, gpus)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["interconnect"]) == (tp, pp, kind)


def test_the_seed_machine_class_gets_tp8_and_k26_layout_names_the_evidence():
    """8x RTX PRO 6000 over PCIe (recorded): auto picks TP8, citing the measured rows by source and figures."""
    chosen = layout.choose(t.RECORDED_RTX_PRO_6000_2NUMA8, 8)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["source"]) == (8, 1, layout.SOURCE_TOPOLOGY)
    assert "TP8 measured 81.5 tok/s" in chosen["reason"] and "the seed's PP8 35.6" in chosen["reason"]
    assert [line.split(" on ")[0] for line in chosen["evidence"]] == [
        "SGLang Kimi K2.6 PP8", "SGLang Kimi K2.5 TP8", "vLLM Kimi K2.6 TP8"]
    assert all("C=1 " in line for line in chosen["evidence"])
    assert any("voipmonitor/rtx6kpro models/kimi-k26.md" in line and "C=16 475.2" in line
               for line in chosen["evidence"])
    (finding,) = [f for f in rules.evaluate(rules.build_context({"tp-size": 8, "pp-size": 1}, layout=chosen))
                  if f["id"] == "K26-LAYOUT"]
    assert finding["evidence"]["layout.evidence"] == chosen["evidence"]
    assert "tensor parallel across 8" in finding["message"]


def test_the_same_settings_give_tp8_on_nvswitch_and_on_pcie():
    nvswitch, pcie = layout.choose(t.RECORDED_H100_NVSWITCH8, 8), layout.choose(t.RECORDED_RTX4090_2NUMA8, 8)
    assert (nvswitch["tp_size"], nvswitch["pp_size"], pcie["tp_size"], pcie["pp_size"]) == (8, 1, 8, 1)
    assert layout.mismatch(t.RECORDED_RTX4090_2NUMA8, 8, 8, 1) is None  # TP across the sockets is what was measured
    message, fix, evidence, dummy = layout.mismatch(t.RECORDED_RTX_PRO_6000_2NUMA8, 8, 1, 8)
    assert "one after another" in message and fix.startswith("tp-size 8 and pp-size 1")
    assert "several times slower" not in message and evidence["measurements"] == layout.pcie_evidence()
    message, fix, evidence, dummy = layout.mismatch(t.RECORDED_H100_NVSWITCH8, 8, 1, 8)
    assert "one after another" in message and fix.startswith("tp-size 8 and pp-size 1")


def test_without_topology_tensor_parallel_with_the_evidence():
    chosen = layout.choose(t.UNKNOWN, 8)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["source"]) == (8, 1, layout.SOURCE_DEFAULT)
    assert "nvidia-smi not found" in chosen["reason"] and "TP8 measured" in chosen["reason"]
    assert chosen["evidence"][:3] == layout.pcie_evidence()
    assert layout.choose(None, 8)["tp_size"] == 8
    assert (layout.choose(None, 8, 2)["tp_size"], layout.choose(None, 8, 2)["pp_size"]) == (8, 2)
    # facts for fewer GPUs than the server uses say nothing about the rest
    assert layout.choose(t.SINGLE, 8)["source"] == layout.SOURCE_DEFAULT


@pytest.mark.parametrize("tp, pp, expected", [(1, 8, (1, 8)), ("2", "auto", (2, 4)), ("auto", 4, (2, 4)),
                                              (8, None, (8, 1))])
def test_sizes_the_inventory_set_win(tp, pp, expected):
    chosen = layout.choose(t.NVSWITCH8, 8, 1, tp, pp)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["source"]) == expected + (layout.SOURCE_INVENTORY,)


@pytest.mark.parametrize("topo, tp, pp, nnodes, words", [
    (t.PCIE8, 8, 1, 1, None),
    (t.PCIE8_2NUMA, 8, 1, 1, None),
    (t.PCIE8_2NUMA, 4, 2, 1, "pp-size 2 puts 2 pipeline stages on GPUs that share PCIe"),
    (t.BRIDGED_PAIRS8, 4, 2, 1, "no published measurement of this class says whether this or auto's tp-size 8"),
    (t.BRIDGED_PAIRS8, 2, 4, 1, "k26deploy tune -i INVENTORY --layouts tp8pp1,tp2pp4 measures both"),
    (t.BRIDGED_PAIRS8, 8, 1, 1, None),
    (t.NVSWITCH8, 1, 8, 1, "pp-size 8 puts 8 pipeline stages"),
    (t.NVSWITCH8, 8, 1, 1, None),
    (t.NVSWITCH8, 8, 2, 2, None),
    (t.NVSWITCH8, 4, 4, 2, "pp-size 4 puts 2 pipeline stages"),
    (t.PCIE8, 1, 8, 1, "pp-size 8 puts 8 pipeline stages on GPUs that share PCIe"),
    (t.UNKNOWN, 1, 8, 1, None),
])
def test_a_layout_that_fights_the_interconnect_is_named(topo, tp, pp, nnodes, words):
    verdict = layout.mismatch(topo, tp * pp // nnodes, tp, pp, nnodes)
    if words is None:
        assert verdict is None
    else:
        message, fix, evidence, severity = verdict
        assert words in message and fix and evidence["tp-size"] == tp
        # a layout on NVLink blocks, which nobody measured, is never warned against (issue 51)
        assert severity == ("info" if topo is t.BRIDGED_PAIRS8 else None)


def test_the_suggested_fix_is_the_layout_auto_would_choose():
    message, fix, evidence, severity = layout.mismatch(t.PCIE8, 8, 1, 8)
    assert fix.startswith("tp-size 8 and pp-size 1") and severity is None
    assert layout.mismatch(t.BRIDGED_PAIRS8, 8, 8, 1) is None  # auto's own choice there
    message, fix, evidence, severity = layout.mismatch(t.NVSWITCH8, 8, 1, 8)
    assert fix.startswith("tp-size 8 and pp-size 1")
