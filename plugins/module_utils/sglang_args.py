# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check an SGLang option mapping with SGLang's own parser, the way `launch_server --config FILE` reads it.

Used by the sglang_args_check module and by tests/unit/test_sglang_args_check.py (which runs it against the
real sglang package on CPU). The check script runs in SGLang's virtualenv; it builds the parser exactly as
``sglang.srt.server_args.prepare_server_args`` does (``argparse.ArgumentParser(prog="sglang serve")`` +
``ServerArgs.add_cli_args``), merges the config file with ``ConfigArgumentMerger(parser).merge_config_with_args``
and parses. argparse's ``error()`` is redirected so that the message comes back without the 500-line usage text.
It stops before ``ServerArgs.from_cli_args`` (whose post-processing needs the GPU).
"""

from __future__ import annotations

import json
import os
import tempfile

RESULT_MARKER = "K26_SGLANG_ARGS_CHECK_RESULT="


CHECK_SCRIPT = r'''
import argparse, json, sys
MARK = "K26_SGLANG_ARGS_CHECK_RESULT="
def emit(result):
    sys.stdout.write("\n" + MARK + json.dumps(result, default=repr) + "\n")
    sys.stdout.flush()
    sys.exit(0)
class ArgError(Exception):
    pass
def raise_error(message):
    raise ArgError(message)
try:
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
except Exception as exc:
    emit({"ok": False, "stage": "import", "error": "%s: %s" % (type(exc).__name__, exc)})
try:
    from importlib.metadata import version
    sglang_version = version("sglang")
except Exception:
    sglang_version = None
argv = sys.argv[1:]
parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
parser.error = raise_error
stage = "merge"
try:
    merged = ConfigArgumentMerger(parser).merge_config_with_args(argv) if "--config" in argv else argv
    stage = "parse"
    namespace = parser.parse_args(merged)
except ArgError as exc:
    emit({"ok": False, "stage": stage, "error": str(exc), "sglang_version": sglang_version})
except SystemExit as exc:
    emit({"ok": False, "stage": stage, "error": "argparse exited with %s" % exc.code, "sglang_version": sglang_version})
except Exception as exc:
    emit({"ok": False, "stage": stage, "error": "%s: %s" % (type(exc).__name__, exc), "sglang_version": sglang_version})
# argparse accepts a unique prefix of a flag (allow_abbrev); SGLang does too, but such a key breaks as soon
# as a new flag shares the prefix. Report them.
abbreviated = sorted({a.split("=", 1)[0] for a in merged if a.startswith("--")
                      and a.split("=", 1)[0] not in parser._option_string_actions})
changed = {}
for action in parser._actions:
    dest = action.dest
    if dest in ("help", "config") or not hasattr(namespace, dest):
        continue
    value = getattr(namespace, dest)
    if value != action.default:
        changed[dest] = value if isinstance(value, (str, int, float, bool, type(None), list)) else repr(value)
emit({"ok": True, "stage": "parse", "error": None, "sglang_version": sglang_version,
      "option_count": len([a for a in parser._actions if a.option_strings]), "parsed": changed,
      "abbreviated": abbreviated})
'''


def write_private_config(options=None, content=None, directory=None):
    """Write the mapping (as JSON, which is YAML) or the given YAML text to a new 0600 file; return its path."""
    fd, path = tempfile.mkstemp(prefix="k26-sglang-args-", suffix=".yaml", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if content is not None:
                handle.write(content)
            else:
                json.dump(options or {}, handle, indent=1, sort_keys=False)
                handle.write("\n")
    except Exception:
        os.unlink(path)
        raise
    return path


def build_argv(python, config_path, extra_args=None, simulator=None):
    """The command that checks the config: SGLang's parser, or the simulator's --sim-check-only."""
    extra = [str(a) for a in (extra_args or [])]
    if simulator:
        return [python, simulator, "--sim-check-only", "--config", config_path] + extra
    return [python, "-c", CHECK_SCRIPT, "--config", config_path] + extra


def parse_check_output(rc, out, err, simulator=False):
    """The check's verdict: {ok, stage, error, sglang_version, option_count, parsed}."""
    if simulator:
        error = None
        if rc != 0:
            lines = [line.strip() for line in (err or out or "").splitlines() if line.strip()]
            error_lines = [line for line in lines if ": error: " in line]
            error = (error_lines[-1].split(": error: ", 1)[1] if error_lines
                     else (lines[-1] if lines else "simulator exited with %s" % rc))
        return {"ok": rc == 0, "stage": "simulator", "error": error, "sglang_version": None,
                "option_count": None, "parsed": {}, "abbreviated": []}
    for line in reversed((out or "").splitlines()):
        if line.startswith(RESULT_MARKER):
            result = json.loads(line[len(RESULT_MARKER):])
            result.setdefault("parsed", {})
            result.setdefault("option_count", None)
            result.setdefault("abbreviated", [])
            return result
    tail = "\n".join((err or out or "").strip().splitlines()[-5:])
    return {"ok": False, "stage": "run", "error": "the check did not report (rc=%s): %s" % (rc, tail),
            "sglang_version": None, "option_count": None, "parsed": {}, "abbreviated": []}


def run_check(runner, python, options=None, content=None, extra_args=None, simulator=None, tmpdir=None):
    """Write the private config, run the check with runner(argv) -> (rc, out, err), remove the file.

    Returns (result, argv_for_display): the temporary path in argv is replaced by a placeholder.
    """
    path = write_private_config(options=options, content=content, directory=tmpdir)
    try:
        argv = build_argv(python, path, extra_args=extra_args, simulator=simulator)
        rc, out, err = runner(argv)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    result = parse_check_output(rc, out, err, simulator=bool(simulator))
    result["rc"] = rc
    shown = ["<script>" if a == CHECK_SCRIPT else ("CONFIG.yaml" if a == path else a) for a in argv]
    return result, shown
