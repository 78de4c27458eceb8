#!/usr/bin/env bash
# Create (once) .cache/aiperf-venv: NVIDIA AIPerf, the load generator of the benchmark sweep
# (plugins/module_utils/sglang_benchmark_aiperf.py says why it and not SGLang's own benchmark).
# About 1.2 GB (transformers, pandas, scipy, plotly come with it; no torch). Skipped when it already runs.
# No registry host is named here: pip uses the machine's own configuration.
#
# Environment: AIPERF_VENV (default .cache/aiperf-venv), AIPERF_VERSION (default 0.13.0),
#              PYTHON (default python3; needs >= 3.10).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${AIPERF_VENV:-$PWD/.cache/aiperf-venv}
AIPERF_VERSION=${AIPERF_VERSION:-0.13.0}
PYTHON=${PYTHON:-python3}

if [ -x "$VENV/bin/aiperf" ] && [ "$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("aiperf"))' 2>/dev/null)" = "$AIPERF_VERSION" ]; then
  exit 0
fi
printf '[setup_aiperf] creating %s (aiperf %s)\n' "$VENV" "$AIPERF_VERSION"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
# pip's "Location ... is ignored" warnings about index folders without the package are noise here
"$VENV/bin/python" -m pip install -q "aiperf==$AIPERF_VERSION" 2> >(grep -v '^WARNING: Location' >&2)
