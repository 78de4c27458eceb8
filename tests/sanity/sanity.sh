#!/usr/bin/env bash
# ansible-test sanity on the collection k26.deploy, natively: the checkout's files, unchanged, in a tree whose path
# ends in ansible_collections/k26/deploy (ansible-test requires that path, and the checkout's own
# .collections link cannot serve: ansible-test resolves the working directory to its real path).
#
# Runs every sanity test that works offline. Excluded, each for a reason that says why it cannot apply here:
#   shellcheck  the shellcheck binary is not installed on the build machines (Debian package, not pip)
# ansible-test's pip bootstrap download is replaced by ensurepip; its test requirements come from pip's own index.
#
# Usage: tests/sanity/sanity.sh [extra ansible-test sanity arguments, e.g. --test validate-modules]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV_BIN=${VENV_BIN:-$ROOT/.venv/bin}
PYTHON_VERSION=${PYTHON_VERSION:-3.11}
[[ -x $VENV_BIN/ansible-test ]] || { echo "ansible-test not found in $VENV_BIN (run scripts/setup.sh)" >&2; exit 2; }

GET_PIP=$HOME/.ansible/test/cache/get_pip_24_2.py
if [[ ! -f $GET_PIP ]]; then
    mkdir -p "$(dirname "$GET_PIP")"
    printf 'import ensurepip, sys; sys.exit(ensurepip._main([]))\n' >"$GET_PIP"
fi

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/k26-sanity.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
source "$ROOT/tests/sanity/scratch_collection.sh"
cd "$(scratch_collection "$SCRATCH")"
"$VENV_BIN/ansible-test" sanity --python "$PYTHON_VERSION" --color no --skip-test shellcheck "$@"
