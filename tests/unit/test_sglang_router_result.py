"""The router's result is built by the service's own transitions and result function (sglang_outcome): run with
the router role's own tasks in a playbook, so it stays here rather than with sglang_outcome's unit tests under
tests/unit/plugins/module_utils (ansible-test runs those without Ansible's controller code)."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.k26.deploy.plugins.module_utils import sglang_outcome as outcome
# the service's own records, which the router's must equal
from ansible_collections.k26.deploy.tests.unit.plugins.module_utils.test_sglang_outcome import CRASHED, READY, deploy

# ---------------------------------------------------------------- the router's result: the same record and function
ROUTER_WAIT_READY = dict(READY, model_ids=["kimi-k2.6"], startup={"invocation": "r1", "phases": {}})
ROUTER_WORKERS = [{"url": "http://10.0.0.11:30000", "status": "ready", "is_healthy": True}]


def test_the_routers_result_is_built_by_the_services_transitions_and_function(tmp_path):
    """roles/sglang_router records its wait (wait.yml) and a failed gate (ready.yml's rescue) with the transitions
    the service records its own with, and publish.yml builds the result with sglang_outcome.result: run here, with
    the roles' own tasks, for a ready deploy, a failed one and a status look."""
    root = Path(__file__).resolve().parents[2]
    tasks = root / "roles" / "sglang_router" / "tasks"
    (record,) = [task for task in yaml.safe_load((tasks / "wait.yml").read_text())
                 if task["name"] == "Record the wait in the router's outcome"]
    (gate,) = [task for task in yaml.safe_load((tasks / "ready.yml").read_text()) if "block" in task]
    rescue = [task for task in gate["rescue"] if "ansible.builtin.set_fact" in task]
    hosts = {"ready": (ROUTER_WAIT_READY, False), "failed": (CRASHED, False), "status": (ROUTER_WAIT_READY, True)}
    play = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"block": [record, {"ansible.builtin.fail": {"msg": "the gate"},
                            "when": "not __sglang_router_wait.ready and not __sglang_router_wait_observe"}],
         "rescue": rescue},
        {"ansible.builtin.include_tasks": str(tasks / "publish.yml")},
        {"ansible.builtin.copy": {"content": "{{ sglang_router_result | to_json }}",
                                  "dest": str(tmp_path) + "/{{ inventory_hostname }}.json", "mode": "0644"},
         "delegate_to": "localhost"}]}]
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "__sglang_router_url": "http://127.0.0.1:30080",
                                  "__sglang_router_unit": "sglang-router.service",
                                  "sglang_router_served_model_name": "kimi-k2.6",
                                  "__sglang_router_info": {"workers": ROUTER_WORKERS}},
                         "hosts": {name: {"__sglang_router_wait": wait, "__sglang_router_wait_observe": observe}
                                   for name, (wait, observe) in hosts.items()}}}
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "play.yml")], cwd=root, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = {name: json.loads((tmp_path / (name + ".json")).read_text()) for name in hosts}

    known = {"endpoint": "http://127.0.0.1:30080", "model_id": "kimi-k2.6", "unit": "sglang-router.service",
             "simulator": False}
    extra = {"workers": ROUTER_WORKERS, "startup": None}
    assert results["ready"] == outcome.result(deploy(("waited", ROUTER_WAIT_READY)), known, extra)
    assert results["failed"] == outcome.result(
        deploy(("waited", CRASHED), ("rescued", {"msg": "the gate"})), known, extra)
    assert results["status"] == outcome.result(deploy(("observed", ROUTER_WAIT_READY)), known, extra)
    assert (results["ready"]["ready"], results["ready"]["time_to_ready"], results["ready"]["workers"]) == (
        True, 12.0, ROUTER_WORKERS)
    assert (results["failed"]["ready"], results["failed"]["reason"], results["failed"]["time_to_ready"]) == (
        False, "unit_failed", None)
    assert results["failed"]["journal_excerpt"] == ["RuntimeError: CUDA out of memory"]
    assert results["status"]["ready"] is True and results["status"]["time_to_ready"] is None
    assert results["ready"]["startup"] is None
