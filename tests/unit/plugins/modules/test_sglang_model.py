"""The sglang_model module: which files are the model, what is hashed, when the model is ready, its digest, the
pre-warm decision; and the module run on small generated model directories."""
import hashlib
import json
import os
import stat
import subprocess

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import sglang_model as logic
from ansible_collections.k26.deploy.plugins.module_utils.sglang_model import (
    human_bytes, judge, list_files, manifest_digest, model_files, normalize_expected, parse_manifest, plan_hashing,
    prewarm_decision, read_into_page_cache, required_shards, sha256_of, summary)
from ansible_collections.k26.deploy.plugins.modules import sglang_model
from module_runner import assert_documented_as_specified, run_module
from module_runner import doc as module_doc
from safetensors_shards import shard_bytes

SHA_A, SHA_B, SHA_C = 'a' * 64, 'b' * 64, 'c' * 64
INDEX_TEXT = json.dumps({'weight_map': {'w1': 'model-00001-of-00002.safetensors',
                                        'w2': 'model-00002-of-00002.safetensors',
                                        'w3': 'model-00002-of-00002.safetensors'}})


def info(size, mtime_ns=1):
    return {'size': size, 'mtime_ns': mtime_ns}


FILES = {'config.json': info(10), logic.INDEX: info(20), 'model-00001-of-00002.safetensors': info(100),
         'model-00002-of-00002.safetensors': info(200)}
HASHED = {name: {'size': entry['size'], 'mtime_ns': 1, 'sha256': SHA_A} for name, entry in FILES.items()}


def meminfo(total_kib):
    return 'MemTotal:       %d kB\nMemFree:         1000 kB\n' % total_kib


# ----------------------------------------------------------------------------------------------------------------
# Pure logic
# ----------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('count, text', [(0, '0 B'), (999, '999 B'), (1000, '1.0 kB'), (595_100_000_000, '595.1 GB'),
                                         (1_500_000_000_000, '1.5 TB'), (2_000_000_000_000_000, '2.0 PB')])
def test_human_bytes(count, text):
    assert human_bytes(count) == text


def test_model_files_leave_out_hidden_files_directories_and_the_manifest():
    listing = {name: info(1) for name in ('config.json', '.gitattributes', '.cache/huggingface/download/x.lock',
                                          'sub/.hidden', 'sub/tokenizer.model', 'manifest.json')}
    assert sorted(model_files(listing, exclude=('manifest.json',))) == ['config.json', 'sub/tokenizer.model']


def test_required_shards_from_the_index_or_the_safetensors_present():
    names = ['config.json', 'extra.safetensors', 'model-00001-of-00002.safetensors']
    assert required_shards(INDEX_TEXT, names) == ['model-00001-of-00002.safetensors',
                                                  'model-00002-of-00002.safetensors']
    assert required_shards(None, names) == ['extra.safetensors', 'model-00001-of-00002.safetensors']
    assert required_shards(None, ['config.json']) == []


@pytest.mark.parametrize('text', ['{', '[]', '{"metadata": {}}', '{"weight_map": {"w": 1}}'])
def test_an_unusable_index_is_an_error(text):
    with pytest.raises(ValueError):
        required_shards(text, [])


def test_normalize_expected():
    assert normalize_expected({'a': {'size': '12', 'sha256': 'ABC'}, 'b': {'sha256': SHA_A}}) == {
        'a': {'size': 12, 'sha256': 'abc', 'git_sha1': None}, 'b': {'size': None, 'sha256': SHA_A, 'git_sha1': None}}
    for bad in ({'a': 12}, {'a': {'bytes': 1}}, {'a': {'size': 'big'}}):
        with pytest.raises(ValueError, match="expected\\['a'\\]"):
            normalize_expected(bad)


def test_plan_hashing():
    manifest = dict(HASHED, **{'config.json': dict(HASHED['config.json'], mtime_ns=0)})
    del manifest['model-00002-of-00002.safetensors']
    manifest[logic.INDEX] = dict(HASHED[logic.INDEX], found_sha256=SHA_B)
    assert plan_hashing(FILES, manifest, 'once') == sorted(['config.json', logic.INDEX,
                                                            'model-00002-of-00002.safetensors'])
    # the files SGLang parses or runs (not shards) are small: hashed on every run, whatever the mode
    small = sorted(['config.json', logic.INDEX])
    assert plan_hashing(FILES, HASHED, 'once') == small
    assert plan_hashing(FILES, {name: dict(entry, sha256=None) for name, entry in HASHED.items()}, 'once') == sorted(FILES)
    assert plan_hashing(FILES, HASHED, 'always') == sorted(FILES)
    assert plan_hashing(FILES, {}, 'size') == small


def test_a_complete_model_is_ready():
    verdict = judge(FILES, INDEX_TEXT, {}, {}, {name: SHA_A for name in FILES})
    assert verdict['ready'] is True
    assert (verdict['missing'], verdict['mismatched'], verdict['problem']) == ([], [], None)
    assert len(verdict['shards']) == 2
    assert verdict['entries'] == HASHED


def test_missing_shard_config_and_expected_file():
    files = {name: entry for name, entry in FILES.items()
             if name not in ('model-00002-of-00002.safetensors', 'config.json')}
    verdict = judge(files, INDEX_TEXT, {}, {'tokenizer.model': {'size': 1, 'sha256': None}}, {})
    assert verdict['ready'] is False
    assert verdict['missing'] == ['config.json', 'model-00002-of-00002.safetensors', 'tokenizer.model']


def test_against_expected():
    expected = normalize_expected({'config.json': {'size': 11}, logic.INDEX: {'sha256': SHA_B},
                                   'model-00001-of-00002.safetensors': {'size': 100, 'sha256': SHA_A}})
    verdict = judge(FILES, INDEX_TEXT, {}, expected, {name: SHA_A for name in FILES})
    assert verdict['mismatched'] == [{'name': 'config.json', 'reason': 'size 10 != expected 11'},
                                     {'name': logic.INDEX, 'reason': 'sha256 differs from expected'}]
    # verify=size: no hash known, only the sizes are compared
    assert judge(FILES, INDEX_TEXT, {}, expected, {})['mismatched'] == verdict['mismatched'][:1]


def test_same_size_and_mtime_with_other_content_is_mismatched_and_stays_so():
    hashes = {'config.json': SHA_B}
    verdict = judge(FILES, INDEX_TEXT, HASHED, {}, hashes)
    assert verdict['mismatched'] == [{'name': 'config.json', 'reason': 'changed since the manifest: sha256 differs'}]
    assert verdict['entries']['config.json'] == dict(HASHED['config.json'], found_sha256=SHA_B)
    # the next runs still report it, hashed again (verify=once) or not (verify=size)
    assert plan_hashing(FILES, verdict['entries'], 'once') == ['config.json', logic.INDEX]  # small files: always
    assert judge(FILES, INDEX_TEXT, verdict['entries'], {}, hashes)['mismatched'] == verdict['mismatched']
    assert judge(FILES, INDEX_TEXT, verdict['entries'], {}, {})['mismatched'] == verdict['mismatched']
    # restored (same content, same mtime): forgotten
    restored = judge(FILES, INDEX_TEXT, verdict['entries'], {}, {'config.json': SHA_A})
    assert restored['ready'] and restored['entries'] == HASHED


def test_a_file_changed_with_its_mtime_fails_unless_the_model_was_updated_or_expected_says_otherwise():
    files = dict(FILES, **{'config.json': info(10, mtime_ns=2)})
    verdict = judge(files, INDEX_TEXT, HASHED, {}, {'config.json': SHA_B})
    assert verdict['ready'] is False and verdict['mismatched'] == [
        {'name': 'config.json', 'reason': 'changed since the manifest: sha256 differs (set the model as updated if '
                                          'this is on purpose)'}]
    assert verdict['entries']['config.json'] == {'size': 10, 'mtime_ns': 2, 'sha256': SHA_A, 'found_size': 10,
                                                 'found_sha256': SHA_B}  # the recorded content stays the reference
    resized = judge(dict(FILES, **{'config.json': info(11, mtime_ns=2)}), INDEX_TEXT, HASHED, {}, {})
    assert resized['mismatched'][0]['reason'].startswith('changed since the manifest: size 11, recorded 10')
    updated = judge(files, INDEX_TEXT, HASHED, {}, {'config.json': SHA_B}, updated=True)
    assert updated['ready'] is True
    assert updated['entries']['config.json'] == {'size': 10, 'mtime_ns': 2, 'sha256': SHA_B}
    assert judge(files, INDEX_TEXT, HASHED, normalize_expected({'config.json': {'sha256': SHA_B}}),
                 {'config.json': SHA_B})['ready'] is True  # the repository's own hash is the authority
    expected = normalize_expected({'config.json': {'sha256': SHA_A}})
    assert judge(files, INDEX_TEXT, HASHED, expected, {'config.json': SHA_B})['mismatched'] == [
        {'name': 'config.json', 'reason': 'sha256 differs from expected'}]


def test_an_expected_size_alone_never_accepts_new_content_at_the_same_size():
    """Issue 50: the hub's files other than the LFS shards (config.json, the tokenizer, the index, the Python that
    trust-remote-code runs) come with a size and no sha256; one changed at the same size with a new mtime must not be
    accepted, nor its new hash become the reference."""
    files = dict(FILES, **{'config.json': info(10, mtime_ns=2)})
    expected = normalize_expected({'config.json': {'size': 10}})
    verdict = judge(files, INDEX_TEXT, HASHED, expected, {'config.json': SHA_B})
    assert verdict['ready'] is False and verdict['mismatched'] == [
        {'name': 'config.json', 'reason': 'changed since the manifest: sha256 differs (set the model as updated if '
                                          'this is on purpose)'}]
    assert verdict['entries']['config.json']['sha256'] == SHA_A
    assert judge(files, INDEX_TEXT, HASHED, expected, {'config.json': SHA_B}, updated=True)['ready'] is True


def test_without_shards_or_with_a_broken_index_it_is_not_ready():
    files = {'config.json': info(10)}
    assert judge(files, None, {}, {}, {})['problem'] == 'no *.safetensors shards (and no model.safetensors.index.json)'
    assert judge(dict(files, **{logic.INDEX: info(2)}), '{"weight_map": {}}', {}, {}, {})['problem'] == (
        'model.safetensors.index.json names no shard')
    broken = judge(dict(files, **{logic.INDEX: info(1)}), '{', {}, {}, {})
    assert broken['ready'] is False and broken['problem'] is None
    assert broken['mismatched'][0]['name'] == logic.INDEX and 'not a JSON object' in broken['mismatched'][0]['reason']


def test_digest_is_over_names_sizes_and_content_only():
    other_host = {name: dict(entry, mtime_ns=99) for name, entry in HASHED.items()}
    assert manifest_digest(HASHED) == manifest_digest(other_host)
    lines = ''.join('%s %d %s\n' % (name, entry['size'], SHA_A) for name, entry in sorted(HASHED.items()))
    assert manifest_digest(HASHED) == hashlib.sha256(lines.encode()).hexdigest()
    assert manifest_digest(dict(HASHED, **{'config.json': dict(HASHED['config.json'], found_sha256=SHA_B)})) != (
        manifest_digest(HASHED))
    unhashed = {name: info(entry['size']) for name, entry in HASHED.items()}
    assert manifest_digest(HASHED, with_sha256=False) == manifest_digest(unhashed, with_sha256=False)


def test_parse_manifest_keeps_only_ours_for_this_directory():
    text = logic.manifest_text('/m', HASHED)
    assert parse_manifest(text, '/m') == HASHED
    assert parse_manifest(text, '/other') == {}
    assert parse_manifest('not json', '/m') == {} == parse_manifest(None, '/m') == parse_manifest('[]', '/m')


def test_summary():
    ready = judge(FILES, INDEX_TEXT, {}, {}, {name: SHA_A for name in FILES})
    assert summary('/m', ready, 595_100_000_000, 'once', 4) == '/m: 2 shards, 595.1 GB, verified (4 of 4 files hashed this run)'
    assert summary('/m', ready, 300, 'size', 0) == '/m: 2 shards, 300 B, sizes checked, not hashed (verify=size)'
    index = json.dumps({'weight_map': {'w%d' % n: 'model-%05d.safetensors' % n for n in range(8)}})
    broken = judge({'model-00000.safetensors': info(5), logic.INDEX: info(1)}, index, {},
                   normalize_expected({'model-00000.safetensors': {'size': 6}}), {})
    assert summary('/m', broken, 0, 'once', 0) == (
        '/m: not ready to serve: 8 missing, 1 mismatched: config.json missing, model-00001.safetensors missing, '
        'model-00002.safetensors missing, model-00003.safetensors missing, model-00004.safetensors missing '
        'and 4 more')


def test_prewarm_decision():
    gib = 1 << 30
    assert prewarm_decision(10, meminfo(1), 'off', 0.8) == (False, 'prewarm is off')
    assert prewarm_decision(gib, meminfo(2 * gib // 1024), 'auto', 0.8) == (
        True, "the model (1.1 GB) fits in 80% of this host's memory (1.7 GB of 2.1 GB)")
    reason = ("the model (590.2 GB) is larger than 80% of this host's memory (412.3 GB of 515.4 GB): not pre-warmed, "
              "the restart reads the shards from disk")
    for mode in ('auto', 'on'):
        assert prewarm_decision(590_200_000_000, meminfo(480 * gib // 1024), mode, 0.8) == (False, reason)
    assert prewarm_decision(19 * gib // 10, meminfo(2 * gib // 1024), 'on', 0.8)[0] is False
    assert prewarm_decision(19 * gib // 10, meminfo(2 * gib // 1024), 'on', 0.95)[0] is True
    assert prewarm_decision(10, 'garbage', 'auto', 0.8)[0] is False
    assert prewarm_decision(10, '', 'on', 0.8)[0] is True
    assert '75%' in prewarm_decision(10, meminfo(1), 'on', 0.75)[1]


def test_io_helpers(tmp_path):
    data = os.urandom(100_000)
    (tmp_path / 'f').write_bytes(data)
    assert sha256_of(str(tmp_path / 'f'), chunk=4096) == hashlib.sha256(data).hexdigest()
    assert read_into_page_cache(str(tmp_path / 'f'), buffer_size=4096) == len(data)
    (tmp_path / 'sub').mkdir()
    os.symlink('../f', tmp_path / 'sub' / 'link')
    os.symlink('nowhere', tmp_path / 'broken')
    os.symlink('sub', tmp_path / 'dirlink')
    listing = list_files(str(tmp_path))
    assert sorted(listing) == ['f', 'sub/link']
    assert listing['sub/link']['size'] == len(data)
    assert 'MemTotal:' in logic.read_meminfo() and logic.read_meminfo(str(tmp_path / 'none')) == ''


# ----------------------------------------------------------------------------------------------------------------
# The module
# ----------------------------------------------------------------------------------------------------------------

def doc(name):
    return module_doc(sglang_model, name)


def test_documented_options_match_argument_spec():
    assert_documented_as_specified(sglang_model)
    assert all('name' in task for task in doc('EXAMPLES'))


SHARDS = {'model-00001-of-00003.safetensors': shard_bytes(b'1' * 3000),
          'model-00002-of-00003.safetensors': shard_bytes(b'2' * 2000),
          'model-00003-of-00003.safetensors': shard_bytes(b'3' * 1000)}


def make_model(directory, shards=None):
    directory.mkdir(parents=True)
    (directory / 'config.json').write_text('{"model_type": "kimi_k2"}')
    (directory / 'tokenizer_config.json').write_text('{}')
    (directory / logic.INDEX).write_text(json.dumps({'weight_map': {'w%d' % n: name
                                                                    for n, name in enumerate(SHARDS)}}))
    for name, data in (SHARDS if shards is None else shards).items():
        (directory / name).write_bytes(data)
    (directory / '.cache' / 'huggingface').mkdir(parents=True)
    (directory / '.cache' / 'huggingface' / 'partial.incomplete').write_bytes(b'x' * 10)
    return directory


def run(capsys, model, manifest, check_mode=False, **args):
    args = dict(args, path=str(model), manifest_path=str(manifest))
    if check_mode:
        args['_ansible_check_mode'] = True
    code, result = run_module(sglang_model, args, capsys)
    assert bool(code) is bool(result.get('failed'))
    assert set(result) - {'failed', 'invocation', 'changed', 'msg'} <= set(doc('RETURN')), result
    assert result['msg'] and '\n' not in result['msg']
    return result


@pytest.fixture
def model(tmp_path):
    return make_model(tmp_path / 'models' / 'k2.6')


@pytest.fixture
def manifest(tmp_path):
    return tmp_path / 'state' / 'k26' / 'manifest.json'


def test_a_ready_model_is_hashed_once_and_its_manifest_kept(model, manifest, capsys):
    first = run(capsys, model, manifest)
    assert first['ready'] is True and first['changed'] is True
    assert (first['files'], first['shards'], first['hashed']) == (6, 3, 6)
    assert first['total_bytes'] == first['hashed_bytes'] == sum(os.path.getsize(model / name) for name in
                                                                os.listdir(model) if not name.startswith('.'))
    assert first['msg'] == '%s: 3 shards, %s, verified (6 of 6 files hashed this run)' % (
        model, human_bytes(first['total_bytes']))
    assert first['prewarm'] == {'state': 'off', 'bytes': 0, 'seconds': 0.0, 'reason': 'prewarm is off'}
    assert stat.S_IMODE(os.stat(manifest).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(manifest.parent).st_mode) == 0o755
    recorded = json.loads(manifest.read_text())['files']
    assert recorded['config.json']['sha256'] == hashlib.sha256(b'{"model_type": "kimi_k2"}').hexdigest()
    assert os.listdir(manifest.parent) == ['manifest.json']
    second = run(capsys, model, manifest)
    # the shards once; the small files SGLang parses or runs on every run
    assert (second['ready'], second['changed'], second['hashed'], second['digest']) == (True, False, 3, first['digest'])


def test_the_same_model_elsewhere_has_the_same_digest(model, manifest, tmp_path, capsys):
    first = run(capsys, model, manifest)
    other = make_model(tmp_path / 'node1' / 'k2.6')
    os.utime(other / 'config.json', ns=(1, 1))
    assert run(capsys, other, tmp_path / 'node1.json')['digest'] == first['digest']
    (other / 'config.json').write_text('{"model_type": "kimi_k3"}')
    assert run(capsys, other, tmp_path / 'node1.json')['digest'] != first['digest']


def test_a_manifest_inside_the_model_directory_is_not_part_of_the_model(model, capsys):
    run(capsys, model, model / 'manifest.json')
    again = run(capsys, model, model / 'manifest.json')
    assert (again['files'], again['changed']) == (6, False)


def test_a_shard_named_by_the_index_that_is_absent_fails(model, manifest, capsys):
    (model / 'model-00002-of-00003.safetensors').unlink()
    result = run(capsys, model, manifest)
    assert result['failed'] is True and result['ready'] is False
    assert result['missing'] == ['model-00002-of-00003.safetensors']
    assert result['msg'] == ('%s: not ready to serve: 1 missing, 0 mismatched: model-00002-of-00003.safetensors missing'
                             % model)
    assert result['prewarm']['state'] == 'off'
    assert manifest.exists()


def test_a_size_other_than_expected_fails(model, manifest, capsys):
    expected = {'model-00001-of-00003.safetensors': {'size': 3001}, 'config.json': {'size': 25}}
    result = run(capsys, model, manifest, expected=expected, prewarm='auto')
    assert result['failed'] is True
    size = len(SHARDS['model-00001-of-00003.safetensors'])
    assert result['mismatched'] == [{'name': 'model-00001-of-00003.safetensors',
                                     'reason': 'size %d != expected 3001' % size}]
    assert result['prewarm'] == {'state': 'skipped', 'bytes': 0, 'seconds': 0.0, 'reason': 'the model is not ready'}


def test_a_file_replaced_after_the_manifest_fails_until_the_model_is_said_updated(model, manifest, capsys):
    first = run(capsys, model, manifest)
    shard = model / 'model-00003-of-00003.safetensors'
    old_sha = hashlib.sha256(shard.read_bytes()).hexdigest()
    shard.write_bytes(shard_bytes(b'9' * 1000))
    os.utime(shard, ns=(os.stat(shard).st_atime_ns, os.stat(shard).st_mtime_ns + 10 ** 9))
    expected = {shard.name: {'sha256': old_sha}}
    judged = run(capsys, model, manifest, expected=expected)
    assert (judged['failed'], judged['hashed']) == (True, 4)
    assert judged['mismatched'] == [{'name': shard.name, 'reason': 'sha256 differs from expected'}]
    refused = run(capsys, model, manifest)  # a failed run recorded nothing: still not the manifest's content
    assert refused['failed'] is True and refused['mismatched'][0]['reason'].startswith(
        'changed since the manifest: sha256 differs')
    accepted = run(capsys, model, manifest, updated=True)
    assert (accepted['ready'], accepted['changed']) == (True, True)
    again = run(capsys, model, manifest)
    assert (again['ready'], again['hashed'], again['changed']) == (True, 3, False)
    assert accepted['digest'] != first['digest']


def test_content_changed_under_the_same_size_and_mtime_is_found_by_verify_always(model, manifest, capsys):
    run(capsys, model, manifest)
    shard = model / 'model-00001-of-00003.safetensors'
    before = os.stat(shard)
    shard.write_bytes(shard_bytes(b'X' * 3000))
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert run(capsys, model, manifest)['ready'] is True  # verify=once trusts size and mtime
    found = run(capsys, model, manifest, verify='always')
    assert found['failed'] is True and found['hashed'] == 6
    assert found['mismatched'] == [{'name': shard.name, 'reason': 'changed since the manifest: sha256 differs'}]
    later = run(capsys, model, manifest)
    assert (later['failed'], later['hashed'], later['mismatched']) == (True, 4, found['mismatched'])


def test_a_shard_cut_short_or_not_a_shard_fails_on_every_run_without_a_hash(model, manifest, capsys):
    run(capsys, model, manifest)
    cut = model / 'model-00002-of-00003.safetensors'
    cut.write_bytes(SHARDS[cut.name][:-500])  # an interrupted copy: new size and mtime, a new version to verify=once
    (model / 'model-00003-of-00003.safetensors').write_bytes(b'not a safetensors file\n')
    result = run(capsys, model, manifest, verify='size')
    assert result['failed'] is True and result['hashed'] == 3  # the small files only
    whole = len(SHARDS[cut.name])
    assert result['mismatched'] == [
        {'name': cut.name, 'reason': 'truncated: %d of the %d bytes its header describes' % (whole - 500, whole)},
        {'name': 'model-00003-of-00003.safetensors',
         'reason': 'not a safetensors file (its first 8 bytes do not give a header length)'}]


def test_a_safetensors_size_comes_from_its_header():
    data = shard_bytes(b'abc')
    assert logic.safetensors_size(data[:-3]) == len(data)
    for head in (b'', b'\x08\x00\x00\x00\x00\x00\x00\x00not json', data[:8] + b'{"w": {"dtype": "U8"}}     '):
        with pytest.raises(ValueError, match='not a safetensors file'):
            logic.safetensors_size(head)


def test_check_mode_hashes_but_writes_nothing(model, manifest, capsys):
    result = run(capsys, model, manifest, check_mode=True, prewarm='on')
    assert (result['ready'], result['changed'], result['hashed']) == (True, True, 6)
    assert result['prewarm']['state'] == 'skipped' and result['prewarm']['reason'] == 'check mode'
    assert not manifest.parent.exists()


def test_verify_size_hashes_no_shard_but_every_small_file(model, manifest, capsys):
    result = run(capsys, model, manifest, verify='size')
    small = [name for name in os.listdir(model) if not name.endswith('.safetensors') and not name.startswith('.')]
    assert (result['ready'], result['hashed'], result['hashed_bytes']) == (
        True, len(small), sum(os.path.getsize(model / name) for name in small))
    recorded = json.loads(manifest.read_text())['files']
    assert 'sha256' in recorded['config.json'] and 'sha256' not in recorded['model-00001-of-00003.safetensors']


def test_prewarm_auto_skips_a_model_larger_than_the_memory(model, manifest, capsys, monkeypatch):
    monkeypatch.setattr(sglang_model, 'read_meminfo', lambda: meminfo(4))
    result = run(capsys, model, manifest, prewarm='auto')
    assert result['ready'] is True
    assert result['prewarm'] == {'state': 'skipped', 'bytes': 0, 'seconds': 0.0, 'reason': (
        "the model (%s) is larger than 80%% of this host's memory (3.3 kB of 4.1 kB): not pre-warmed, the restart "
        "reads the shards from disk" % human_bytes(result['total_bytes']))}


def test_prewarm_on_reads_every_file(model, manifest, capsys, monkeypatch):
    monkeypatch.setattr(sglang_model, 'read_meminfo', lambda: meminfo(1 << 20))
    result = run(capsys, model, manifest, prewarm=True)  # YAML's `prewarm: on` arrives as a boolean
    assert result['prewarm']['state'] == 'done'
    assert result['prewarm']['bytes'] == result['total_bytes'] > 6000
    assert result['msg'].endswith('; pre-warmed in %.1f s' % result['prewarm']['seconds'])


@pytest.mark.parametrize('make, reason', [
    (lambda path: None, 'the model directory does not exist'),
    (lambda path: path.write_text(''), 'not a directory'),
    (lambda path: make_model(path, shards={}) and (path / logic.INDEX).unlink(),
     'no *.safetensors shards (and no model.safetensors.index.json)'),
])
def test_no_model_is_not_ready(tmp_path, manifest, capsys, make, reason):
    path = tmp_path / 'model'
    make(path)
    result = run(capsys, path, manifest)
    assert result['failed'] is True
    assert result['msg'] == '%s: not ready to serve: %s' % (path, reason)


def test_bad_arguments_fail(model, manifest, capsys):
    assert 'expected' in run(capsys, model, manifest, expected={'config.json': 25})['msg']
    assert 'prewarm_ram_fraction' in run(capsys, model, manifest, prewarm_ram_fraction=1.5)['msg']


def test_git_blob_sha1_is_gits_own(tmp_path):
    """The id the hub lists for a file outside LFS is git's blob id: the same as git hash-object's."""
    path = tmp_path / "modeling_kimi.py"
    path.write_bytes(b"print('trust remote code')\n" * 3)
    assert logic.git_blob_sha1(str(path)) == subprocess.run(["git", "hash-object", str(path)], check=True,
                                                            capture_output=True, text=True).stdout.strip()


def test_a_file_the_hub_names_by_its_git_blob_id_must_be_that_file():
    """Issue 50: config.json changed at the same size is refused against the hub's git blob id, even when the operator
    says the model was updated (the hub, not the manifest, says what the file is)."""
    expected = normalize_expected({'config.json': {'size': 10, 'git_sha1': 'AA' * 20}})
    assert expected['config.json'] == {'size': 10, 'sha256': None, 'git_sha1': 'aa' * 20}
    right = judge(FILES, INDEX_TEXT, {}, expected, {name: SHA_A for name in FILES}, git_hashes={'config.json': 'aa' * 20})
    assert right['ready'] is True
    for updated in (False, True):
        wrong = judge(FILES, INDEX_TEXT, {}, expected, {name: SHA_A for name in FILES}, updated=updated,
                      git_hashes={'config.json': 'bb' * 20})
        assert wrong['ready'] is False and wrong['mismatched'] == [
            {'name': 'config.json', 'reason': "content differs from the hub's (git blob %s, expected %s)"
                                              % ('bb' * 20, 'aa' * 20)}]


def test_the_module_holds_config_json_to_the_hubs_git_blob_id(model, manifest, capsys):
    """The module hashes a file the hub names by its git blob id (git's own id of the file, here from git itself),
    and a config.json changed at the same size is not ready, updated or not."""
    blob = subprocess.run(["git", "hash-object", str(model / 'config.json')], check=True, capture_output=True,
                          text=True).stdout.strip()
    assert run(capsys, model, manifest, expected={'config.json': {'git_sha1': blob}})['ready'] is True
    (model / 'config.json').write_text('{"model_type": "kimi_k3"}')  # same size, other content
    changed = run(capsys, model, manifest, expected={'config.json': {'git_sha1': blob}}, updated=True)
    assert changed['ready'] is False and changed['mismatched'][0]['name'] == 'config.json'
    assert "content differs from the hub's (git blob" in changed['mismatched'][0]['reason']
