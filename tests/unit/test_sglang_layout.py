"""The layout decision (sglang_layout) and the topology parsers it reads (nvidia_smi), on the interconnects of
tests/unit/topologies.py."""
import pytest

from ansible_collections.k26.deploy.plugins.module_utils import nvidia_smi as smi
from ansible_collections.k26.deploy.plugins.module_utils import sglang_layout as layout
import topologies as t


ALL = [t.NVSWITCH8, t.PCIE8, t.PCIE8_2NUMA, t.BRIDGED_PAIRS8, t.SINGLE, t.RECORDED_H100_NVSWITCH8,
       t.RECORDED_RTX4090_2NUMA8, t.RECORDED_RTX4090_PCIE5, t.RECORDED_NV12_PAIR]
ALL_IDS = ["nvswitch8", "pcie8", "pcie8-2numa", "bridged-pairs8", "single", "recorded-h100-nvswitch8",
           "recorded-4090-2numa8", "recorded-4090-pcie5", "recorded-nv12-pair"]


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
    (t.PCIE8, 8, 1, 1, 8, layout.PCIE, "share PCIe only (no NVLink): pipeline parallel, 8 stages"),
    (t.PCIE8_2NUMA, 8, 1, 1, 8, layout.PCIE, "pipeline parallel"),
    (t.BRIDGED_PAIRS8, 8, 1, 2, 4, layout.PARTIAL, "blocks of 2"),
    (t.NVSWITCH8, 8, 2, 8, 2, layout.NVLINK, "pipeline parallel across the 2 nodes"),
    (t.NVSWITCH8, 4, 1, 4, 1, layout.NVLINK, "all 4 GPUs"),
    (t.SINGLE, 1, 1, 1, 1, layout.SINGLE, "one GPU"),
], ids=["nvswitch8", "pcie8", "pcie8-2numa", "bridged-pairs8", "nvswitch8-2nodes", "nvswitch-4-of-8", "single"])
def test_auto_chooses_from_the_interconnect(topo, gpus, nnodes, tp, pp, kind, words):
    chosen = layout.choose(topo, gpus, nnodes)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["interconnect"], chosen["source"]) == (
        tp, pp, kind, layout.SOURCE_TOPOLOGY)
    assert words in chosen["reason"]


@pytest.mark.parametrize("topo, gpus, tp, pp, kind", [
    (t.RECORDED_H100_NVSWITCH8, 8, 8, 1, layout.NVLINK),
    (t.RECORDED_RTX4090_2NUMA8, 8, 1, 8, layout.PCIE),
    (t.RECORDED_RTX4090_PCIE5, 4, 1, 4, layout.PCIE),
    (t.RECORDED_NV12_PAIR, 2, 2, 1, layout.NVLINK),
], ids=["h100-nvswitch8", "4090-2numa8", "4090-pcie5", "nv12-pair"])
def test_the_recorded_machines_get_the_layout_of_their_interconnect(topo, gpus, tp, pp, kind):
    chosen = layout.choose(topo, gpus)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["interconnect"]) == (tp, pp, kind)


def test_the_same_settings_give_tp8_on_nvswitch_and_pp8_on_pcie():
    nvswitch, pcie = layout.choose(t.RECORDED_H100_NVSWITCH8, 8), layout.choose(t.RECORDED_RTX4090_2NUMA8, 8)
    assert (nvswitch["tp_size"], nvswitch["pp_size"], pcie["tp_size"], pcie["pp_size"]) == (8, 1, 1, 8)
    message, fix, evidence = layout.mismatch(t.RECORDED_RTX4090_2NUMA8, 8, 4, 2)
    assert "across the two NUMA nodes" in message and evidence["link GPU0-GPU1"] == "SYS"
    message, fix, evidence = layout.mismatch(t.RECORDED_H100_NVSWITCH8, 8, 1, 8)
    assert "bubbles" in message and fix.startswith("tp-size 8 and pp-size 1")


def test_without_topology_the_pcie_layout_stays():
    chosen = layout.choose(t.UNKNOWN, 8)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["source"]) == (1, 8, layout.SOURCE_DEFAULT)
    assert "nvidia-smi not found" in chosen["reason"]
    assert layout.choose(None, 8)["pp_size"] == 8
    # facts for fewer GPUs than the server uses say nothing about the rest
    assert layout.choose(t.SINGLE, 8)["source"] == layout.SOURCE_DEFAULT


@pytest.mark.parametrize("tp, pp, expected", [(1, 8, (1, 8)), ("2", "auto", (2, 4)), ("auto", 4, (2, 4)),
                                              (8, None, (8, 1))])
def test_sizes_the_inventory_set_win(tp, pp, expected):
    chosen = layout.choose(t.NVSWITCH8, 8, 1, tp, pp)
    assert (chosen["tp_size"], chosen["pp_size"], chosen["source"]) == expected + (layout.SOURCE_INVENTORY,)


@pytest.mark.parametrize("topo, tp, pp, nnodes, words", [
    (t.PCIE8, 8, 1, 1, "between GPUs 0 and 2 over PCIe (NODE)"),
    (t.PCIE8_2NUMA, 8, 1, 1, "across the two NUMA nodes"),
    (t.PCIE8_2NUMA, 4, 2, 1, "over PCIe (NODE)"),
    (t.BRIDGED_PAIRS8, 4, 2, 1, "over PCIe (NODE)"),
    (t.BRIDGED_PAIRS8, 2, 4, 1, None),
    (t.NVSWITCH8, 1, 8, 1, "pp-size 8 puts 8 pipeline stages"),
    (t.NVSWITCH8, 8, 1, 1, None),
    (t.NVSWITCH8, 8, 2, 2, None),
    (t.NVSWITCH8, 4, 4, 2, "pp-size 4 puts 2 pipeline stages"),
    (t.PCIE8, 1, 8, 1, None),
    (t.UNKNOWN, 8, 1, 1, None),
])
def test_a_layout_that_fights_the_interconnect_is_named(topo, tp, pp, nnodes, words):
    verdict = layout.mismatch(topo, tp * pp // nnodes, tp, pp, nnodes)
    if words is None:
        assert verdict is None
    else:
        message, fix, evidence = verdict
        assert words in message and fix and evidence["tp-size"] == tp


def test_the_suggested_fix_is_the_layout_auto_would_choose():
    message, fix, evidence = layout.mismatch(t.PCIE8, 8, 8, 1)
    assert fix.startswith("tp-size 1 and pp-size 8")
    message, fix, evidence = layout.mismatch(t.NVSWITCH8, 8, 1, 8)
    assert fix.startswith("tp-size 8 and pp-size 1")
