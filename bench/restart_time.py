"""How long a configuration change keeps a server from serving: cold (the shards not in the page cache) against
warm (the deploy pre-warmed them while the old server still served), measured where the work is real.

On a GPU host, as root, under systemd (the GPU proof's set-up):
    K26_GPU_SCRIPT=bench/restart_time.py tests/gpu/prove.sh [--gib 24] [--shards 12] [--rounds 2]
The simulator's GPU mode stands in for SGLang and reads the model directory's shard files (generated here, tens of
GB) from disk or the page cache into GPU memory, so the load costs what reading those bytes costs. Before every
run the shards leave the page cache (fsync, then POSIX_FADV_DONTNEED on each file, and drop_caches where this host
lets root write it); the cold run then loads from disk, the warm one's deploy reads them back first
(sglang_model_prewarm: on) while the old server serves. Each run changes the configuration (an environment
variable), so each restarts the service. Prints each run and the medians side by side with warm/cold.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]

import prove  # noqa: E402  (the GPU proof's inventory, state directory and deploy variables)
from safetensors_shards import header, write_shard  # noqa: E402

CHUNK = 64 << 20


def write_shards(model, shards, gib):
    """``shards`` safetensors files of ``gib``/``shards`` GiB (incompressible bytes) and the index that names them."""
    size = int(gib * (1 << 30)) // shards
    names = ["model-%05d-of-%05d.safetensors" % (index + 1, shards) for index in range(shards)]
    block = os.urandom(CHUNK)
    for name in names:
        path = model / name
        if not (path.exists() and path.stat().st_size == len(header(size)) + size):
            write_shard(path, size, block)
    for stale in model.glob("*.safetensors"):
        if stale.name not in names:
            stale.unlink()
    index = {"metadata": {"total_size": size * shards},
             "weight_map": {"layer.%d" % i: name for i, name in enumerate(names)}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    return [model / name for name in names]


def evict(files):
    """Put the files out of the page cache; says how (drop_caches only where root may write it)."""
    os.sync()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return "fadvise+drop_caches"
    except OSError:
        return "fadvise"


def deploy(args, model, name, prewarm):
    extra = prove.deploy_vars(args, sglang_service_model_path=str(model), sglang_model_prewarm=prewarm,
                              sglang_service_ready_timeout=900)
    extra["sglang_service_environment"] = dict(
        SGLANG_SIM_LOAD_SECONDS=0, SGLANG_SIM_GRAPH_SECONDS=1, SGLANG_SIM_WARMUP_SECONDS=1, NCCL_NVLS_ENABLE=0,
        TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1, K26_RESTART_BENCH_RUN=name)
    started = time.monotonic()
    result = k26deploy_deploy(extra)
    wall = time.monotonic() - started
    host = prove.host_of(result)
    if result.exit_code != 0 or not host.ready:
        raise SystemExit("run %s failed: %s" % (name, prove.describe(result)))
    phases = (host.startup or {}).get("phases") or {}
    return {"run": name, "wall": round(wall, 1), "weights_loaded": phases.get("weights_loaded"),
            "ready": phases.get("ready"), "restarted": host.restarted, "prewarm": (host.model or {}).get("prewarm")}


def k26deploy_deploy(extra):
    return prove.k26deploy.deploy(str(prove.INVENTORY), extra)


def median(runs, key):
    values = [run[key] for run in runs if run[key] is not None]
    return statistics.median(values) if values else float("nan")


def report(cold, warm, gib, gpus, how):
    lines = ["", "restart after a configuration change: %.1f GiB of shards, %d GPU(s), evicted by %s" % (gib, gpus, how),
             "  %-34s %10s %10s %10s" % ("median of %d runs each" % len(cold), "cold", "warm", "warm/cold")]
    for key, words in (("weights_loaded", "process start -> weights loaded, s"),
                       ("ready", "process start -> ready (downtime), s"),
                       ("wall", "deploy command, whole, s")):
        c, w = median(cold, key), median(warm, key)
        lines.append("  %-34s %10.1f %10.1f %10.2f" % (words, c, w, w / c if c else float("nan")))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=24.0, help="size of the generated checkpoint (GiB)")
    parser.add_argument("--shards", type=int, default=12, help="number of shard files")
    parser.add_argument("--rounds", type=int, default=2, help="cold and warm runs each")
    parser.add_argument("--pp", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("ANSIBLE_NOCOLOR", "1")
    prove.prepare(args)
    model = prove.STATE_DIR / "restart-model"
    model.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        source = prove.STATE_DIR / "model" / name
        if source.exists():
            (model / name).write_bytes(source.read_bytes())
    started = time.monotonic()
    files = write_shards(model, args.shards, args.gib)
    print("[restart] %d shards, %.1f GiB, written in %.0fs" % (len(files), args.gib, time.monotonic() - started), flush=True)
    first = deploy(args, model, "first", "off")
    print("[restart] first deploy: %s" % json.dumps(first), flush=True)
    cold, warm, how = [], [], ""
    for number in range(args.rounds):
        for kind, runs, prewarm in (("cold", cold, "off"), ("warm", warm, "on")):
            how = evict(files)
            run = deploy(args, model, "%s-%d" % (kind, number), prewarm)
            runs.append(run)
            print("[restart] %s" % json.dumps(run), flush=True)
    print(report(cold, warm, args.gib, args.gpus, how), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
