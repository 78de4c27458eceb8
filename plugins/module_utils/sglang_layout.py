# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tensor or pipeline parallel from the GPUs' interconnect: pure decisions over the nvidia_gpu facts' topology.

SGLang puts the ranks of one tensor-parallel group on consecutive GPUs of a node (GPU ``pp_rank * tp + tp_rank``), and
a TP group all-reduces twice per layer. Decode at small batches is bound by reading the weights: TP splits every
layer's weights over the GPUs, which read their shares at the same time; pipeline stages read theirs one after another
for each token. The published measurements (sglang_perf_facts.MEASUREMENTS) on 8 RTX PRO 6000 that share PCIe only
put TP8 at 2-2.5x the seed's PP8 at concurrency 1 and about 3x at 16, all-reduces over PCIe included; over NVLink
SGLang's cookbook serves Kimi K2.x with TP8. Hence: TP across a node's GPUs whether NVLink or PCIe joins them, PP across
nodes. Where only some GPUs share NVLink (bridged pairs, blocks) no measurement was found: auto follows the measured
classes on either side (TP across the node) and says which measurement would settle it (``k26deploy tune``); a layout
set there by hand is never warned against.

``topology`` is the facts' shape (nvidia_smi.parse_topology_matrix): {"links": [[entry, ...], ...], "numa": [...],
"error": text or None}; an entry is "X", "NV<n>" or a PCIe path (PIX, PXB, PHB, NODE, SYS).
"""

from __future__ import annotations

from ansible_collections.k26.deploy.plugins.module_utils import sglang_perf_facts as facts

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
# Kimi K2.x has 64 attention heads, and SGLang needs tp-size to divide them.
ATTENTION_HEADS = 64


def pcie_evidence():
    """The measurements a TP layout on PCIe-only GPUs stands on, one line each."""
    return [facts.evidence_line(facts.measurement(row_id)) for row_id in facts.PCIE8_LAYOUT_EVIDENCE]


def evidence_summary():
    seed, sglang_tp8, vllm_tp8 = (facts.measurement(row_id) for row_id in facts.PCIE8_LAYOUT_EVIDENCE)
    return ("on 8 RTX PRO 6000 over PCIe, TP8 measured %.1f tok/s at concurrency 1 (SGLang, %s) and %.1f (vLLM) "
            "against the seed's PP8 %.1f (K26-LAYOUT's evidence names the sources)"
            % (sglang_tp8.tokens_per_s[1], sglang_tp8.note, vllm_tp8.tokens_per_s[1], seed.tokens_per_s[1]))


def tensor_parallel_share(gpus):
    """The largest tp-size that divides both the GPUs and the attention heads (the rest becomes pipeline stages)."""
    return max(size for size in range(1, gpus + 1) if gpus % size == 0 and ATTENTION_HEADS % size == 0)


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


def as_size(value):
    """An explicit size (int >= 1), or None for auto/unset."""
    if value is None or str(value).strip().lower() in ("", AUTO):
        return None
    return int(value)


def choose(topology, gpus, nnodes=1, tp=AUTO, pp=AUTO):
    """{"tp_size", "pp_size", "source", "interconnect", "reason", "evidence"}: the layout the inventory set, or the
    one the interconnect of this node's first ``gpus`` GPUs asks for (pipeline across nodes); ``evidence`` lists the
    measurements the choice stands on."""
    gpus, nnodes = int(gpus), max(1, int(nnodes or 1))
    links = known_links(topology, gpus)
    kind = interconnect(links)
    tp_set, pp_set = as_size(tp), as_size(pp)
    if tp_set is not None or pp_set is not None:
        total = gpus * nnodes
        tp_size = tp_set if tp_set is not None else max(1, total // pp_set)
        pp_size = pp_set if pp_set is not None else max(1, total // tp_set)
        return layout(tp_size, pp_size, SOURCE_INVENTORY, kind, "set in the inventory")
    across_nodes = nodes_reason(gpus, nnodes)
    if links is None:
        why = (topology or {}).get("error") or "no topology facts"
        block = tensor_parallel_share(gpus)
        return layout(block, gpus // block * nnodes, SOURCE_DEFAULT, kind,
                      "interconnect unknown (%s): tensor parallel, which every published Kimi K2.x measurement on 8 "
                      "GPUs favours, over NVLink (SGLang's cookbook: --tp 8) and over PCIe (%s)%s"
                      % (why, evidence_summary(), across_nodes),
                      pcie_evidence() + [facts.NVLINK_LAYOUT_SOURCE])
    if kind == PCIE:
        block = tensor_parallel_share(gpus)
        return layout(block, gpus // block * nnodes, SOURCE_TOPOLOGY, kind,
                      "the %d GPUs share PCIe only (no NVLink): tensor parallel across %d of them: decode reads the "
                      "weights on all GPUs at once, where pipeline stages read them one after another; %s%s"
                      % (gpus, block, evidence_summary(), across_nodes), pcie_evidence())
    if kind == PARTIAL:
        block, share = nvlink_block(links), tensor_parallel_share(gpus)
        return layout(share, gpus // share * nnodes, SOURCE_TOPOLOGY, kind,
                      "NVLink joins GPUs in blocks of %d, PCIe between the blocks: no published measurement of this "
                      "class was found, so tensor parallel across %d of them, as measured on both sides of it (all "
                      "NVLink: SGLang's cookbook --tp 8; PCIe only: %s); %s measures it against tensor parallel "
                      "within the blocks%s" % (block, share, evidence_summary(), tune_command(gpus, block), across_nodes),
                      pcie_evidence() + [facts.NVLINK_LAYOUT_SOURCE])
    reason = {
        SINGLE: "one GPU",
        NVLINK: "all %d GPUs joined by NVLink (%s): tensor parallel across them" % (gpus, links[0][1] if gpus > 1
                                                                                    else ""),
    }[kind]
    return layout(gpus, nnodes, SOURCE_TOPOLOGY, kind, reason + across_nodes,
                  [facts.NVLINK_LAYOUT_SOURCE] if kind == NVLINK else [])


def nodes_reason(gpus, nnodes):
    """What auto does between nodes, and that no measurement decided it (nothing, on one node)."""
    if nnodes <= 1:
        return ""
    share = tensor_parallel_share(gpus)
    return ("; pipeline parallel across the %d nodes (the network between them carries one hand-over a stage instead "
            "of two all-reduces a layer): no published Kimi K2.x measurement compares it with tensor parallel across "
            "the nodes; k26deploy tune -i INVENTORY --layouts tp%dpp%d,tp%dpp%d measures both"
            % (nnodes, share, gpus // share * nnodes, share * nnodes, gpus // share))


def tune_command(gpus, block):
    """The k26deploy tune command that measures auto's choice for NVLink blocks against the block-wise layout."""
    return "k26deploy tune -i INVENTORY --layouts tp%dpp1,tp%dpp%d" % (gpus, block, gpus // block)


def layout(tp_size, pp_size, source, kind, reason, evidence=()):
    return {"tp_size": tp_size, "pp_size": pp_size, "source": source, "interconnect": kind, "reason": reason,
            "evidence": list(evidence)}


def mismatch(topology, gpus, tp, pp, nnodes=1):
    """Why an explicit tp/pp fights this node's interconnect, as (message, fix, evidence, severity: None for the
    rule's own), or None. On NVLink blocks, where nothing was measured, a layout other than auto's is information."""
    gpus, tp, pp, nnodes = int(gpus), int(tp), int(pp), max(1, int(nnodes or 1))
    links = known_links(topology, gpus)
    if links is None or gpus < 2 or tp < 1 or pp < 1:
        return None
    stages_on_node = max(1, pp // nnodes)
    kind = interconnect(links)
    evidence = {"tp-size": tp, "pp-size": pp, "gpus": gpus, "interconnect": kind}
    suggested = choose(topology, gpus, nnodes)
    fix = ("tp-size %d and pp-size %d for this interconnect (leave both unset: auto)"
           % (suggested["tp_size"], suggested["pp_size"]))
    if kind == PARTIAL:
        if (tp, pp) == (suggested["tp_size"], suggested["pp_size"]):
            return None
        block = nvlink_block(links)
        return ("tp-size %d and pp-size %d on GPUs that NVLink joins in blocks of %d (PCIe between them): no published "
                "measurement of this class says whether this or auto's tp-size %d is faster; %s measures both."
                % (tp, pp, block, suggested["tp_size"], tune_command(gpus, block)),
                "nothing to do unless the measurement says so", evidence, "info")
    if stages_on_node > 1 and kind == PCIE and suggested["pp_size"] < pp:
        return ("pp-size %d puts %d pipeline stages on GPUs that share PCIe: a token passes the stages one after "
                "another, each GPU reading its share of the weights in turn, where tensor parallel reads them all at "
                "once; %s." % (pp, stages_on_node, evidence_summary()), fix,
                dict(evidence, measurements=pcie_evidence()), None)
    if stages_on_node > 1 and kind == NVLINK:
        return ("pp-size %d puts %d pipeline stages on GPUs that NVLink joins all to all (%s): a token passes the "
                "stages one after another, where tensor parallel over NVLink has every GPU work on every token; "
                "SGLang's Kimi K2 cookbook serves 8x H200 with --tp 8." % (pp, stages_on_node, links[0][1]),
                "tp-size %d and pp-size %d (leave both unset: auto)" % (gpus, nnodes), evidence, None)
    return None
