"""The launcher: SGLang (or any target) runs in the same process, with the secret options' values masked in all it
prints, in its children too; exit status and signals are the target's own. Checked with real processes, and
against the real SGLang 0.5.23 package."""
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from ansible_collections.k26.deploy.plugins.module_utils import sglang_options
from sglang_venv import SGLANG_PYTHON, requires_real_sglang

LAUNCHER = Path(__file__).resolve().parents[2] / "roles" / "sglang" / "files" / "sglang_launcher.py"
API_KEY, ADMIN_KEY, FLAG_KEY = "k26-api-8c1f2e", "k26-admin-77aa01", "k26-flag-5d5d5d"

# A target that shows the secrets every way a server can: a log record with arguments, an f-string record in a
# child process that multiprocessing spawns, print(), and an uncaught exception; then it exits with 3.
TARGET = textwrap.dedent("""\
    import logging, multiprocessing, sys, yaml

    def child(config):
        logging.basicConfig(level=logging.INFO)
        logging.getLogger("child").info(f"server_args={yaml.safe_load(open(config))}")

    if __name__ == "__main__":
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
        config = sys.argv[sys.argv.index("--config") + 1]
        args = yaml.safe_load(open(config))
        logging.getLogger("sglang").info("server_args=%s", args)
        process = multiprocessing.get_context("spawn").Process(target=child, args=(config,))
        process.start()
        process.join()
        print("argv:", sys.argv)
        if "--crash" in sys.argv:
            raise RuntimeError("bad key " + args["api-key"])
        sys.exit(3)
    """)


def write_config(tmp_path, **extra):
    config = tmp_path / "sglang.yaml"
    config.write_text(yaml.safe_dump(dict({"model-path": "/nonexistent/model", "api-key": API_KEY,
                                           "admin-api-key": ADMIN_KEY}, **extra)))
    return config


def launch(python, *argv, cwd=None):
    return subprocess.run([str(python), str(LAUNCHER), *argv], check=False, capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_the_launcher_has_the_collections_secret_options_and_no_copy_of_them():
    """The launcher imports k26_sglang_options, which is module_utils/sglang_options.py itself (a link in the role's
    files; the role installs both files side by side)."""
    beside = LAUNCHER.parent / "k26_sglang_options.py"
    assert beside.is_symlink() and beside.resolve() == Path(sglang_options.__file__).resolve()
    tasks = yaml.safe_load((LAUNCHER.parents[1] / "tasks" / "main.yml").read_text())
    install = next(task for task in tasks if task.get("register") == "__sglang_launcher_copy")
    assert sorted(install["loop"]) == sorted([LAUNCHER.name, beside.name])
    assert "{{ item }}" in install["ansible.builtin.copy"]["dest"]
    code = LAUNCHER.read_text()
    assert not [key for key in sglang_options.SECRET_OPTION_KEYS if '"%s"' % key in code or "'%s'" % key in code]
    sys.path.insert(0, str(LAUNCHER.parent))
    import sglang_launcher

    assert sglang_launcher.SECRET_MASK == sglang_options.SECRET_MASK


@pytest.mark.parametrize("config, argv", [
    ({"api_key": "a1", "admin-api-key": "b2", "ssl_keyfile_password": "c3", "port": 30000}, []),
    ({"--api-key": "a1", "api_key_x": "not-a-secret"}, ["--admin-api-key=b2", "--api-key", "d4", "--port", "1"]),
    ({}, ["--ssl-keyfile-password", "c3", "--api-key"]),
])
def test_the_launcher_finds_the_secrets_the_collection_finds(tmp_path, config, argv):
    # The launcher reads the config file that argv names; the collection's secret_values finds the values in both.
    sys.path.insert(0, str(LAUNCHER.parent))
    import sglang_launcher

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    launcher_found = sglang_launcher.secret_values(["--config", str(path), *argv])
    assert sorted(launcher_found) == sorted(set(sglang_options.secret_values(config, argv)))


def test_every_way_out_is_masked_and_the_exit_status_kept(tmp_path):
    target = tmp_path / "target.py"
    target.write_text(TARGET)
    config = write_config(tmp_path)
    direct = subprocess.run([sys.executable, str(target), "--config", str(config), "--api-key", FLAG_KEY],
                            check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    launched = launch(sys.executable, str(target), "--config", str(config), "--api-key", FLAG_KEY, cwd=tmp_path)
    assert API_KEY in direct.stderr and FLAG_KEY in direct.stdout  # what the launcher is for
    assert launched.returncode == direct.returncode == 3
    output = launched.stdout + launched.stderr
    for secret in (API_KEY, ADMIN_KEY, FLAG_KEY):
        assert secret not in output
    assert "'api-key': '********'" in launched.stderr  # the parent's record
    assert launched.stderr.count("'admin-api-key': '********'") == 2  # and the spawned child's
    assert launched.stdout.replace(FLAG_KEY, "x") == launched.stdout and "'--api-key', '********'" in launched.stdout
    assert launched.stdout.replace("********", "?") == direct.stdout.replace(FLAG_KEY, "?")  # nothing else changes


# Writes that never pass through Python's sys.stdout and sys.stderr objects: a key split across two os.write calls,
# sys.__stderr__, sys.stdout.buffer, a shell child, a password escaped by repr() and by JSON, a URL; then a line
# printed while the whole process group is being stopped (as systemd stops the unit), after the target killed every
# child it has (as SGLang does).
RAW_WRITES = textwrap.dedent("""\
    import json, os, signal, subprocess, sys, time, urllib.parse, yaml

    config = yaml.safe_load(open(sys.argv[sys.argv.index("--config") + 1]))
    key, password = config["api-key"].encode(), config["ssl-keyfile-password"]
    os.write(2, b"split " + key[:5])
    time.sleep(0.2)
    os.write(2, key[5:] + b" end\\n")
    sys.__stderr__.write("dunder %s\\n" % config["api-key"])
    sys.__stderr__.flush()
    sys.stdout.buffer.write(b"buffer " + key + b"\\n")
    sys.stdout.flush()
    subprocess.run(["sh", "-c", "echo child $0 >&2", config["admin-api-key"]], check=True)
    print("repr", repr(password), "json", json.dumps(password), "url", urllib.parse.quote(password, safe=""))
    sys.stdout.flush()

    def stop(signum, frame):
        time.sleep(0.5)
        os.write(2, b"stopping " + key + b"\\n")
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    for task in os.listdir("/proc/self/task"):  # SGLang kills its own process tree when it stops
        for child in open("/proc/self/task/%s/children" % task).read().split():
            os.kill(int(child), signal.SIGKILL)
    os.write(1, b"waiting\\n")
    time.sleep(60)
    """)


def test_every_write_of_the_process_tree_is_masked_even_while_it_stops(tmp_path):
    target = tmp_path / "target.py"
    target.write_text(RAW_WRITES)
    password = 'pa\\ss"w\u00f6rd/&x'
    config = write_config(tmp_path, **{"ssl-keyfile-password": password})
    process = subprocess.Popen([sys.executable, str(LAUNCHER), str(target), "--config", str(config)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    lines = [process.stdout.readline()]
    while lines[-1] not in (b"waiting\n", b""):
        lines.append(process.stdout.readline())
    os.killpg(process.pid, signal.SIGTERM)  # the whole group, as KillMode=control-group does
    out, err = process.communicate(timeout=60)
    out = b"".join(lines) + out
    output = (out + err).decode()
    assert process.returncode == 0
    for secret in (API_KEY, ADMIN_KEY, password, repr(password)[1:-1], json.dumps(password)[1:-1], "pa%5Css"):
        assert secret not in output
    assert err.decode().splitlines() == ["split ******** end", "dunder ********", "child ********",
                                         "stopping ********"]
    assert out.decode().splitlines() == ["buffer ********", "repr '********' json \"********\" url ********",
                                         "waiting"]


def test_a_traceback_is_masked_and_still_exits_1(tmp_path):
    target = tmp_path / "target.py"
    target.write_text(TARGET)
    launched = launch(sys.executable, str(target), "--config", str(write_config(tmp_path)), "--crash", cwd=tmp_path)
    assert launched.returncode == 1
    assert "RuntimeError: bad key ********" in launched.stderr and API_KEY not in launched.stderr


def test_a_signal_ends_the_launched_process_as_it_ends_the_target(tmp_path):
    target = tmp_path / "target.py"
    target.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    launched = launch(sys.executable, str(target))
    assert launched.returncode == -signal.SIGTERM


def test_without_secrets_nothing_is_touched(tmp_path):
    target = tmp_path / "target.py"
    target.write_text("import sys\nprint('argv', sys.argv[1:])\nsys.exit(5)\n")
    launched = launch(sys.executable, str(target), "--port", "30000")
    assert launched.returncode == 5 and launched.stdout == "argv ['--port', '30000']\n"


@pytest.mark.sglang_real
@requires_real_sglang
def test_real_sglang_launch_server_through_the_launcher(tmp_path):
    """SGLang 0.5.23's own launch_server (it stops early on CPU); the launcher changes neither its status nor, apart
    from the masked values, its output."""
    config = write_config(tmp_path)
    argv = ["--config", str(config), "--admin-api-key", FLAG_KEY]
    direct = subprocess.run([str(SGLANG_PYTHON), "-m", "sglang.launch_server", *argv], check=False,
                            capture_output=True, text=True, timeout=300)
    launched = launch(SGLANG_PYTHON, "-m", "sglang.launch_server", *argv)
    assert launched.returncode == direct.returncode != 0
    for secret in (API_KEY, ADMIN_KEY, FLAG_KEY):
        assert secret not in launched.stdout + launched.stderr
    assert json.dumps(direct.stderr.splitlines()[-1]) == json.dumps(launched.stderr.splitlines()[-1])


def test_a_script_imports_its_neighbours_as_under_python(tmp_path):
    (tmp_path / "neighbour.py").write_text("VALUE = 42\n")
    target = tmp_path / "target.py"
    target.write_text("import neighbour, sys\nsys.exit(neighbour.VALUE)\n")
    assert launch(sys.executable, str(target)).returncode == 42


# A stand-in for SGLang's package layout, enough to see what the launcher does to the HTTP app that
# sglang.srt.entrypoints.http_server builds: launch_server imports it (as SGLang's does, late), wraps the app in the
# middleware added to it, sends one request and prints what left the app.
FAKE_HTTP_SERVER = textwrap.dedent("""\
    import json

    class App:
        def __init__(self):
            self.user_middleware = []

        def add_middleware(self, cls, **options):
            self.user_middleware.insert(0, (cls, options))

        def built(self, endpoint):
            for cls, options in reversed(self.user_middleware):
                endpoint = cls(endpoint, **options)
            return endpoint

    app = App()
    """)
FAKE_LAUNCH_SERVER = textwrap.dedent("""\
    import asyncio, json, sys, yaml
    imported_before = "sglang.srt.entrypoints.http_server" in sys.modules
    from sglang.srt.entrypoints import http_server

    options = yaml.safe_load(open(sys.argv[sys.argv.index("--config") + 1]))
    path = sys.argv[-1]

    async def endpoint(scope, receive, send):
        body = json.dumps({"server_args": options, "launch_command": "x --api-key " + options["api-key"]}).encode()
        if path == "/server_info":
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            pieces = [body[:7], body[7:]]
        else:  # /chunked and /events: no length, sent in pieces that split the key
            kind = b"text/event-stream" if path == "/events" else b"application/json"
            headers, cut = [(b"content-type", kind)], body.index(options["api-key"].encode()) + 3
            pieces = [body[:cut], body[cut:]]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i, piece in enumerate(pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": i < len(pieces) - 1})

    sent = []
    async def send(message):
        sent.append(message)
    asyncio.run(http_server.app.built(endpoint)({"type": "http", "path": path}, None, send))
    start = sent[0]
    print(json.dumps({"imported_before": imported_before, "headers": dict((k.decode(), v.decode()) for k, v in start["headers"]),
                      "body": b"".join(m["body"] for m in sent[1:]).hex(), "messages": len(sent)}))
    """)


def launch_fake_sglang(tmp_path, path):
    """The launcher's `-m sglang.launch_server` on the stand-in; what the app sent, as the stand-in printed it (the
    body in hex: the launcher masks what the process prints)."""
    config = write_config(tmp_path)
    done = subprocess.run([sys.executable, str(LAUNCHER), "-m", "sglang.launch_server", "--config", str(config), path],
                          check=False, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(fake_sglang(tmp_path))))
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    return dict(answer, body=bytes.fromhex(answer["body"]).decode())


def fake_sglang(tmp_path):
    package = tmp_path / "fake" / "sglang"
    (package / "srt" / "entrypoints").mkdir(parents=True)
    for init in (package, package / "srt", package / "srt" / "entrypoints"):
        (init / "__init__.py").write_text("")
    (package / "srt" / "entrypoints" / "http_server.py").write_text(FAKE_HTTP_SERVER)
    (package / "launch_server.py").write_text(FAKE_LAUNCH_SERVER)
    return package.parent


@pytest.mark.parametrize("path", ["/server_info", "/chunked"])
def test_sglangs_http_responses_carry_no_secret(tmp_path, path):
    """Issue 50 item 2: SGLang's /server_info gives a holder of the API key both keys; the launcher masks them in
    every response of SGLang's HTTP app, the app SGLang imports when it does (never earlier), a key split between
    two writes included, and the length it declares stays true."""
    answer = launch_fake_sglang(tmp_path, path)
    assert answer["imported_before"] is False
    body = answer["body"]
    assert API_KEY not in body and ADMIN_KEY not in body
    assert json.loads(body)["server_args"]["api-key"] == json.loads(body)["server_args"]["admin-api-key"] == "********"
    if path == "/server_info":
        assert int(answer["headers"]["content-length"]) == len(body.encode()) and answer["messages"] == 2


def test_an_event_stream_passes_untouched(tmp_path):
    """Streamed generation (text/event-stream) is the hot path and carries no option: not scanned."""
    assert API_KEY in launch_fake_sglang(tmp_path, "/events")["body"]
