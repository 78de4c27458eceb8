"""One interpreter of the real SGLang venv answering many `python -c SCRIPT ARGS...` questions.

Importing SGLang's parser (torch, transformers, sglang.srt.server_args) costs seconds of CPU per process; the tests
ask it dozens of questions. `run(argv)` has the same contract as a subprocess runner, (rc, stdout, stderr), and
sends `SGLANG_PYTHON -c SCRIPT ARGS...` to one warm interpreter per test process, which runs SCRIPT as a fresh
`__main__` with sys.argv = ["-c", ARGS...] and its output captured. Anything else runs as a real subprocess.
"""
import atexit
import json
import subprocess
import threading

from sglang_venv import SGLANG_PYTHON

REPLY = "K26_PARSER_REPLY="
SERVER = r"""
import contextlib, io, json, sys
from sglang.srt.server_args import ServerArgs  # noqa: F401 - the imports every question needs, paid once
from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger  # noqa: F401
REPLY = sys.argv[1]
for request in sys.stdin:
    argv = json.loads(request)
    out, err, rc = io.StringIO(), io.StringIO(), 0
    sys.argv = ["-c"] + argv[1:]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(argv[0], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                err.write(str(exc.code) + "\n")
        except BaseException:
            import traceback
            traceback.print_exc()
            rc = 1
    sys.__stdout__.write(REPLY + json.dumps([rc, out.getvalue(), err.getvalue()]) + "\n")
    sys.__stdout__.flush()
"""


class WarmParser:
    def __init__(self):
        self.lock = threading.Lock()
        self.proc = None

    def ask(self, script_and_args):
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = subprocess.Popen([str(SGLANG_PYTHON), "-c", SERVER, REPLY], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.proc.stdin.write(json.dumps(script_and_args) + "\n")
            self.proc.stdin.flush()
            for line in self.proc.stdout:
                if line.startswith(REPLY):
                    return tuple(json.loads(line[len(REPLY):]))
            raise RuntimeError("the SGLang parser process ended (rc %s)" % self.proc.wait())

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


_PARSER = WarmParser()
atexit.register(_PARSER.close)


def run(argv, timeout=300):
    """(rc, stdout, stderr) of argv; `SGLANG_PYTHON -c SCRIPT ...` is answered by the warm interpreter."""
    if len(argv) >= 3 and str(argv[0]) == str(SGLANG_PYTHON) and argv[1] == "-c":
        return _PARSER.ask([str(a) for a in argv[2:]])
    proc = subprocess.run([str(a) for a in argv], check=False, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr
