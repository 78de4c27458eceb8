#!/usr/bin/env bash
# Every test of the project, in the order that fails fastest, in three lanes one after the other (the real SGLang
# that pytest needs installs in the background meanwhile):
#   checks:   ansible-lint (production profile) -> ansible-test sanity -> `make demo` and its curls from this machine
#   pytest:   unit and integration tests (real systemd in podman containers), on K26_TEST_WORKERS workers (2)
#   molecule: the scenario default (fleet is run by hand: test_router and test_multinode hold its checks)
# (Run side by side they took longer: the suite keeps both cores busy, and podman's lock is shared.)
# Each part's wall time, pytest's JUnit XML and Molecule's timestamped output go to .cache/test-times/
# (K26_TEST_TIMES): `.venv/bin/python bench/suite_times.py` prints where the time went, and this script prints it at
# the end.
set -euo pipefail
cd "$(dirname "$0")/.."
TIMES=${K26_TEST_TIMES:-$PWD/.cache/test-times}
rm -rf "$TIMES" && mkdir -p "$TIMES"

# part NAME COMMAND...: run COMMAND under a heading and record its wall time and exit status in lanes.tsv.
part() {
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

# Real SGLang on CPU (a 2 GB virtualenv, mostly download and unpacking) is only needed by pytest: it installs in
# the background from the start, beside the set-up and the checks, and pytest waits for it.
SGLANG_CPU_LOG=$TIMES/setup-sglang-cpu.log
scripts/setup_sglang_cpu.sh >"$SGLANG_CPU_LOG" 2>&1 &
sglang_cpu=$!
sglang_cpu_ready() {
  local rc=0
  wait "$sglang_cpu" || rc=$?
  cat "$SGLANG_CPU_LOG"
  return "$rc"
}
trap 'pkill -P "$sglang_cpu" 2>/dev/null || true; kill "$sglang_cpu" 2>/dev/null || true' EXIT
part "set-up (packages, virtualenv, image)" scripts/setup.sh
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_CONFIG=$PWD/ansible.cfg
source scripts/image.env
export K26_IMAGE

checks_lane() {
  part "ansible-lint (production profile)" ansible-lint --profile production &&
    part "ansible-test sanity (the collection k26.deploy)" tests/sanity/sanity.sh &&
    part "make demo, and its curls from this machine" scripts/demo_check.sh
}

# Two workers, a test file each at a time (a file's containers are set up once for its tests); tests/conftest.py
# hands out the longest files first.
pytest_lane() {
  part "set-up: real SGLang on CPU (installed in the background)" sglang_cpu_ready &&
    part "pytest: unit and integration tests" python -m pytest -v -rs -p no:cacheprovider \
    -n "${K26_TEST_WORKERS:-2}" --dist loadfile --durations=15 --junitxml="$TIMES/pytest.xml" tests
}

molecule_scenario() { molecule test -s "$1" 2>&1 | stamp "$TIMES/molecule-$1.log"; }
molecule_lane() {
  part "molecule: default" molecule_scenario default
}

failed=()
for lane in checks pytest molecule; do
  "${lane}_lane" || { failed+=("$lane"); break; }
done
.venv/bin/python bench/suite_times.py "$TIMES" || true
if ((${#failed[@]})); then
  printf '\nFAILED: %s\n' "${failed[*]}"
  exit 1
fi
