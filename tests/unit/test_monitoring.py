"""The sglang_monitoring role's files: alert rules that promtool accepts and whose unit tests (one per alert, firing
and quiet) pass, a Prometheus configuration with every replica and router of the inventory, and a dashboard and
rules that use only metric names the real SGLang 0.5.23 defines."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

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
    return env.get_template(template).render(dict(DEFAULTS, ansible_managed="managed", **variables))


def promtool(*args):
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, check=False)


@requires_promtool
def test_every_alert_fires_on_its_series_and_stays_quiet_on_the_others(tmp_path):
    (tmp_path / "sglang-alerts.yml").write_text(render("sglang-alerts.yml.j2"))
    shutil.copy(ROOT / "tests" / "fixtures" / "monitoring" / "alerts.test.yml", tmp_path)
    checked = promtool("check", "rules", tmp_path / "sglang-alerts.yml")
    assert checked.returncode == 0 and "SUCCESS: 10 rules found" in checked.stdout, checked.stdout + checked.stderr
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
                "router": {"sglang_router_prometheus_port": 29100}}
    text = render("prometheus.yml.j2", groups={"sglang_servers": ["gpu-a", "gpu-b"], "sglang_routers": ["router"]},
                  hostvars=hostvars, sglang_monitoring_rules_dir=str(tmp_path / "rules"),
                  sglang_monitoring_extra_targets=[{"job": "node", "targets": ["gpu-a:9100"]}])
    config = yaml.safe_load(text)
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert jobs == {"sglang": ["10.0.0.11:30000", "gpu-b:30000"], "sglang-router": ["router:29100"],
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
