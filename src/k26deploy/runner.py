# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ansible-runner plumbing: run one playbook of the project and return a ``RunResult``.

What every run gets:

* a private data dir of its own (a fresh ``k26deploy-*`` temporary directory unless one is
  given). It is kept afterwards: ``RunResult.artifacts_dir`` (``<pdd>/artifacts/<ident>``)
  holds ansible-runner's ``job_events/``, ``stdout``, ``status``, ``rc``, ``command`` and our
  ``progress.jsonl``;
* ansible-runner's ``cwd`` = the project root, ``ANSIBLE_CONFIG`` = its ``ansible.cfg``, so
  ``roles/``, ``plugins/`` and the default inventory resolve as with ``ansible-playbook``;
* extra vars in a 0600 file that is passed as ``-e @file`` and removed after the run (a dict
  given to ansible-runner would land on the command line, readable in /proc by every local
  user, and in ``artifacts/<ident>/command``);
* ``suppress_env_files=True``: nothing from an earlier run in the same private data dir
  (``env/extravars``, ``env/envvars``) silently overrides this run's values;
* ``K26DEPLOY_PROGRESS_FILE`` pointing into the artifacts dir; a thread tails it;
* an event handler that feeds the result builder and the caller's callback and RETURNS TRUE,
  so ansible-runner writes every event to ``job_events/`` and ``runner.stats`` works;
* ``cancel_callback`` bound to a ``threading.Event``; a ``KeyboardInterrupt`` while waiting
  sets it, ansible-runner kills the ansible-playbook process group within about a second,
  and the run returns a ``RunResult`` with ``cancelled=True``.
"""

from __future__ import annotations

import configparser
import datetime
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from .progress import ProgressTail
# re-exported: the runner was their home, and callers import them from it
from .project import (  # noqa: F401  pylint: disable=unused-import
    PROJECT_DIR_ENV, BadInputError, K26DeployError, collection_module_utils, find_project_dir)
from .results import ResultBuilder, RunResult

log = logging.getLogger("k26deploy")

#: command -> playbook, relative to the project root
PLAYBOOKS = {
    "deploy": "deploy_k26.yml",
    "preflight": "playbooks/preflight.yml",
    "status": "playbooks/status.yml",
    "rollback": "playbooks/rollback.yml",
    "logs": "playbooks/logs.yml",
    "incidents": "playbooks/incidents.yml",
    "bench": "playbooks/benchmark.yml",
}

PROGRESS_FILE_ENV = "K26DEPLOY_PROGRESS_FILE"
PROGRESS_FILE_NAME = "progress.jsonl"
#: set in ansible-playbook's environment; inherited by its forks, modules and ssh clients, it
#: finds every process of one run (Ansible's workers call setsid(), so killing
#: ansible-playbook's process group, as ansible-runner does, leaves them running)
RUN_ID_ENV = "K26DEPLOY_RUN_ID"

EventCallback = Callable[[dict[str, Any]], Any]
ProgressCallback = Callable[[dict[str, Any]], Any]


class Untrusted(str):
    """Text that Ansible takes as data, never as a template: the extra-vars file, which ansible-playbook trusts as
    templates (``-e @file``), holds it as ``{"__ansible_unsafe": text}``, the JSON form of YAML's ``!unsafe``."""

    __slots__ = ()


def untrusted(value: Any) -> Any:
    """VALUE with every text in it (mappings' and lists' too) :class:`Untrusted`; keys stay (Ansible templates none)."""
    if isinstance(value, str):
        return Untrusted(value)
    if isinstance(value, Mapping):
        return {key: untrusted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [untrusted(item) for item in value]
    return value


def _extra_vars_json(value: Any) -> Any:
    """VALUE as the extra-vars file holds it: :class:`Untrusted` text marked unsafe, other text as it is."""
    if isinstance(value, Untrusted):
        return {"__ansible_unsafe": str(value)}
    if isinstance(value, Mapping):
        return {str(key) if isinstance(key, Untrusted) else key: _extra_vars_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_extra_vars_json(item) for item in value]
    return value


def resolve_playbook(command_or_path: str, project_dir: Path) -> str:
    """A command name (deploy, status, ...) or a playbook path -> a path relative to the project."""
    relative = PLAYBOOKS.get(command_or_path, command_or_path)
    path = Path(relative)
    if not path.is_absolute():
        path = project_dir / path
    if not path.is_file():
        raise BadInputError(f"playbook {path} not found")
    try:
        return str(path.resolve().relative_to(project_dir))
    except ValueError:
        return str(path.resolve())


def yaml_error_text(exc: yaml.YAMLError) -> str:
    """The YAML parser's position and problem, without the lines around the error that its own message (and
    ansible-core's) quotes: they may hold a secret."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = "; ".join(part for part in (getattr(exc, "context", None), getattr(exc, "problem", None)) if part)
    return f"not valid YAML/JSON{where}" + (f": {what}" if what else "")


class _AnyTagLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """PyYAML's safe loader that takes Ansible's tags (!vault, !unsafe) as they come: only the syntax is checked."""


_AnyTagLoader.add_multi_constructor("!", lambda loader, suffix, node: None)
# The files Ansible reads as YAML in an inventory source (its yaml plugin's extensions, and the variables beside it).
_YAML_SUFFIXES = (".yml", ".yaml", ".json")


def _inventory_yaml_files(path: Path) -> list[Path]:
    """The YAML files Ansible would read for the inventory source PATH: every one in the directory, or the file
    itself and the group_vars/host_vars beside it."""
    if path.is_dir():
        files, tops = [], [path]
    else:
        files = [path] if path.suffix in _YAML_SUFFIXES else []
        tops = [path.parent / name for name in ("group_vars", "host_vars") if (path.parent / name).is_dir()]
    for top in tops:
        for root, dirs, names in os.walk(top):
            dirs[:] = sorted(name for name in dirs if not name.startswith("."))
            files += [Path(root) / name for name in sorted(names) if Path(name).suffix in _YAML_SUFFIXES]
    return files


# In an inventory directory, the files that are meant as INI inventories (Ansible tries every other file too, and
# only warns when one does not parse: a README beside them is no inventory).
_INI_NAMES = ("hosts", "inventory")


def _inventory_ini_files(path: Path) -> list[Path]:
    """The INI inventories of the source PATH: the file itself unless it is YAML, JSON or executable (a script);
    in a directory, its top-level *.ini files and those named hosts or inventory."""
    if path.is_dir():
        candidates = [name for name in sorted(path.iterdir()) if name.suffix == ".ini" or name.name in _INI_NAMES]
    else:
        candidates = [path]
    return [name for name in candidates if name.is_file() and name.suffix not in _YAML_SUFFIXES
            and not os.access(name, os.X_OK) and not _is_yaml_mapping(name)]


def _is_yaml_mapping(name: Path) -> bool:
    """Whether NAME holds a YAML mapping: Ansible's yaml plugin reads a file without an extension too."""
    try:
        return isinstance(yaml.load(name.read_text(encoding="utf-8", errors="replace"), Loader=_AnyTagLoader), dict)
    except yaml.YAMLError:
        return False


class _IniLine(Exception):
    """Where Ansible's INI inventory plugin stopped: the line, never its text."""

    def __init__(self, line: int | None) -> None:
        super().__init__(line)
        self.line = line


def ini_error_line(name: Path) -> int | None:
    """None when Ansible's own INI inventory plugin parses NAME; else the line it stopped at (0: not known)."""
    from ansible.inventory.data import InventoryData  # pylint: disable=import-outside-toplevel
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.plugins.inventory.ini import InventoryModule  # pylint: disable=import-outside-toplevel

    class LineOfError(InventoryModule):
        def _raise_error(self, message: str) -> None:
            raise _IniLine(getattr(getattr(self, "_origin", None), "line_num", None))

    try:
        LineOfError().parse(InventoryData(), DataLoader(), str(name))
    except Exception as exc:  # pylint: disable=broad-except
        causes = [exc, exc.__cause__, exc.__context__]
        return next((cause.line or 0 for cause in causes if isinstance(cause, _IniLine)), 0)
    return None


def check_inventory(path: Path) -> None:
    """Refuse an inventory source whose YAML, JSON or INI does not parse, naming the file and line only (and for YAML
    the problem). ansible-playbook would warn, quote the lines around the error (an API key, a password), fall back to
    an empty inventory and run with no host."""
    for name in _inventory_yaml_files(path):
        try:
            yaml.load(name.read_text(encoding="utf-8", errors="replace"), Loader=_AnyTagLoader)  # noqa: S506
        except yaml.YAMLError as exc:
            raise BadInputError(f"inventory {name}: {yaml_error_text(exc)} (its lines are not shown: they may "
                                "hold a secret)") from None
    for name in _inventory_ini_files(path):
        line = ini_error_line(name)
        if line is not None:
            where = f" at line {line}" if line else ""
            raise BadInputError(f"inventory {name}: not a valid INI inventory{where} (its lines are not shown: they "
                                "may hold a secret)")


def _inventory_args(inventory: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None) -> list[str]:
    """``-i`` arguments: existing paths made absolute; ``host1,host2,`` lists passed through."""
    if inventory is None:
        return []
    items = [inventory] if isinstance(inventory, (str, os.PathLike)) else list(inventory)
    args: list[str] = []
    for item in items:
        text = os.fspath(item)
        path = Path(text).expanduser()
        if path.exists():
            check_inventory(path.resolve())
            args += ["-i", str(path.resolve())]
        elif "," in text:
            args += ["-i", text]
        else:
            raise BadInputError(f"inventory {text} not found")
    return args


def _host_key_checking(project_dir: Path) -> str:
    """ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False unless told: keep the project's choice."""
    if "ANSIBLE_HOST_KEY_CHECKING" in os.environ:
        return os.environ["ANSIBLE_HOST_KEY_CHECKING"]
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(project_dir / "ansible.cfg")
        return str(parser.getboolean("defaults", "host_key_checking", fallback=True))
    except (configparser.Error, ValueError):
        return "True"


def _search_path() -> str:
    """PATH for ansible-playbook: this interpreter's bin dir first (a venv need not be activated)."""
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    path = os.environ.get("PATH", os.defpath)
    if bin_dir not in path.split(os.pathsep):
        path = bin_dir + os.pathsep + path
    return path


def run_processes(run_id: str) -> list[int]:
    """PIDs of the processes that carry ``K26DEPLOY_RUN_ID=run_id`` (Linux /proc; [] elsewhere)."""
    marker = f"{RUN_ID_ENV}={run_id}".encode()
    me = os.getpid()
    pids: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return pids
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            pids.append(int(name))
    return pids


def signal_processes(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _new_ident(command: str) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = "".join(c if c.isalnum() else "-" for c in Path(command).stem)[:24]
    return f"{stamp}-{name}-{uuid.uuid4().hex[:8]}"


class PlaybookRun:
    """One run of one playbook. ``execute()`` once; afterwards ``runner`` is ansible-runner's ``Runner``.

    The ``event_callback`` gets every event dict (the same dicts written to ``job_events/``);
    the ``progress_callback`` gets every progress record. Exceptions raised by callbacks are
    logged and swallowed: they never drop an event.
    """

    def __init__(
        self,
        playbook: str,
        *,
        project_dir: str | os.PathLike[str] | None = None,
        inventory: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        extra_vars: Mapping[str, Any] | None = None,
        limit: str | None = None,
        check: bool = False,
        diff: bool = False,
        tags: str | None = None,
        skip_tags: str | None = None,
        verbosity: int = 0,
        private_data_dir: str | os.PathLike[str] | None = None,
        envvars: Mapping[str, str] | None = None,
        event_callback: EventCallback | None = None,
        progress_callback: ProgressCallback | None = None,
        cancel_event: threading.Event | None = None,
        keep_extra_vars_file: bool = False,
        cancel_poll_seconds: float = 0.5,
    ) -> None:
        self.project_dir = find_project_dir(project_dir)
        self.command = playbook if playbook in PLAYBOOKS else None
        self.playbook = resolve_playbook(playbook, self.project_dir)
        self.inventory_args = _inventory_args(inventory)
        if extra_vars is not None and not isinstance(extra_vars, Mapping):
            raise BadInputError("extra_vars must be a mapping")
        self.extra_vars = dict(extra_vars or {})
        self.limit = limit
        self.check = check
        self.diff = diff
        self.tags = tags
        self.skip_tags = skip_tags
        self.verbosity = verbosity
        self.private_data_dir = os.fspath(private_data_dir) if private_data_dir else None
        self.envvars = dict(envvars or {})
        self.event_callback = event_callback
        self.progress_callback = progress_callback
        self.cancel_event = cancel_event or threading.Event()
        self.keep_extra_vars_file = keep_extra_vars_file
        self.cancel_poll_seconds = cancel_poll_seconds

        self.builder = ResultBuilder()
        self.runner: Any = None
        self.status: str = "unstarted"
        self.rc: int | None = None
        self.ident = _new_ident(self.command or self.playbook)
        self.result: RunResult | None = None
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._cancel_sent = False

    # -- callbacks handed to ansible-runner -------------------------------------------------
    def _event_handler(self, event: dict[str, Any]) -> bool:
        with self._lock:
            self.builder.add_event(event)
        if self.event_callback is not None:
            try:
                self.event_callback(event)
            except Exception:  # noqa: BLE001 - a consumer's bug must not lose the event
                log.exception("event callback failed")
        # True: ansible-runner writes the event to job_events/ (None would drop it, and
        # runner.events / runner.stats would come back empty).
        return True

    def _on_progress(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.builder.add_progress(record)
        if self.progress_callback is not None:
            try:
                self.progress_callback(record)
            except Exception:  # noqa: BLE001
                log.exception("progress callback failed")

    def _status_handler(self, status_data: dict[str, Any], runner_config: Any = None) -> None:
        self.status = status_data.get("status", self.status)

    def _finished_callback(self, runner: Any) -> None:
        self.status = runner.status
        self.rc = runner.rc
        self._finished.set()

    def _cancel_callback(self) -> bool:
        if not self.cancel_event.is_set():
            return False
        if not self._cancel_sent:
            # ansible-runner SIGKILLs ansible-playbook's process group when this returns True;
            # the workers (own sessions) and their modules get SIGTERM from us first.
            self._cancel_sent = True
            signal_processes(run_processes(self.ident), signal.SIGTERM)
        return True

    def _sweep(self, grace: float = 1.0) -> None:
        """After a cancel: SIGKILL whatever process of this run is still alive after ``grace``."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not run_processes(self.ident):
                return
            time.sleep(0.1)
        signal_processes(run_processes(self.ident), signal.SIGKILL)

    def cancel(self) -> None:
        """Ask the run to stop; ansible-runner kills ansible-playbook at its next poll."""
        self.cancel_event.set()

    # -- running ------------------------------------------------------------------------------
    def _prepare_dirs(self) -> tuple[str, str]:
        if self.private_data_dir:
            pdd = Path(self.private_data_dir).expanduser().resolve()
            pdd.mkdir(parents=True, exist_ok=True, mode=0o700)
            pdd_s = str(pdd)
        else:
            pdd_s = tempfile.mkdtemp(prefix="k26deploy-")
        artifacts = os.path.join(pdd_s, "artifacts", self.ident)
        os.makedirs(artifacts, mode=0o700, exist_ok=True)
        return pdd_s, artifacts

    def _write_extra_vars(self, pdd: str) -> str | None:
        if not self.extra_vars:
            return None
        env_dir = os.path.join(pdd, "env")
        os.makedirs(env_dir, mode=0o700, exist_ok=True)
        path = os.path.join(env_dir, f"extravars-{self.ident}.json")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(_extra_vars_json(self.extra_vars), handle, default=str)
        return path

    def cmdline(self) -> list[str]:
        args = list(self.inventory_args)
        if self.check:
            args.append("--check")
        if self.diff:
            args.append("--diff")
        return args

    def snapshot(self):
        """Host results as known right now (thread-safe)."""
        with self._lock:
            return self.builder.snapshot()

    def execute(self) -> RunResult:
        """Run the playbook; returns when it finished, failed or was cancelled."""
        if self.result is not None:
            raise K26DeployError("a PlaybookRun executes once")
        started = time.monotonic()
        pdd, artifacts_dir = self._prepare_dirs()
        progress_file = os.path.join(artifacts_dir, PROGRESS_FILE_NAME)
        envvars = self._environment(progress_file)
        extra_vars_file = self._write_extra_vars(pdd)
        tail = ProgressTail(progress_file, self._on_progress)
        tail.start()
        try:
            self.runner = self._init_runner(pdd, envvars, extra_vars_file)
            self._run_until_done()
        finally:
            if self.cancel_event.is_set():
                self._sweep()
            tail.stop()
            if extra_vars_file and not self.keep_extra_vars_file:
                _remove(extra_vars_file)
        return self._build_result(started)

    def _environment(self, progress_file: str) -> dict[str, str]:
        """ansible-playbook's environment: the project's ansible.cfg, no colours, the progress file, the run id."""
        envvars = {
            "ANSIBLE_HOST_KEY_CHECKING": _host_key_checking(self.project_dir),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }
        cfg = self.project_dir / "ansible.cfg"
        if cfg.is_file():
            envvars["ANSIBLE_CONFIG"] = str(cfg)
        envvars.update(self.envvars)
        envvars.setdefault("PATH", _search_path())
        if shutil.which("ansible-playbook", path=envvars["PATH"]) is None:
            raise K26DeployError("ansible-playbook not found on PATH (install ansible-core in this environment)")
        envvars[PROGRESS_FILE_ENV] = progress_file
        envvars[RUN_ID_ENV] = self.ident
        return envvars

    def _init_runner(self, pdd: str, envvars: Mapping[str, str], extra_vars_file: str | None) -> Any:
        import ansible_runner  # imported late: the CLI's --help must not pay for it

        cmdline = self.cmdline()
        try:
            runner = ansible_runner.interface.init_runner(
                private_data_dir=pdd,
                project_dir=str(self.project_dir),
                playbook=self.playbook,
                ident=self.ident,
                quiet=True,
                envvars=dict(envvars),
                extravars=extra_vars_file,
                limit=self.limit,
                tags=self.tags,
                skip_tags=self.skip_tags,
                verbosity=self.verbosity or None,
                cmdline=shlex.join(cmdline) if cmdline else None,
                suppress_env_files=True,
                event_handler=self._event_handler,
                status_handler=self._status_handler,
                cancel_callback=self._cancel_callback,
                finished_callback=self._finished_callback,
            )
        except Exception as exc:  # ConfigurationError and friends
            raise K26DeployError(f"ansible-runner could not prepare the run: {exc}") from exc
        # How often ansible-runner wakes up to ask cancel_callback (default 5 s). Set on the prepared config: a
        # ``settings`` dict passed to ansible-runner 2.4 is discarded when the private data dir has no env/settings.
        runner.config.pexpect_timeout = self.cancel_poll_seconds
        return runner

    def _run_until_done(self) -> None:
        """ansible-runner in a thread; a first Ctrl-C here cancels the run cleanly, a second one propagates."""
        done = threading.Event()
        worker_error: list[BaseException] = []

        def work() -> None:
            try:
                self.runner.run()
            except BaseException as exc:  # noqa: BLE001 - reported by the waiting thread
                worker_error.append(exc)
            finally:
                done.set()

        threading.Thread(target=work, name="k26deploy-runner", daemon=True).start()
        interrupted = False
        # Poll with time.sleep, not thread.join(): a KeyboardInterrupt inside join() can leave CPython's thread
        # state saying "not alive" while the thread still runs.
        while not done.is_set():
            try:
                time.sleep(0.1)
            except KeyboardInterrupt:
                if interrupted or self.cancel_event.is_set():
                    raise
                interrupted = True
                self.cancel_event.set()
        if worker_error:
            raise K26DeployError(f"ansible-runner failed: {worker_error[0]!r}") from worker_error[0]

    def _build_result(self, started: float) -> RunResult:
        runner = self.runner
        self.status = runner.status
        self.rc = runner.rc
        with self._lock:
            self.result = self.builder.build(
                playbook=self.playbook,
                status=runner.status,
                rc=runner.rc,
                artifacts_dir=runner.config.artifact_dir,
                cancelled=bool(runner.canceled) or runner.status == "canceled",
                check=self.check,
                duration=round(time.monotonic() - started, 3),
                command=self.command,
            )
        return self.result


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
