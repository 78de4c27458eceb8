# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the project is, and the collection's module_utils it shares with the plugins (the one home of a result's
schema, the option names ...): imported by the runner and by the results alike, so neither imports the other for it."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

PROJECT_DIR_ENV = "K26DEPLOY_PROJECT_DIR"


class K26DeployError(Exception):
    """A run could not be started."""


class BadInputError(K26DeployError, ValueError):
    """The caller's input is wrong (missing playbook or inventory, bad extra vars): exit code 2."""


def _looks_like_project(path: Path) -> bool:
    return (path / "ansible.cfg").is_file() and (path / "deploy_k26.yml").is_file()


def find_project_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The playbook project root.

    Order: ``explicit`` argument, then ``$K26DEPLOY_PROJECT_DIR``, then the source checkout the
    package lives in (``src/k26deploy`` -> ``../..``), then the current directory.
    """
    for candidate, origin in (
        (explicit, "argument"),
        (os.environ.get(PROJECT_DIR_ENV), PROJECT_DIR_ENV),
    ):
        if candidate:
            path = Path(candidate).expanduser().resolve()
            if not path.is_dir():
                raise BadInputError(f"project directory {path} (from {origin}) does not exist")
            return path
    checkout = Path(__file__).resolve().parents[2]
    if _looks_like_project(checkout):
        return checkout
    cwd = Path.cwd()
    if _looks_like_project(cwd):
        return cwd
    raise BadInputError(
        f"cannot find the k26deploy project (ansible.cfg + deploy_k26.yml): set {PROJECT_DIR_ENV} "
        "or pass project_dir / --project-dir"
    )


def collection_module_utils(name: str) -> Any:
    """The collection's ``plugins/module_utils/NAME``: the one home of what the package shares with the plugins.

    Imported as Ansible imports it (``ansible_collections.k26.deploy.plugins.module_utils.NAME``); where nothing has
    made that name importable yet (no collection loader in this process), from the project's ``.collections``, which
    links the checkout in as k26.deploy.
    """
    qualified = f"ansible_collections.k26.deploy.plugins.module_utils.{name}"
    try:
        return importlib.import_module(qualified)
    except ModuleNotFoundError:
        collections = str(find_project_dir() / ".collections")
        if collections not in sys.path:
            sys.path.append(collections)
        return importlib.import_module(qualified)
