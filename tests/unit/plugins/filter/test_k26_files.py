"""The k26_files_in_place and k26_dir_in_place filters: which shipped files and directories a deploy need not
write again."""
import pytest

from ansible_collections.k26.deploy.plugins.filter.k26_files import dir_in_place, file_in_place, files_in_place
from ansible_collections.k26.deploy.plugins.module_utils.k26_paths import text_digest
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


DIRECTORY = {"exists": True, "isdir": True, "isreg": False, "islnk": False, "owner": "sglang", "group": "sglang",
             "mode": "0750"}


@pytest.mark.parametrize("change", [{"exists": False}, {"isdir": False, "islnk": True}, {"isdir": False, "isreg": True},
                                    {"owner": "root"}, {"group": "root"}, {"mode": "0755"}],
                         ids=["missing", "a link", "a file", "another owner", "another group", "another mode"])
def test_only_a_directory_with_the_owner_group_and_mode_is_in_place(change):
    assert dir_in_place(DIRECTORY, "sglang", "sglang", "0750")
    assert not dir_in_place(dict(DIRECTORY, **change), "sglang", "sglang", "0750")


def test_anything_but_a_looked_path_is_bad_input():
    with pytest.raises(BadInputError):
        dir_in_place(["/etc/tool"], "root", "root", "0755")


KEY = "run-key"
FILE = {"exists": True, "isdir": False, "isreg": True, "islnk": False, "owner": "root", "group": "sglang",
        "mode": "0640", "digest": text_digest("A=1\n", KEY)}


@pytest.mark.parametrize("change", [{"exists": False, "isreg": False, "digest": ""}, {"digest": text_digest("A=2\n", KEY)},
                                    {"digest": text_digest("A=1\n", "another run")}, {"isreg": False, "islnk": True},
                                    {"owner": "sglang"}, {"group": "root"}, {"mode": "0644"}],
                         ids=["missing", "other content", "another run's key", "a link", "another owner", "another group",
                              "another mode"])
def test_only_a_file_with_the_content_owner_group_and_mode_is_in_place(change):
    assert file_in_place(FILE, "A=1\n", KEY, "root", "sglang", "0640")
    assert not file_in_place(dict(FILE, **change), "A=1\n", KEY, "root", "sglang", "0640")
    assert not file_in_place(FILE, "A=1\n", "", "root", "sglang", "0640")


def test_anything_but_a_looked_file_is_bad_input():
    with pytest.raises(BadInputError):
        file_in_place("/etc/sglang/sglang.env", "A=1\n", KEY, "root", "sglang", "0640")
