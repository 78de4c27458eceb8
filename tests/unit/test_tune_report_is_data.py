"""Issue 50 item 9: a k26deploy tune report is data. Its text reaches Ansible untrusted (a ``{{`` in a row stays
text, in a playbook's template and in sglang_preflight's action plugin), and a report file that the user who runs
the command does not own, or that others may write, is refused before it is read."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase
from ansible.template import Templar, trust_as_template

from ansible_collections.k26.deploy.plugins.action import sglang_preflight as action
from k26deploy import cli, tune
from k26deploy.runner import BadInputError, PlaybookRun

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n      ansible_python_interpreter: '{}'\n"
# the playbook's task templates the whole report, as any use of the variable would
PLAYBOOK = """---
- name: Show what Ansible makes of the tune report
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the report as the play sees it
      ansible.builtin.copy:
        content: "{{ dict(k26_preflight_tune_report, own=own) | to_json }}"
        dest: "{{ seen_file }}"
        mode: "0600"
"""


def evil_report(marker, inventory):
    name = "{{ 7 * 7 }}"
    pwn = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % marker
    return {"time": "2026-12-05T01:00:00Z", "objective": "c1", "unit": "tok/s of one request alone",
            "winner": name, "hosts": ["localhost"], "inventory": inventory, "levels": [1],
            "rows": [{"name": name, "extra_vars": {"sglang_service_tp_size": 8, "note": pwn}, "ok": True,
                      "score": 73.7, "score_level": 1, "levels": [], "error": pwn}]}


def test_a_template_in_a_report_reaches_the_playbook_as_text_and_runs_nothing(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(sys.executable))
    (tmp_path / "show.yml").write_text(PLAYBOOK)
    tune_dir = tmp_path / "tune"
    tune_dir.mkdir()
    marker = tmp_path / "pwned"
    (tune_dir / "tune-x.json").write_text(json.dumps(evil_report(marker, cli.inventory_identity([str(inventory)]))))
    seen = tmp_path / "seen.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PATH=os.path.dirname(sys.executable) + ":" + os.environ["PATH"])
    proc = subprocess.run([sys.executable, "-m", "k26deploy.cli", "preflight", "-i", str(inventory), "--json", "-q",
                           "--project-dir", str(tmp_path), "--playbook", "show.yml", "--tune-dir", str(tune_dir),
                           "--artifacts-dir", str(tmp_path / "artifacts"), "-e", "seen_file=" + str(seen),
                           # the operator's own -e stays a template
                           "-e", '{"own": "{{ 6 * 7 }}"}'],
                          check=False, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(seen.read_text())
    assert report["winner"] == "{{ 7 * 7 }}" and report["rows"][0]["name"] == "{{ 7 * 7 }}"
    assert report["rows"][0]["extra_vars"]["note"].startswith("{{ lookup(")
    assert report["own"] == 42 and not marker.exists()


def test_the_operator_s_own_extra_variables_stay_templates_and_a_report_s_text_is_written_unsafe(tmp_path):
    report = tune.latest_report(_write(tmp_path, evil_report("/nowhere", "/srv/inv.yml")), "/srv/inv.yml")
    run = PlaybookRun("ok.yml", project_dir=ROOT / "tests" / "fixtures" / "playbooks",
                      extra_vars={"own": "{{ 6 * 7 }}", cli.TUNE_REPORT_VARIABLE: report})
    path = run._write_extra_vars(str(tmp_path))
    loaded = DataLoader().load_from_file(path, trusted_as_template=True)  # as ansible-playbook reads -e @file
    templar = Templar(loader=DataLoader(), variables=loaded)
    assert templar.template(trust_as_template("{{ own }}")) == 42
    shown = templar.template(trust_as_template("{{ %s }}" % cli.TUNE_REPORT_VARIABLE))
    assert shown["rows"][0]["name"] == "{{ 7 * 7 }}" and shown["winner"] == "{{ 7 * 7 }}"


class FakeTask(object):
    def __init__(self, args):
        self.args = args
        self.check_mode = False
        self.no_log = False
        self.async_val = 0
        self.action = 'sglang_preflight'


def run_action(monkeypatch, task_vars):
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = FakeTask({})
    plugin._templar = Templar(loader=DataLoader(), variables=task_vars)
    sent = []

    def execute_module(module_args=None, task_vars=None, **kwargs):
        sent.append(module_args)
        return {}

    monkeypatch.setattr(plugin, '_execute_module', execute_module, raising=False)
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    plugin.run(task_vars=task_vars)
    return sent[0]


def trusted(value):
    """Every text of VALUE trusted as a template, as Ansible tags what it reads from an extra-vars file."""
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return trust_as_template(value) if isinstance(value, str) else value


def test_the_action_plugin_hands_the_module_a_report_s_text_untemplated(monkeypatch, tmp_path):
    marker = tmp_path / "pwned"
    report = trusted(evil_report(marker, None))
    args = run_action(monkeypatch, {"inventory_hostname": "localhost", action.TUNE_REPORT_VARIABLE: report})
    assert args["tune_report"]["rows"][0]["name"] == "{{ 7 * 7 }}"
    assert args["tune_report"]["rows"][0]["extra_vars"]["note"].startswith("{{ lookup(")
    assert not marker.exists()
    # an inventory may still name the report with an expression (here to what a lookup read, text Ansible does not
    # trust): the expression is templated, the report it gives is data
    args = run_action(monkeypatch, {"inventory_hostname": "localhost", "measured": evil_report(marker, None),
                                    action.TUNE_REPORT_VARIABLE: trust_as_template("{{ measured }}")})
    assert args["tune_report"]["winner"] == "{{ 7 * 7 }}" and not marker.exists()
    args = run_action(monkeypatch, {"inventory_hostname": "gpu-9", action.TUNE_REPORT_VARIABLE: report})
    assert "tune_report" not in args


def _write(directory, report, name="tune-x.json"):
    path = directory / name
    path.write_text(json.dumps(report))
    path.chmod(0o644)
    return directory


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_report_owned_by_another_user_is_refused_naming_the_file(tmp_path, capsys):
    _write(tmp_path, evil_report("/nowhere", "/srv/inv.yml"))
    assert tune.latest_report(tmp_path, "/srv/inv.yml")["time"] == "2026-12-05T01:00:00Z"
    os.chown(tmp_path / "tune-x.json", 65534, 65534)
    with pytest.raises(BadInputError, match="tune-x.json.*is owned by uid 65534"):
        tune.latest_report(tmp_path, "/srv/inv.yml")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all: {}\n")
    assert cli.main(["preflight", "-i", str(inventory), "--tune-dir", str(tmp_path), "--json", "-q"]) == 2
    out = capsys.readouterr()
    assert str(tmp_path / "tune-x.json") in out.err and json.loads(out.out)["bad_input"] is True


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_report_that_others_may_write_is_refused_naming_the_file(tmp_path, mode):
    _write(tmp_path, evil_report("/nowhere", "/srv/inv.yml"))
    os.chmod(tmp_path / "tune-x.json", mode)
    with pytest.raises(BadInputError, match="tune-x.json.*writable by its group or others"):
        tune.latest_report(tmp_path, "/srv/inv.yml")


def test_tune_writes_its_report_that_no_one_else_may_write_whatever_the_umask(tmp_path):
    earlier = tmp_path / "tune-2026-12-05T010000Z.json"  # the same report written before, others allowed to write
    earlier.write_text("{}")
    earlier.chmod(0o666)
    previous = os.umask(0o000)
    try:
        files = tune.write_report(dict(evil_report("/nowhere", "/srv/inv.yml"), slo_ttft_ms=None, why="x"), tmp_path)
    finally:
        os.umask(previous)
    assert files["json"] == str(earlier) and os.stat(files["json"]).st_mode & 0o022 == 0
    assert tune.latest_report(tmp_path, "/srv/inv.yml")["winner"] == "{{ 7 * 7 }}"
