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

SGLang 0.5.23 also answers /server_info (and /get_server_info) to any holder of the API key with its resolved
options, both keys and the launch command included (srt/utils/common.py build_server_info): whoever may generate
could read the admin key and reach the admin endpoints with it. For `-m sglang.launch_server` the launcher therefore
adds one layer to SGLang's own HTTP app once SGLang imports it (entrypoints/http_server.py `app`, never imported
earlier than SGLang itself does): every response body leaves with the secrets masked as in the journal, except an
event stream's (streamed generation, the hot path, which carries no option). SGLang's own auth still decides who
gets an answer; nothing else of SGLang changes.

Needs Python >= 3.11 and PyYAML, like SGLang and the simulator. Which options are secret, where their values are
and the mask are the collection's own: plugins/module_utils/sglang_options.py, which the role installs beside the
launcher as k26_sglang_options.py (roles/sglang/files/k26_sglang_options.py links to it), so the launcher runs on
hosts that have no collection and still has no copy of it.
"""

import importlib.abc
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
# Where SGLang 0.5.23 builds the FastAPI app its HTTP server runs, and the attribute that holds it.
SGLANG_HTTP_MODULE, SGLANG_HTTP_APP = "sglang.srt.entrypoints.http_server", "app"


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


def masked(data, forms):
    """data (bytes) with every printed form of a secret replaced by the mask."""
    for form in forms:
        data = data.replace(form, SECRET_MASK.encode())
    return data


class Masker:
    """Masks the secrets' printed forms in a byte stream written in pieces. It passes on everything at once except
    the longest tail that could begin a secret (held until the next piece says whether it does)."""

    def __init__(self, forms):
        self._forms = forms
        self._held = b""

    def feed(self, data):
        text = masked(self._held + data, self._forms)
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


def _header(headers, name):
    return next((value for key, value in headers if key.lower() == name), None)


class ResponseMasker:
    """ASGI middleware: every HTTP response body leaves with the secrets' printed forms masked. A body of known length
    is held until complete and sent once, its Content-Length corrected; a body of unknown length is masked as it
    streams (Masker); an event stream (text/event-stream: streamed generation) passes untouched."""

    def __init__(self, app, forms):
        self.app = app
        self.forms = forms

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _MaskedResponse(send, self.forms).send)


class _MaskedResponse:
    """One response's messages on their way out (see ResponseMasker)."""

    def __init__(self, send, forms):
        self._send = send
        self._forms = forms
        self._start = None
        self._mode = None  # "pass", "whole" or "stream", chosen at the first body message
        self._held = []
        self._masker = Masker(forms)

    async def send(self, message):
        kind = message["type"]
        if kind == "http.response.start":
            self._start = message
            return
        if kind != "http.response.body" or self._mode == "pass":
            await self._flush_start()
            await self._send(message)
            return
        if self._mode is None:
            self._mode = self._mode_for(self._start["headers"] if self._start else [])
            if self._mode == "pass":
                await self.send(message)
                return
        more = message.get("more_body", False)
        if self._mode == "whole":
            self._held.append(message.get("body", b""))
            if not more:
                await self._send_whole()
            return
        await self._flush_start()
        body = self._masker.feed(message.get("body", b"")) + (b"" if more else self._masker.close())
        await self._send({"type": kind, "body": body, "more_body": more})

    @staticmethod
    def _mode_for(headers):
        content_type = (_header(headers, b"content-type") or b"").lower()
        if content_type.startswith(b"text/event-stream"):
            return "pass"
        return "whole" if _header(headers, b"content-length") is not None else "stream"

    async def _send_whole(self):
        body = masked(b"".join(self._held), self._forms)
        self._held = []
        headers = [(key, value) for key, value in self._start["headers"] if key.lower() != b"content-length"]
        self._start = dict(self._start, headers=headers + [(b"content-length", str(len(body)).encode())])
        await self._flush_start()
        await self._send({"type": "http.response.body", "body": body, "more_body": False})

    async def _flush_start(self):
        if self._start is not None:
            start, self._start = self._start, None
            await self._send(start)


class _CallWhenImported(importlib.abc.MetaPathFinder):
    """Calls callback(module) right after the named module's code has run, when its first importer imports it: the
    import order stays the program's own."""

    def __init__(self, name, callback):
        self._name = name
        self._callback = callback

    def find_spec(self, fullname, path, target=None):  # pylint: disable=unused-argument
        if fullname != self._name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, callback = spec.loader.exec_module, self._callback

        def exec_then_call(module):
            execute(module)
            callback(module)

        spec.loader.exec_module = exec_then_call
        return spec


def mask_responses(secrets):
    """Mask the secrets in every response of SGLang's HTTP app (see the module's docstring)."""
    forms = printed_forms(secrets)
    if not forms:
        return

    def add_masker(module):
        app = getattr(module, SGLANG_HTTP_APP, None)
        if app is None or not hasattr(app, "add_middleware"):
            raise RuntimeError("%s has no ASGI app %r: its responses could carry the API keys; this launcher does not "
                               "know this SGLang" % (SGLANG_HTTP_MODULE, SGLANG_HTTP_APP))
        app.add_middleware(ResponseMasker, forms=forms)

    sys.meta_path.insert(0, _CallWhenImported(SGLANG_HTTP_MODULE, add_masker))


def run(argv):
    """Run `-m MODULE ARGS...` or `SCRIPT ARGS...` as `python` would, in this process."""
    if len(argv) >= 2 and argv[0] == "-m":
        module, rest = argv[1], argv[2:]
        spec = importlib.util.find_spec(module)
        secrets = secret_values(rest)
        mask_output(secrets)
        mask_responses(secrets)
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
