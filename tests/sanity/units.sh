#!/usr/bin/env bash
# ansible-test units on the collection k26.deploy: the unit tests of its plugins, under tests/unit/plugins/
# {module_utils,modules,filter,action}/ and named after the plugin each tests, as ansible-test expects them, run by
# ansible-test itself natively (the project's virtualenv) in a scratch tree whose path ends in
# ansible_collections/k26/deploy. ansible-test runs those of module_utils without Ansible's controller code, as the
# code they test runs on a host. The rest of tests/unit (tests of roles, playbooks, the CLI, real SGLang) is pytest's.
#
# Usage: tests/sanity/units.sh [extra ansible-test units arguments]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV_BIN=${VENV_BIN:-$ROOT/.venv/bin}
PYTHON_VERSION=${PYTHON_VERSION:-3.11}
[[ -x $VENV_BIN/ansible-test ]] || { echo "ansible-test not found in $VENV_BIN (run scripts/setup.sh)" >&2; exit 2; }
export PATH=$VENV_BIN:$PATH

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/k26-units.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
source "$ROOT/tests/sanity/scratch_collection.sh"
cd "$(scratch_collection "$SCRATCH")"
"$VENV_BIN/ansible-test" units --python "$PYTHON_VERSION" --color no "${@:-tests/unit/plugins/}"
