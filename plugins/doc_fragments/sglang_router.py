# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The options every module that talks to SGLang's router (smg) takes: its address, its key and TLS."""

from __future__ import annotations


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  router_url:
    description:
      - Base URL of the router, for example C(http://127.0.0.1:30080).
      - The module runs where this address answers; C(delegate_to) the router host when the router listens on
        loopback.
    type: str
    required: true
  api_key:
    description:
      - The key of the router, which is also the replicas' key (smg passes the client's key on to the replica).
      - It is the key for the router's control plane (C(/workers)) too when I(admin_key_file) gives none.
    type: str
  admin_key_file:
    description:
      - A file on the host the module runs on that holds the router's control-plane key (the C(sglang_router) role's
        C(<sglang_router_config_dir>/admin_key)), sent on every call to C(/workers) instead of I(api_key).
      - A file that does not exist (a router deployed before it had one) leaves I(api_key) in charge.
    type: path
  validate_certs:
    description:
      - Verify the router's and the replicas' HTTPS certificates.
    type: bool
    default: true
  ca_path:
    description:
      - CA bundle for the router's and the replicas' HTTPS certificates.
    type: path
"""
