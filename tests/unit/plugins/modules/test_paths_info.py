"""paths_info: several paths looked at in one run, never through a link."""
import grp
import os
import pwd

from ansible_collections.k26.deploy.plugins.module_utils.k26_paths import dir_in_place, file_in_place, text_digest
from ansible_collections.k26.deploy.plugins.modules import paths_info as module

from module_runner import run_module

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def test_each_path_is_looked_at_itself_not_through_a_link(tmp_path, capsys):
    (tmp_path / "dir").mkdir(mode=0o750)
    os.chmod(tmp_path / "dir", 0o750)
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    paths = [str(tmp_path / name) for name in ("dir", "file", "link", "missing")]
    code, result = run_module(module, {"paths": paths}, capsys)
    assert code == 0 and result["changed"] is False
    looked = result["paths"]
    assert looked[paths[0]] == {"exists": True, "path": paths[0], "isdir": True, "isreg": False, "islnk": False,
                                "uid": os.getuid(), "gid": os.getgid(), "owner": ME, "group": MY_GROUP, "mode": "0750"}
    assert looked[paths[1]]["isreg"] and not looked[paths[1]]["isdir"]
    assert looked[paths[2]]["islnk"] and not looked[paths[2]]["isdir"]
    assert looked[paths[3]] == {"exists": False, "path": paths[3]}
    assert dir_in_place(looked[paths[0]], ME, MY_GROUP, "0750")
    assert not dir_in_place(looked[paths[2]], ME, MY_GROUP, "0777")


def test_a_relative_path_or_one_through_a_file_fails_with_the_path(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, result = run_module(module, {"paths": ["etc/tool"]}, capsys)
    assert code == 1 and "must be absolute" in result["msg"]
    code, result = run_module(module, {"paths": [str(tmp_path / "file" / "below")]}, capsys)
    assert code == 1 and str(tmp_path / "file" / "below") in result["msg"]


def test_with_a_key_a_regular_files_content_is_returned_as_its_digest_only(tmp_path, capsys):
    secret = tmp_path / "guard.json"
    secret.write_text('{"api_key": "secret"}\n')
    secret.chmod(0o600)
    code, result = run_module(module, {"paths": [str(secret), str(tmp_path)], "digest_key": "run-key"}, capsys)
    looked = result["paths"][str(secret)]
    assert code == 0 and looked["digest"] == text_digest('{"api_key": "secret"}\n', "run-key")
    assert "digest" not in result["paths"][str(tmp_path)] and "run-key" not in str(result)
    assert file_in_place(looked, text_digest('{"api_key": "secret"}\n', "run-key"), ME, MY_GROUP, "0600")
    assert not file_in_place(looked, text_digest('{"api_key": "other"}\n', "run-key"), ME, MY_GROUP, "0600")
