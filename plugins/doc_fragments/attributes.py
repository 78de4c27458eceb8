# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The attributes the collection's modules share: every module here but sglang_ready runs fully in check mode and
has nothing to show in diff mode. A module says in its own ``attributes:`` what check mode does for it (the
``description`` of ``check_mode``), unless it shares that too (CHANGES_NOTHING, READS_ONLY)."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
    description: Nothing to compare.
"""

    CHANGES_NOTHING = r"""
options: {}
attributes:
  check_mode:
    description: Changes nothing.
"""

    READS_ONLY = r"""
options: {}
attributes:
  check_mode:
    description: Reads only; runs the same in check mode.
"""
