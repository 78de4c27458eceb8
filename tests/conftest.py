"""Shared test set-up: make the project's module_utils importable the way Ansible imports them."""
import sys
from pathlib import Path

import ansible.module_utils

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins/module_utils",):
    path = str(ROOT / sub)
    if path not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(path)
for sub in ("plugins/modules", "plugins/filter", "plugins/action", "src"):
    path = str(ROOT / sub)
    if path not in sys.path:
        sys.path.insert(0, path)
