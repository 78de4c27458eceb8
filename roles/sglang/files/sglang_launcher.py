# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start SGLang (or the simulator) with the values of its secret options kept out of everything it prints.

    python sglang_launcher.py -m sglang.launch_server --config /etc/sglang/sglang.yaml
    python sglang_launcher.py /opt/sglang/simulator/sglang_simulator --config /etc/sglang/sglang.yaml

SGLang 0.5.23 logs its server_args, API keys included, at every start, into the journal. The launcher reads the
values of the secret options from the config file and the command line and masks them at the file-descriptor
level: file descriptors 1 and 2 become pipes to a masking process, so whatever the process tree writes there -
logging, print, tracebacks, os.write, sys.__stderr__, every child process - reaches the journal masked, in every
form a secret takes when printed (as it is, escaped as repr or JSON does, URL-quoted), even split across writes.
Then the target runs in this same process, as `python -m MODULE` or `python SCRIPT` would (SCRIPT may be a directory
with a __main__.py, as the simulator's package is): the process, its exit status, its signals and its children stay
SGLang's own.

The masking process is no child of SGLang (SGLang kills its own process tree when it stops) and ignores SIGTERM,
SIGINT, SIGHUP and SIGQUIT (systemd sends SIGTERM to the whole unit): it ends when the last writer has closed the
pipes, so the last lines of a stop still reach the journal.

Needs Python >= 3.11 and PyYAML, like SGLang and the simulator. Which options are secret, where their values are
and the mask are the collection's own: plugins/module_utils/sglang_options.py, which the role installs beside the
launcher as k26_sglang_options.py (roles/sglang/files/k26_sglang_options.py links to it), so the launcher runs on
hosts that have no collection and still has no copy of it.
"""

import importlib.util
import json
import os
import runpy
import selectors
import signal
import stat
import sys
import urllib.parse

import yaml

import k26_sglang_options as sglang_options

SECRET_MASK = sglang_options.SECRET_MASK
_CHUNK = 65536


def config_path(argv):
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def secret_values(argv):
    """The values of the secret options in the config file that argv names and in argv itself."""
    config = {}
    path = config_path(argv)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                config = yaml.safe_load(handle) or {}
        except (OSError, yaml.YAMLError):
            config = {}  # the target reports an unreadable config itself
    values = sglang_options.secret_values(config if isinstance(config, dict) else {}, argv)
    return sorted({value for value in values if value}, key=len, reverse=True)


def printed_forms(secrets):
    """Every byte string a secret becomes when printed: itself, escaped as repr() and JSON escape it, URL-quoted;
    longest first, so a form that contains another is masked whole."""
    forms = set()
    for secret in secrets:
        for text in (secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
                     urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret, safe="")):
            forms.add(text.encode("utf-8", "backslashreplace"))
    return sorted((form for form in forms if form), key=len, reverse=True)


class Masker:
    """Masks the secrets' printed forms in a byte stream written in pieces. It passes on everything at once except
    the longest tail that could begin a secret (held until the next piece says whether it does)."""

    def __init__(self, forms):
        self._forms = forms
        self._held = b""

    def feed(self, data):
        text = self._held + data
        for form in self._forms:
            text = text.replace(form, SECRET_MASK.encode())
        hold = self._tail_that_begins_a_secret(text)
        self._held = text[len(text) - hold:] if hold else b""
        return text[:len(text) - hold]

    def close(self):
        """What is left at the end: a held tail is part of a secret that never ended, masked whole."""
        held, self._held = self._held, b""
        return SECRET_MASK.encode() if held else b""

    def _tail_that_begins_a_secret(self, text):
        longest = 0
        for form in self._forms:
            for size in range(min(len(form) - 1, len(text)), longest, -1):
                if text.endswith(form[:size]):
                    longest = size
                    break
        return longest


def _write_all(fd, data):
    while data:
        try:
            data = data[os.write(fd, data):]
        except OSError:
            return  # the journal or the reader went away: nothing left to protect


def _mask_until_closed(streams, forms):
    """streams: (read end, output fd) pairs. Copies each masked until every writer has closed its read end."""
    selector = selectors.DefaultSelector()
    for source, target in streams:
        selector.register(source, selectors.EVENT_READ, (target, Masker(forms)))
    while selector.get_map():
        for key, dummy in selector.select():
            target, masker = key.data
            data = os.read(key.fd, _CHUNK)
            _write_all(target, masker.feed(data) if data else masker.close())
            if not data:
                selector.unregister(key.fd)
                os.close(key.fd)


def _same_file(fd_a, fd_b):
    try:
        a, b = os.fstat(fd_a), os.fstat(fd_b)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) and not stat.S_ISCHR(a.st_mode)


def mask_output(secrets):
    """Put a masking process between this process (and every process it starts) and its stdout and stderr."""
    forms = printed_forms(secrets)
    if not forms:
        return
    shared = _same_file(1, 2)  # the journal's one stream: one pipe keeps stdout's and stderr's lines in order
    pipes = [(1, os.pipe())] if shared else [(1, os.pipe()), (2, os.pipe())]
    sys.stdout.flush()
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:  # the masker's parent exits at once: the masker is nobody's child, so SGLang never kills it
        if os.fork() == 0:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
                signal.signal(signum, signal.SIG_IGN)
            for dummy, (read_end, write_end) in pipes:
                os.close(write_end)
            try:
                _mask_until_closed([(read_end, fd) for fd, (read_end, dummy) in pipes], forms)
            finally:
                os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    for fd, (read_end, write_end) in pipes:
        os.close(read_end)
        os.dup2(write_end, fd)
        if shared:
            os.dup2(write_end, 2)
        os.close(write_end)


def run(argv):
    """Run `-m MODULE ARGS...` or `SCRIPT ARGS...` as `python` would, in this process."""
    if len(argv) >= 2 and argv[0] == "-m":
        module, rest = argv[1], argv[2:]
        spec = importlib.util.find_spec(module)
        mask_output(secret_values(rest))
        sys.argv = [spec.origin if spec and spec.origin else module] + rest
        sys.path[0] = os.getcwd()  # as `python -m` has it
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    elif argv:
        mask_output(secret_values(argv[1:]))
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python SCRIPT` has it
        runpy.run_path(argv[0], run_name="__main__")
    else:
        sys.exit("usage: sglang_launcher.py -m MODULE [ARGS...] | SCRIPT [ARGS...]")


if __name__ == "__main__":
    run(sys.argv[1:])
