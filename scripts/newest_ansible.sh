#!/usr/bin/env bash
# The newest ansible-core, on Debian 13's Python 3.13, in a Debian 13 container this project builds (debootstrap, as
# the test image is built): ansible-test sanity of the collection with that ansible-core, then the collection as a
# user gets it: built by that ansible-core's ansible-galaxy, installed into an outside project of its own
# (tests/fixtures/outside_project: FQCNs only), whose playbook runs every entry point (preflight, deploy, status,
# rollback, logs) with the demo's settings against the same container (Debian 13 and its systemd as the managed
# host, reached by the local connection); then the endpoint's answer and the units' exposure by that systemd's own
# `systemd-analyze security`. (A second deploy that changes nothing is left to the Debian 12 tests.)
#
# The container reaches no package registry: what it installs is downloaded on this machine first, by pip as this
# machine configures it (--python-version 3.13, wheels only), and handed in as a directory of wheels.
#   scripts/newest_ansible.sh [prepare] [sanity] [deploy]   (sanity and deploy by default, each after the preparation;
#                                   K26_NEWEST_ANSIBLE_CORE: the requirement, default the newest 2.21)
# `prepare` alone builds the Debian 13 image and downloads the wheels into .cache/newest-ansible/ (a directory per
# requirement, kept, complete once it holds `done`): `make test` runs it in the background while the parts before
# this one run, and this one then finds both in place.
set -euo pipefail
cd "$(dirname "$0")/.."
parts=" ${*:-sanity deploy} "
CORE=${K26_NEWEST_ANSIBLE_CORE:-ansible-core>=2.21,<2.22}
# the exposure every unit of the package is held to (tests/gpu/prove.py EXPOSURE_AIM, issue 50)
EXPOSURE_AIM=1.5
export K26_IMAGE_SUITE=trixie
say() { printf '[newest] %s\n' "$*"; }

# The wheels: ansible-core, then what ansible-test's sanity tests install into their own virtualenvs (their pinned
# requirement files, read from that ansible-core's wheel).
downloads=$PWD/.cache/newest-ansible/$(printf '%s' "$CORE" | sha256sum | cut -c1-12)
wheels=$downloads/wheels
# (pip's warnings about the machine's own find-links that lack a package are noise here)
fetch() {
  .venv/bin/pip download -q --only-binary=:all: --python-version 3.13 --implementation cp --dest "$wheels" "$@" \
    2> >(grep -v "^WARNING: Location '" >&2)
}
download_wheels() {
  local requirements=() file
  rm -rf "$downloads" && mkdir -p "$downloads"
  fetch "$CORE"
  .venv/bin/python - "$(echo "$wheels"/ansible_core-*.whl)" "$downloads/requirements" <<'EOF'
import sys, zipfile
from pathlib import Path
wheel, out = zipfile.ZipFile(sys.argv[1]), Path(sys.argv[2])
out.mkdir()
for name in wheel.namelist():
    if name.startswith("ansible_test/_data/requirements/") and name.endswith(".txt") and (
            "/sanity." in name or name.endswith("/ansible-test.txt")):
        (out / Path(name).name).write_bytes(wheel.read(name))
EOF
  for file in "$downloads"/requirements/*.txt; do requirements+=(-r "$file"); done
  fetch "${requirements[@]}" pip
  touch "$downloads/done"
}
scripts/build_image.sh
[[ -f $downloads/done ]] || download_wheels
say "$(basename "$(echo "$wheels"/ansible_core-*.whl)"), $(ls "$wheels" | wc -l) wheels for Python 3.13"
[[ $parts == *" sanity "* || $parts == *" deploy "* ]] || exit 0

name=k26-newest-$$
work=$(mktemp -d /var/tmp/k26-newest.XXXXXX)
trap 'podman rm -f -t 0 "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
cp -a "$wheels" "$work/wheels"

# The collection as ansible-test wants it (ansible_collections/k26/deploy, the files git tracks; no .git: Debian's
# minimal image has no git, and ansible-test then takes every file of the tree), and the collections it uses, from
# this machine's `ansible` bundle (in the tree for ansible-test, and in deps/ for the outside project).
source tests/sanity/scratch_collection.sh
collection=$(scratch_collection "$work/tree")
rm -rf "$collection/.git"
bundle=$(.venv/bin/python -c 'import ansible_collections as c; print(next(p for p in c.__path__ if "site-packages" in p))')
for used in ansible/posix community/general; do
  for into in tree deps; do
    mkdir -p "$work/$into/ansible_collections/$used"
    cp -a "$bundle/$used/." "$work/$into/ansible_collections/$used/"
  done
done
# The outside project: its ansible.cfg and playbook, and the demo's settings aimed at the container itself
cp -a tests/fixtures/outside_project "$work/project"
mkdir -p "$work/project/inventory"
cp -a inventories/demo/group_vars "$work/project/inventory/"
printf 'sglang_servers:\n  hosts:\n    localhost:\n      ansible_connection: local\n      ansible_python_interpreter: /usr/bin/python3\n' \
  >"$work/project/inventory/hosts.yml"

scripts/container.sh "$name" -v "$work:/k26"
in_box() { podman exec "$name" bash -ec "$*"; }
# pip in the container (ansible-test's too, which runs pip with an environment of its own) takes the wheels only
in_box 'printf "[global]\nno-index = true\nfind-links = /k26/wheels\n" >/etc/pip.conf'
say "Debian $(in_box 'cat /etc/debian_version'), $(in_box 'python3 --version'), $(in_box 'systemctl --version | head -n1')"
in_box 'python3 -m venv /opt/newest && /opt/newest/bin/pip install -q ansible-core'
# ansible-test bootstraps pip in its virtualenvs with a script it would download: the interpreter's own ensurepip serves
pip_version=$(in_box "grep -o \"pip='[0-9.]*'\" /opt/newest/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -n1 | cut -d\\' -f2")
in_box "mkdir -p ~/.ansible/test/cache && printf 'import ensurepip, sys; sys.exit(ensurepip._main([]))\n' >~/.ansible/test/cache/get_pip_${pip_version//./_}.py"
say "$(in_box '/opt/newest/bin/ansible --version | head -n1')"

[[ $parts != *" sanity "* ]] || {
say "ansible-test sanity"
in_box 'cd /k26/tree/ansible_collections/k26/deploy &&
  /opt/newest/bin/ansible-test sanity --python 3.13 --color no --skip-test shellcheck'
}
[[ $parts == *" deploy "* ]] || exit 0

say "the collection built and installed into an outside project, whose playbook runs every entry point"
in_box "cd /k26/tree/ansible_collections/k26/deploy && /opt/newest/bin/ansible-galaxy collection build -v \
  --output-path /k26/build . >/dev/null && cd /k26/project && ANSIBLE_CONFIG=/k26/project/ansible.cfg \
  /opt/newest/bin/ansible-galaxy collection install --no-deps /k26/build/k26-deploy-*.tar.gz -p collections >/dev/null"
installed=$work/project/collections/ansible_collections/k26/deploy
[[ -f $installed/MANIFEST.json && ! -e $installed/.collections && ! -e $installed/tests ]] || {
  say "the installed collection is not the built artifact: $(ls -A "$installed" | tr '\n' ' ')"; exit 1; }
in_box "cd /k26/project && ANSIBLE_CONFIG=/k26/project/ansible.cfg ANSIBLE_NOCOLOR=1 \
  /opt/newest/bin/ansible-playbook -i inventory site.yml" >"$work/site.log" || {
  tail -n 60 "$work/site.log"; say "the outside project's playbook failed"; exit 1; }
grep -A2 '^PLAY RECAP' "$work/site.log" | tail -n 3
# what each entry point says when it works (the same words the Debian 12 tests look for)
expect() {
  local count
  count=$(grep -c -F -- "$1" "$work/site.log" || true)
  ((count >= ${2:-1})) || { tail -n 60 "$work/site.log"; say "the playbook's output lacks: $1"; exit 1; }
}
expect "localhost is serving kimi-k2.6"
expect "READY"
expect "Preflight passed on localhost" 2  # preflight.yml, and again inside deploy.yml
expect "not attempted: the live configuration is already the last one that reached ready"
expect "k26_log_lines_masked"
expect "The server is fired up and ready to roll!"
say "preflight, deploy, status, rollback and logs ran from the installed collection"
in_box 'curl -sf -H "Authorization: Bearer $(cat /k26/project/inventory/.secrets/api_key)" http://127.0.0.1:30000/v1/models' |
  grep -q '"kimi-k2.6"'
say "the endpoint answers with the key"
for unit in sglang.service sglang-guard.service; do
  exposure=$(in_box "systemd-analyze security $unit --no-pager" |
    sed -nE 's/.*Overall exposure level for [^:]*: ([0-9.]+).*/\1/p')
  say "systemd-analyze security $unit: ${exposure:-none} (aim: $EXPOSURE_AIM or lower)"
  awk -v e="$exposure" -v aim="$EXPOSURE_AIM" 'BEGIN { exit !(e != "" && e + 0 <= aim + 0) }'
done
say "passed: sanity and the outside project with $(in_box '/opt/newest/bin/ansible --version | head -n1') on Debian 13"
