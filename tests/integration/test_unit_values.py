"""What systemd itself reads from the forms our filters write: hostile but legal values go into a unit and an
EnvironmentFile the way the roles' templates put them there, and the process systemd starts gets exactly them
(argv and environment), as `systemctl show` reports exactly the description, working directory and paths. The
values no escaping can carry are refused before any change (tests/integration/test_bad_input.py)."""
import json
import shlex

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import systemd_unit_values as values

pytestmark = pytest.mark.integration

UNIT = "k26-unit-values"
OUT_DIR = "/srv/k26 rw 100%/$HOME"  # space, %, $: quoted in ReadWritePaths would be refused; here it is argv
LISTED = "/srv/k26-rw-100%x"
WORKDIR = "/srv/k26 work 100% $HOME"
DESCRIPTION = 'SGLang for kimi "k2.6" 100% %n $HOME ${HOME} \\ ; `id` #'
DUMP = ("import json, os, sys; json.dump({'argv': sys.argv[1:], 'env': dict(os.environ)}, "
        "open(os.path.join(sys.argv[1], 'dump.json'), 'w'))")
WORDS = ["a b", '"double"', "'single'", "back\\slash", "$HOME", "${HOME}", "%n", "%%", ";", "", "--x=1 2",
         "tab-free é ü", "#not-a-comment", "-", "--config", "/etc/sglang/100%.yaml"]
ENVIRONMENT = {"V_QUOTES": 'a "b" \'c\'', "V_BACKSLASH": "\\", "V_END_BACKSLASH": "x\\", "V_DOLLAR": "$HOME ${HOME}",
               "V_BACKTICK": "`id`", "V_HASH": "# not a comment", "V_EQUALS": "x=y", "V_SPACES": "  lead trail  ",
               "V_PERCENT": "%n 100%", "V_EMPTY": "", "V_UNICODE": "é ü"}


@pytest.fixture(scope="module")
def started(container):
    container.exec("mkdir -p %s %s %s" % tuple(shlex.quote(path) for path in (OUT_DIR, LISTED, WORKDIR)))
    env_file = "/etc/k26-unit-values/100%.env"
    container.put(env_file, "".join("%s=%s\n" % (name, values.environment_value(value))
                                    for name, value in ENVIRONMENT.items()))
    argv = ["/usr/bin/python3", "-c", DUMP, OUT_DIR] + WORDS
    unit = "\n".join([
        "[Unit]",
        "Description=" + values.specifiers_escaped(DESCRIPTION),
        "[Service]",
        "Type=oneshot",
        "WorkingDirectory=" + values.specifiers_escaped(WORKDIR),
        "EnvironmentFile=" + values.specifiers_escaped(env_file),
        "ExecStart=" + values.command_line(argv),
        "ProtectSystem=strict",
        "ReadWritePaths=" + " ".join(values.specifiers_escaped(path) for path in ["/srv", LISTED]),
        ""])
    container.put("/etc/systemd/system/%s.service" % UNIT, unit)
    container.exec("systemctl daemon-reload")
    started = container.systemctl("start", UNIT, check=False)
    assert started.returncode == 0, started.stderr + container.exec("journalctl -u %s -o cat" % UNIT).stdout[-3000:]
    yield json.loads(container.exec("cat %s" % shlex.quote(OUT_DIR + "/dump.json")).stdout)
    container.exec("rm -f /etc/systemd/system/%s.service && systemctl daemon-reload" % UNIT)


def show(container, prop):
    return container.systemctl("show", "--value", "-p", prop, UNIT).stdout.rstrip("\n")


def test_the_command_line_reaches_the_process_word_for_word(started):
    assert started["argv"] == [OUT_DIR] + WORDS


def test_environment_file_values_reach_the_process_exactly(started):
    assert {name: started["env"].get(name) for name in ENVIRONMENT} == ENVIRONMENT


def test_specifier_directives_read_back_exactly(container, started):
    assert show(container, "Description") == DESCRIPTION
    assert show(container, "WorkingDirectory") == WORKDIR
    assert show(container, "ReadWritePaths") == "/srv " + LISTED


def test_a_trailing_backslash_joins_the_next_line_so_it_is_refused(container):
    """Why a value that ends a line may not end with a backslash: systemd reads the next line as part of it."""
    name = "k26-trailing-backslash"
    served = "kimi-k2.6\\"
    container.put("/etc/systemd/system/%s.service" % name, "\n".join([
        "[Unit]", "Description=SGLang server for " + values.specifiers_escaped(served),
        "Documentation=https://docs.sglang.ai/", "[Service]", "ExecStart=/bin/true", ""]))
    container.exec("systemctl daemon-reload")
    try:
        description = container.systemctl("show", "--value", "-p", "Description", name).stdout
        assert "Documentation=" in description
    finally:
        container.exec("rm -f /etc/systemd/system/%s.service && systemctl daemon-reload" % name)
    assert values.problems([["sglang_service_served_model_name", "text", served]]) == [
        'sglang_service_served_model_name ends with "\\" (%r): systemd would read the next line of the unit as '
        'part of it, so it is refused' % served]
