#!/usr/bin/env bash
# Every test of the project, in the order that fails fastest:
#   lint (ansible-lint production profile) -> ansible-test sanity on the collection k26.deploy
#   -> unit tests -> integration tests (real systemd in podman containers) -> Molecule scenarios.
# Each part's wall time, pytest's JUnit XML and Molecule's timestamped output go to .cache/test-times/
# (K26_TEST_TIMES): `.venv/bin/python bench/suite_times.py` prints where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
TIMES=${K26_TEST_TIMES:-$PWD/.cache/test-times}
rm -rf "$TIMES" && mkdir -p "$TIMES"

# lane NAME COMMAND...: run COMMAND under a heading and record its wall time and exit status in lanes.tsv.
lane() {
  local name=$1 start rc=0
  shift
  start=$(date +%s)
  printf '\n===== %s =====\n' "$name"
  "$@" || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s)" "$rc" >>"$TIMES/lanes.tsv"
  return "$rc"
}

# stamp FILE: copy standard input to standard output, and to FILE with each line prefixed by the epoch second.
stamp() {
  local line
  while IFS= read -r line; do
    printf '%s\n' "$line"
    printf '%(%s)T %s\n' -1 "$line" >>"$1"
  done
}

setup() { scripts/setup.sh && scripts/setup_sglang_cpu.sh; }
lane "set-up (packages, virtualenvs, image)" setup
trap '.venv/bin/python bench/suite_times.py "$TIMES" || true' EXIT
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_CONFIG=$PWD/ansible.cfg
source scripts/image.env
export K26_IMAGE

lane "ansible-lint (production profile)" ansible-lint --profile production
lane "ansible-test sanity (the collection k26.deploy)" tests/sanity/sanity.sh

# Two workers, a test file each at a time (a file's containers are set up once for its tests): the integration
# tests wait on systemd and containers more than they compute, so two share CI's two cores well.
lane "pytest: unit and integration tests" python -m pytest -v -rs -p no:cacheprovider \
  -n "${K26_TEST_WORKERS:-2}" --dist loadfile --durations=15 --junitxml="$TIMES/pytest.xml" tests

molecule_scenario() { molecule test -s "$1" 2>&1 | stamp "$TIMES/molecule-$1.log"; }
for scenario in default failure fleet; do
  lane "molecule: $scenario" molecule_scenario "$scenario"
done
