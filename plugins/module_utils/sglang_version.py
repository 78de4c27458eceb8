# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SGLang release this collection is built and checked against: the sglang role's default ``sglang_version``,
the simulator's version, the option table, the preflight rules and the scripts that install SGLang for the tests
all follow it (tests/unit/test_one_home.py holds them to it)."""

from __future__ import annotations

SGLANG_VERSION = '0.5.23'

# Its Requires-Python, from its wheel's METADATA (tests/unit/test_sglang_args_check.py reads the real one).
SGLANG_REQUIRES_PYTHON = '>=3.11'
