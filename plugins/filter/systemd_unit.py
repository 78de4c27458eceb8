# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that check and write inventory values into systemd units and EnvironmentFiles
(plugins/module_utils/systemd_unit_values.py holds the rules)."""

from ansible_collections.k26.deploy.plugins.module_utils import systemd_unit_values as values
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def value_problems(checks):
    """[[variable, kind, value], ...] -> every reason one of them cannot go into a unit ([] when none)."""
    try:
        return values.problems(checks)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInputError('systemd_value_problems: %s' % exc)


def environment_problems(environment, name, allowed=()):
    if not isinstance(environment, dict):
        raise BadInputError('%s must be a mapping of variable names to values' % name)
    return values.environment_problems(name, environment, allowed)


def hardening(read_write_paths, protect_home, syscall_deny, syscall_allow, ip_address_allow, device_allow):
    return values.service_hardening(read_write_paths, protect_home, syscall_deny, syscall_allow, ip_address_allow,
                                    device_allow)


class FilterModule:
    def filters(self):
        return {
            "systemd_value_problems": value_problems,
            "systemd_environment_problems": environment_problems,
            "systemd_specifiers_escaped": values.specifiers_escaped,
            "systemd_command_line": values.command_line,
            "systemd_environment_value": values.environment_value,
            "systemd_hardening": hardening,
            "systemd_show_units": values.show_units,
            "systemd_unit_running": values.running,
            "systemd_unit_settled": values.settled,
        }
