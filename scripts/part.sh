#!/usr/bin/env bash
# One part of the test suite, the same way `make PART` and scripts/test.sh run it (after scripts/setup.sh):
#   lint          ansible-lint (production profile), ruff and mypy: scripts/lint.sh
#   sanity        ansible-test sanity of the collection k26.deploy (further arguments go to ansible-test sanity)
#   newest        the newest ansible-core on Debian 13's Python 3.13 in a Debian 13 container: its ansible-test sanity,
#                 and the built collection installed into an outside project whose playbook runs every entry point
#                 against that container (scripts/newest_ansible.sh)
#   collection    the collection's changelog, docs lint and execution environment
#   demo          `make demo` and its curls from this machine
#   units         ansible-test units: the plugins' unit tests under tests/unit/plugins/ (tests/sanity/units.sh)
#   unit          those, then pytest on the rest of tests/unit (modules run in-process, roles' files, the CLI; a few
#                 real-SGLang checks)
#   integration   pytest tests/integration (real systemd in podman containers)
#   pytest        both pytest parts in one run (how `make test` balances them over the workers)
#   molecule      Molecule `default`: the real SGLang 0.5.23 on the CPU
#   fleet         Molecule `fleet`: two replicas and the router (by hand; test_router holds its checks)
# pytest parts run on K26_TEST_WORKERS workers (3: more than the cores, so that one waiting on a start leaves its
# core to the others), a test file each at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.venv/bin:$PATH
export ANSIBLE_CONFIG=$PWD/ansible.cfg
source scripts/image.env
export K26_IMAGE
TIMES=${K26_TEST_TIMES:-$PWD/.cache/test-times}
mkdir -p "$TIMES"

# --no-loadscope-reorder: pytest-xdist (3.5 on) hands out the files with the most tests first unless told not to, which
# left the integration files of few long tests (test_promises_starts: 4 tests, 440 s) to the end, run while the other
# workers had nothing left; in collection order tests/conftest.py puts the longest files first.
pytest_on() {
  exec python -m pytest -v -rs -p no:cacheprovider -n "${K26_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder \
    --durations=15 --junitxml="$TIMES/$1.xml" "${@:2}"
}

case ${1:-} in
  lint) exec scripts/lint.sh ;;
  sanity) exec tests/sanity/sanity.sh "${@:2}" ;;
  newest) exec scripts/newest_ansible.sh ;;
  collection) exec tests/sanity/collection.sh ;;
  demo) exec scripts/demo_check.sh ;;
  units) exec tests/sanity/units.sh ;;
  unit) tests/sanity/units.sh && pytest_on pytest-unit tests/unit --ignore=tests/unit/plugins ;;
  integration) scripts/setup_sglang_cpu.sh && pytest_on pytest-integration tests/integration ;;
  # (tests/unit/plugins is ansible-test's: the checks lane runs it)
  pytest) scripts/setup_sglang_cpu.sh && pytest_on pytest tests --ignore=tests/unit/plugins ;;
  molecule) exec molecule test -s default ;;
  fleet) exec molecule test -s fleet ;;
  *) echo "usage: scripts/part.sh lint|sanity|newest|collection|demo|units|unit|integration|pytest|molecule|fleet" >&2; exit 2 ;;
esac
