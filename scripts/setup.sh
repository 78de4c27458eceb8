#!/usr/bin/env bash
# One-time (idempotent) set-up of a development/CI machine for this project:
#   - system packages: podman, a working OCI runtime, debootstrap, prometheus (promtool)
#   - the Python virtualenv .venv with the project and its tools (ansible-core, the
#     `ansible` bundle for collections, ansible-runner, molecule, ansible-lint, pytest)
#   - a podman runtime that works on this machine (runc where crun cannot run, e.g. cgroups v1/hybrid)
#   - the local Debian 12 + systemd image used by the demo, the tests and Molecule
#     (scripts/setup.sh trixie ...: also the image of each Debian release named, e.g. for Molecule `fleet`)
# Each step is skipped when it is already satisfied. No registry host is named here:
# apt and pip use the machine's own configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv

log() { printf '[setup] %s\n' "$*"; }

need_apt=()
# prometheus: its promtool checks and unit-tests the sglang_monitoring role's alert rules
for pkg_cmd in podman:podman runc:runc debootstrap:debootstrap prometheus:promtool; do
  command -v "${pkg_cmd#*:}" >/dev/null 2>&1 || need_apt+=("${pkg_cmd%%:*}")
done
if ((${#need_apt[@]})); then
  log "installing system packages: ${need_apt[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

scripts/configure_podman.sh

stamp=$VENV/.k26-setup-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  log "creating virtualenv $VENV"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  # pip compiles every module at install, on purpose: where PYTHONDONTWRITEBYTECODE is set (make test's machines set
  # it), a --no-compile virtualenv compiles each import anew in every process (tried 2026-12-07: slower, not faster)
  "$VENV/bin/python" -m pip install -q -e '.[dev]'
  rm -f "$VENV"/.k26-setup-*
  touch "$stamp"
fi

# make test's caches of what each ansible-playbook process computes again (tests/controller/k26_controller_cache.py,
# inert unless K26_CONTROLLER_CACHE is set), installed at every set-up so that .venv holds this checkout's version
# (k26_ansiballz_cache was its name before it cached more than the payloads' walk)
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -f "$site/k26_ansiballz_cache.py" "$site/k26_ansiballz_cache.pth"
install -m 0644 tests/controller/k26_controller_cache.py "$site/k26_controller_cache.py"
echo 'import k26_controller_cache' >"$site/k26_controller_cache.pth"

scripts/build_image.sh
for suite in "$@"; do K26_IMAGE_SUITE=$suite scripts/build_image.sh; done
log "ready: activate with 'source .venv/bin/activate'"
