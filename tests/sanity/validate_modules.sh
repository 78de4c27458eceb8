#!/usr/bin/env bash
# Run `ansible-test sanity --test validate-modules` on every module in plugins/modules.
#
# The project is a playbook project, not a collection, and ansible-test only works on
# collections: copy plugins/ into a scratch tree ansible_collections/k26/deploy/ (with the
# project's `ansible.module_utils.<name>` imports of its own module_utils rewritten to the
# collection's path), commit it to a throw-away git repository and run ansible-test there.
# Works offline: ansible-test's pip bootstrap download is replaced by ensurepip.
#
# Usage: tests/sanity/validate_modules.sh [extra ansible-test arguments]
# Env:   PYTHON_VERSION (default 3.11), KEEP_TREE=1 keeps the scratch tree for inspection,
#        MODULES="a b" restricts the check to those modules (default: all of plugins/modules).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV_BIN=${VENV_BIN:-$ROOT/.venv/bin}
ANSIBLE_TEST=$VENV_BIN/ansible-test
PYTHON_VERSION=${PYTHON_VERSION:-3.11}
NAMESPACE=k26
NAME=deploy

[[ -x $ANSIBLE_TEST ]] || { echo "ansible-test not found at $ANSIBLE_TEST (run the set-up first)" >&2; exit 2; }
shopt -s nullglob
modules=("$ROOT"/plugins/modules/*.py)
if (( ${#modules[@]} == 0 )); then
    echo "no modules in plugins/modules: nothing to validate"
    exit 0
fi

# ansible-test downloads get-pip.py unless it finds it in its cache; ensurepip does the same job offline.
GET_PIP=$HOME/.ansible/test/cache/get_pip_24_2.py
if [[ ! -f $GET_PIP ]]; then
    mkdir -p "$(dirname "$GET_PIP")"
    printf 'import ensurepip, sys; sys.exit(ensurepip._main([]))\n' >"$GET_PIP"
fi

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/k26-validate-modules.XXXXXX")
cleanup() { [[ ${KEEP_TREE:-0} == 1 ]] && echo "scratch tree kept: $SCRATCH" || rm -rf "$SCRATCH"; }
trap cleanup EXIT

COLL=$SCRATCH/ansible_collections/$NAMESPACE/$NAME
mkdir -p "$COLL/meta"
cat >"$COLL/galaxy.yml" <<EOF
namespace: $NAMESPACE
name: $NAME
version: 1.0.0
readme: README.md
authors:
  - k26deploy maintainers
description: Scratch copy of the k26deploy project's plugins for ansible-test.
license:
  - GPL-3.0-or-later
EOF
printf '# scratch collection for ansible-test\n' >"$COLL/README.md"
printf 'requires_ansible: ">=2.16"\n' >"$COLL/meta/runtime.yml"
cp -a "$ROOT/plugins" "$COLL/plugins"
find "$COLL" \( -name __pycache__ -o -name '*.pyc' \) -prune -exec rm -rf {} +

# Rewrite imports of the project's own module_utils (whatever their names) to the collection path.
own_utils=()
for f in "$COLL"/plugins/module_utils/*.py; do
    base=$(basename "$f" .py)
    [[ $base == __init__ ]] || own_utils+=("$base")
done
if (( ${#own_utils[@]} > 0 )); then
    alternation=$(IFS='|'; echo "${own_utils[*]}")
    find "$COLL/plugins" -name '*.py' -print0 | xargs -0 sed -i -E \
        -e "s/\bansible\.module_utils\.(${alternation})\b/ansible_collections.${NAMESPACE}.${NAME}.plugins.module_utils.\1/g"
fi

# In the project, modules refer to each other by short name (M(nvidia_gpu_facts), seealso module: x);
# a collection needs the FQCN: rewrite those references to the scratch collection's names.
for f in "$COLL"/plugins/modules/*.py; do
    mod=$(basename "$f" .py)
    find "$COLL/plugins" -name '*.py' -print0 | xargs -0 sed -i -E \
        -e "s/\bM\(${mod}\)/M(${NAMESPACE}.${NAME}.${mod})/g" \
        -e "s/^([[:space:]]*-[[:space:]]*module:[[:space:]]*)${mod}[[:space:]]*\$/\1${NAMESPACE}.${NAME}.${mod}/"
done

# The GPLv3 header check is for collections published under the GPL; this project is not one.
ansible_version=$("$VENV_BIN/python" -c 'import ansible.release as r; print(".".join(r.__version__.split(".")[:2]))')
mkdir -p "$COLL/tests/sanity"
: >"$COLL/tests/sanity/ignore-$ansible_version.txt"
for f in "$COLL"/plugins/modules/*.py; do
    if ! head -n 20 "$f" | grep -q 'GNU General Public License'; then
        printf '%s validate-modules:missing-gplv3-license\n' "plugins/modules/$(basename "$f")" \
            >>"$COLL/tests/sanity/ignore-$ansible_version.txt"
    fi
done

(
    cd "$COLL"
    git init -q
    git -c user.name=validate -c user.email=validate@localhost.invalid add -A
    git -c user.name=validate -c user.email=validate@localhost.invalid commit -q -m scratch
)

echo "validate-modules: ${MODULES:-$(cd "$ROOT/plugins/modules" && ls -- *.py | tr "\n" " ")}"
targets=(plugins/modules/)
if [[ -n ${MODULES:-} ]]; then
    targets=()
    for m in $MODULES; do targets+=("plugins/modules/${m%.py}.py"); done
fi
cd "$COLL"
# ansible-test's own output tells what failed; its exit status is ours.
"$ANSIBLE_TEST" sanity --test validate-modules --python "$PYTHON_VERSION" --color no "$@" "${targets[@]}"
