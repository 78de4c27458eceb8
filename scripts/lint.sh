#!/usr/bin/env bash
# The Python and Ansible checks, each by name, as `make lint`, CI (scripts/part.sh lint) and pre-commit
# (.pre-commit-config.yaml) run them; no name: all of them, in this order.
#   ansible-lint  the production profile (its yaml rule is yamllint's, with ansible-lint's settings)
#   ruff          pyflakes and pycodestyle (pyproject.toml [tool.ruff])
#   mypy          src/k26deploy and plugins/module_utils, imported as Ansible imports them (pyproject.toml [tool.mypy])
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.venv/bin:$PATH

check() {
  case $1 in
    # ansible-lint puts $ANSIBLE_HOME/collections (~/.ansible) before the checkout's .collections: an installed copy
    # of k26.deploy there would be linted in place of this tree. Its own home here sees only this checkout's.
    ansible-lint) ANSIBLE_HOME=$PWD/.cache/ansible-lint-home ansible-lint --profile production ;;
    ruff) ruff check --no-cache . ;;
    mypy) MYPYPATH=$PWD/.collections:$PWD/src mypy --cache-dir "$PWD/.cache/mypy" -p k26deploy \
            -p ansible_collections.k26.deploy.plugins.module_utils ;;
    *) echo "usage: scripts/lint.sh [ansible-lint|ruff|mypy]..." >&2; exit 2 ;;
  esac
}

if [ $# -eq 0 ]; then set -- ansible-lint ruff mypy; fi
for name in "$@"; do
  echo "[lint] $name"
  check "$name"
done
