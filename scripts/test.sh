#!/usr/bin/env bash
# Every test of the project, in the order that fails fastest:
#   lint (ansible-lint production profile) -> ansible-test sanity on the collection k26.deploy
#   -> unit tests -> integration tests (real systemd in podman containers) -> Molecule scenarios.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup_sglang_cpu.sh
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_CONFIG=$PWD/ansible.cfg
source scripts/image.env
export K26_IMAGE

step() { printf '\n===== %s =====\n' "$*"; }

step "ansible-lint (production profile)"
ansible-lint --profile production

step "ansible-test sanity (the collection k26.deploy)"
tests/sanity/sanity.sh

# Two workers, a test file each at a time (a file's containers are set up once for its tests): the integration
# tests wait on systemd and containers more than they compute, so two share CI's two cores well.
step "pytest: unit and integration tests"
python -m pytest -v -rs -p no:cacheprovider -n "${K26_TEST_WORKERS:-2}" --dist loadfile --durations=15 tests

step "molecule: default, failure and fleet scenarios"
for scenario in default failure fleet; do
  molecule test -s "$scenario"
done
