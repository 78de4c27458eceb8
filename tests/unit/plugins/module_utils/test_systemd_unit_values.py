"""Which inventory values may go into a unit or an EnvironmentFile, and how they are written there. What systemd
reads back from the written forms is checked against systemd itself in tests/integration/test_unit_values.py."""
import pytest

from ansible_collections.k26.deploy.plugins.module_utils import systemd_unit_values as values

NEWLINE = "kimi\n[Service]\nExecStartPre=+/bin/sh -c id"


@pytest.mark.parametrize("kind, value", [
    ("text", NEWLINE), ("text", "tab\there"), ("text", "nul\x00"), ("text", "del\x7f"),
    ("account", "root\nExecStartPre=+/bin/sh"), ("account", "Sglang"), ("account", "1sglang"), ("account", "a b"),
    ("account", "x" * 32), ("account", ""),
    ("path", "relative/path"), ("path", "/var/lib/../etc"), ("path", "//var"),
    ("path", "/var/lib\n/etc"),
    ("listed_path", "/srv/with space"), ("listed_path", '/srv/"quoted"'), ("listed_path", "/srv/back\\slash"),
    ("unit_name", "../../tmp/x"), ("unit_name", "sglang@1"), ("unit_name", ".hidden"), ("unit_name", "a\nb"),
    ("unit_name", ""),
    ("command", []), ("command", ["python3", "-m", "sglang"]), ("command", ["/usr/bin/python3", "a\nb"]),
    ("words", ["--ok", "--bad\nExecStartPre=+/bin/sh"]),
    ("syscalls", ["@privileged", "@x y"]), ("syscalls", ["~@privileged"]),
    ("addresses", ["10.0.0.0/8", "10.0.0.0/8 any"]), ("addresses", ["not-an-address"]),
    # a trailing newline alone ($ in a pattern matches before one)
    ("account", "sglang\n"), ("unit_name", "sglang\n"), ("syscalls", ["@privileged\n"]),
    # a trailing backslash: systemd joins the next line of the unit to the value (Description= swallows
    # Documentation=)
    ("text", "kimi-k2.6\\"), ("text", "kimi\\\\"), ("path", "/srv/model\\"),
])
def test_values_no_escaping_can_carry_are_refused(kind, value):
    found = values.problems([["the_variable", kind, value]])
    assert len(found) == 1 and found[0].startswith("the_variable ")


@pytest.mark.parametrize("kind, value", [
    ("text", "Kimi K2.6 (100% \"quoted\" $HOME \\ ;)"), ("account", "sglang"), ("account", "_svc-1"),
    ("path", "/var/lib/sglang"), ("path", "/var/lib/"), ("path", "/srv/with space"), ("path", "/"), ("listed_path", "/srv/100%"),
    ("unit_name", "sglang-k2.6_a:b"), ("command", ["/usr/bin/python3", "a b", "$x", "%n", ";"]),
    ("words", []), ("words", ["--policy", "a b"]),
    ("syscalls", ["@privileged", "@resources", "ptrace"]),
    ("addresses", ["10.1.2.3", "10.0.0.0/8", "fd00::/8", "link-local", "multicast"]),
])
def test_values_systemd_can_carry_pass(kind, value):
    assert values.problems([["v", kind, value]]) == []


def test_every_problem_is_reported_at_once():
    found = values.problems([["a", "text", "x\ny"], ["b", "account", "Root"], ["c", "paths", ["/ok", "rel", "/s p"]]])
    assert [problem.split()[0] for problem in found] == ["a", "b", "c", "c"]


def test_environment_names_must_be_valid_and_code_loading_ones_allowed():
    environment = {"GOOD_1": "x", "BAD\nNAME": "x", "1X": "x", "LD_PRELOAD": "/tmp/x.so", "PYTHONPATH": "/tmp",
                   "PYTHONSAFE": "1", "VALUE": "a\nb", "TRAILING\n": "x"}
    found = values.environment_problems("env", environment, allowed=["PYTHONSAFE"])
    assert len(found) == 6
    assert any("'BAD\\nNAME'" in problem for problem in found)
    assert any("LD_PRELOAD" in problem and "allow-list" in problem for problem in found)
    assert any(problem.startswith("env[VALUE] holds a control character") for problem in found)
    assert values.environment_problems("env", {"LD_LIBRARY_PATH": "/x"}, allowed=["LD_LIBRARY_PATH"]) == []


def test_specifiers_are_doubled():
    assert values.specifiers_escaped("100% %n") == "100%% %%n"


@pytest.mark.parametrize("word, written", [
    ("/usr/bin/python3", "/usr/bin/python3"),
    ("--config", "--config"),
    ("/etc/sglang/a%b.yaml", "/etc/sglang/a%%b.yaml"),
    ("a b", '"a b"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("$HOME", '"$$HOME"'),
    (";", '";"'),
    ("", '""'),
])
def test_command_words(word, written):
    assert values.command_word(word) == written


def test_environment_values_are_double_quoted_and_escaped():
    assert values.environment_value('a "b" \\c $d `e`') == '"a \\"b\\" \\\\c \\$d \\`e\\`"'
    assert values.environment_value(8) == '"8"'


SHOWN = ("InvocationID=abc\nActiveState=active\nUnitFileState=enabled\nNeedDaemonReload=no\n\n"
         "InvocationID=\nActiveState=inactive\nUnitFileState=\nNeedDaemonReload=no\n")


def test_systemctl_show_of_several_units_is_read_one_mapping_each_in_order():
    service, guard = values.show_units(SHOWN)
    assert service == {"InvocationID": "abc", "ActiveState": "active", "UnitFileState": "enabled",
                       "NeedDaemonReload": "no"}
    assert guard["ActiveState"] == "inactive" and guard["UnitFileState"] == ""
    assert values.show_units("") == [] and values.show_units("ActiveState=a=b\n") == [{"ActiveState": "a=b"}]


@pytest.mark.parametrize("change", [{"ActiveState": "failed"}, {"ActiveState": "inactive"}, {"UnitFileState": "disabled"},
                                    {"UnitFileState": "masked"}, {"NeedDaemonReload": "yes"}])
def test_only_a_running_unit_enabled_as_wanted_and_loaded_as_written_is_settled(change):
    service = values.show_units(SHOWN)[0]
    assert values.settled(service, True) and values.settled(dict(service, ActiveState="activating"), True)
    assert not values.settled(dict(service, **change), True)
    assert values.settled(dict(service, UnitFileState="disabled"), False) and not values.settled(service, False)


def test_a_unit_runs_while_active_activating_or_reloading():
    assert [values.running({"ActiveState": state}) for state in ("active", "activating", "reloading")] == [True] * 3
    assert not any(values.running(shown) for shown in ({"ActiveState": "deactivating"}, {"ActiveState": "failed"},
                                                       {}, None))
