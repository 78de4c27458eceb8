"""host_info: the host's accounts, groups and usable processors, in the shape the role's filters read."""
import grp
import os
import pwd
import subprocess

from ansible_collections.k26.deploy.plugins.module_utils.sglang_host_inputs import account_in_place
from ansible_collections.k26.deploy.plugins.modules import host_info as module

from module_runner import run_module


def getent(database):
    """What ansible.builtin.getent would make of `getent DATABASE`: name -> the other fields."""
    lines = subprocess.run(["getent", database], capture_output=True, text=True, check=True).stdout.splitlines()
    return {line.split(":")[0]: line.split(":")[1:] for line in lines}


def test_the_accounts_and_groups_are_getents_and_the_processors_nprocs(capsys):
    code, result = run_module(module, {}, capsys)
    assert code == 0 and result["changed"] is False
    assert result["accounts"] == {"passwd": getent("passwd"), "group": getent("group")}
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout
    assert result["processors"] == int(nproc)


def test_the_filters_read_its_accounts(capsys):
    me = pwd.getpwuid(os.getuid())
    primary = grp.getgrgid(me.pw_gid).gr_name
    code, result = run_module(module, {}, capsys)
    passwd, groups = result["accounts"]["passwd"], result["accounts"]["group"]
    assert account_in_place(me.pw_name, primary, me.pw_dir, me.pw_shell, [], passwd, groups)
    assert not account_in_place(me.pw_name, primary, me.pw_dir, "/bin/other-shell", [], passwd, groups)
