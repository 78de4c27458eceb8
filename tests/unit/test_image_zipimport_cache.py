"""The test image's compile cache for zip imports (tests/image/k26_zipimport_cache.py), run by a real interpreter:
it compiles a module once, serves the same source from the cache with the file name of the zip it came from this
time, falls back to compiling when the cache is damaged, and only root writes it."""

import marshal
import subprocess
import sys
import zipfile
from pathlib import Path

HOOK_DIR = Path(__file__).resolve().parents[1] / "image"
SOURCE = "VALUE = 1\n\n\ndef where():\n    return where.__code__.co_filename\n"

IMPORT = """
import os, sys
if {uid} is not None:
    os.geteuid = lambda: {uid}
sys.path.insert(0, {hook!r})
import k26_zipimport_cache
k26_zipimport_cache.CACHE_DIR = {cache!r}
sys.path.insert(0, {archive!r})
import cached_module
print(cached_module.VALUE, cached_module.where())
"""


def archive(path, source=SOURCE):
    with zipfile.ZipFile(path, "w") as out:
        out.writestr("cached_module.py", source)
    return str(path)


def import_from(path, cache, uid=None):
    """(VALUE, the file name its function was compiled from) of cached_module imported from the zip `path`."""
    script = IMPORT.format(uid=uid, hook=str(HOOK_DIR), cache=str(cache), archive=path)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), out[1]


def test_the_first_import_compiles_and_keeps_it_and_the_next_one_uses_it_under_its_own_name(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    first = archive(tmp_path / "first.zip")
    assert import_from(first, cache) == (1, first + "/cached_module.py")
    [kept] = list(cache.iterdir())
    # what the cache holds is what the next import of the same source runs (shown by changing it)
    kept.write_bytes(marshal.dumps(compile(SOURCE.replace("VALUE = 1", "VALUE = 2"), "elsewhere", "exec")))
    second = archive(tmp_path / "second.zip")
    assert import_from(second, cache) == (2, second + "/cached_module.py")


def test_other_source_is_compiled_on_its_own(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    import_from(archive(tmp_path / "a.zip"), cache)
    changed = archive(tmp_path / "b.zip", SOURCE.replace("VALUE = 1", "VALUE = 3"))
    assert import_from(changed, cache)[0] == 3
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_cache_entry_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    path = archive(tmp_path / "a.zip")
    import_from(path, cache)
    [kept] = list(cache.iterdir())
    kept.write_bytes(b"not marshal data")
    assert import_from(path, cache) == (1, path + "/cached_module.py")


def test_only_root_writes_the_cache(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    assert import_from(archive(tmp_path / "a.zip"), cache, uid=1000)[0] == 1
    assert list(cache.iterdir()) == []
