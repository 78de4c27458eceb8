#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_rollback_store: the rollback store and the live configuration, looked at in one pass."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_rollback_store
short_description: Whether root may trust the rollback store, and how the live configuration compares with it
description:
  - Looks (without following links) at the rollback store, every directory above it and each saved file, and says
    why root must not restore from it when anyone but root could have written one of them (a link, another owner,
    a group or other write bit).
  - Looks at each live file and its saved copy (SHA-256 of regular files) and says whether a saved copy of every
    required file exists in a trusted store and whether the live configuration differs from the saved one.
  - Looks (without following links) at each live file and every directory above it, and says why root must neither
    save it into the store nor restore over it (RV(live_unsafe)) when it is not a regular file of root's, or anyone
    but root could write it or a directory above it (the service account could otherwise link it to any file of
    root's, C(/etc/shadow), and have root copy that into the store and back out readable by the service's group).
  - One module run instead of a C(ansible.builtin.stat) per path, as the role asks this on every run. Changes nothing.
version_added: "0.3.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  store:
    description: The rollback store's directory (absolute).
    type: path
    required: true
  files:
    description:
      - The managed files, each a dict with C(live) and C(saved) (absolute paths) and C(required) (default true;
        without the saved copy of a required file there is nothing to roll back to).
      - Other keys are returned as given.
    type: list
    elements: dict
    required: true
extends_documentation_fragment:
  - k26.deploy.digest_key
  - k26.deploy.attributes
  - k26.deploy.attributes.changes_nothing
"""

EXAMPLES = r"""
- name: Look at the rollback store and the live configuration
  k26.deploy.sglang_rollback_store:
    store: /var/lib/k26deploy/rollback/sglang
    files:
      - {live: /etc/systemd/system/sglang.service, saved: /var/lib/k26deploy/rollback/sglang/unit}
      - {live: /etc/sglang/sglang.yaml, saved: /var/lib/k26deploy/rollback/sglang/config.yaml}
      - {live: /etc/sglang/tls/server.crt, saved: /var/lib/k26deploy/rollback/sglang/tls-server.crt, required: false}
  register: store
"""

RETURN = r"""
untrusted:
  description: Why root must not restore from the store (the first path that fails); empty when it may.
  returned: success
  type: str
  sample: /var/lib/k26deploy/rollback/sglang is owned by uid 999, not root
live_unsafe:
  description:
    - Why root must neither save a live file nor restore over it ('' when it may) - the first live file that is not a
      regular file owned by root and writable by root alone, or that lies below a directory someone else owns or
      can write (or a link). The role fails before it saves or restores anything when this is set.
  returned: success
  type: str
can_roll_back:
  description: The store is trusted and holds a saved copy of every required file.
  returned: success
  type: bool
differs:
  description: A live file and its saved copy differ (content, or one exists without the other).
  returned: success
  type: bool
files:
  description: The files as given, each with C(live_exists) and C(saved_exists) added.
  returned: success
  type: list
  elements: dict
  sample: [{"live": "/etc/sglang/sglang.yaml", "saved": "/var/lib/k26deploy/rollback/sglang/config.yaml",
            "live_exists": true, "saved_exists": true}]
live_files:
  description:
    - What each live file is now, by its path, as M(k26.deploy.paths_info) says it (C(exists), C(isreg), C(islnk),
      C(owner), C(group), C(mode), ...), with C(digest), its content's HMAC-SHA-256 under O(digest_key) (empty
      without one, or for anything but a regular file).
    - A file already as the role would write it need not be written again (P(k26.deploy.k26_file_in_place#filter)).
  returned: success
  type: dict
  sample: {"/etc/sglang/sglang.yaml": {"exists": true, "path": "/etc/sglang/sglang.yaml", "isdir": false,
           "isreg": true, "islnk": false, "uid": 0, "gid": 998, "owner": "root", "group": "sglang", "mode": "0640",
           "digest": "5d5b09f6dcb2d53a5fffc60c4ac0d55fabdf556069d6631545f42aa6e3500f2e"}}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.k26_paths import file_hashes, lstat_info
from ansible_collections.k26.deploy.plugins.module_utils.sglang_rollback_store import (
    compare, path_and_parents, unsafe_live_file, untrusted)


def look(module, path, key=''):
    """(ansible.builtin.stat-like result without following links, SHA-256 of a regular file or '', and its HMAC-SHA-256
    under KEY or '' (k26_paths.file_hashes: one read for both))."""
    try:
        info = lstat_info(path)
        checksum, digest = file_hashes(path, key) if info.get('isreg') else ('', '')
    except OSError as exc:
        module.fail_json(msg='cannot look at %s: %s' % (path, exc))
    return {'item': path, 'stat': info}, checksum, digest


def main():
    module = AnsibleModule(
        argument_spec=dict(
            store=dict(type='path', required=True),
            files=dict(type='list', elements='dict', required=True),
            digest_key=dict(type='str', default='', no_log=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for entry in params['files']:
        if not all(isinstance(entry.get(key), str) and entry[key].startswith('/') for key in ('live', 'saved')):
            module.fail_json(msg='each of files needs an absolute live and saved path, got %r' % (entry,))
    try:
        directories = path_and_parents(params['store'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    store = [look(module, path)[0] for path in directories]
    looked, live_files, live_looks = [], {}, []
    for entry in params['files']:
        saved, saved_sum = look(module, entry['saved'])[:2]
        live, live_sum, live_digest = look(module, entry['live'], params['digest_key'])
        store.append(saved)
        live_looks.append(live)
        looked.append(dict(entry, live_exists=live['stat']['exists'], saved_exists=saved['stat']['exists'],
                           live_sha256=live_sum, saved_sha256=saved_sum))
        live_files[entry['live']] = dict(live['stat'], digest=live_digest)
    reason = untrusted(store) or ''
    live_unsafe = ''
    for live in live_looks:
        directories = [look(module, path)[0] for path in path_and_parents(os.path.dirname(live['item']))]
        live_unsafe = unsafe_live_file(directories, live) or ''
        if live_unsafe:
            break
    can_roll_back, differs = compare(looked, reason)
    files = [{key: value for key, value in entry.items() if not key.endswith('_sha256')} for entry in looked]
    module.exit_json(changed=False, untrusted=reason, live_unsafe=live_unsafe, can_roll_back=can_roll_back,
                     differs=differs, files=files, live_files=live_files)


if __name__ == '__main__':
    main()
