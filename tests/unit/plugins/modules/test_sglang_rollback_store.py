"""The rollback store's trust rule: root restores only from files that root alone can write, below directories that
root alone can write."""
import hashlib
import json

import pytest

from ansible_collections.k26.deploy.plugins.module_utils.k26_paths import text_digest
from ansible_collections.k26.deploy.plugins.module_utils.sglang_rollback_store import (
    compare, path_and_parents, unsafe_live_file, untrusted, writable_overlaps)
from ansible_collections.k26.deploy.plugins.modules import sglang_rollback_store as module

from module_runner import run_module


def stat(path, uid=0, mode="0700", islnk=False, exists=True):
    return {"item": path, "stat": {"exists": exists, "path": path, "uid": uid, "mode": mode, "islnk": islnk}}


GOOD = [stat("/", mode="0755"), stat("/var", mode="0755"), stat("/var/lib", mode="0755"),
        stat("/var/lib/k26deploy"), stat("/var/lib/k26deploy/rollback"), stat("/var/lib/k26deploy/rollback/sglang"),
        stat("/var/lib/k26deploy/rollback/sglang/unit", mode="0644")]


def test_path_and_parents():
    assert path_and_parents("/var/lib/k26deploy/rollback/sglang") == [
        "/", "/var", "/var/lib", "/var/lib/k26deploy", "/var/lib/k26deploy/rollback", "/var/lib/k26deploy/rollback/sglang"]
    assert path_and_parents("/a//b/../c/") == ["/", "/a", "/a/c"]
    with pytest.raises(ValueError):
        path_and_parents("var/lib")


def test_a_store_root_alone_controls_is_trusted():
    assert untrusted(GOOD) is None
    assert untrusted(GOOD[:-1] + [{"item": "/var/lib/k26deploy/rollback/sglang/env", "stat": {"exists": False}}]) is None


@pytest.mark.parametrize("index, change, reason", [
    (5, {"uid": 999}, "/var/lib/k26deploy/rollback/sglang is owned by uid 999, not root"),
    (2, {"uid": 1000}, "/var/lib is owned by uid 1000, not root"),
    (3, {"mode": "0770"}, "/var/lib/k26deploy is writable by its group (mode 0770)"),
    (4, {"mode": "1777"}, "/var/lib/k26deploy/rollback is writable by everyone (mode 1777)"),
    (6, {"islnk": True}, "/var/lib/k26deploy/rollback/sglang/unit is a symbolic link"),
    (6, {"uid": 999, "mode": "0644"}, "/var/lib/k26deploy/rollback/sglang/unit is owned by uid 999, not root"),
], ids=["store owned by the service", "a parent owned by a user", "group-writable parent", "world-writable parent",
        "a saved file that is a link", "a saved file the service planted"])
def test_anything_else_is_refused_with_the_path(index, change, reason):
    stats = [dict(entry, stat=dict(entry["stat"])) for entry in GOOD]
    stats[index]["stat"].update(change)
    assert untrusted(stats) == reason


def looked(live, saved, required=True):
    """A file as sglang_rollback_store looks at it ('' or None for an absent file)."""
    return {"required": required, "live_exists": bool(live), "saved_exists": bool(saved),
            "live_sha256": live or "", "saved_sha256": saved or ""}


def test_rolling_back_needs_every_required_saved_file_in_a_trusted_store():
    files = [looked("a", "a"), looked("b", "b"), looked(None, None, required=False)]
    assert compare(files, "") == (True, False)
    assert compare(files, "/var/lib/k26deploy is owned by uid 999, not root") == (False, False)
    assert compare([looked("a", None), looked("b", "b")], "") == (False, True)
    assert compare([looked("a", "a"), looked("c", None, required=False)], "") == (True, True)


@pytest.mark.parametrize("live, saved", [("a", "b"), ("a", None), (None, "a")])
def test_any_difference_in_content_or_presence_differs(live, saved):
    assert compare([looked("x", "x"), looked(live, saved, required=False)], "")[1] is True


# ---- the live files root saves and restores: regular files of root's, in directories root alone can write

LIVE_DIRS = [stat("/", mode="0755"), stat("/etc", mode="0755"), stat("/etc/sglang", mode="0750"),
             stat("/etc/sglang/tls", mode="0750")]


def regular(path, isreg=None, **change):
    entry = stat(path, mode="0640", **change)
    entry["stat"]["isreg"] = not change.get("islnk", False) if isreg is None else isreg
    return entry


def test_a_live_file_root_alone_controls_may_be_saved_and_restored():
    assert unsafe_live_file(LIVE_DIRS, regular("/etc/sglang/tls/server.crt")) is None
    assert unsafe_live_file(LIVE_DIRS, {"item": "/etc/sglang/tls/ca.crt", "stat": {"exists": False}}) is None


@pytest.mark.parametrize("dirs, live, reason", [
    # the attack: the service account owns the configuration directory and links a managed file to /etc/shadow
    (LIVE_DIRS[:2] + [stat("/etc/sglang", uid=999, mode="0750")] + LIVE_DIRS[3:],
     regular("/etc/sglang/tls/server.crt", islnk=True), "/etc/sglang is owned by uid 999, not root"),
    (LIVE_DIRS, regular("/etc/sglang/tls/server.crt", islnk=True), "/etc/sglang/tls/server.crt is a symbolic link"),
    (LIVE_DIRS, regular("/etc/sglang/tls/server.crt", uid=999), "/etc/sglang/tls/server.crt is owned by uid 999, not root"),
    (LIVE_DIRS, regular("/etc/sglang/tls/server.crt", isreg=False), "/etc/sglang/tls/server.crt is not a regular file"),
    (LIVE_DIRS[:3] + [stat("/etc/sglang/tls", mode="0770")], regular("/etc/sglang/tls/server.crt"),
     "/etc/sglang/tls is writable by its group (mode 0770)"),
], ids=["directory of the service's", "a link", "a file of the service's", "a fifo or directory", "group-writable"])
def test_a_live_file_anyone_else_controls_is_refused_with_the_path(dirs, live, reason):
    assert unsafe_live_file(dirs, live) == reason


WRITABLE = {"sglang_service_home": "/var/lib/sglang", "sglang_service_cache_dir": "/var/cache/sglang",
            "sglang_service_hf_home": "/var/cache/sglang/huggingface", "sglang_service_read_write_paths": ["/srv/out"]}


@pytest.mark.parametrize("path, expected", [
    ("/etc/sglang", []),
    ("/etc/sglang-cache", []),  # a name that starts like a writable one is not inside it
    ("/var/lib/sglang", ["sglang_service_config_dir /var/lib/sglang is sglang_service_home /var/lib/sglang, which the "
                         "service account can write"]),
    ("/var/lib/sglang/etc", ["sglang_service_config_dir /var/lib/sglang/etc lies inside sglang_service_home "
                             "/var/lib/sglang, which the service account can write"]),
    ("/var/cache", ["sglang_service_config_dir /var/cache contains sglang_service_cache_dir /var/cache/sglang, which "
                    "the service account can write",
                    "sglang_service_config_dir /var/cache contains sglang_service_hf_home "
                    "/var/cache/sglang/huggingface, which the service account can write"]),
    ("/srv/out/conf", ["sglang_service_config_dir /srv/out/conf lies inside sglang_service_read_write_paths "
                       "/srv/out, which the service account can write"]),
])
def test_a_root_directory_may_not_overlap_one_the_service_account_writes(path, expected):
    assert writable_overlaps("sglang_service_config_dir", path, WRITABLE) == expected


def test_the_module_looks_at_a_live_link_itself_not_at_its_target(tmp_path):
    """Issue 50: where the directories above a live file are root's alone, what the module's own look at the file
    says decides. A link the service put there in place of the file (here to a root-owned regular file, which a
    look that follows links would pass) is refused; the file itself is not."""
    class Module:  # the one AnsibleModule method look() calls, on an error
        @staticmethod
        def fail_json(**result):
            raise AssertionError(result)

    target = tmp_path / "server.crt"
    target.write_text("certificate")
    target.chmod(0o640)
    link = tmp_path / "planted.crt"
    link.symlink_to(target)
    as_root = {"uid": 0}  # what a root-owned file under /etc/sglang/tls looks like, wherever the test runs
    looked_at_link, looked_at_file = (module.look(Module, str(path))[0] for path in (link, target))
    for entry in (looked_at_link, looked_at_file):
        entry["stat"].update(as_root)
    assert unsafe_live_file(LIVE_DIRS, looked_at_link) == "%s is a symbolic link" % link
    assert unsafe_live_file(LIVE_DIRS, looked_at_file) is None


def test_the_live_files_content_is_returned_only_as_a_digest_under_the_runs_key(tmp_path, capsys):
    """A config file holds API keys: the result (kept in the run's artifacts) has no plain hash of it to test guesses
    of a key against, only its HMAC under a key of this run, which the role compares with what it would write."""
    live = tmp_path / "sglang.yaml"
    live.write_text("api-key: secret\n")
    files = [{"live": str(live), "saved": str(tmp_path / "store" / "config.yaml")},
             {"live": str(tmp_path / "absent.env"), "saved": str(tmp_path / "store" / "env"), "required": False}]
    code, result = run_module(module, {"store": str(tmp_path / "store"), "files": files, "digest_key": "run-key"}, capsys)
    assert code == 0, result
    looked, absent = (result["live_files"][entry["live"]] for entry in files)
    assert looked["digest"] == text_digest("api-key: secret\n", "run-key") != text_digest("api-key: secret\n", "other")
    assert looked["isreg"] and looked["mode"] == "%04o" % (live.stat().st_mode & 0o7777)
    assert absent == {"exists": False, "path": files[1]["live"], "digest": ""}
    assert hashlib.sha256(live.read_bytes()).hexdigest() not in json.dumps(result)
    assert "run-key" not in json.dumps(result)


def test_the_live_files_are_compared_with_the_saved_by_content(tmp_path, capsys):
    """Each live file is read once for both its SHA-256 (live against saved) and its digest under the run's key."""
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "sglang.yaml").write_text("tp-size: 8\n")
    (store / "config.yaml").write_text("tp-size: 8\n")
    files = [{"live": str(tmp_path / "sglang.yaml"), "saved": str(store / "config.yaml")}]
    args = {"store": str(store), "files": files, "digest_key": "run-key"}
    code, result = run_module(module, args, capsys)
    assert code == 0 and result["differs"] is False, result
    assert result["live_files"][files[0]["live"]]["digest"] == text_digest("tp-size: 8\n", "run-key")
    (tmp_path / "sglang.yaml").write_text("tp-size: 4\n")
    code, result = run_module(module, args, capsys)
    assert code == 0 and result["differs"] is True, result
    assert result["live_files"][files[0]["live"]]["digest"] == text_digest("tp-size: 4\n", "run-key")
