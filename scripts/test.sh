#!/usr/bin/env bash
# Every test of the project, in three lanes after the set-up (what the lanes download comes in the background
# meanwhile):
#   checks:   ansible-lint (production profile), ruff, mypy -> ansible-test units (the plugins' unit tests,
#             tests/unit/plugins) -> ansible-test sanity with ansible-core 2.19 (pylint
#             runs in the next part, with the newest) -> the newest ansible-core on Debian 13 (its sanity, and the
#             built collection in an outside project: scripts/newest_ansible.sh) -> changelog, docs lint, execution
#             environment -> `make demo` and its curls from this machine
#   pytest:   the other unit tests and the integration tests (real systemd in podman containers), on
#             K26_TEST_WORKERS workers (3)
#   molecule: the scenario default, the real SGLang 0.5.23 on the CPU (fleet is run by hand: test_router and
#             test_multinode hold its checks)
# checks then pytest run one after the other, in the order that fails fastest; molecule runs beside them, its output
# in a log of its own that is printed when it ends. Alone, Molecule kept one core of two busy (one Ansible run, one
# SGLang at a time) while the others waited: on two cores with a busy loop beside, 39.3 minutes side by side against
# 44.4 one after the other (2026-12-05). More beside pytest is slower, not faster: the suite keeps both cores busy.
# With sanity and the demo moved into the Molecule lane and the newest ansible-core's lane (make newest, 112 s alone)
# added there, it took 2552 s against 2141 (2026-12-06, a busy loop beside). In the checks lane, in place of the
# outside project's test (test_collection, 87 s in pytest) and of the 2.19 sanity's pylint (42 s), it adds 120 to 370 s
# on this machine with a busy loop beside (2385 s against 2013 and 2243 for the same tree without it; with it, 2798
# and 2651 s, 2026-12-07; the project's CI took 1608 and 1659 s without it).
# Each part's wall time, pytest's JUnit XML and Molecule's timestamped output go to .cache/test-times/
# (K26_TEST_TIMES): `.venv/bin/python bench/suite_times.py` prints where the time went, and this script prints it at
# the end.
set -euo pipefail
cd "$(dirname "$0")/.."
TIMES=${K26_TEST_TIMES:-$PWD/.cache/test-times}
rm -rf "$TIMES" && mkdir -p "$TIMES"

# part NAME COMMAND...: run COMMAND under a heading, its output also to $TIMES/last-part-$lane.log (the lane that
# runs it: each lane sets `lane`), and record its wall time and exit status in lanes.tsv.
part() {
  local name=$1 start rc=0
  shift
  start=$(date +%s)
  printf '\n===== %s =====\n' "$name"
  # (a pipeline, not a process substitution: after an external command bash's $! still names the last background
  # job, so waiting on it for tee waited for that job)
  "$@" 2>&1 | tee "$TIMES/last-part-$lane.log" || rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s)" "$rc" >>"$TIMES/lanes.tsv"
  return "$rc"
}

# why_it_failed LANE: the lines of the lane's failed part that say why (a task's fatal result, Molecule's verdict,
# pytest's FAILED lines), short enough to stay in the last screen of a CI log: the whole log is above them.
why_it_failed() {
  printf '\nwhy (from the failed part of %s; the whole output is above):\n' "$1"
  sed 's/\x1b\[[0-9;]*m//g' "$TIMES/last-part-$1.log" | grep -v 'FAILED - RETRYING' |
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

# Downloads that only the lanes need run in the background from the start, beside the set-up:
# real SGLang's parser on CPU (a 2 GB virtualenv; pytest waits for it) and SGLang's wheels (4.1 GB, the wheelhouse
# Molecule `default` installs the real SGLang from; the Molecule lane waits for it). Each leaves its exit status in
# $TIMES/NAME.rc, which a lane running in a shell of its own can wait for too.
declare -A background=()
in_background() {
  local name=$1
  shift
  { local rc=0; "$@" >"$TIMES/$name.log" 2>&1 || rc=$?; echo "$rc" >"$TIMES/$name.rc"; } &
  background[$name]=$!
}
# wait_for NAME: the background job's exit status, after its output
wait_for() {
  until [ -s "$TIMES/$1.rc" ]; do sleep 1; done
  cat "$TIMES/$1.log"
  return "$(cat "$TIMES/$1.rc")"
}
# stop_tree PID: PID and every process under it
stop_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do stop_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
in_background setup-sglang-cpu scripts/setup_sglang_cpu.sh
in_background setup-sglang-wheelhouse scripts/setup_sglang_wheelhouse.sh
trap 'for pid in "${background[@]}"; do stop_tree "$pid"; done' EXIT
lane=setup part "set-up (packages, virtualenv, image)" scripts/setup.sh
# What the checks lane's two sanity parts install before they test (ansible-test's virtualenvs for 2.19; the newest
# ansible-core's Debian 13 image and wheels), made with the set-up's tools while the parts before them run: mostly
# downloads (in a full run here the 2.19 sanity part took 156 s, 13 s with its virtualenvs in place; the Debian 13
# image takes about 90 s to build; 2026-12-07)
in_background sanity-venvs tests/sanity/sanity.sh --skip-test pylint --prime-venvs
in_background newest-prepare scripts/newest_ansible.sh prepare
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_CONFIG=$PWD/ansible.cfg
source scripts/image.env
export K26_IMAGE
# What each ansible-playbook process computes again (a module's payload, the collections' Python, Jinja's compiled
# templates) is computed once per run (tests/controller/k26_controller_cache.py, installed in .venv by
# scripts/setup.sh): a fresh directory each run, as the checkout does not change during one.
export K26_CONTROLLER_CACHE=$PWD/.cache/controller-run
rm -rf "$K26_CONTROLLER_CACHE"

# Each part is scripts/part.sh PART, as `make PART` runs it alone.
checks_lane() {
  local lane=checks
  part "ansible-lint (production profile), ruff, mypy" scripts/part.sh lint &&
    part "ansible-test units (the plugins' unit tests)" scripts/part.sh units &&
    part "ansible-test sanity with ansible-core 2.19: its virtualenvs (prepared in the background)" \
      wait_for sanity-venvs &&
    part "ansible-test sanity with ansible-core 2.19 (the collection k26.deploy; pylint with the newest)" \
      scripts/part.sh sanity --skip-test pylint &&
    part "the newest ansible-core on Debian 13: its image and wheels (prepared in the background)" \
      wait_for newest-prepare &&
    part "the newest ansible-core on Debian 13: sanity, and the collection in an outside project" \
      scripts/part.sh newest &&
    part "the collection's changelog, docs and execution environment" scripts/part.sh collection &&
    part "make demo, and its curls from this machine" scripts/part.sh demo
}

# K26_TEST_WORKERS workers (3), a test file each at a time (a file's containers are set up once for its tests);
# tests/conftest.py hands out the longest files first.
pytest_lane() {
  local lane=pytest
  part "set-up: real SGLang on CPU (installed in the background)" wait_for setup-sglang-cpu &&
    part "pytest: unit and integration tests" scripts/part.sh pytest
}

molecule_default() { scripts/part.sh molecule 2>&1 | stamp "$TIMES/molecule-default.log"; }
# Molecule's prepare makes its tiny model with real SGLang on CPU too (and would make that virtualenv itself, beside
# the download of the same: it waits for it)
molecule_downloads() { wait_for setup-sglang-wheelhouse && wait_for setup-sglang-cpu; }
molecule_lane() {
  local lane=molecule
  part "set-up: SGLang's wheels and real SGLang on CPU (downloaded in the background)" molecule_downloads &&
    part "molecule: default (the real SGLang)" molecule_default
}

molecule_lane >"$TIMES/lane-molecule.log" 2>&1 &
background[molecule-lane]=$!
failed=()
for name in checks pytest; do
  "${name}_lane" || { failed+=("$name"); break; }
done
if ((${#failed[@]} == 0)); then
  rc=0
  wait "${background[molecule-lane]}" || rc=$?
  printf '\n===== the molecule lane (it ran beside the others) =====\n'
  cat "$TIMES/lane-molecule.log"
  ((rc == 0)) || failed+=(molecule)
fi
.venv/bin/python bench/suite_times.py "$TIMES" || true
if ((${#failed[@]})); then
  why_it_failed "${failed[0]}" || true
  printf '\nFAILED: %s\n' "${failed[*]}"
  exit 1
fi
