"""Start SGLang (or the simulator) with the values of its secret options kept out of everything it prints.

    python sglang_launcher.py -m sglang.launch_server --config /etc/sglang/sglang.yaml
    python sglang_launcher.py /opt/sglang/simulator/sglang_simulator.py --config /etc/sglang/sglang.yaml

SGLang 0.5.23 logs its server_args, API keys included, at every start, into the journal. The launcher reads the
values of the secret options from the config file and the command line, installs two filters that replace them by
a mask - a logging record factory (every record of every logger) and wrappers of sys.stdout and sys.stderr
(whatever else Python prints: tracebacks, print, tqdm) - and then runs the target in this same process, as
`python -m MODULE` or `python SCRIPT` would. The process, its exit status, its signals and its children stay
SGLang's own; processes that multiprocessing spawns install the same filters first, from the same files.
Nothing else changes.

Needs Python >= 3.11 and PyYAML, like SGLang and the simulator. The secret option names are the collection's
(plugins/module_utils/sglang_options.py; tests/unit/test_sglang_launcher.py holds this copy to them: the launcher
runs on hosts that have no collection).
"""

import importlib.util
import logging
import os
import runpy
import sys

import yaml

SECRET_OPTION_KEYS = ("api-key", "admin-api-key", "ssl-keyfile-password")
SECRET_MASK = "********"


def option_key(name):
    return str(name).strip().lstrip("-").replace("_", "-")


def config_path(argv):
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def secret_values(argv):
    """The values of the secret options in the config file that argv names and in argv itself."""
    values = []
    path = config_path(argv)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                config = yaml.safe_load(handle) or {}
        except (OSError, yaml.YAMLError):
            config = {}  # the target reports an unreadable config itself
        if isinstance(config, dict):
            values += [str(value) for key, value in config.items()
                       if option_key(key) in SECRET_OPTION_KEYS and value not in (None, "")]
    for i, arg in enumerate(argv):
        name, sep, inline = arg.partition("=")
        if arg.startswith("--") and option_key(name) in SECRET_OPTION_KEYS:
            if sep and inline:
                values.append(inline)
            elif i + 1 < len(argv):
                values.append(argv[i + 1])
    # longest first: a secret that contains another is masked whole
    return sorted({value for value in values if value}, key=len, reverse=True)


class Redactor:
    """Masks the secrets of the target's argv (and config file), read again whenever sys.argv changes: a spawned
    child learns its parent's argv only after this is installed."""

    def __init__(self):
        self._argv = None
        self._secrets = []

    def secrets(self):
        if self._argv != sys.argv:
            self._argv = list(sys.argv)
            self._secrets = secret_values(self._argv[1:])
        return self._secrets

    def __call__(self, text):
        for secret in self.secrets():
            if secret in text:
                text = text.replace(secret, SECRET_MASK)
        return text


class RedactingStream:
    """A text stream that masks the secrets in everything written to it; everything else is the stream's own."""

    k26_redacting = True

    def __init__(self, stream, redact):
        self._stream = stream
        self._redact = redact

    def write(self, text):
        return self._stream.write(self._redact(text))

    def writelines(self, lines):
        self._stream.writelines(self._redact(line) for line in lines)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install():
    """Mask the secrets in every log record and in everything written to sys.stdout and sys.stderr, here and in
    every child that multiprocessing spawns."""
    if getattr(sys.stderr, "k26_redacting", False):
        return
    redact = Redactor()
    make_record = logging.getLogRecordFactory()

    def record_factory(*args, **kwargs):
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a record whose arguments do not fit: logging reports it itself
            return record
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        return record

    logging.setLogRecordFactory(record_factory)
    sys.stdout = RedactingStream(sys.stdout, redact)
    sys.stderr = RedactingStream(sys.stderr, redact)
    _children_install_too()


def _children_install_too():
    """A spawned child starts as `python -c PROGRAM`: put install() in front of that program."""
    from multiprocessing import spawn

    command_line = spawn.get_command_line
    prelude = "import sys; sys.path.insert(0, %r); import sglang_launcher; sglang_launcher.install(); " % (
        os.path.dirname(os.path.abspath(__file__)))

    def get_command_line(**kwargs):
        argv = command_line(**kwargs)
        if "-c" in argv:
            program = argv.index("-c") + 1
            argv[program] = prelude + argv[program]
        return argv

    spawn.get_command_line = get_command_line


def run(argv):
    """Run `-m MODULE ARGS...` or `SCRIPT ARGS...` as `python` would, in this process."""
    if len(argv) >= 2 and argv[0] == "-m":
        module, rest = argv[1], argv[2:]
        spec = importlib.util.find_spec(module)
        sys.argv = [spec.origin if spec and spec.origin else module] + rest
        sys.path[0] = os.getcwd()  # as `python -m` has it
        install()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    elif argv:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python SCRIPT` has it
        install()
        runpy.run_path(argv[0], run_name="__main__")
    else:
        sys.exit("usage: sglang_launcher.py -m MODULE [ARGS...] | SCRIPT [ARGS...]")


if __name__ == "__main__":
    run(sys.argv[1:])
