"""The k26_files_in_place filter: which shipped files a deploy need not copy again."""
import pytest

from ansible_collections.k26.deploy.plugins.filter.k26_files import files_in_place
from ansible_collections.k26.deploy.plugins.plugin_utils.k26_bad_input import BadInputError


def found(path, uid=0, gid=0, mode="0644", checksum="abc"):
    return {"path": path, "uid": uid, "gid": gid, "mode": mode, "checksum": checksum}


def test_only_roots_files_with_the_mode_are_in_place():
    files = [found("/opt/a.py"), found("/opt/user.py", uid=999), found("/opt/group.py", gid=999),
             found("/opt/private.py", mode="0600"), found("/opt/b.py", checksum="def")]
    assert files_in_place(files) == [["/opt/a.py", "abc"], ["/opt/b.py", "def"]]
    assert files_in_place(files, mode="0600") == [["/opt/private.py", "abc"]]


def test_a_file_without_a_checksum_is_never_in_place():
    assert files_in_place([found("/opt/a.py", checksum="")]) == []


@pytest.mark.parametrize("bad", [None, "files", [["/opt/a.py"]]])
def test_anything_but_finds_files_is_bad_input(bad):
    with pytest.raises(BadInputError):
        files_in_place(bad)
