#!/usr/bin/env bash
# The collection k26.deploy as its users read it, checked on the checkout's files (a scratch copy):
#   changelog   the fragments and changelogs/changelog.yaml lint, and CHANGELOG.md is what antsibull-changelog
#               generates from them (the released versions; changelogs/fragments/ holds what is not released yet)
#   docs        antsibull-docs lint-collection-docs --plugin-docs: every module, filter and role entry point
#               documented, and ansible-doc renders each module, lookup and role entry point
#   ee          execution-environment.yml renders with ansible-builder (scripts/ee.sh; the image is not built)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV_BIN=${VENV_BIN:-$ROOT/.venv/bin}
export PATH=$VENV_BIN:$PATH
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/k26-collection.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
source "$ROOT/tests/sanity/scratch_collection.sh"
COLL=$(scratch_collection "$SCRATCH")
# This collection and the ones it uses (the `ansible` bundle in the virtualenv), nothing else.
export ANSIBLE_COLLECTIONS_PATH=$SCRATCH:$("$VENV_BIN/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cd "$COLL"

echo "== changelog"
antsibull-changelog lint
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
antsibull-changelog generate --output "$SCRATCH/CHANGELOG.md" --output-format md
diff -u CHANGELOG.md "$SCRATCH/CHANGELOG.md" ||
  { echo "CHANGELOG.md is not what antsibull-changelog generates: run 'antsibull-changelog generate'" >&2; exit 1; }

echo "== docs"
antsibull-docs lint-collection-docs --plugin-docs .
"$VENV_BIN/python" - <<'PY'
import json, pathlib, subprocess, sys
dump = json.loads(subprocess.run(["ansible-doc", "--metadata-dump", "k26.deploy"], check=True,
                                 capture_output=True, text=True).stdout)["all"]
modules = {"k26.deploy." + p.stem for p in pathlib.Path("plugins/modules").glob("*.py")}
documented = {name for name, doc in dump["module"].items() if doc.get("doc")}
lookups = {"k26.deploy." + p.stem for p in pathlib.Path("plugins/lookup").glob("*.py")}
documented_lookups = {name for name, doc in dump.get("lookup", {}).items() if doc.get("doc")}
roles = {"k26.deploy." + path.parts[1] for path in pathlib.Path("roles").glob("*/meta/argument_specs.yml")}
missing = sorted(modules - documented) + sorted(lookups - documented_lookups) + sorted(roles - set(dump["role"]))
for role, doc in dump["role"].items():
    for entry, spec in doc.get("entry_points", {}).items():
        if not spec.get("short_description"):
            missing.append("%s entry point %s (no short_description)" % (role, entry))
if missing:
    sys.exit("ansible-doc renders no documentation for: " + ", ".join(missing))
print("ansible-doc: %d modules, %d lookups, %d role entry points" % (
    len(documented & modules), len(documented_lookups & lookups),
    sum(len(d.get("entry_points", {})) for d in dump["role"].values())))
PY

echo "== execution environment"
"$ROOT/scripts/ee.sh"
