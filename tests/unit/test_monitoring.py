"""The sglang_monitoring role's files: alert rules that promtool accepts and whose unit tests (one per alert, firing
and quiet) pass, a Prometheus configuration with every replica and router of the inventory, and a dashboard and
rules that use only metric names the real SGLang 0.5.23 defines."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.k26.deploy.plugins.filter.sglang_router import serves_api
from ansible_collections.k26.deploy.plugins.module_utils import sglang_benchmark_report as report
from sglang_venv import SGLANG_SITE, requires_real_sglang

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "sglang_monitoring"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
PROMTOOL = shutil.which("promtool")
NO_PROMTOOL = "promtool not installed (scripts/setup.sh installs the distribution's prometheus package)"
requires_promtool = pytest.mark.skipif(not PROMTOOL, reason=NO_PROMTOOL)


def render(template, **variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["to_json"] = json.dumps
    env.filters["k26.deploy.sglang_serves_api"] = serves_api
    context = dict(DEFAULTS, ansible_managed="managed", __sglang_monitoring_baselines={}, groups={}, hostvars={})
    return env.get_template(template).render(dict(context, **variables))


def promtool(*args):
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, check=False)


@requires_promtool
def test_every_alert_fires_on_its_series_and_stays_quiet_on_the_others(tmp_path):
    (tmp_path / "sglang-alerts.yml").write_text(render("sglang-alerts.yml.j2"))
    shutil.copy(ROOT / "tests" / "fixtures" / "monitoring" / "alerts.test.yml", tmp_path)
    checked = promtool("check", "rules", tmp_path / "sglang-alerts.yml")
    assert checked.returncode == 0 and "SUCCESS: 17 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = promtool("test", "rules", tmp_path / "alerts.test.yml")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_has_a_unit_test_a_summary_and_a_runbook():
    rules = [rule for group in yaml.safe_load(render("sglang-alerts.yml.j2"))["groups"] for rule in group["rules"]]
    tests = yaml.safe_load((ROOT / "tests" / "fixtures" / "monitoring" / "alerts.test.yml").read_text())["tests"]
    tested = {case["alertname"] for test in tests for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert {rule["alert"] for rule in rules} == tested
    for rule in rules:
        assert rule["annotations"]["summary"] and "k26deploy" in rule["annotations"]["runbook"], rule


def test_the_thresholds_come_from_the_role_s_variables():
    rules = yaml.safe_load(render("sglang-alerts.yml.j2", sglang_monitoring_ttft_p99_seconds=0.5,
                                  sglang_monitoring_queue_requests=7))
    exprs = {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}
    assert exprs["K26TimeToFirstTokenSLO"].endswith("> 0.5") and exprs["K26QueueGrowing"].endswith("> 7")


@requires_promtool
def test_the_configuration_scrapes_every_replica_and_router_of_the_inventory(tmp_path):
    hostvars = {"gpu-a": {"ansible_host": "10.0.0.11", "sglang_service_port": 30000}, "gpu-b": {},
                "gpu-c": {"sglang_service_guard": False}, "gpu-d": {"sglang_service_guard_metrics_port": 0},
                "router": {"sglang_router_prometheus_port": 29100}}
    # nodes of rank >= 1 of a multi-node instance serve no API (no /metrics, no guard): by their published rank, the
    # inventory's rank, or their place in the instance's group
    groups = {"sglang_servers": ["gpu-a", "gpu-b", "gpu-c", "gpu-d", "mn-1", "mn-2", "mn-3"],
              "sglang_routers": ["router"], "mn": ["mn-0", "mn-3"]}
    hostvars.update({"mn-1": {"sglang_service_result": {"node_rank": 1}}, "mn-2": {"sglang_service_node_rank": 2},
                     "mn-3": {"inventory_hostname": "mn-3", "groups": groups, "sglang_service_instance_group": "mn"}})
    text = render("prometheus.yml.j2", groups=groups,
                  hostvars=hostvars, sglang_monitoring_rules_dir=str(tmp_path / "rules"),
                  sglang_monitoring_extra_targets=[{"job": "node", "targets": ["gpu-a:9100"]}])
    config = yaml.safe_load(text)
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    # each replica's guard too, where it runs and serves its metrics
    assert jobs == {"sglang": ["10.0.0.11:30000", "gpu-b:30000", "gpu-c:30000", "gpu-d:30000"],
                    "sglang-guard": ["10.0.0.11:29100", "gpu-b:29100"], "sglang-router": ["router:29100"],
                    "node": ["gpu-a:9100"]}
    (tmp_path / "prometheus.yml").write_text(text)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "sglang-alerts.yml").write_text(render("sglang-alerts.yml.j2"))
    checked = promtool("check", "config", tmp_path / "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def metric_names(text):
    """sglang: names in PromQL, without the suffixes Prometheus adds to a histogram's series."""
    return {re.sub(r"_(bucket|sum|count)$", "", name) for name in re.findall(r"sglang:[a-z_0-9]+", text)}


@requires_real_sglang
def test_the_rules_and_the_dashboard_use_only_metrics_sglang_defines():
    source = "\n".join(path.read_text(errors="replace") for path in (SGLANG_SITE / "sglang").rglob("*.py"))
    defined = set(re.findall(r'name="(sglang:[a-z_0-9]+)"', source))
    assert "sglang:num_running_reqs" in defined  # the source was read
    dashboard = (ROLE / "files" / "sglang-dashboard.json").read_text()
    used = metric_names(render("sglang-alerts.yml.j2")) | metric_names(dashboard)
    assert used and used <= defined, sorted(used - defined)


BASELINE = {"time": "2026-12-01T00:00:00Z", "file": "/x/gpu-a.json", "config_hash": "abc", "concurrency": 8,
            "output_tokens_per_second": 95.6}


@requires_promtool
def test_each_replica_s_benchmark_baseline_is_recorded_under_its_scrape_target(tmp_path):
    hostvars = {"gpu-a": {"ansible_host": "10.0.0.11", "sglang_service_port": 30001}, "gpu-b": {}}
    variables = dict(groups={"sglang_servers": ["gpu-a", "gpu-b"]}, hostvars=hostvars,
                     __sglang_monitoring_baselines={"gpu-a": BASELINE, "gpu-b": None})
    text = render("sglang-alerts.yml.j2", **variables)
    (recorded,) = [group["rules"] for group in yaml.safe_load(text)["groups"] if group["name"] == "k26deploy-benchmarks"]
    assert recorded == [
        {"record": "k26:benchmark_output_tokens_per_second", "expr": "vector(95.6)",
         "labels": {"instance": "10.0.0.11:30001", "measured": "2026-12-01T00:00:00Z"}},
        {"record": "k26:benchmark_concurrency", "expr": "vector(8)", "labels": {"instance": "10.0.0.11:30001"}}]
    scraped = yaml.safe_load(render("prometheus.yml.j2", **variables))["scrape_configs"][0]["static_configs"][0]
    assert recorded[0]["labels"]["instance"] in scraped["targets"]
    (tmp_path / "rules.yml").write_text(text)
    checked = promtool("check", "rules", tmp_path / "rules.yml")
    assert checked.returncode == 0 and "SUCCESS: 19 rules found" in checked.stdout, checked.stdout + checked.stderr


def test_the_baseline_is_the_newest_sweep_that_passed_its_gate_at_its_highest_clean_level(tmp_path):
    levels = [{"concurrency": 1, "output_tokens_per_second": 35.6}, {"concurrency": 8, "output_tokens_per_second": 95.6},
              {"concurrency": 16, "output_tokens_per_second": 99.0, "errors": 3}]
    sweeps = {"old": {"host": "gpu-a", "time": "2026-11-01T00:00:00Z", "levels": levels},
              "new": {"host": "gpu-a", "time": "2026-12-01T00:00:00Z", "levels": levels, "config_hash": "abc"},
              "gated": {"host": "gpu-a", "time": "2026-12-02T00:00:00Z", "levels": levels, "gate": {"passed": False}},
              "other": {"host": "gpu-b", "time": "2026-12-03T00:00:00Z", "levels": levels}}
    for name, sweep in sweeps.items():
        (tmp_path / (name + ".json")).write_text(json.dumps(sweep))
    (tmp_path / "torn.json").write_text("{")
    read = report.read_sweeps(str(tmp_path))
    assert report.monitoring_baseline("gpu-a", read) == {
        "time": "2026-12-01T00:00:00Z", "file": str(tmp_path / "new.json"), "config_hash": "abc", "concurrency": 8,
        "output_tokens_per_second": 95.6}
    assert report.monitoring_baseline("gpu-c", read) is None


def test_the_lookup_reads_the_baselines_on_the_controller_through_ansible(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"host": "gpu-a", "time": "2026-12-01T00:00:00Z", "levels": [
        {"concurrency": 8, "output_tokens_per_second": 95.6}]}))
    expression = "{{ lookup('k26.deploy.sglang_benchmark_baselines', ['gpu-a', 'gpu-b'], results_dir=%r) }}" % str(tmp_path)
    done = subprocess.run([str(Path(sys.executable).parent / "ansible"), "localhost", "-m", "ansible.builtin.debug",
                           "-a", "msg=" + expression, "-o"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.split("=> ", 1)[1])["msg"]
    assert seen["gpu-a"]["output_tokens_per_second"] == 95.6 and seen["gpu-a"]["concurrency"] == 8
    assert seen["gpu-b"] is None


@requires_promtool
def test_the_role_s_files_render_through_ansible_with_the_baselines_from_the_controller(tmp_path):
    """Ansible's own templating (the shared targets.j2, the lookup in vars/main.yml), on this machine only."""
    results = tmp_path / "benchmarks"
    results.mkdir()
    (results / "gpu-a.json").write_text(json.dumps({"host": "gpu-a", "time": "2026-12-01T00:00:00Z", "levels": [
        {"concurrency": 8, "output_tokens_per_second": 95.6}]}))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": {
        "gpu-a": {"ansible_host": "10.0.0.11"}, "gpu-b": {}}}}}}))
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
             "tasks": [{"name": name, "ansible.builtin.template": {"src": str(ROLE / "templates" / name),
                                                                   "dest": str(dest), "mode": "0644"}}
                       for name, dest in (("sglang-alerts.yml.j2", tmp_path / "rules" / "sglang-alerts.yml"),
                                          ("prometheus.yml.j2", tmp_path / "prometheus.yml"))]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    # extra vars: the role's defaults come in as vars_files here, above a play's own vars
    (tmp_path / "rules").mkdir()
    settings = {"sglang_monitoring_benchmarks_dir": str(results), "sglang_monitoring_rules_dir": str(tmp_path / "rules")}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           "-e", json.dumps(settings), str(tmp_path / "play.yml")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rules = yaml.safe_load((tmp_path / "rules" / "sglang-alerts.yml").read_text())
    (recorded,) = [group["rules"] for group in rules["groups"] if group["name"] == "k26deploy-benchmarks"]
    assert [rule["labels"]["instance"] for rule in recorded] == ["10.0.0.11:30000"] * 2
    config = yaml.safe_load((tmp_path / "prometheus.yml").read_text())
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["10.0.0.11:30000", "gpu-b:30000"]
    checked = promtool("check", "config", tmp_path / "prometheus.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
