#!/usr/bin/env bash
# Create (once) .cache/sglang-venv: the real sglang package on CPU torch, enough to build SGLang's own
# command-line parser (ServerArgs.add_cli_args) and config-file merger (ConfigArgumentMerger).
# tests/unit/test_sglang_args_check.py uses it to check option mappings against the real package.
#
# The recipe (verified on the Debian 12 build machines):
#   torch==2.13.0 (the CPU wheel that lies on this machine), sglang==0.5.23 without its dependencies,
#   then the few dependencies that importing sglang.srt.server_args needs.
# Skipped when the venv already imports them. About 2 GB. No registry host is named here:
# pip uses the machine's own configuration.
#
# Environment: SGLANG_CPU_VENV (default .cache/sglang-venv), SGLANG_VERSION (default plugins/module_utils/sglang_version.py's),
#              SGLANG_TORCH_VERSION (default 2.13.0), PYTHON (default python3; needs >= 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${SGLANG_CPU_VENV:-$ROOT/.cache/sglang-venv}
source scripts/sglang_version.sh
TORCH_VERSION=${SGLANG_TORCH_VERSION:-2.13.0}
PYTHON=${PYTHON:-python3}

log() { printf '[setup_sglang_cpu] %s\n' "$*"; }

probe() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" - "$SGLANG_VERSION" >/dev/null 2>&1 <<'EOF'
import argparse
import sys
from importlib.metadata import version

if version("sglang") != sys.argv[1]:
    sys.exit(1)
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger  # noqa: F401

parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
parser.parse_args(["--model-path", "x"])
EOF
}

if probe; then
  log "ok: $VENV already imports sglang $SGLANG_VERSION"
  exit 0
fi

start=$(date +%s)
log "creating $VENV (sglang $SGLANG_VERSION on CPU torch $TORCH_VERSION)"
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# pip's output goes to a log, shown only when a step fails: with --no-deps, pip lists every sglang dependency
# that is deliberately left out as a "conflict", which would only bury real errors. pip compiles at install, on
# purpose: make test's machines set PYTHONDONTWRITEBYTECODE (see scripts/setup.sh).
LOG=$(dirname "$VENV")/setup_sglang_cpu.log
: >"$LOG"
pip_install() {
  log "pip install $*"
  if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" >>"$LOG" 2>&1; then
    tail -n 30 "$LOG" >&2
    log "FAILED: pip install $* (full log: $LOG)"
    exit 1
  fi
}
pip_install "torch==$TORCH_VERSION"
pip_install --no-deps "sglang==$SGLANG_VERSION"
pip_install pybase64 triton pillow starlette msgspec pyzmq ipython aiohttp numpy requests packaging \
  psutil pydantic orjson 'transformers==5.19.0' pyyaml

if ! probe; then
  log "FAILED: $VENV does not import sglang.srt.server_args after installation; try:"
  log "  $VENV/bin/python -c 'from sglang.srt.server_args import ServerArgs'"
  exit 1
fi
log "ready in $(($(date +%s) - start)) s: $VENV"
