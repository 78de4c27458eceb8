# -*- coding: utf-8 -*-
"""Tensor or pipeline parallel from the GPUs' interconnect: pure decisions over the nvidia_gpu facts' topology.

SGLang puts the ranks of one tensor-parallel group on consecutive GPUs of a node (GPU ``pp_rank * tp + tp_rank``), and
a TP group all-reduces twice per layer: over NVLink that is cheap, over PCIe it dominates decode. Pipeline stages
pass one activation per micro-batch and need no NVLink, but leave GPUs idle unless enough micro-batches are in flight
(pp-async-batch-depth). Hence: TP across GPUs joined by NVLink, PP across GPUs that only share PCIe (and across nodes).

``topology`` is the facts' shape (nvidia_smi.parse_topology_matrix): {"links": [[entry, ...], ...], "numa": [...],
"error": text or None}; an entry is "X", "NV<n>" or a PCIe path (PIX, PXB, PHB, NODE, SYS).
"""

from __future__ import annotations

from ansible_collections.k26.deploy.plugins.module_utils.nvidia_smi import PCIE_LINKS

AUTO = "auto"
SOURCE_INVENTORY = "inventory"
SOURCE_TOPOLOGY = "topology"
SOURCE_DEFAULT = "default"
# the interconnect of a node's GPUs, as a word
NVLINK = "nvlink"          # every pair joined by NVLink (an NVSwitch fabric, or a full mesh)
PARTIAL = "nvlink_blocks"  # NVLink within blocks (bridged pairs ...), PCIe between them
PCIE = "pcie"              # no NVLink at all
SINGLE = "single"          # one GPU
UNKNOWN = "unknown"        # no topology (no GPU, no nvidia-smi, a simulator)
CROSS_SOCKET = PCIE_LINKS[-1]  # SYS: across the SMP interconnect between NUMA nodes


def is_nvlink(entry):
    return str(entry).upper().startswith("NV")


def known_links(topology, gpus):
    """The first ``gpus`` rows and columns of the link matrix, or None when the facts do not cover them."""
    links = (topology or {}).get("links") or []
    if gpus < 1 or len(links) < gpus or any(len(row) < gpus for row in links[:gpus]):
        return None
    return [row[:gpus] for row in links[:gpus]]


def pairs(start, size):
    return [(a, b) for a in range(start, start + size) for b in range(a + 1, start + size)]


def block_joined(links, start, size):
    return all(is_nvlink(links[a][b]) for a, b in pairs(start, size))


def nvlink_block(links):
    """The largest block size d dividing the GPUs such that every run of d consecutive GPUs is joined by NVLink."""
    gpus = len(links)
    for size in range(gpus, 0, -1):
        if gpus % size == 0 and all(block_joined(links, start, size) for start in range(0, gpus, size)):
            return size
    return 1


def interconnect(links):
    if links is None:
        return UNKNOWN
    if len(links) == 1:
        return SINGLE
    block = nvlink_block(links)
    if block == len(links):
        return NVLINK
    if any(is_nvlink(links[a][b]) for a, b in pairs(0, len(links))):
        return PARTIAL
    return PCIE


def slowest_pair(links, start, size):
    """(a, b, entry) of the worst link inside a block of GPUs: a PCIe path, SYS (across sockets) worst of all."""
    ranked = [(a, b, links[a][b]) for a, b in pairs(start, size) if not is_nvlink(links[a][b])]
    ranked.sort(key=lambda item: (-pcie_distance(item[2]), item[0], item[1]))
    return ranked[0] if ranked else None


def pcie_distance(entry):
    """How far a PCIe path goes (nvidia-smi's legend, PIX nearest, SYS farthest; an unknown one counts as SYS)."""
    return PCIE_LINKS.index(entry) if entry in PCIE_LINKS else len(PCIE_LINKS)


def as_size(value):
    """An explicit size (int >= 1), or None for auto/unset."""
    if value is None or str(value).strip().lower() in ("", AUTO):
        return None
    return int(value)


def choose(topology, gpus, nnodes=1, tp=AUTO, pp=AUTO):
    """{"tp_size", "pp_size", "source", "interconnect", "reason"}: the layout the inventory set, or the one the
    interconnect of this node's first ``gpus`` GPUs asks for (pipeline across nodes)."""
    gpus, nnodes = int(gpus), max(1, int(nnodes or 1))
    links = known_links(topology, gpus)
    kind = interconnect(links)
    tp_set, pp_set = as_size(tp), as_size(pp)
    if tp_set is not None or pp_set is not None:
        total = gpus * nnodes
        tp_size = tp_set if tp_set is not None else max(1, total // pp_set)
        pp_size = pp_set if pp_set is not None else max(1, total // tp_set)
        return layout(tp_size, pp_size, SOURCE_INVENTORY, kind, "set in the inventory")
    if links is None:
        why = (topology or {}).get("error") or "no topology facts"
        return layout(1, gpus, SOURCE_DEFAULT, kind,
                      "interconnect unknown (%s): pipeline parallel, which needs no NVLink" % why)
    block = nvlink_block(links)
    stages = gpus // block * nnodes
    reason = {
        SINGLE: "one GPU",
        NVLINK: "all %d GPUs joined by NVLink (%s): tensor parallel across them" % (gpus, links[0][1] if gpus > 1
                                                                                    else ""),
        PARTIAL: "NVLink joins GPUs in blocks of %d, PCIe between the blocks: tensor parallel within a block, "
                 "pipeline parallel across the %d blocks" % (block, gpus // block),
        PCIE: "the %d GPUs share PCIe only (no NVLink): pipeline parallel, %d stages" % (gpus, gpus),
    }[kind]
    if nnodes > 1:
        reason += "; pipeline parallel across the %d nodes" % nnodes
    return layout(block, stages, SOURCE_TOPOLOGY, kind, reason)


def layout(tp_size, pp_size, source, kind, reason):
    return {"tp_size": tp_size, "pp_size": pp_size, "source": source, "interconnect": kind, "reason": reason}


def mismatch(topology, gpus, tp, pp, nnodes=1):
    """Why an explicit tp/pp fights this node's interconnect, as (message, fix, evidence), or None."""
    gpus, tp, pp, nnodes = int(gpus), int(tp), int(pp), max(1, int(nnodes or 1))
    links = known_links(topology, gpus)
    if links is None or gpus < 2 or tp < 1 or pp < 1:
        return None
    stages_on_node = max(1, pp // nnodes)
    evidence = {"tp-size": tp, "pp-size": pp, "gpus": gpus, "interconnect": interconnect(links)}
    if 1 < tp <= gpus:
        worst = next((found for found in (slowest_pair(links, start, tp) for start in range(0, gpus - tp + 1, tp))
                      if found), None)
        if worst:
            a, b, entry = worst
            where = ("across the two NUMA nodes (SYS: PCIe and the inter-socket link)" if entry == CROSS_SOCKET
                     else "over PCIe (%s)" % entry)
            suggested = choose(topology, gpus, nnodes)
            return ("tp-size %d all-reduces twice per layer between GPUs %d and %d %s: decode waits on PCIe instead "
                    "of NVLink, several times slower per token than pipeline stages there."
                    % (tp, a, b, where),
                    "tp-size %d and pp-size %d for this interconnect (leave both unset: auto), or NVLink-joined GPUs"
                    % (suggested["tp_size"], suggested["pp_size"]),
                    dict(evidence, **{"link GPU%d-GPU%d" % (a, b): entry}))
    if stages_on_node > 1 and nvlink_block(links) == gpus:
        return ("pp-size %d puts %d pipeline stages on GPUs that NVLink joins all to all (%s): each stage idles while "
                "the others work (bubbles), where tensor parallel over NVLink keeps every GPU busy on every token; "
                "SGLang's Kimi K2 cookbook serves 8x H200 with --tp 8." % (pp, stages_on_node, links[0][1]),
                "tp-size %d and pp-size %d (leave both unset: auto)" % (gpus, nnodes),
                evidence)
    return None
