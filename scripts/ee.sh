#!/usr/bin/env bash
# The execution environment of execution-environment.yml: build the collection from this checkout, render the
# build context into .cache/ee/context with ansible-builder, and check what it rendered. With --build, also build
# the image with podman (tag k26-deploy-ee:<version>); further arguments go to `ansible-builder build`, e.g.
#   scripts/ee.sh --build --build-arg EE_BASE_IMAGE=<an image with dnf and Python 3.11-3.13 you can pull>
# Building needs the base image; this project's CI machines cannot pull one, so `make test` renders and checks only.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV_BIN=${VENV_BIN:-$PWD/.venv/bin}
OUT=$PWD/.cache/ee
build=false
if [[ ${1:-} == --build ]]; then build=true; shift; fi

rm -rf "$OUT" && mkdir -p "$OUT"
"$VENV_BIN/ansible-galaxy" collection build --force --output-path "$OUT" . >/dev/null
mv "$OUT"/k26-deploy-*.tar.gz "$OUT/k26-deploy.tar.gz"
"$VENV_BIN/ansible-builder" create -f execution-environment.yml -c "$OUT/context" >/dev/null

# What the image must hold: this collection, installed by ansible-galaxy from the copied tarball (the pins of
# ansible-core and ansible-runner are held to pyproject.toml's by tests/unit/test_one_home.py).
check() { grep -q -- "$2" "$OUT/context/$1" || { echo "ee: $1 lacks $2" >&2; exit 1; }; }
[[ -s $OUT/context/_build/k26-deploy.tar.gz ]] || { echo "ee: the build context lacks the collection" >&2; exit 1; }
check _build/requirements.yml /build/k26-deploy.tar.gz
check Containerfile 'ansible-galaxy collection install'
echo "ee: rendered $OUT/context (Containerfile and _build, the collection $(sed -n 's/^version: //p' galaxy.yml))"

if $build; then
  "$VENV_BIN/ansible-builder" build -f execution-environment.yml -c "$OUT/context" \
    -t "k26-deploy-ee:$(sed -n 's/^version: //p' galaxy.yml)" --container-runtime podman "$@"
fi
