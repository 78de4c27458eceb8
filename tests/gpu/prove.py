"""The GPU proof: the real deploy_k26.yml on this GPU host, then the evidence for each promise, with figures.

Run by tests/gpu/prove.sh as root on a GPU host with systemd (it boots one where PID 1 is not systemd). Every
playbook goes through k26deploy (ansible-runner, structured results); the checks read systemd, the journal,
/proc, nvidia-smi and the endpoint directly. The SGLang simulator runs in its GPU mode as the service, under
the role's real hardened unit (DevicePolicy=closed). Ends with a summary table; exit status 0 when every check
passed.
"""

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "integration"), str(ROOT / "tests")]
# the k26deploy CLI run as a subprocess (tune, preflight) imports the same package
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))

import k26deploy  # noqa: E402
from safetensors_shards import write_shard  # noqa: E402
from sim_tokenizer import write_tokenizer  # noqa: E402

INVENTORY = ROOT / "tests" / "gpu" / "inventory.yml"
SAMPLE_PLAYBOOK = ROOT / "tests" / "gpu" / "sample.yml"
HOST = "gpu-host"
UNIT = "sglang.service"
STATE_DIR = Path("/var/lib/k26-proof")
# sglang_deepgemm_precompile's records (its state_dir): "this configuration was precompiled here"
PRECOMPILE_RECORDS = Path("/var/lib/k26deploy/deepgemm")
MEM_FRACTION = 0.88
BAD_MEM_FRACTION = 0.99
SHARD_BYTES = 256 << 20
ROUTER_PORT = yaml.safe_load((ROOT / "roles" / "sglang_router" / "defaults" / "main.yml").read_text())[
    "sglang_router_port"]


class Proof:
    """Checks with their figures, printed as they happen and as a summary at the end."""

    def __init__(self):
        self.rows = []

    def check(self, name, ok, figure):
        self.rows.append((name, bool(ok), figure))
        print(f"[proof] {'PASS' if ok else 'FAIL'} {name}: {figure}", flush=True)
        return ok

    def summary(self):
        width = max(len(name) for name, dummy, dummy in self.rows)
        lines = ["", "GPU proof summary (%s)" % time.strftime("%Y-%m-%d %H:%M:%S %Z")]
        lines += ["  %-4s %-*s  %s" % ("PASS" if ok else "FAIL", width, name, figure) for name, ok, figure in self.rows]
        passed = sum(ok for dummy, ok, dummy in self.rows)
        lines.append("  %d/%d checks passed" % (passed, len(self.rows)))
        return "\n".join(lines)

    @property
    def ok(self):
        return all(ok for dummy, ok, dummy in self.rows)


# --------------------------------------------------------------------------- host readings

def run(argv, check=False):
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def unit_prop(name):
    return run(["systemctl", "show", UNIT, "--property=" + name, "--value"]).stdout.strip()


def nvidia_smi(query):
    out = run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader,nounits"], check=True).stdout
    return [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.strip()]


def journal_of_invocation(invocation):
    out = run(["journalctl", "-u", UNIT, "_SYSTEMD_INVOCATION_ID=" + invocation, "-o", "cat", "--no-pager"]).stdout
    return out.splitlines()


def service_pids():
    cgroup = unit_prop("ControlGroup")
    procs = Path("/sys/fs/cgroup" + cgroup, "cgroup.procs")
    return [int(pid) for pid in procs.read_text().split()] if cgroup and procs.exists() else []


def capabilities(pid):
    fields = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if ":\t" in line)
    return fields.get("CapEff", "?").strip(), fields.get("CapPrm", "?").strip()


# --------------------------------------------------------------------------- the endpoint

class Load:
    """A steady stream of completions from a few threads, until stopped."""

    def __init__(self, endpoint, api_key, model, threads=4, max_tokens=256):
        self.url = endpoint + "/v1/completions"
        self.headers = {"Content-Type": "application/json", "Authorization": "Bearer " + api_key}
        self.body = json.dumps({"model": model, "prompt": "Tell me about pipeline parallelism.",
                                "max_tokens": max_tokens}).encode()
        self.stop = threading.Event()
        self.tokens = 0
        self.requests = 0
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.worker, daemon=True) for dummy in range(threads)]
        self.started = None
        self.seconds = None

    def worker(self):
        while not self.stop.is_set():
            request = urllib.request.Request(self.url, data=self.body, headers=self.headers)
            try:
                with urllib.request.urlopen(request, timeout=120) as reply:
                    usage = json.load(reply)["usage"]
                with self.lock:
                    self.tokens += usage["completion_tokens"]
                    self.requests += 1
            except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
                with self.lock:
                    self.errors.append(str(exc))

    def __enter__(self):
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=180)
        self.seconds = time.monotonic() - self.started
        return False


# --------------------------------------------------------------------------- runs through k26deploy

def deploy_vars(args, **over):
    base = {
        "sglang_simulator_python": sys.executable,
        "sglang_service_model_path": str(STATE_DIR / "model"),
        "sglang_service_gpu_count": args.gpus,
        # the layout from the interconnect (auto) unless --pp sets it
        "sglang_service_pp_size": args.pp or "auto",
        "sglang_service_mem_fraction_static": MEM_FRACTION,
        "sglang_service_api_key": args.api_key,
        # the proof writes an Xid 13 (RESTART_APP) to the kernel log for preflight to see; the guard would restart
        # the service for it in the middle of the other checks: it records it only, until prove_guard
        "sglang_service_guard_act_on_gpu_fault": False,
        # the guard's program needs the standard library only: the interpreter this proof runs with has it
        "sglang_service_guard_python": sys.executable,
    }
    if args.extras_only:
        # a second run on the same host: prove_guard's synthetic Xid 79 stays in the kernel log until the next boot,
        # and preflight would (rightly) leave the replica out for it
        base["k26_preflight_severity_overrides"] = {"K26-GPU-HEALTH": "warning"}
    base.update(over)
    return base


def host_of(result):
    return result.hosts.get(HOST) or k26deploy.HostResult(host=HOST)


def describe(result):
    host = host_of(result)
    return (f"exit {result.exit_code}, ready={host.ready}, reason={host.reason}, changed={host.changed}, "
            f"restarted={host.restarted}, rolled_back={host.rolled_back}")


def gpu_facts_sampled(seconds):
    """What tests/gpu/sample.yml published: the GPUs' load over ``seconds`` (sampling) and their topology."""
    result = k26deploy.run("sample", str(INVENTORY), {"k26_sample_seconds": seconds}, playbook=str(SAMPLE_PLAYBOOK))
    return host_of(result).summary or {}


def sample_gpus(seconds):
    return (gpu_facts_sampled(seconds).get("sampling") or {}).get("gpus") or []


def figures(gpus):
    return "; ".join(f"GPU{g['index']} util mean {g['utilization_gpu_pct']['mean']}% max "
                     f"{g['utilization_gpu_pct']['max']}%, power {g['power_draw_pct_of_limit']}% of "
                     f"{g['power_limit_w']} W, SM {g['clocks_sm_mhz']['mean']} MHz" for g in gpus) or "no samples"


# --------------------------------------------------------------------------- the proof

def prepare(args):
    model = STATE_DIR / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"]}))
    write_tokenizer(model)  # the benchmark's prompts; the stand-in answers one word per token
    shard = model / "model.safetensors"  # verified by the sglang_model role, read into GPU memory by the stand-in
    if not shard.exists():
        write_shard(shard, SHARD_BYTES, os.urandom(1 << 20))
    key_file = STATE_DIR / "api_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_hex(24))  # token_urlsafe may begin with "-", which SGLang cannot take
        key_file.chmod(0o600)
    args.api_key = key_file.read_text().strip()
    args.gpus = len(nvidia_smi("index"))
    record_nvidia_smi()


def record_nvidia_smi():
    """nvidia-smi -q and -q -x of this GPU host, under $OUT/nvidia-smi (the parsers' fixtures: tests/fixtures/nvidia)."""
    if not os.environ.get("OUT"):
        return
    folder = Path(os.environ["OUT"]) / "nvidia-smi"
    folder.mkdir(parents=True, exist_ok=True)
    for name, argv in (("nvidia-smi-q.txt", ["nvidia-smi", "-q"]), ("nvidia-smi-q-x.xml", ["nvidia-smi", "-q", "-x"]),
                       ("nvidia-smi-version.txt", ["nvidia-smi", "--version"])):
        (folder / name).write_text(run(argv).stdout)


def prove_deploy(proof, args):
    started = time.monotonic()
    first = k26deploy.deploy(str(INVENTORY), deploy_vars(args))
    host = host_of(first)
    proof.check("deploy_k26.yml reaches ready", first.exit_code == 0 and host.ready,
                f"{describe(first)}, {time.monotonic() - started:.0f} s, time_to_ready {host.time_to_ready}")
    if not host.ready:
        print(host.msg, "\n".join(host.journal_excerpt or []) if isinstance(host.journal_excerpt, list)
              else host.journal_excerpt, sep="\n")
        return False
    args.layout = host.layout or {}
    unit_text = Path("/etc/systemd/system", UNIT).read_text()
    allow = [line for line in unit_text.splitlines() if line.startswith(("DeviceAllow", "DevicePolicy", "PrivateDevices"))]
    proof.check("unit: DevicePolicy=closed with the driver's devices", "DevicePolicy=closed" in allow and
                any(line.startswith("DeviceAllow=char-nvidia") for line in allow), ", ".join(allow))
    return True


def prove_layout(proof, args):
    """The facts' topology of this host, and the layout the deploy chose from it (with --pp: the one set)."""
    topology = gpu_facts_sampled(1).get("topology") or {}
    print(f"[proof] topology facts: links {topology.get('links')}, numa {topology.get('numa')}, "
          f"nvlink {topology.get('nvlink')}, error {topology.get('error')}", flush=True)
    layout = args.layout
    sizes = (layout.get("tp_size"), layout.get("pp_size"))
    source = "inventory" if args.pp else "topology"
    proof.check("layout: tp x pp covers the GPUs, chosen from the " + source,
                layout.get("source") == source and len(topology.get("links") or []) == args.gpus
                and sizes[0] * sizes[1] == args.gpus,
                f"tp-size {sizes[0]}, pp-size {sizes[1]} ({layout.get('interconnect')}): {layout.get('reason')}")


def prove_gpu_access(proof, args):
    invocation = unit_prop("InvocationID")
    lines = journal_of_invocation(invocation)
    seen = next((line for line in lines if "GPU mode: CUDA sees" in line), "")
    expected = f"CUDA sees {args.gpus} device(s)"
    nvml = f"NVML sees {args.gpus}."
    proof.check("the service sees every GPU (CUDA and NVML)", expected in seen and nvml in seen,
                seen.split("] ", 1)[-1] or "no GPU line in the journal")
    pids = service_pids()
    caps = {pid: capabilities(pid) for pid in pids}
    proof.check("every service process has an empty capability set",
                pids and all(eff == "0000000000000000" for eff, dummy in caps.values()),
                f"{len(pids)} processes, CapEff {sorted({eff for eff, dummy in caps.values()})}")
    memory = nvidia_smi("memory.used,memory.total")
    shares = [int(used) / int(total) for used, total in memory]
    proof.check("GPU memory held by the service matches mem-fraction-static",
                all(MEM_FRACTION <= share <= MEM_FRACTION + 0.05 for share in shares),
                f"mem-fraction-static {MEM_FRACTION}; held " +
                ", ".join(f"GPU{i} {int(u)} of {int(t)} MiB ({s:.3f})" for i, ((u, t), s) in
                          enumerate(zip(memory, shares))))


# a synthetic Xid the proof writes to the kernel log: 13 (graphics engine exception) is an application's fault in
# NVIDIA's catalog (RESTART_APP), a warning, so it blocks no later deploy on this machine
SYNTHETIC_XID = 13


def prove_gpu_health(proof, args):
    """The real GPU's health as nvidia_gpu_facts reads it, then an NVIDIA event written to the kernel log (/dev/kmsg)
    seen by preflight and by status, with its meaning."""
    facts = gpu_facts_sampled(1)
    gpus = facts.get("gpus") or []
    health = [gpu.get("health") or {} for gpu in gpus]
    proof.check("GPU health read from nvidia-smi -q and the kernel log",
                len(gpus) == args.gpus and all(h.get("readings") for h in health)
                and facts.get("kernel_log_error") is None,
                "; ".join(f"GPU{gpu['index']} {gpu.get('pci_bus_id')}: verdict {h.get('verdict')}, readings "
                          f"{json.dumps(h.get('readings'), sort_keys=True)}, events {len(h.get('events') or [])}"
                          for gpu, h in zip(gpus, health)) or f"no GPU ({facts.get('kernel_log_error')})")
    if not gpus:
        return
    bus = gpus[0]["pci_bus_id"].split(":", 1)[1].rsplit(".", 1)[0].lower()  # 00000000:00:06.0 -> 00:06
    line = f"NVRM: Xid (PCI:0000:{bus}): {SYNTHETIC_XID}, k26deploy GPU proof: a synthetic event at {time.time():.0f}"
    Path("/dev/kmsg").write_text(line + "\n")
    for command in ("preflight", "status"):
        result = getattr(k26deploy, command)(str(INVENTORY), deploy_vars(args))
        seen = [f for f in host_of(result).findings or [] if f["id"] == "K26-GPU-HEALTH"]
        message = seen[0]["message"] if seen else ""
        proof.check(f"{command} sees the kernel's Xid {SYNTHETIC_XID} with its meaning",
                    bool(seen) and seen[0]["severity"] == "warning"
                    and f"Xid {SYNTHETIC_XID} (graphics engine exception" in message,
                    f"{seen[0]['severity']}: {message[:300]}" if seen else "no K26-GPU-HEALTH finding")


EXPOSURE_AIM = 1.5


def exposure_of(unit):
    """systemd-analyze's exposure score of a loaded unit (0 safest, 10 least safe), or None with its output."""
    out = run(["systemd-analyze", "security", "--no-pager", unit]).stdout
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out)
    return (float(match.group(1)), out) if match else (None, out)


def prove_exposure(proof):
    """systemd-analyze's exposure score of the GPU unit: the issue's aim is 1.5 or lower."""
    score, out = exposure_of(UNIT)
    proof.check(f"the GPU unit's exposure is {EXPOSURE_AIM} or lower", score is not None and score <= EXPOSURE_AIM,
                f"systemd-analyze security: {score if score is not None else out[-300:]} "
                f"(SystemCallFilter allow-list, PrivateMounts={unit_prop('PrivateMounts')})")


def prove_load_and_idle(proof, args):
    endpoint = "http://127.0.0.1:30000"
    with Load(endpoint, args.api_key, "kimi-k2.6") as load:
        time.sleep(2)  # past the first requests' start
        busy = sample_gpus(6)
    idle = sample_gpus(4)
    rate = load.tokens / load.seconds if load.seconds else 0
    busy_util = min((g["utilization_gpu_pct"]["mean"] or 0) for g in busy) if busy else 0
    idle_util = max((g["utilization_gpu_pct"]["mean"] or 0) for g in idle) if idle else 100
    proof.check("completions drive real GPU work", busy and busy_util >= 50 and not load.errors,
                f"{load.requests} requests, {load.tokens} tokens, {rate:.0f} tok/s, {len(load.errors)} errors; "
                f"busy: {figures(busy)}")
    proof.check("GPUs idle once the stream stops", idle and idle_util <= 10, f"idle: {figures(idle)}")


def prove_idempotence(proof, args):
    before = unit_prop("InvocationID")
    again = k26deploy.deploy(str(INVENTORY), deploy_vars(args))
    host = host_of(again)
    after = unit_prop("InvocationID")
    proof.check("second deploy changes nothing and keeps the InvocationID",
                again.exit_code == 0 and host.changed == 0 and before == after,
                f"{describe(again)}, InvocationID {before[:8]} -> {after[:8]}")


def prove_precompile(proof, args):
    """A DeepGEMM precompile (the stand-in's compile mode: a whole server that takes mem-fraction-static of the GPUs)
    before a restart: it can only succeed once the serving server has given its GPUs back."""
    precompile_vars = deploy_vars(args, sglang_service_deepgemm_precompile="always",
                                  sglang_service_deepgemm_precompile_timeout=300,
                                  sglang_service_environment={"K26_PROOF_PRECOMPILE": "1"})
    # A precompile runs once per configuration: a second proof on this host would find its record and skip it (as it
    # should). Forgetting the records makes the configuration new to the host again, so every run sees a precompile.
    shutil.rmtree(PRECOMPILE_RECORDS, ignore_errors=True)
    before = unit_prop("InvocationID")
    stop, seen = threading.Event(), {}
    watcher = threading.Thread(target=watch_precompile_exposure, args=(stop, seen), daemon=True)
    watcher.start()
    try:
        result = k26deploy.deploy(str(INVENTORY), precompile_vars)
    finally:
        stop.set()
        watcher.join(timeout=30)
    host = host_of(result)
    precompile = host.precompile or {}
    said = run(["journalctl", "-o", "cat", "--no-pager", "-u", precompile.get("unit") or "none"]).stdout
    finished = "DeepGEMM Kernels compilation finished successfully." in said
    proof.check("DeepGEMM precompile on the freed GPUs before the restart",
                result.exit_code == 0 and host.ready and finished and unit_prop("InvocationID") != before,
                f"{describe(result)}; precompile {precompile.get('seconds')} s in {precompile.get('unit')}, "
                f"finished={finished}")
    if not host.ready:
        print(host.msg, host.journal_excerpt, said[-4000:], sep="\n", flush=True)
    score = seen.get("exposure")
    proof.check(f"the precompile's transient unit's exposure is {EXPOSURE_AIM} or lower (as sandboxed as the service)",
                score is not None and score <= EXPOSURE_AIM,
                f"systemd-analyze security {seen.get('unit')}: {score if score is not None else seen.get('out', '')[-300:]}")
    again = k26deploy.deploy(str(INVENTORY), precompile_vars)
    proof.check("the same configuration again: no precompile, no restart",
                again.exit_code == 0 and host_of(again).precompile is None and host_of(again).changed == 0,
                describe(again))


def watch_precompile_exposure(stop, seen):
    """Until STOP: find the precompile's transient unit while it runs and rate it once (it is gone afterwards)."""
    while not stop.is_set() and "exposure" not in seen:
        names = run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "sglang-deepgemm-*"]).stdout.split()
        if names:
            seen["unit"] = names[0]
            seen["exposure"], seen["out"] = exposure_of(names[0])
            if seen["exposure"] is None:
                del seen["exposure"]
        time.sleep(0.2)


def prove_oom_rollback(proof, args):
    good_config = Path("/etc/sglang/sglang.yaml").read_text()
    started = time.monotonic()
    bad = k26deploy.deploy(str(INVENTORY), deploy_vars(args, sglang_service_mem_fraction_static=BAD_MEM_FRACTION))
    took = time.monotonic() - started
    host = host_of(bad)
    excerpt = host.journal_excerpt if isinstance(host.journal_excerpt, str) else "\n".join(host.journal_excerpt or [])
    oom_line = next((line for line in excerpt.splitlines() if "OutOfMemoryError" in line or "out of memory" in line), "")
    proof.check("mem-fraction 0.99 fails with the real CUDA OOM line", bad.exit_code != 0 and oom_line,
                f"{describe(bad)}, {took:.0f} s; {oom_line.strip()[:160]}")
    restored = Path("/etc/sglang/sglang.yaml").read_text() == good_config
    status = k26deploy.status(str(INVENTORY), deploy_vars(args))
    proof.check("the failed change was rolled back and serves again",
                host.rolled_back and restored and host_of(status).ready,
                f"rolled_back={host.rolled_back}, config restored byte for byte={restored}, "
                f"status ready={host_of(status).ready}")


def prove_manual_rollback(proof, args):
    bad_vars = deploy_vars(args, sglang_service_mem_fraction_static=BAD_MEM_FRACTION, sglang_service_rollback=False)
    bad = k26deploy.deploy(str(INVENTORY), bad_vars)
    status = k26deploy.status(str(INVENTORY), deploy_vars(args))
    proof.check("k26deploy status reports the broken service", bad.exit_code != 0 and host_of(status).ready is False,
                f"deploy without rollback: {describe(bad)}; status: ready={host_of(status).ready}, "
                f"reason={host_of(status).reason}")
    rolled = k26deploy.rollback(str(INVENTORY), deploy_vars(args))
    status = k26deploy.status(str(INVENTORY), deploy_vars(args))
    proof.check("k26deploy rollback restores the last good configuration",
                rolled.exit_code == 0 and host_of(rolled).ready and host_of(status).ready,
                f"rollback: {describe(rolled)}; {host_of(rolled).msg}; status ready={host_of(status).ready}")


GUARD_UNIT = "sglang-guard.service"
GUARD_STATE = Path("/var/lib/k26deploy/guard/sglang")
# the simulator's hang file (tests/gpu/inventory.yml): while it exists, no token is made and HTTP answers
HANG_FILE = Path("/var/lib/sglang/hang")


def guard_incidents():
    return [json.loads(path.read_text()) for path in sorted((GUARD_STATE / "incidents").glob("*.json"))]


def write_fatal_xid(tag):
    """A synthetic Xid 79 ("fallen off the bus": reset the GPU) for the service's GPU, written to the kernel log;
    returns the monotonic time it was written."""
    bus = nvidia_smi("pci.bus_id")[0][0].split(":", 1)[1].rsplit(".", 1)[0].lower()  # 00000000:00:06.0 -> 00:06
    written = time.monotonic()
    Path("/dev/kmsg").write_text(f"NVRM: Xid (PCI:0000:{bus}): 79, k26deploy GPU proof: GPU has fallen off the bus "
                                 f"(synthetic, {tag}, {time.time():.0f})\n")
    return written


def wait(condition, seconds):
    """Seconds until condition() held (polled every 0.25 s), or None after ``seconds``."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        time.sleep(0.25)
    return None


def prove_guard(proof, args):
    """The replica guard under the real hardened unit on a GPU host: its exposure; an Xid 79 on the service's GPU in
    the kernel log (/dev/kmsg) stops and holds the service (never restarted into the fault); a scheduler that hangs
    (the simulator's hang file) is found hung and restarted, and serves again."""
    score, out = exposure_of(GUARD_UNIT)
    proof.check(f"the guard unit's exposure is {EXPOSURE_AIM} or lower", score is not None and score <= EXPOSURE_AIM,
                f"systemd-analyze security {GUARD_UNIT}: {score if score is not None else out[-300:]}")
    acting = k26deploy.deploy(str(INVENTORY), deploy_vars(args, sglang_service_guard_act_on_gpu_fault=True))
    seen = len(guard_incidents())
    write_fatal_xid("guard")
    held = wait(lambda: unit_prop("ActiveState") in ("inactive", "failed"), 30)
    time.sleep(6)  # a guard that holds does not start it again
    new = guard_incidents()[seen:]
    proof.check("a fatal Xid on the service's GPU stops and holds the replica (not restarted into the fault)",
                acting.exit_code == 0 and held is not None and held <= 10 and unit_prop("ActiveState") != "active"
                and [(r["verdict"], r["action"]) for r in new] == [("gpu_fault", "hold")],
                f"stopped {held if held is None else round(held, 1)} s after the line; "
                f"incidents {[(r['verdict'], r['action'], r['why'][:120]) for r in new]}")
    run(["systemctl", "start", UNIT])  # the operator's start ends the hold
    ready = wait(lambda: host_ready(args), 120)
    seen, before = len(guard_incidents()), unit_prop("InvocationID")
    HANG_FILE.write_text("")
    try:
        restarted = wait(lambda: unit_prop("InvocationID") not in (before, ""), 120)
    finally:
        HANG_FILE.unlink(missing_ok=True)
    answered = wait(lambda: (guard_incidents()[-1:] or [{}])[0].get("recovered_after_seconds") is not None, 120)
    new = guard_incidents()[seen:]
    proof.check("a hung scheduler is found hung and restarted, and serves again",
                ready is not None and restarted is not None and answered is not None
                and [(r["verdict"], r["action"]) for r in new] == [("hung", "restart")],
                f"restarted {restarted if restarted is None else round(restarted, 1)} s into the hang; "
                f"{[(r['verdict'], r['action'], r.get('recovered_after_seconds')) for r in new]}")


def level_figure(level):
    return "C=%d %.0f tok/s, %s" % (level["concurrency"], level.get("output_tokens_per_second") or 0,
                                    figures(level.get("gpus") or []))


def prove_benchmark(proof, args):
    """k26deploy bench with AIPerf installed into this interpreter's venv from the wheelhouse given."""
    results = Path(os.environ.get("OUT") or STATE_DIR) / "benchmark"
    bench_vars = deploy_vars(args, sglang_benchmark_venv_dir=sys.prefix, sglang_benchmark_wheelhouse=args.bench,
                             sglang_benchmark_results_dir=str(results), sglang_benchmark_levels=[1, 8, 16, 32],
                             sglang_benchmark_input_tokens=128, sglang_benchmark_output_tokens=512,
                             sglang_benchmark_gpu_sample_interval=0.5)
    started = time.monotonic()
    result = k26deploy.bench(str(INVENTORY), bench_vars)
    benchmark = host_of(result).benchmark or {}
    levels = benchmark.get("levels") or []
    sampled = all(level.get("gpus") for level in levels)
    figure = "; ".join(level_figure(level) for level in levels)
    proof.check("k26deploy bench measures every level with GPU samples",
                result.exit_code == 0 and len(levels) == 4 and sampled and not any(level.get("errors") for level in levels),
                f"exit {result.exit_code}, {time.monotonic() - started:.0f} s; {figure or host_of(result).msg}")
    for line in benchmark.get("lines") or []:
        print("[bench] " + line, flush=True)
    markdown = (benchmark.get("files") or {}).get("markdown")
    if markdown and Path(markdown).exists():
        print(Path(markdown).read_text(), flush=True)


def prove_tune(proof, args):
    """k26deploy tune on one GPU: CUDA graphs on (the profile) against graphs off, swept at C=1; the winner is kept in
    service. The choice is held to the figures this run measured."""
    results = Path(os.environ.get("OUT") or STATE_DIR) / "tune"
    candidates = results / "candidates.json"
    results.mkdir(parents=True, exist_ok=True)
    candidates.write_text(json.dumps([{"name": "graphs-on", "extra_vars": {}},
                                      {"name": "graphs-off", "extra_vars": {"sglang_service_options":
                                                                            {"disable-decode-cuda-graph": True}}}]))
    tune_vars = deploy_vars(args, sglang_benchmark_venv_dir=sys.prefix, sglang_benchmark_wheelhouse=args.bench,
                            sglang_benchmark_results_dir=str(results / "benchmarks"),
                            sglang_benchmark_input_tokens=128, sglang_benchmark_output_tokens=256)
    started = time.monotonic()
    proc = run([sys.executable, "-m", "k26deploy.cli", "tune", "-i", str(INVENTORY), "-e", json.dumps(tune_vars),
                "--candidates", str(candidates), "--levels", "1", "--json", "-q", "--results-dir", str(results)])
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    scores = {row["name"]: row["score"] for row in report.get("rows") or []}
    best = max((name for name in scores if scores[name]), key=scores.get, default=None)
    proof.check("k26deploy tune measures each candidate and keeps the best in service",
                proc.returncode == 0 and report.get("winner") == best and report.get("kept_serving"),
                f"exit {proc.returncode}, {time.monotonic() - started:.0f} s; {report.get('why') or proc.stderr[-500:]}")
    markdown = (report.get("files") or {}).get("markdown")
    if markdown and Path(markdown).exists():
        print(Path(markdown).read_text(), flush=True)
    if best:
        prove_tuned_finding(proof, args, report, results, tune_vars)


def prove_tuned_finding(proof, args, report, results, tune_vars):
    """Preflight of the configuration that lost, with the tune report: K26-TUNED names the measured winner."""
    rows = {row["name"]: row for row in report.get("rows") or []}
    loser = next((name for name in rows if name != report.get("winner") and rows[name].get("score")), None)
    if loser is None:
        return
    candidates = json.loads((results / "candidates.json").read_text())
    loser_vars = next(c["extra_vars"] for c in candidates if c["name"] == loser)
    proc = run([sys.executable, "-m", "k26deploy.cli", "preflight", "-i", str(INVENTORY),
                "-e", json.dumps({**tune_vars, **loser_vars}), "--tune-dir", str(results), "--json", "-q"])
    try:
        findings = json.loads(proc.stdout)["hosts"][HOST]["findings"]
    except (ValueError, KeyError):
        findings = []
    tuned = [f for f in findings if f["id"] == "K26-TUNED"]
    message = tuned[0]["message"] if tuned else proc.stderr[-300:]
    proof.check("preflight of the slower candidate names the measured winner (K26-TUNED)",
                bool(tuned) and f"this configuration ({loser})" in message and report["winner"] in message,
                f"{tuned[0]['severity']}: {message}" if tuned else f"exit {proc.returncode}: {message}")


ROUTER_UNIT = "sglang-router.service"


def host_ready(args):
    return host_of(k26deploy.status(str(INVENTORY), deploy_vars(args))).ready


def router_deployment(args, **over):
    """(the inventory with this host as its router too, the variables that deploy smg from --router's wheels)."""
    inventory = yaml.safe_load(INVENTORY.read_text())
    inventory["sglang_routers"] = {"hosts": {HOST: None}}
    path = STATE_DIR / "inventory-router.yml"
    path.write_text(yaml.safe_dump(inventory))
    return path, deploy_vars(args, sglang_router_venv_dir=sys.prefix, sglang_router_wheelhouse=args.router,
                             sglang_router_worker_address="127.0.0.1", sglang_router_host="127.0.0.1",
                             sglang_router_policy="round_robin", sglang_router_ready_timeout=120, **over)


def router_workers():
    """The router's workers, URL -> healthy, asked with its control-plane key (None when it does not answer)."""
    try:
        key = Path("/etc/sglang-router/admin_key").read_text().strip()
        request = urllib.request.Request("http://127.0.0.1:%d/workers" % ROUTER_PORT,
                                         headers={"Authorization": "Bearer " + key})
        with urllib.request.urlopen(request, timeout=2) as reply:
            return {w["url"]: w.get("is_healthy") for w in json.loads(reply.read()).get("workers") or []}
    except (urllib.error.URLError, OSError, ValueError):
        return None


def router_all_healthy():
    workers = router_workers()
    return bool(workers) and all(workers.values())


def router_none_healthy():
    """The router answers and routes to no worker (a router that does not answer proves nothing)."""
    workers = router_workers()
    return workers is not None and not any(workers.values())


def prove_router(proof, args):
    """SGLang's router (smg) deployed on this host in front of the GPU service, from the wheels given, installed into
    this interpreter's venv (a host that has the venv needs no package manager): it serves a completion, and its unit
    is as sandboxed as the service's."""
    path, router_vars = router_deployment(args)
    started = time.monotonic()
    result = k26deploy.deploy(str(path), router_vars)
    host = host_of(result)
    workers = [(w.get("url"), w.get("is_healthy")) for w in host.summary.get("workers") or []] if host.summary else []
    proof.check("the router (smg) deploys in front of the GPU service and routes to it",
                result.exit_code == 0 and host.ready and workers and all(healthy for dummy, healthy in workers),
                f"{describe(result)}, {time.monotonic() - started:.0f} s, workers {workers}")
    if result.exit_code != 0 or not workers:
        print(f"[proof] router deploy: failed task {host.failed_task!r} ({host.failed_action}): {host.msg}",
              host.journal_excerpt or "", sep="\n", flush=True)
    with Load("http://127.0.0.1:%d" % ROUTER_PORT, args.api_key, "kimi-k2.6", threads=2, max_tokens=16) as load:
        time.sleep(3)
    proof.check("completions through the router", load.requests and not load.errors,
                f"{load.requests} requests, {load.tokens} tokens, {len(load.errors)} errors {load.errors[:1]}")
    score, out = exposure_of(ROUTER_UNIT)
    proof.check(f"the router unit's exposure is {EXPOSURE_AIM} or lower", score is not None and score <= EXPOSURE_AIM,
                f"systemd-analyze security {ROUTER_UNIT}: {score if score is not None else out[-300:]}")


def prove_fault_leaves_router(proof, args):
    """Issue 49's bound: from a fatal Xid line on the service's GPU, the replica is out of the router's routing within
    10 s (the guard hears the line at once and stops it; smg's own health checks of /health_generate find it gone)."""
    # the Xid that prove_guard wrote stays in the kernel log: preflight would (rightly) leave the replica out for it
    path, router_vars = router_deployment(args, sglang_service_guard_act_on_gpu_fault=True,
                                          k26_preflight_severity_overrides={"K26-GPU-HEALTH": "warning"})
    acting = k26deploy.deploy(str(path), router_vars)
    healthy = wait(router_all_healthy, 60)
    started = write_fatal_xid("router")
    stopped = wait(lambda: unit_prop("ActiveState") in ("inactive", "failed"), 30)
    out = wait(router_none_healthy, 60)
    out = None if out is None else time.monotonic() - started
    proof.check("a fatal Xid takes the replica out of the router's routing within 10 s",
                acting.exit_code == 0 and healthy is not None and out is not None and out <= 10,
                f"service stopped {stopped if stopped is None else round(stopped, 1)} s after the line, out of the "
                f"router {out if out is None else round(out, 1)} s after it; workers {router_workers()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp", type=int, default=0, help="pp-size (default: one stage per GPU)")
    parser.add_argument("--extras-only", action="store_true",
                        help="deploy, then only what --bench and --router add (a second run on the same host)")
    parser.add_argument("--router", metavar="WHEELHOUSE",
                        help="also deploy SGLang's router (smg) on this host in front of the service, installing smg "
                             "from this directory of wheels into the interpreter's venv")
    parser.add_argument("--bench", metavar="WHEELHOUSE",
                        help="also run k26deploy bench, installing AIPerf from this directory of wheels into the "
                             "interpreter's venv (results under $OUT, else /var/lib/k26-proof)")
    args = parser.parse_args()
    # the roles copy a wheelhouse from the controller: a relative path would be looked up in the role's own files
    args.bench, args.router = (str(Path(path).resolve()) if path else path for path in (args.bench, args.router))
    os.environ.setdefault("ANSIBLE_NOCOLOR", "1")
    prepare(args)
    print(f"[proof] {args.gpus} GPU(s), pp-size {args.pp or 'auto'}, interpreter {sys.executable}", flush=True)
    proof = Proof()
    if prove_deploy(proof, args) and not args.extras_only:
        prove_layout(proof, args)
        prove_gpu_access(proof, args)
        prove_exposure(proof)
        prove_gpu_health(proof, args)
        prove_load_and_idle(proof, args)
        prove_idempotence(proof, args)
        prove_precompile(proof, args)
        prove_oom_rollback(proof, args)
        prove_manual_rollback(proof, args)
    if args.bench and proof.ok:
        prove_benchmark(proof, args)
        prove_tune(proof, args)
    if args.router and host_ready(args):
        prove_router(proof, args)
    if not args.extras_only and host_ready(args):
        # late: its fatal Xid stays in the kernel log, and preflight leaves the replica out for it from then on
        prove_guard(proof, args)
    if args.router and host_ready(args) and router_workers():
        prove_fault_leaves_router(proof, args)
    print(proof.summary(), flush=True)
    return 0 if proof.ok else 1


if __name__ == "__main__":
    sys.exit(main())
