"""The service account and directories: an account or directory others depend on is refused, with the reason."""
import pytest

from ansible_collections.k26.deploy.plugins.module_utils.sglang_host_inputs import account_in_place, problems

HOME = "/var/lib/sglang"
PASSWD = {
    "root": ["x", "0", "0", "root", "/root", "/bin/bash"],
    "daemon": ["x", "1", "1", "daemon", "/usr/sbin", "/usr/sbin/nologin"],
    "sglang": ["x", "999", "998", "", HOME, "/usr/sbin/nologin"],
    "ubuntu": ["x", "1000", "1000", "Ubuntu", "/home/ubuntu", "/bin/bash"],
    "alice": ["x", "1001", "100", "", "/home/alice", "/bin/bash"],
}
GROUPS = {"root": ["x", "0", ""], "sglang": ["x", "998", ""], "users": ["x", "100", ""], "video": ["x", "44", "bob"],
          "ubuntu": ["x", "1000", ""]}
DIRS = (("sglang_service_home", HOME), ("sglang_service_cache_dir", "/var/cache/sglang"))


ROOT_ONLY = "/var/lib/k26deploy"  # the sglang_service role's __sglang_service_rollback_root | dirname


def check(user="sglang", group="sglang", directories=DIRS, existing_ok=False):
    return problems(user, group, HOME, directories, PASSWD, GROUPS, ROOT_ONLY, existing_ok)


def test_a_new_account_or_the_one_the_role_created_is_fine():
    assert check() == []
    assert check(user="new", group="new") == []


@pytest.mark.parametrize("user, seen", [("ubuntu", "uid 1000, shell /bin/bash"), ("daemon", "home /usr/sbin")])
def test_an_account_the_role_did_not_create_is_refused_unless_meant(user, seen):
    found = check(user=user, group="new")
    assert len(found) == 1 and found[0].startswith("sglang_service_user %s is an existing account" % user)
    assert seen in found[0] and "sglang_service_existing_account_ok" in found[0]
    assert check(user=user, group="new", existing_ok=True) == []


def test_root_is_refused_even_when_meant():
    assert "root's account" in check(user="root", existing_ok=True)[0]
    assert "root's group" in check(group="root", existing_ok=True)[0]


@pytest.mark.parametrize("group, others", [("users", "alice"), ("video", "bob")])
def test_a_group_with_other_members_is_refused_unless_meant(group, others):
    found = check(group=group)
    assert len(found) == 1 and "has other members (%s)" % others in found[0]
    assert check(group=group, existing_ok=True) == []


@pytest.mark.parametrize("path", ["/etc", "/var/lib", "/var/lib/", "/", "/usr/local", "/var/lib/k26deploy",
                                  "/var/lib/k26deploy/rollback/x"])
def test_system_directories_and_roots_store_are_refused(path):
    found = check(directories=[["sglang_service_cache_dir", path]], existing_ok=True)
    assert len(found) == 1 and found[0].startswith("sglang_service_cache_dir is ")


def test_every_problem_at_once():
    assert len(check(user="ubuntu", group="users", directories=[["a", "/etc"], ["b", "/var"]])) == 4


def test_missing_writable_paths_are_named():
    found = problems("sglang", "sglang", HOME, DIRS, PASSWD, GROUPS, ROOT_ONLY, missing=["/srv/typo"])
    assert found == ["sglang_service_read_write_paths names /srv/typo, which does not exist on the host: systemd "
                     "would refuse to start the unit (226/NAMESPACE). Create it first, or remove it from the list"]


@pytest.mark.parametrize("entry", [
    ["x", "33", "33", "www-data", "/var/www", "/usr/sbin/nologin"],  # Debian's web server account
    ["x", "34", "34", "", "/var/www", "/usr/sbin/nologin"],  # a static system account (base-passwd: below 100)
], ids=["named system account", "static system account"])
def test_a_system_account_with_the_services_home_is_not_the_roles_own(entry):
    passwd = dict(PASSWD, **{"www-data": entry})
    found = problems("www-data", "new", "/var/www", [], passwd, GROUPS, ROOT_ONLY)
    assert len(found) == 1 and found[0].startswith("sglang_service_user www-data is an existing account"), found


NOLOGIN = "/usr/sbin/nologin"


def test_the_account_the_role_made_is_in_place_and_anything_else_is_not():
    groups = dict(GROUPS, video=["x", "44", "bob,sglang"])
    assert account_in_place("sglang", "sglang", HOME, NOLOGIN, ["video"], PASSWD, groups)
    assert not account_in_place("sglang", "sglang", HOME, NOLOGIN, ["video"], PASSWD, GROUPS)  # not in video yet
    assert not account_in_place("sglang", "sglang", HOME, NOLOGIN, ["render"], PASSWD, groups)  # no such group
    assert not account_in_place("new", "sglang", HOME, NOLOGIN, [], PASSWD, groups)
    assert not account_in_place("sglang", "new", HOME, NOLOGIN, [], PASSWD, groups)
    assert not account_in_place("sglang", "users", HOME, NOLOGIN, [], PASSWD, groups)  # another primary group
    assert not account_in_place("sglang", "sglang", "/srv/sglang", NOLOGIN, [], PASSWD, groups)
    assert not account_in_place("sglang", "sglang", HOME, "/bin/false", [], PASSWD, groups)
