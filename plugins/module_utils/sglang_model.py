# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The model directory of the sglang_model module: which files are the model, which must be hashed, whether it is
intact and ready to serve, its digest, and whether to pre-warm the page cache with it.

Pure functions over plain data, plus a few small I/O helpers at the end (listing, hashing, reading, /proc/meminfo).

A listing maps a file's path relative to the model directory to ``{"size": int, "mtime_ns": int}``. A manifest maps
the same names to ``{"size", "mtime_ns", "sha256"}`` (``sha256`` absent while not hashed), and ``"found_sha256"``
(``"found_size"``) when a file's content (size) no longer matches the recorded one: the recorded value stays the
reference, so the change is reported (and the file hashed again) on every later run until the file is restored, or
the operator says the model was updated on purpose (``updated``), which records the new content.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

CONFIG = 'config.json'
INDEX = 'model.safetensors.index.json'
SHARD_SUFFIX = '.safetensors'
MANIFEST_VERSION = 1
BUFFER_SIZE = 16 << 20
NAMED_AT_MOST = 5
# A safetensors header larger than this is not one (SGLang's shards have headers of a few hundred kB).
MAX_HEADER_BYTES = 100 << 20


def human_bytes(count):
    """Decimal units, one decimal: 595100000000 -> '595.1 GB'."""
    if count < 1000:
        return '%d B' % count
    value = float(count)
    for unit in ('kB', 'MB', 'GB', 'TB'):
        value /= 1000
        if value < 1000:
            return '%.1f %s' % (value, unit)
    return '%.1f PB' % (value / 1000)


def model_files(listing, exclude=()):
    """The listing without hidden files and files under hidden directories (``.cache/huggingface`` that
    ``hf download`` leaves, ``.git``) and without the names in ``exclude`` (the manifest, when it lies inside)."""
    return {name: info for name, info in listing.items()
            if name not in exclude and not any(part.startswith('.') for part in name.split('/'))}


def required_shards(index_text, names):
    """Sorted shard names the model needs: the values of the index's ``weight_map`` when there is an index
    (``index_text`` is its content), else every ``*.safetensors`` among ``names``. ValueError for an unusable index."""
    if index_text is None:
        return sorted(name for name in names if name.endswith(SHARD_SUFFIX))
    try:
        weight_map = json.loads(index_text).get('weight_map')
    except (ValueError, AttributeError) as exc:
        raise ValueError('not a JSON object (%s)' % exc) from None
    if not isinstance(weight_map, dict) or not all(isinstance(value, str) for value in weight_map.values()):
        raise ValueError('no weight_map of tensor names to shard files')
    return sorted(set(weight_map.values()))


def safetensors_size(head):
    """The size a safetensors file has when whole, from its first bytes ``head`` (8 bytes of little-endian header
    length, then the JSON header, whose tensors' data_offsets end where the file ends). ValueError when ``head`` is
    not the start of a safetensors file."""
    if len(head) < 8:
        raise ValueError('not a safetensors file (%d bytes)' % len(head))
    length = int.from_bytes(head[:8], 'little')
    if length > MAX_HEADER_BYTES or len(head) < 8 + length:
        raise ValueError('not a safetensors file (its first 8 bytes do not give a header length)')
    try:
        header = json.loads(head[8:8 + length].decode('utf-8'))
        ends = [int(tensor['data_offsets'][1]) for key, tensor in header.items() if key != '__metadata__']
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        raise ValueError('not a safetensors file (its header is not a JSON table of tensors)') from None
    return 8 + length + max(ends or [0])


def shard_problem(size, head):
    """Why a shard of ``size`` bytes starting with ``head`` cannot be loaded (cut short, not a safetensors file), or
    None. Needs no hash: an interrupted copy or download is found on every run."""
    try:
        whole = safetensors_size(head)
    except ValueError as exc:
        return str(exc)
    if size < whole:
        return 'truncated: %d of the %d bytes its header describes' % (size, whole)
    return None


def normalize_expected(expected):
    """``expected`` as given (name -> {size, sha256, git_sha1}, each optional) -> name -> {'size': int|None,
    'sha256': lowercase str|None, 'git_sha1': lowercase str|None}. ``git_sha1``: the file's git blob id, which the
    hub lists for a file outside LFS. ValueError naming the entry that is not of that shape."""
    result = {}
    for name, entry in (expected or {}).items():
        if not isinstance(entry, dict) or not set(entry) <= {'size', 'sha256', 'git_sha1'}:
            raise ValueError('expected[%r] must be a dict with size, sha256 and/or git_sha1, got %r' % (name, entry))
        try:
            size = None if entry.get('size') is None else int(entry['size'])
        except (TypeError, ValueError):
            raise ValueError('expected[%r].size is not an integer: %r' % (name, entry['size'])) from None
        sha256, git_sha1 = entry.get('sha256'), entry.get('git_sha1')
        result[str(name)] = {'size': size, 'sha256': str(sha256).lower() if sha256 else None,
                             'git_sha1': str(git_sha1).lower() if git_sha1 else None}
    return result


def _unchanged(info, entry):
    return bool(entry) and entry.get('size') == info['size'] and entry.get('mtime_ns') == info['mtime_ns']


def is_shard(name):
    return name.endswith(SHARD_SUFFIX)


def plan_hashing(files, manifest, verify):
    """Sorted names to hash this run. Every file that is not a shard (config.json, the index, the tokenizer, the
    ``*.py`` that trust-remote-code runs: small, and parsed or executed by SGLang) on every run, whatever the mode.
    Shards: ``once``, those the manifest does not know with this size and mtime, or without a recorded sha256, or
    found to differ from it before; ``always``, every one; ``size``, none."""
    if verify == 'always':
        return sorted(files)
    return sorted(name for name, info in files.items()
                  if not is_shard(name) or (verify != 'size' and (
                      not _unchanged(info, manifest.get(name))
                      or not manifest[name].get('sha256') or manifest[name].get('found_sha256'))))


def judge(files, index_text, manifest, expected, hashes, updated=False, git_hashes=None):
    """Whether the model in ``files`` is intact and complete, and its new manifest.

    ``index_text``: the index's content or None; ``manifest``: the previous manifest's files; ``expected``:
    normalize_expected's result; ``hashes``: name -> sha256 computed this run; ``git_hashes``: name -> git blob id
    computed this run, of the files whose expected entry has a git_sha1. A file's sha256 is this run's, else the
    manifest's when size and mtime are unchanged. ``expected`` is the authority where it gives a value (a sha256, or
    the git blob id the hub lists for a file outside LFS: config.json, the tokenizer, the Python that
    trust-remote-code runs), ``updated`` or not; without either (a size alone), a file whose content (or size) is
    not the one the manifest recorded is mismatched, whether or not its mtime moved, unless ``updated`` (the operator
    says the model was replaced on purpose: the new content is recorded).

    Returns {ready, shards, missing, mismatched: [{name, reason}], problem (why not ready besides files, or None),
    entries (the new manifest's files)}."""
    mismatched = []
    try:
        shards = required_shards(index_text, files)
    except ValueError as exc:
        shards = []
        mismatched.append({'name': INDEX, 'reason': str(exc)})
    missing = sorted((set(shards) | {CONFIG} | set(expected)) - set(files))
    entries = {}
    for name in sorted(files):
        info, old, want = files[name], manifest.get(name) or {}, expected.get(name) or {}
        unchanged = _unchanged(info, old)
        known = hashes.get(name) or (unchanged and (old.get('found_sha256') or old.get('sha256'))) or None
        entry = {'size': info['size'], 'mtime_ns': info['mtime_ns']}
        reason = info.get('problem')
        if reason:
            pass
        elif want.get('size') is not None and want['size'] != info['size']:
            reason = 'size %d != expected %d' % (info['size'], want['size'])
        elif want.get('sha256'):
            if known and known != want['sha256']:
                reason = 'sha256 differs from expected'
        elif want.get('git_sha1'):
            found = (git_hashes or {}).get(name)
            if found != want['git_sha1']:
                reason = 'content differs from the hub\'s (git blob %s, expected %s)' % (found, want['git_sha1'])
        elif unchanged and old.get('sha256') and known and known != old['sha256'] and not updated:
            reason = 'changed since the manifest: sha256 differs'
            entry.update(sha256=old['sha256'], found_sha256=known)
        elif old and not updated and not want.get('sha256') and _replaced(info, old, known):
            reason = _replaced(info, old, known)
            entry.update((key, old[key]) for key in ('sha256', 'size') if old.get(key) is not None)
            entry['found_size'] = info['size']
            if known:
                entry['found_sha256'] = known
        if reason and old.get('sha256') and 'found_sha256' not in entry:
            # a file judged wrong never replaces the manifest's record: the recorded content stays the reference
            entry['sha256'] = old['sha256']
            if known and known != old['sha256']:
                entry['found_sha256'] = known
        if known and 'sha256' not in entry:
            entry['sha256'] = known
        if reason:
            mismatched.append({'name': name, 'reason': reason})
        entries[name] = entry
    problem = None
    if not shards and not any(item['name'] == INDEX for item in mismatched):
        problem = ('%s names no shard' % INDEX if index_text is not None
                   else 'no *.safetensors shards (and no %s)' % INDEX)
    return {'ready': not (missing or mismatched or problem), 'shards': shards, 'missing': missing,
            'mismatched': mismatched, 'problem': problem, 'entries': entries}


def _replaced(info, old, known):
    """Why a file is not the one the manifest recorded (its size or content changed), or ''."""
    if old.get('size') is not None and info['size'] != old['size']:
        return 'changed since the manifest: size %d, recorded %d (set the model as updated if this is on purpose)' % (
            info['size'], old['size'])
    if known and old.get('sha256') and known != old['sha256']:
        return 'changed since the manifest: sha256 differs (set the model as updated if this is on purpose)'
    return ''


def content_sha256(entry):
    """The sha256 of the content a manifest entry saw last ('' when not hashed)."""
    return entry.get('found_sha256') or entry.get('sha256') or ''


def manifest_digest(entries, with_sha256=True):
    """sha256 hex over the sorted lines ``name size sha256`` (``name size`` without hashes): the same model gives
    the same digest on every host, whatever the mtimes."""
    lines = ''.join('%s %d %s\n' % (name, entry['size'], content_sha256(entry)) if with_sha256
                    else '%s %d\n' % (name, entry['size']) for name, entry in sorted(entries.items()))
    return hashlib.sha256(lines.encode('utf-8')).hexdigest()


def manifest_text(path, entries):
    """The manifest file's content: stable (sorted keys, no time stamp), so that an unchanged model rewrites nothing."""
    return json.dumps({'version': MANIFEST_VERSION, 'path': path, 'files': entries},
                      indent=1, sort_keys=True) + '\n'


def parse_manifest(text, path):
    """The files of a manifest's content; {} when there is none, it is not ours or it describes another directory."""
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get('version') != MANIFEST_VERSION or data.get('path') != path:
        return {}
    files = data.get('files')
    return {name: entry for name, entry in files.items() if isinstance(entry, dict)} if isinstance(files, dict) else {}


def summary(path, verdict, total_bytes, verify, hashed):
    """One line: what the model is and how it was checked, or what is wrong with it (up to five files named)."""
    if verdict['ready']:
        how = ('sizes checked, not hashed (verify=size)' if verify == 'size'
               else 'verified (%d of %d files hashed this run)' % (hashed, len(verdict['entries'])))
        return '%s: %d shards, %s, %s' % (path, len(verdict['shards']), human_bytes(total_bytes), how)
    problems = ['%s missing' % name for name in verdict['missing']]
    problems += ['%s: %s' % (item['name'], item['reason']) for item in verdict['mismatched']]
    named = ', '.join(problems[:NAMED_AT_MOST])
    if len(problems) > NAMED_AT_MOST:
        named += ' and %d more' % (len(problems) - NAMED_AT_MOST)
    parts = [verdict['problem']] if verdict['problem'] else []
    if problems:
        parts.append('%d missing, %d mismatched: %s' % (len(verdict['missing']), len(verdict['mismatched']), named))
    return '%s: not ready to serve: %s' % (path, '; '.join(parts))


def mem_total_bytes(meminfo_text):
    """MemTotal of /proc/meminfo's content in bytes, or None."""
    for line in (meminfo_text or '').splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == 'MemTotal:' and fields[1].isdigit():
            return int(fields[1]) * 1024
    return None


def prewarm_decision(total_bytes, meminfo_text, mode, fraction):
    """(pre-warm, reason). ``auto`` and ``on`` pre-warm only a model that fits in ``fraction`` of MemTotal (reading
    more than the memory only evicts what was read first); when MemTotal is unknown, ``on`` pre-warms, ``auto`` not."""
    if mode == 'off':
        return False, 'prewarm is off'
    total = mem_total_bytes(meminfo_text)
    share = '%g%%' % round(fraction * 100, 1)
    if total is None:
        if mode == 'on':
            return True, 'this host\'s memory is unknown (no MemTotal in /proc/meminfo): pre-warmed as asked'
        return False, 'this host\'s memory is unknown (no MemTotal in /proc/meminfo): not pre-warmed'
    budget = int(total * fraction)
    figures = '%s of this host\'s memory (%s of %s)' % (share, human_bytes(budget), human_bytes(total))
    if total_bytes > budget:
        return False, ('the model (%s) is larger than %s: not pre-warmed, the restart reads the shards from disk'
                       % (human_bytes(total_bytes), figures))
    return True, 'the model (%s) fits in %s' % (human_bytes(total_bytes), figures)


# I/O helpers


def list_files(path):
    """name (relative, '/'-separated) -> {size, mtime_ns} of the regular files under ``path``: links to files are
    followed (a Hugging Face cache snapshot is made of them), links to directories are not, broken links skipped."""
    listing = {}
    for top, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(top, name)
            try:
                info = os.stat(full)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                relative = os.path.relpath(full, path).replace(os.sep, '/')
                listing[relative] = {'size': info.st_size, 'mtime_ns': info.st_mtime_ns}
    return listing


def _read_chunks(path, buffer_size):
    """Yield memoryviews of the file's successive chunks, read sequentially into one reused buffer."""
    buffer = bytearray(buffer_size)
    view = memoryview(buffer)
    with open(path, 'rb', buffering=0) as handle:
        if hasattr(os, 'posix_fadvise'):
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while True:
            count = handle.readinto(buffer)
            if not count:
                return
            yield view[:count]


def read_head(path):
    """The first bytes of a safetensors file: its 8-byte header length and the header (as much as there is)."""
    with open(path, 'rb') as handle:
        first = handle.read(8)
        if len(first) < 8:
            return first
        return first + handle.read(min(int.from_bytes(first, 'little'), MAX_HEADER_BYTES))


def git_blob_sha1(path, chunk=BUFFER_SIZE):
    """A file's git blob id (git hash-object): sha1 of 'blob SIZE\\0' and its content, as the hub lists a file
    outside LFS."""
    digest = hashlib.sha1(b'blob %d\x00' % os.path.getsize(path))
    for data in _read_chunks(path, chunk):
        digest.update(data)
    return digest.hexdigest()


def sha256_of(path, chunk=BUFFER_SIZE):
    """sha256 hex of a file's content."""
    digest = hashlib.sha256()
    for data in _read_chunks(path, chunk):
        digest.update(data)
    return digest.hexdigest()


def read_into_page_cache(path, buffer_size=BUFFER_SIZE):
    """Read the whole file (so that the kernel keeps it in the page cache); the number of bytes read."""
    return sum(len(data) for data in _read_chunks(path, buffer_size))


def read_meminfo(path='/proc/meminfo'):
    """/proc/meminfo's content, '' where there is none."""
    try:
        with open(path, encoding='ascii', errors='replace') as handle:
            return handle.read()
    except OSError:
        return ''
