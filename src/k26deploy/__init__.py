# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""k26deploy: deploy Kimi K2.6 on SGLang with the project's Ansible playbooks, from Python.

Each function runs the matching playbook through ansible-runner (no ``ansible-playbook``
subprocess to parse, no stdout scraping) and returns a typed :class:`RunResult`::

    import k26deploy

    result = k26deploy.deploy(inventory="inventories/demo/hosts.yml",
                              extra_vars={"sglang_service_port": 30000},
                              event_callback=print_event)          # optional
    for host in result.hosts.values():
        print(host.host, host.ready, host.endpoint, host.model_id, host.time_to_ready, host.reason)
    print(result.artifacts_dir, result.exit_code)

Common keyword arguments (see :class:`k26deploy.runner.PlaybookRun`):

``inventory``         path (or list of paths, or ``"host1,host2,"``); default: ansible.cfg's
``extra_vars``        mapping passed as ``-e @file`` (0600, removed after the run)
``limit``             host pattern (``--limit``)
``check``, ``diff``   ``--check`` / ``--diff``
``project_dir``       project root; default ``$K26DEPLOY_PROJECT_DIR`` or the source checkout
``private_data_dir``  ansible-runner's private data dir; default a new temporary directory (kept)
``event_callback``    called with every ansible-runner event dict
``progress_callback`` called with every readiness progress record (phase, elapsed, last_log_line)
``cancel_event``      a ``threading.Event``; setting it cancels the run (``cancelled=True``)
``envvars``           extra environment for ansible-playbook (e.g. ``ANSIBLE_*``)
``playbook``          run another playbook with the command's semantics (advanced)

:attr:`RunResult.exit_code` (the CLI's exit status too) is one of :data:`k26deploy.results.EXIT_CODES`.
"""

from __future__ import annotations

from typing import Any, Mapping

from .results import (
    EXIT_BAD_INPUT,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    HostResult,
    HostStats,
    RunResult,
    build_run_result,
)
from .runner import PLAYBOOKS, BadInputError, K26DeployError, PlaybookRun, find_project_dir

__all__ = [
    "deploy",
    "preflight",
    "status",
    "rollback",
    "logs",
    "incidents",
    "bench",
    "run",
    "RunResult",
    "HostResult",
    "HostStats",
    "PlaybookRun",
    "K26DeployError",
    "BadInputError",
    "build_run_result",
    "find_project_dir",
    "PLAYBOOKS",
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_BAD_INPUT",
    "EXIT_TIMEOUT",
    "EXIT_UNREACHABLE",
    "EXIT_CANCELLED",
]

__version__ = "0.5.0"


def run(command: str, inventory: Any = None, extra_vars: Mapping[str, Any] | None = None, *,
        playbook: str | None = None, **options: Any) -> RunResult:
    """Run ``command`` (deploy, preflight, status, rollback, logs, bench) or, with ``playbook``, another playbook with its
    semantics; ``options`` are :class:`PlaybookRun`'s keyword arguments.

    Raises ``BadInputError`` when the playbook or inventory is missing (before anything runs)
    and ``K26DeployError`` when ansible-runner cannot start; everything that happens once
    ansible-playbook runs is reported in the returned ``RunResult``.
    """
    return PlaybookRun(playbook or command, inventory=inventory, extra_vars=extra_vars, **options).execute()


def deploy(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``deploy_k26.yml``: preflight, driver/CUDA, SGLang, the service, readiness, summary."""
    return run("deploy", inventory, extra_vars, **options)


def preflight(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``playbooks/preflight.yml``: validate inputs and hosts without changing anything."""
    return run("preflight", inventory, extra_vars, **options)


def status(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``playbooks/status.yml``: is each host's service ready, which model, which endpoint."""
    return run("status", inventory, extra_vars, **options)


def rollback(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``playbooks/rollback.yml``: restore the last configuration that reached ready."""
    return run("rollback", inventory, extra_vars, **options)


def incidents(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``playbooks/incidents.yml``: each replica guard's verdict and its incidents with their evidence, in
    ``HostResult.guard``."""
    return run("incidents", inventory, extra_vars, **options)


def logs(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``playbooks/logs.yml``: each host's journal excerpt in ``HostResult.journal_excerpt``."""
    return run("logs", inventory, extra_vars, **options)


def bench(inventory: Any = None, extra_vars: Any = None, **options: Any) -> RunResult:
    """Run ``playbooks/benchmark.yml``: a concurrency sweep per host, in ``HostResult.benchmark`` (levels,
    diagnosis, change against the host's previous sweep, gate, report files on this machine)."""
    return run("bench", inventory, extra_vars, **options)
