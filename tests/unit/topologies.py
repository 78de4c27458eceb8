"""GPU interconnects as the nvidia_gpu facts' topology holds them (nvidia_smi.parse_topology_matrix's shape).

RECORDED_*: the link matrix and NUMA nodes of real machines, transcribed from `nvidia-smi topo -m` output their
operators posted (the source is named at each). The others are constructed from nvidia-smi's legend (X, NV#, PIX,
PXB, PHB, NODE, SYS) for machines no public output was found for. topo_m_text() and topo_m_aligned() print a
topology the two ways such output reaches us (tab-separated from nvidia-smi, space-aligned once pasted).
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

# 8x H100 SXM (HGX, NVSwitch), two NUMA nodes: github.com/HazyResearch/ThunderKittens/issues/167 (2026-01-24).
RECORDED_H100_NVSWITCH8 = topology(matrix(8, lambda a, b: "NV18"), [0, 0, 0, 0, 1, 1, 1, 1])
# 8x RTX 4090 (PCIe) on a dual-socket host, every pair SYS, GPUs 0-3 on NUMA node 0 and 4-7 on node 1:
# github.com/NVIDIA/go-gpuallocator/issues/17 (2023-12-05).
RECORDED_RTX4090_2NUMA8 = topology(matrix(8, lambda a, b: "SYS"), [0, 0, 0, 0, 1, 1, 1, 1])
# 5x RTX 4090 (PCIe): GPU0 on NUMA node 1, GPUs 1-4 on node 0 in two PHB pairs joined through NODE:
# github.com/noonghunna/club-3090/issues/46 (2026-05-03).
RECORDED_RTX4090_PCIE5 = topology([
    ["X", "SYS", "SYS", "SYS", "SYS"],
    ["SYS", "X", "PHB", "NODE", "NODE"],
    ["SYS", "PHB", "X", "NODE", "NODE"],
    ["SYS", "NODE", "NODE", "X", "PHB"],
    ["SYS", "NODE", "NODE", "PHB", "X"],
], [1, 0, 0, 0, 0])
# 2 GPUs joined by 12 NVLinks (a Slurm allocation of 2): github.com/rapidsai/dask-cuda/issues/1358 (2024-07-19).
RECORDED_NV12_PAIR = topology([["X", "NV12"], ["NV12", "X"]], [3, 3])
# 8x RTX PRO 6000 Blackwell (PCIe, no NVLink), the seed deployment's machine class, as voipmonitor/rtx6kpro
# hardware/topology.md records `nvidia-smi topo -m` for it (read 2026-12-04; its listings carry no affinity columns,
# the NUMA nodes are those of its diagram): dual-CPU direct attach, GPUs 0-3 on one socket (PHB), 4-7 on the other
# (SYS between them) ...
RECORDED_RTX_PRO_6000_2NUMA8 = topology(matrix(8, lambda a, b: "PHB" if a // 4 == b // 4 else "SYS"),
                                        [0, 0, 0, 0, 1, 1, 1, 1])
# ... and single CPU with two PCIe switches, GPUs 0-3 on one (PIX), 4-7 on the other (PHB between them).
RECORDED_RTX_PRO_6000_SWITCHES8 = topology(matrix(8, lambda a, b: "PIX" if a // 4 == b // 4 else "PHB"), [0] * 8)
UNKNOWN = {"links": [], "numa": [], "nvlink": [], "error": "nvidia-smi not found"}


def topo_m_text(topo):
    """The text `nvidia-smi topo -m` prints for a topology (tab-separated, with the affinity columns)."""
    gpus = len(topo["links"])
    head = "\t" + "\t".join("GPU%d" % i for i in range(gpus)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    cells = ["\t".join(" X " if entry == "X" else entry for entry in row) for row in topo["links"]]
    rows = "".join("GPU%d\t%s\t0-47\t%s\t\tN/A\n" % (i, cells[i], topo["numa"][i]) for i in range(gpus))
    return head + rows + "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"


def topo_m_aligned(topo):
    """The same, as it reads once pasted into an issue: columns padded with spaces, no tabs."""
    return "\n".join(" ".join("%-8s" % cell for cell in line.split("\t"))
                     for line in topo_m_text(topo).splitlines()) + "\n"
