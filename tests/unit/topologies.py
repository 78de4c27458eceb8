"""GPU interconnects as the nvidia_gpu facts' topology holds them (nvidia_smi.parse_topology_matrix's shape).

Constructed from nvidia-smi's legend (X, NV#, PIX, PXB, PHB, NODE, SYS) for the machines the layout decision must
tell apart; tests/unit/test_sglang_layout.py parses recorded `nvidia-smi topo -m` output into the same shape.
"""


def matrix(gpus, link):
    return [["X" if a == b else link(a, b) for b in range(gpus)] for a in range(gpus)]


def topology(links, numa=None):
    return {"links": links, "numa": numa or [None] * len(links), "nvlink": [], "error": None}


# 8x H200 / H100 SXM on an HGX board: every pair through the NVSwitch fabric, 18 NVLinks per GPU.
NVSWITCH8 = topology(matrix(8, lambda a, b: "NV18"), [0, 0, 0, 0, 1, 1, 1, 1])
# 8 PCIe cards under one socket's PCIe switches (the seeds' 8x RTX PRO 6000 class): no NVLink.
PCIE8 = topology(matrix(8, lambda a, b: "PIX" if a // 2 == b // 2 else "NODE"), [0] * 8)
# 8 PCIe cards on a dual-socket host: GPUs 0-3 on NUMA node 0, 4-7 on node 1.
PCIE8_2NUMA = topology(matrix(8, lambda a, b: "NODE" if a // 4 == b // 4 else "SYS"), [0] * 4 + [1] * 4)
# 8 PCIe cards with NVLink bridges joining pairs (0-1, 2-3, ...).
BRIDGED_PAIRS8 = topology(matrix(8, lambda a, b: "NV4" if a // 2 == b // 2 else "NODE"), [0] * 8)
SINGLE = topology([["X"]], [0])
UNKNOWN = {"links": [], "numa": [], "nvlink": [], "error": "nvidia-smi not found"}


def topo_m_text(topo):
    """The text `nvidia-smi topo -m` prints for a topology (tab-separated, with the affinity columns)."""
    gpus = len(topo["links"])
    head = "\t" + "\t".join("GPU%d" % i for i in range(gpus)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    cells = ["\t".join(" X " if entry == "X" else entry for entry in row) for row in topo["links"]]
    rows = "".join("GPU%d\t%s\t0-47\t%s\t\tN/A\n" % (i, cells[i], topo["numa"][i]) for i in range(gpus))
    return head + rows + "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
