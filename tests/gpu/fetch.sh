#!/usr/bin/env bash
# Run HERE (a machine with apt and pip access), before tests/gpu/prove.sh runs on a GPU host that has no
# package registry. Fills .gpu/ (git-ignored, about 14 MB) with:
#   .gpu/debs/   Debian 12's systemd 252 and the libraries a bare Ubuntu 24.04 GPU image lacks for it
#                (used only where PID 1 is not systemd; tests/gpu/boot_systemd.sh unpacks them)
#   .gpu/wheels/ ansible-core and ansible-runner with their dependencies, for the GPU host's python3
#                (the one that holds PyTorch; PYTHON_VERSION, default 3.12)
# No registry host is named here: apt and pip use this machine's own configuration.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${K26_GPU_BUNDLE:-.gpu}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
mkdir -p "$DEST/debs" "$DEST/wheels"

log() { printf '[gpu-fetch] %s\n' "$*"; }

log "systemd 252 and its libraries (Debian 12) -> $DEST/debs"
(cd "$DEST/debs" && apt-get download -qq systemd libsystemd-shared libapparmor1 libip4tc2 libkmod2 libseccomp2 \
  libcap-ng0 libaudit1 libgcrypt20 libgpg-error0 liblz4-1 libpam0g libacl1 2>&1 | grep -v '^W:' || true)

# The versions the project's own .venv runs (scripts/setup.sh makes it), so the GPU host runs the same Ansible as CI.
[ -x .venv/bin/python ] || scripts/setup.sh
mapfile -t pins < <(.venv/bin/python -m pip freeze --all 2>/dev/null | grep -iE \
  '^(ansible-core|resolvelib|cryptography|cffi|pycparser|ansible-runner|pexpect|ptyprocess|python-daemon|lockfile)==')
[ "${#pins[@]}" -eq 10 ] || { log "expected 10 pinned packages in .venv, found: ${pins[*]}"; exit 1; }
log "wheels for Python $PYTHON_VERSION -> $DEST/wheels: ${pins[*]}"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d "$DEST/wheels" "${pins[@]}"
du -sh "$DEST"
log "done: carry $DEST to the GPU host (the device tool: carry [\"$DEST\"]) and run tests/gpu/prove.sh there"
