# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The option of the modules that look at files a role writes on every run (paths_info, sglang_rollback_store): the
content of each comes back as a digest under a key of this run (module_utils/k26_paths.py says why)."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  digest_key:
    description:
      - A key for this run only (the role makes one). With it, the content of each regular file looked at is returned
        as C(digest), its HMAC-SHA-256 under this key, which P(k26.deploy.k26_file_in_place#filter) compares with the
        content a task would write, so that a file holding a secret leaves no plain hash of it in the result.
      - Without it, no digest is returned (empty).
    type: str
    default: ''
"""
