# Sourced by the scripts that install SGLang for the tests: SGLANG_VERSION, unless set, is the release this
# collection is checked against (plugins/module_utils/sglang_version.py, its one home).
SGLANG_VERSION=${SGLANG_VERSION:-$(sed -n "s/^SGLANG_VERSION = '\(.*\)'\$/\1/p" \
    "$(dirname "${BASH_SOURCE[0]}")/../plugins/module_utils/sglang_version.py")}
[ -n "$SGLANG_VERSION" ] || { echo "no SGLANG_VERSION in plugins/module_utils/sglang_version.py" >&2; exit 2; }
