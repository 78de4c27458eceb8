# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start SGLang's router (smg) with its keys read from files.

smg takes its keys only in argv: the clients' key as --api-key, the control plane's (adding, removing and listing
workers, cache flush, profiling) as --control-plane-api-keys 'id:name:role:key'. Passed that way they would sit in
the unit file and in the process's argv at start; this launcher reads them from files that only root and the
service's group can read instead. With a control-plane key set, smg 1.13 no longer lets the clients' key reach its
control plane (without one, --api-key opens it too). Everything else is smg's own: its argument parser (the admin
key's entry goes through smg's own parsing of --control-plane-api-keys), its launch function, its exit status.

    python sglang_router_launcher.py [--api-key-file PATH] [--admin-key-file PATH] [smg launch arguments, without keys]
"""
import sys

from smg.launch_router import launch_router, parse_router_args
from smg.router_args import RouterArgs

KEY_FILE_OPTION = "--api-key-file"
ADMIN_KEY_FILE_OPTION = "--admin-key-file"
# The options that would put a key into argv.
KEY_OPTIONS = ("--api-key", "--control-plane-api-keys")
# The admin key's identity in smg's control-plane log and audit records.
ADMIN_KEY_ID = "k26deploy"


def split_option(argv, option):
    """(the option's value or None, argv without it)."""
    if option in argv:
        at = argv.index(option)
        if at + 1 >= len(argv):
            sys.exit("sglang_router_launcher: %s needs a path" % option)
        return argv[at + 1], argv[:at] + argv[at + 2:]
    return None, list(argv)


def split_key_file(argv):
    """(the key file's path or None, the admin key file's path or None, the arguments for smg)."""
    key_file, rest = split_option(argv, KEY_FILE_OPTION)
    admin_key_file, rest = split_option(rest, ADMIN_KEY_FILE_OPTION)
    return key_file, admin_key_file, rest


def read_key(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip() or None


def main(argv):
    if any(arg == option or arg.startswith(option + "=") for arg in argv for option in KEY_OPTIONS):
        sys.exit("sglang_router_launcher: pass the keys as %s and %s, not in argv"
                 % (KEY_FILE_OPTION, ADMIN_KEY_FILE_OPTION))
    key_file, admin_key_file, smg_argv = split_key_file(argv)
    args = parse_router_args(smg_argv)
    if key_file:
        args.api_key = read_key(key_file)
    if admin_key_file:
        admin_key = read_key(admin_key_file)
        if not admin_key:
            sys.exit("sglang_router_launcher: %s is empty" % admin_key_file)
        args.control_plane_api_keys = RouterArgs._parse_control_plane_api_keys(  # pylint: disable=protected-access
            ["%s:%s:admin:%s" % (ADMIN_KEY_ID, ADMIN_KEY_ID, admin_key)])
    launch_router(args)


if __name__ == "__main__":
    main(sys.argv[1:])
