#!/usr/bin/env bash
# The GPU proof, on a GPU host, as root:  tests/gpu/prove.sh [--pp N] [--bench AIPERF_WHEELHOUSE] [--router SMG_WHEELHOUSE] [--extras-only]
# (K26_GPU_SCRIPT=bench/restart_time.py tests/gpu/prove.sh: the restart benchmark, with the same set-up)
# Needs the bundle that tests/gpu/fetch.sh made on a machine with registry access (.gpu/, or K26_GPU_BUNDLE):
# ansible-core and ansible-runner wheels for this host's python3 (the interpreter that holds PyTorch), and the
# systemd packages used where PID 1 is not systemd. Then tests/gpu/prove.py deploys with deploy_k26.yml and
# checks the result; its summary ends the output. Takes a few minutes; run it twice: the second run must find
# nothing to change.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUNDLE=${K26_GPU_BUNDLE:-$ROOT/.gpu}
PYTHON=${K26_GPU_PYTHON:-python3}
SITE=${K26_GPU_SITE:-$BUNDLE/site}

log() { printf '[gpu-proof] %s\n' "$*"; }

[ "$(id -u)" -eq 0 ] || { log "run as root"; exit 2; }
[ -d "$BUNDLE/wheels" ] || { log "no $BUNDLE/wheels: run tests/gpu/fetch.sh on a machine with registry access first"; exit 2; }
command -v nvidia-smi >/dev/null || { log "nvidia-smi not found: this is not a GPU host"; exit 2; }

if [ ! -x "$SITE/bin/ansible-playbook" ]; then
  log "installing ansible-core and ansible-runner from $BUNDLE/wheels into $SITE"
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$BUNDLE"/wheels/*.whl
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
export PATH=$SITE/bin:$PATH
export ANSIBLE_CONFIG=$ROOT/ansible.cfg

if [ "$(cat /proc/1/comm)" = systemd ]; then
  in_systemd=()
else
  pid=$(tests/gpu/boot_systemd.sh "$BUNDLE/debs")
  log "systemd booted as PID 1 of its own namespaces (pid $pid here)"
  in_systemd=(nsenter -t "$pid" -p -m --wd="$ROOT")
fi
"${in_systemd[@]}" "$PYTHON" -c 'import ansible_runner, ansible' || {
  log "ansible-runner or ansible-core does not import from $SITE inside systemd's namespaces"; exit 1; }
# K26_GPU_SCRIPT runs another script with the same set-up (bench/restart_time.py measures restarts).
"${in_systemd[@]}" "$PYTHON" "$ROOT/${K26_GPU_SCRIPT:-tests/gpu/prove.py}" "$@"
