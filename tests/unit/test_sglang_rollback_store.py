"""The rollback store's trust rule: root restores only from files that root alone can write, below directories that
root alone can write."""
import pytest

from ansible_collections.k26.deploy.plugins.module_utils.sglang_rollback_store import compare, path_and_parents, untrusted


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
