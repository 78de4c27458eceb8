# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start SGLang's router (smg) with its API key read from a file.

smg takes its key only as --api-key. Passed that way it would sit in the unit file and in the process's argv
at start; this launcher reads it from a file that only root and the service's group can read instead.
Everything else is smg's own: its argument parser, its launch function, its exit status.

    python sglang_router_launcher.py [--api-key-file PATH] [smg launch arguments, without --api-key]
"""
import sys

from smg.launch_router import launch_router, parse_router_args

KEY_FILE_OPTION = "--api-key-file"


def split_key_file(argv):
    """(the key file's path or None, the arguments for smg)."""
    if KEY_FILE_OPTION in argv:
        at = argv.index(KEY_FILE_OPTION)
        if at + 1 >= len(argv):
            sys.exit("sglang_router_launcher: %s needs a path" % KEY_FILE_OPTION)
        return argv[at + 1], argv[:at] + argv[at + 2:]
    return None, list(argv)


def read_key(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip() or None


def main(argv):
    if any(arg == "--api-key" or arg.startswith("--api-key=") for arg in argv):
        sys.exit("sglang_router_launcher: pass the API key as %s, not in argv" % KEY_FILE_OPTION)
    key_file, smg_argv = split_key_file(argv)
    args = parse_router_args(smg_argv)
    if key_file:
        args.api_key = read_key(key_file)
    launch_router(args)


if __name__ == "__main__":
    main(sys.argv[1:])
