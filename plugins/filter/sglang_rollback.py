"""Filters for the rollback store (plugins/module_utils/sglang_rollback_store.py holds the logic)."""

from ansible.errors import AnsibleFilterError
from ansible_collections.k26.deploy.plugins.module_utils import sglang_rollback_store


def path_and_parents(path):
    try:
        return sglang_rollback_store.path_and_parents(path)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def rollback_store_untrusted(stat_results):
    """Why root must not trust the rollback store ('' when it may): see sglang_rollback_store.untrusted."""
    return sglang_rollback_store.untrusted(stat_results) or ''


class FilterModule:
    def filters(self):
        return {
            "sglang_path_and_parents": path_and_parents,
            "sglang_rollback_store_untrusted": rollback_store_untrusted,
        }
