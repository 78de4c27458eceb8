#!/usr/bin/env bash
# Download (once) the wheels of SGLang and every dependency into .cache/sglang-wheelhouse-<version>: what the sglang
# role's sglang_pip_wheelhouse takes, so that a target installs the real SGLang with pip without an index (Molecule
# `default`; or a GPU fleet that should not download 4 GB per host). About 4.1 GB, 207 wheels for 0.5.23 on
# CPython 3.11. A complete wheelhouse has a .complete marker; a partial one is downloaded again.
# No registry host is named here: pip uses the machine's own configuration.
#
# Environment: SGLANG_WHEELHOUSE (default .cache/sglang-wheelhouse-$SGLANG_VERSION), SGLANG_VERSION (default plugins/module_utils/sglang_version.py's),
#              PYTHON (default python3: the wheels are for its version and platform, which must be the target's).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sglang_version.sh
DIR=${SGLANG_WHEELHOUSE:-$PWD/.cache/sglang-wheelhouse-$SGLANG_VERSION}
PYTHON=${PYTHON:-python3}

if [ -f "$DIR/.complete" ]; then
  printf '[setup_sglang_wheelhouse] ok: %s\n' "$DIR"
  exit 0
fi
start=$(date +%s)
mkdir -p "$DIR"
printf '[setup_sglang_wheelhouse] downloading sglang==%s and its dependencies into %s\n' "$SGLANG_VERSION" "$DIR"
# pip's "Location ... is ignored" warnings about index folders without the package are noise here
"$PYTHON" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$DIR" "sglang==$SGLANG_VERSION" \
  2> >(grep -v '^WARNING: Location' >&2)
touch "$DIR/.complete"
printf '[setup_sglang_wheelhouse] ready in %s s: %s (%s)\n' "$(($(date +%s) - start))" "$DIR" "$(du -sh "$DIR" | cut -f1)"
