"""Shard files the way a checkpoint holds them (safetensors: an 8-byte little-endian header length, a JSON header
whose one tensor's data_offsets end where the file ends, then the bytes), for tests and the GPU benchmarks that
need a model directory whose shards the sglang_model module accepts."""
import json
import struct


def header(size):
    """The header of a shard whose data is ``size`` bytes, padded to 8 bytes as safetensors pads it."""
    text = json.dumps({"weight": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def shard_bytes(data):
    """A whole shard holding ``data``."""
    return header(len(data)) + data


def write_shard(path, size, block):
    """Write a shard of ``size`` data bytes to ``path``, the data ``block`` repeated (large shards, quickly)."""
    with open(path, "wb") as out:
        out.write(header(size))
        for start in range(0, size, len(block)):
            out.write(block[:min(len(block), size - start)])
