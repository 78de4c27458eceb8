#!/usr/bin/env bash
# The newest ansible-core, on Debian 13's Python 3.13, in a Debian 13 container this project builds (debootstrap, as
# the test image is built): ansible-test sanity of the collection with that ansible-core, then one real deploy of the
# demo's settings into the same container (Debian 13 and its systemd as the managed host, reached by the local
# connection), the endpoint's answer, and the units' exposure by that systemd's own `systemd-analyze security`. (A
# second deploy that changes nothing is left to the Debian 12 tests: it would add a minute and a half to make test.)
#
# The container reaches no package registry: what it installs is downloaded on this machine first, by pip as this
# machine configures it (--python-version 3.13, wheels only), and handed in as a directory of wheels.
#   scripts/newest_ansible.sh [sanity] [deploy]   (both by default; K26_NEWEST_ANSIBLE_CORE: the requirement, default
#                                                  the newest 2.21)
set -euo pipefail
cd "$(dirname "$0")/.."
parts=" ${*:-sanity deploy} "
CORE=${K26_NEWEST_ANSIBLE_CORE:-ansible-core>=2.21,<2.22}
# the exposure every unit of the package is held to (tests/gpu/prove.py EXPOSURE_AIM, issue 50)
EXPOSURE_AIM=1.5
export K26_IMAGE_SUITE=trixie
scripts/build_image.sh
name=k26-newest-$$
work=$(mktemp -d /var/tmp/k26-newest.XXXXXX)
trap 'podman rm -f -t 0 "$name" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
say() { printf '[newest] %s\n' "$*"; }

# The wheels: ansible-core, then what ansible-test's sanity tests install into their own virtualenvs (their pinned
# requirement files, read from that ansible-core's wheel).
wheels=$work/wheels
py313=(--only-binary=:all: --python-version 3.13 --implementation cp --dest "$wheels")
# (pip's warnings about the machine's own find-links that lack a package are noise here)
fetch() { .venv/bin/pip download -q "${py313[@]}" "$@" 2> >(grep -v "^WARNING: Location '" >&2); }
fetch "$CORE"
core=$(echo "$wheels"/ansible_core-*.whl)
.venv/bin/python - "$core" "$work/requirements" <<'EOF'
import sys, zipfile
from pathlib import Path
wheel, out = zipfile.ZipFile(sys.argv[1]), Path(sys.argv[2])
out.mkdir()
for name in wheel.namelist():
    if name.startswith("ansible_test/_data/requirements/") and name.endswith(".txt") and (
            "/sanity." in name or name.endswith("/ansible-test.txt")):
        (out / Path(name).name).write_bytes(wheel.read(name))
EOF
requirements=()
for file in "$work"/requirements/*.txt; do requirements+=(-r "$file"); done
fetch "${requirements[@]}" pip
say "$(basename "$core"), $(ls "$wheels" | wc -l) wheels for Python 3.13"

# The collection as ansible-test wants it (ansible_collections/k26/deploy, the files git tracks; no .git: Debian's
# minimal image has no git, and ansible-test then takes every file of the tree), and the collections it uses, from
# this machine's `ansible` bundle.
source tests/sanity/scratch_collection.sh
collection=$(scratch_collection "$work/tree")
rm -rf "$collection/.git"
bundle=$(.venv/bin/python -c 'import ansible_collections as c; print(next(p for p in c.__path__ if "site-packages" in p))')
for used in ansible/posix community/general; do
  mkdir -p "$work/tree/ansible_collections/$used"
  cp -a "$bundle/$used/." "$work/tree/ansible_collections/$used/"
done
# The demo's settings, the deploy aimed at the container itself
mkdir -p "$work/inventory"
cp -a inventories/demo/group_vars "$work/inventory/"
printf 'sglang_servers:\n  hosts:\n    localhost:\n      ansible_connection: local\n      ansible_python_interpreter: /usr/bin/python3\n' \
  >"$work/inventory/hosts.yml"

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

say "deploy the demo's settings into the Debian 13 container"
in_box "cd /k26/tree/ansible_collections/k26/deploy && ANSIBLE_COLLECTIONS_PATH=/k26/tree ANSIBLE_NOCOLOR=1 \
  /opt/newest/bin/ansible-playbook -i /k26/inventory deploy_k26.yml" >"$work/deploy.log" || {
  tail -n 60 "$work/deploy.log"; say "the deploy failed"; exit 1; }
grep -A2 '^PLAY RECAP' "$work/deploy.log"
in_box 'curl -sf -H "Authorization: Bearer $(cat /k26/inventory/.secrets/api_key)" http://127.0.0.1:30000/v1/models' |
  grep -q '"kimi-k2.6"'
say "the endpoint answers with the key"
for unit in sglang.service sglang-guard.service; do
  exposure=$(in_box "systemd-analyze security $unit --no-pager" |
    sed -nE 's/.*Overall exposure level for [^:]*: ([0-9.]+).*/\1/p')
  say "systemd-analyze security $unit: ${exposure:-none} (aim: $EXPOSURE_AIM or lower)"
  awk -v e="$exposure" -v aim="$EXPOSURE_AIM" 'BEGIN { exit !(e != "" && e + 0 <= aim + 0) }'
done
say "passed: sanity and a deploy with $(in_box '/opt/newest/bin/ansible --version | head -n1') on Debian 13"
