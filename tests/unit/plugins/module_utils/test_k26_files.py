"""The modules' own files and directories (plugins/module_utils/k26_files.py)."""
import os

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import k26_files

OTHER_UID = 65534  # nobody


def test_a_private_directory_is_created_for_its_owner_alone(tmp_path):
    path = str(tmp_path / "k26-benchmark")
    assert k26_files.private_directory(path) is None
    info = os.lstat(path)
    assert info.st_uid == os.geteuid() and oct(info.st_mode & 0o777) == "0o700"
    assert k26_files.private_directory(path) is None  # a second run finds it as it left it


def test_an_existing_directory_of_its_own_is_made_private(tmp_path):
    path = tmp_path / "k26-benchmark"
    path.mkdir()
    os.chmod(path, 0o777)
    assert k26_files.private_directory(str(path)) is None
    assert oct(os.lstat(path).st_mode & 0o777) == "0o700"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_another_user_made_first_is_refused(tmp_path):
    path = tmp_path / "k26-benchmark"
    path.mkdir()
    os.chmod(path, 0o777)
    os.chown(path, OTHER_UID, OTHER_UID)
    problem = k26_files.private_directory(str(path))
    assert problem and str(path) in problem and "uid %d" % OTHER_UID in problem
    assert os.lstat(path).st_uid == OTHER_UID and oct(os.lstat(path).st_mode & 0o777) == "0o777"


def test_a_link_or_a_file_in_its_place_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "k26-benchmark"
    link.symlink_to(target)
    problem = k26_files.private_directory(str(link))
    assert problem and str(link) in problem and "not a directory" in problem
    plain = tmp_path / "plain"
    plain.write_text("")
    assert "not a directory" in k26_files.private_directory(str(plain))
