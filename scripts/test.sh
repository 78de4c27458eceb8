#!/usr/bin/env bash
# Every test of the project, in the order that fails fastest, in three lanes one after the other (what the later
# lanes download comes in the background meanwhile):
#   checks:   ansible-lint (production profile) -> ansible-test sanity -> changelog, docs lint, execution environment
#             -> `make demo` and its curls from this machine
#   pytest:   unit and integration tests (real systemd in podman containers), on K26_TEST_WORKERS workers (3)
#   molecule: the scenario default, the real SGLang 0.5.23 on the CPU (fleet is run by hand: test_router and
#             test_multinode hold its checks)
# (Run side by side they took longer: the suite keeps both cores busy, and podman's lock is shared.)
# Each part's wall time, pytest's JUnit XML and Molecule's timestamped output go to .cache/test-times/
# (K26_TEST_TIMES): `.venv/bin/python bench/suite_times.py` prints where the time went, and this script prints it at
# the end.
set -euo pipefail
cd "$(dirname "$0")/.."
TIMES=${K26_TEST_TIMES:-$PWD/.cache/test-times}
rm -rf "$TIMES" && mkdir -p "$TIMES"

# part NAME COMMAND...: run COMMAND under a heading, its output also to $TIMES/last-part.log, and record its wall
# time and exit status in lanes.tsv.
part() {
  local name=$1 start rc=0
  shift
  start=$(date +%s)
  printf '\n===== %s =====\n' "$name"
  "$@" > >(tee "$TIMES/last-part.log") 2>&1 || rc=$?
  wait "$!" 2>/dev/null || true # tee's last lines
  printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s)" "$rc" >>"$TIMES/lanes.tsv"
  return "$rc"
}

# why_it_failed: the lines of the failed part that say why (a task's fatal result, Molecule's verdict, pytest's
# FAILED lines), short enough to stay in the last screen of a CI log: the whole log is above them.
why_it_failed() {
  printf '\nwhy (from the failed part; the whole output is above):\n'
  sed 's/\x1b\[[0-9;]*m//g' "$TIMES/last-part.log" | grep -v 'FAILED - RETRYING' |
    grep -E -A6 'fatal: |FAILED|ERROR|CRITICAL|Error:|error:|Traceback' | cut -c1-300 | head -n 24
}

# stamp FILE: copy standard input to standard output, and to FILE with each line prefixed by the epoch second.
stamp() {
  local line
  while IFS= read -r line; do
    printf '%s\n' "$line"
    printf '%(%s)T %s\n' -1 "$line" >>"$1"
  done
}

# Downloads that only later lanes need run in the background from the start, beside the set-up and the checks:
# real SGLang's parser on CPU (a 2 GB virtualenv; pytest waits for it) and SGLang's wheels (4.1 GB, the wheelhouse
# Molecule `default` installs the real SGLang from; the Molecule lane waits for it).
declare -A background=()
in_background() {
  local name=$1
  shift
  "$@" >"$TIMES/$name.log" 2>&1 &
  background[$name]=$!
}
# wait_for NAME: the background job's exit status, after its output
wait_for() {
  local rc=0
  wait "${background[$1]}" || rc=$?
  cat "$TIMES/$1.log"
  return "$rc"
}
in_background setup-sglang-cpu scripts/setup_sglang_cpu.sh
in_background setup-sglang-wheelhouse scripts/setup_sglang_wheelhouse.sh
trap 'for pid in "${background[@]}"; do pkill -P "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done' EXIT
part "set-up (packages, virtualenv, image)" scripts/setup.sh
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_CONFIG=$PWD/ansible.cfg
source scripts/image.env
export K26_IMAGE

# Each part is scripts/part.sh PART, as `make PART` runs it alone.
checks_lane() {
  part "ansible-lint (production profile)" scripts/part.sh lint &&
    part "ansible-test sanity (the collection k26.deploy)" scripts/part.sh sanity &&
    part "the collection's changelog, docs and execution environment" scripts/part.sh collection &&
    part "make demo, and its curls from this machine" scripts/part.sh demo
}

# Two workers, a test file each at a time (a file's containers are set up once for its tests); tests/conftest.py
# hands out the longest files first.
pytest_lane() {
  part "set-up: real SGLang on CPU (installed in the background)" wait_for setup-sglang-cpu &&
    part "pytest: unit and integration tests" scripts/part.sh pytest
}

molecule_default() { scripts/part.sh molecule 2>&1 | stamp "$TIMES/molecule-default.log"; }
molecule_lane() {
  part "set-up: SGLang's wheels (downloaded in the background)" wait_for setup-sglang-wheelhouse &&
    part "molecule: default (the real SGLang)" molecule_default
}

failed=()
for lane in checks pytest molecule; do
  "${lane}_lane" || { failed+=("$lane"); break; }
done
.venv/bin/python bench/suite_times.py "$TIMES" || true
if ((${#failed[@]})); then
  why_it_failed || true
  printf '\nFAILED: %s\n' "${failed[*]}"
  exit 1
fi
