#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module sglang_model: a model directory's manifest, whether every shard is there and intact, and the page
cache pre-warmed with it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model
short_description: Verify a model directory against its manifest, say whether it is ready to serve, pre-warm it
description:
  - Lists the model directory (a Hugging Face checkout), keeps a manifest of its files (size, mtime, SHA-256) on the
    host between runs, and says whether every file the model needs is present and intact.
  - The model's files are the regular files under O(path), recursively (links to files followed), except hidden
    files and files under hidden directories (C(.cache/huggingface) that C(hf download) leaves, C(.git)) and the
    manifest itself.
  - The model needs C(config.json) and its shards - the files named by the C(weight_map) of
    C(model.safetensors.index.json), or without an index every C(*.safetensors) file; a directory without shards
    or that does not exist is not ready.
  - A file whose size and mtime are those of the manifest but whose content is not is mismatched (the manifest keeps
    the recorded SHA-256, so later runs report it too until the file is restored or replaced). A file whose size or
    mtime changed is hashed again and, unless O(expected) says otherwise, accepted as a new version (a model
    replaced on purpose); the manifest is updated and the result is changed.
  - Fails when the model is not ready, with every return value, so that a play stops on that host before anything
    else changes. The manifest is still written (the hashes computed are kept).
  - Hashing takes time - about the read speed of the disk for the whole model on the first run - so a first run on
    a large model may need C(async).
version_added: "0.5.0"
author:
  - k26deploy maintainers (!UNKNOWN)
options:
  path:
    description: The model directory.
    type: path
    required: true
  manifest_path:
    description:
      - JSON file where the manifest is kept between runs (written atomically with mode 0644; its directory is
        created with mode 0755).
    type: path
    required: true
  expected:
    description:
      - File name (relative to O(path)) to a dict with C(size) (bytes), C(sha256) and/or C(git_sha1) (the git blob
        id, which the Hugging Face hub lists for a file outside LFS), for instance from the repository's metadata.
      - A file named here that is missing, of another size or whose SHA-256 differs makes the model not ready.
        Its SHA-256 is compared only when known (not with O(verify=size) before the file was ever hashed).
      - A file with C(git_sha1) is hashed that way on every run; content that differs makes the model not ready,
        with O(updated) too.
    type: dict
    default: {}
  verify:
    description:
      - Every file that is not a C(*.safetensors) shard (C(config.json), the index, the tokenizer, the C(*.py) that
        trust-remote-code runs) is hashed on every run, whatever the mode.
      - For the shards, V(once) hashes a shard the first time it is seen and again when its size or mtime changed (a
        change that keeps both is not seen); V(always) hashes every shard on every run; V(size) compares sizes only.
      - A file whose size or content is not the one the manifest recorded makes the model not ready, unless
        O(updated).
    type: str
    choices: [once, always, size]
    default: once
  updated:
    description:
      - The model was replaced on purpose (a new revision, a new checkpoint). Files that differ from the manifest are
        accepted and their new content recorded. Without it a changed file fails, and stays failed until restored.
      - Files named in O(expected) are held to it either way.
    type: bool
    default: false
  hash_workers:
    description: Files hashed at the same time.
    type: int
    default: 4
  prewarm:
    description:
      - Read every file of the model into the page cache, so that a restart of the server loads it from memory.
      - V(auto) and V(on) pre-warm only when the model fits in O(prewarm_ram_fraction) of the host's memory (reading
        more only evicts what was read first); when the memory is unknown V(on) pre-warms and V(auto) does not.
      - Nothing is pre-warmed when the model is not ready, nor in check mode.
    type: str
    choices: ['off', 'on', auto]
    default: 'off'
  prewarm_ram_fraction:
    description: Share of the host's memory (MemTotal) the model must fit in to be pre-warmed, above 0 and at most 1.
    type: float
    default: 0.8
attributes:
  check_mode:
    description: Hashes and judges as usual; writes no manifest and pre-warms nothing; changed says whether the
      manifest would be written.
extends_documentation_fragment:
  - k26.deploy.attributes
seealso:
  - module: k26.deploy.sglang_preflight
"""

EXAMPLES = r"""
- name: Verify the Kimi K2.6 checkpoint and pre-warm the page cache when it fits
  k26.deploy.sglang_model:
    path: /srv/models/Kimi-K2.6
    manifest_path: /var/lib/k26deploy/model-manifest.json
    prewarm: auto
  register: model

- name: Check sizes only, against the repository's metadata
  k26.deploy.sglang_model:
    path: /srv/models/Kimi-K2.6
    manifest_path: /var/lib/k26deploy/model-manifest.json
    verify: size
    expected:
      model-00001-of-00064.safetensors: {size: 9958505744}
"""

RETURN = r"""
ready:
  description: Every file the model needs is present and intact.
  returned: always
  type: bool
msg:
  description: One line - the model's shards, size and how it was checked, or what is wrong (up to five files named).
  returned: always
  type: str
  sample: "/srv/models/Kimi-K2.6: 64 shards, 595.1 GB, verified (0 of 70 files hashed this run)"
path:
  description: The model directory.
  returned: always
  type: str
manifest_path:
  description: The manifest file.
  returned: always
  type: str
files:
  description: Number of the model's files.
  returned: always
  type: int
shards:
  description: Number of shards the model needs.
  returned: always
  type: int
total_bytes:
  description: Size of the model's files.
  returned: always
  type: int
missing:
  description: Files the model needs (C(config.json), the shards, those in O(expected)) that are not there.
  returned: always
  type: list
  elements: str
mismatched:
  description: Files that are there but not as they should be.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The file, relative to O(path).
      type: str
      returned: always
    reason:
      description: How it differs.
      type: str
      returned: always
      sample: size 123 != expected 456
hashed:
  description: Number of files hashed this run.
  returned: always
  type: int
hashed_bytes:
  description: Bytes hashed this run.
  returned: always
  type: int
digest:
  description:
    - SHA-256 over the sorted lines C(name size sha256) of the model's files (C(name size) with O(verify=size)),
      the same for the same model on every host; compare it across the nodes of a multi-node instance.
    - Empty when the directory does not exist.
  returned: always
  type: str
prewarm:
  description: What the pre-warm did.
  returned: always
  type: dict
  contains:
    state:
      description: V(done), V(skipped) or V(off).
      type: str
      returned: always
    bytes:
      description: Bytes read.
      type: int
      returned: always
    seconds:
      description: Time the reads took.
      type: float
      returned: always
    reason:
      description: Why it was done or skipped, with the figures.
      type: str
      returned: always
      sample: "the model (590.2 GB) is larger than 80% of this host's memory (412.3 GB of 515.4 GB): not pre-warmed,
        the restart reads the shards from disk"
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.k26.deploy.plugins.module_utils.k26_files import write_atomically
from ansible_collections.k26.deploy.plugins.module_utils.sglang_model import (
    INDEX, SHARD_SUFFIX, git_blob_sha1, human_bytes, judge, list_files, manifest_digest, manifest_text,
    model_files, normalize_expected, parse_manifest, plan_hashing, prewarm_decision, read_head,
    read_into_page_cache, read_meminfo, sha256_of, shard_problem, summary)

ARGUMENT_SPEC = dict(
    path=dict(type='path', required=True),
    manifest_path=dict(type='path', required=True),
    expected=dict(type='dict', default={}),
    verify=dict(type='str', choices=['once', 'always', 'size'], default='once'),
    updated=dict(type='bool', default=False),
    hash_workers=dict(type='int', default=4),
    prewarm=dict(type='str', choices=['off', 'on', 'auto'], default='off'),
    prewarm_ram_fraction=dict(type='float', default=0.8),
)


def read_text(module, path):
    """A file's content, None when it does not exist."""
    try:
        with open(path, encoding='utf-8') as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        return module.fail_json(msg='cannot read %s: %s' % (path, exc))


def prewarm(path, names, total_bytes, params, ready, check_mode):
    mode = params['prewarm']
    result = {'state': 'skipped', 'bytes': 0, 'seconds': 0.0, 'reason': ''}
    if mode == 'off':
        return dict(result, state='off', reason='prewarm is off')
    if not ready:
        return dict(result, reason='the model is not ready')
    if check_mode:
        return dict(result, reason='check mode')
    do_it, reason = prewarm_decision(total_bytes, read_meminfo(), mode, params['prewarm_ram_fraction'])
    if not do_it:
        return dict(result, reason=reason)
    start = time.monotonic()
    try:
        count = sum(read_into_page_cache(os.path.join(path, name)) for name in names)
    except OSError as exc:
        return dict(result, reason='reading %s failed: %s' % (exc.filename, exc.strerror))
    seconds = round(time.monotonic() - start, 3)
    return {'state': 'done', 'bytes': count, 'seconds': seconds,
            'reason': '%s: read %s in %.1f s' % (reason, human_bytes(count), seconds)}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # The result's path is the model directory, not a file this module manages: no owner, mode, size or state of it.
    module.add_path_info = lambda kwargs: kwargs
    params = module.params
    path = os.path.normpath(params['path'])
    manifest_path = os.path.normpath(params['manifest_path'])
    try:
        expected = normalize_expected(params['expected'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    if not 0 < params['prewarm_ram_fraction'] <= 1:
        module.fail_json(msg='prewarm_ram_fraction must be above 0 and at most 1, not %s' % params['prewarm_ram_fraction'])
    result = dict(changed=False, ready=False, path=path, manifest_path=manifest_path, files=0, shards=0,
                  total_bytes=0, missing=[], mismatched=[], hashed=0, hashed_bytes=0, digest='',
                  prewarm={'state': 'off' if params['prewarm'] == 'off' else 'skipped', 'bytes': 0, 'seconds': 0.0,
                           'reason': 'prewarm is off' if params['prewarm'] == 'off' else 'the model is not ready'})
    if not os.path.isdir(path):
        module.fail_json(msg='%s: not ready to serve: %s' % (
            path, 'not a directory' if os.path.exists(path) else 'the model directory does not exist'), **result)

    inside = os.path.relpath(manifest_path, path)
    files = model_files(list_files(path), exclude=(inside.replace(os.sep, '/'),))
    for name, info in files.items():
        if name.endswith(SHARD_SUFFIX):
            try:
                info['problem'] = shard_problem(info['size'], read_head(os.path.join(path, name)))
            except OSError as exc:
                info['problem'] = 'cannot be read: %s' % exc.strerror
    old_text = read_text(module, manifest_path)
    manifest = parse_manifest(old_text, path)
    to_hash = plan_hashing(files, manifest, params['verify'])
    try:
        with ThreadPoolExecutor(max_workers=max(1, params['hash_workers'])) as pool:
            hashes = dict(zip(to_hash, pool.map(sha256_of, [os.path.join(path, name) for name in to_hash])))
    except OSError as exc:
        module.fail_json(msg='%s: cannot hash %s: %s' % (path, exc.filename, exc.strerror), **result)
    try:
        git_hashes = dict((name, git_blob_sha1(os.path.join(path, name))) for name in sorted(files)
                          if (expected.get(name) or {}).get('git_sha1'))
    except OSError as exc:
        module.fail_json(msg='%s: cannot hash %s: %s' % (path, exc.filename, exc.strerror), **result)
    index_text = read_text(module, os.path.join(path, INDEX)) if INDEX in files else None
    verdict = judge(files, index_text, manifest, expected, hashes, updated=params['updated'], git_hashes=git_hashes)

    text = manifest_text(path, verdict['entries'])
    changed = text != old_text
    if changed and not module.check_mode:
        try:
            write_atomically(manifest_path, text)
        except OSError as exc:
            module.fail_json(msg='cannot write the manifest %s: %s' % (manifest_path, exc), **result)
    total_bytes = sum(info['size'] for info in files.values())
    result.update(
        changed=changed, ready=verdict['ready'], files=len(files), shards=len(verdict['shards']),
        total_bytes=total_bytes, missing=verdict['missing'], mismatched=verdict['mismatched'], hashed=len(hashes),
        hashed_bytes=sum(files[name]['size'] for name in hashes),
        digest=manifest_digest(verdict['entries'], with_sha256=params['verify'] != 'size'),
        prewarm=prewarm(path, sorted(files), total_bytes, params, verdict['ready'], module.check_mode))
    msg = summary(path, verdict, total_bytes, params['verify'], len(hashes))
    if not verdict['ready']:
        module.fail_json(msg=msg, **result)
    if result['prewarm']['state'] == 'done':
        msg += '; pre-warmed in %.1f s' % result['prewarm']['seconds']
    module.exit_json(msg=msg, **result)


if __name__ == '__main__':
    main()
