"""SGLang's router (the real smg package) in front of two replicas (the simulator), each in a container of its own
with real systemd, on a podman network of their own: one deploy_k26.yml run deploys all three, requests through
the router reach both replicas, the key is in no argv, unit or journal, a second run changes nothing, and bad
input or a router that cannot start fails with the reason."""

import contextlib
import json
import os
import subprocess

import pytest
import yaml

import k26deploy
from harness import ROOT, VENV_BIN, demo_inventory, podman_network, systemd_container

pytestmark = pytest.mark.integration

ROLE_DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_router" / "defaults" / "main.yml").read_text())
PACKAGE = "%s==%s" % (ROLE_DEFAULTS["sglang_router_package"], ROLE_DEFAULTS["sglang_router_version"])
ROUTER_URL = "http://127.0.0.1:30080"


def wheelhouse():
    """smg and its dependencies as wheels (pip's own configuration decides where from): the containers have no
    package index, so the role installs from a copy of this directory."""
    directory = ROOT / ".cache" / "wheelhouse" / PACKAGE.replace("==", "-")
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(VENV_BIN / "pip"), "download", "--disable-pip-version-check", "-q", "--only-binary=:all:",
                    "-d", str(directory), PACKAGE], check=True, timeout=600)
    return directory


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tag = os.getpid()
    names = ["k26-it-replica-a-%d" % tag, "k26-it-replica-b-%d" % tag, "k26-it-router-%d" % tag]
    with contextlib.ExitStack() as stack:
        network = stack.enter_context(podman_network("k26-it-fleet-%d" % tag))
        first, second, router = (stack.enter_context(systemd_container(name, network=network)) for name in names)
        inventory = demo_inventory(first, tmp_path_factory.mktemp("inventory"), second, routers=[router],
                                   router_vars={"sglang_router_wheelhouse": str(wheelhouse()),
                                                "sglang_router_policy": "round_robin",
                                                "sglang_router_ready_timeout": 120})
        result = k26deploy.deploy(inventory=inventory)
        yield first, second, router, inventory, result


def key_of(inventory):
    with open(os.path.join(inventory, ".secrets", "api_key")) as handle:
        return handle.read().strip()


def chat(router, key, content):
    body = json.dumps({"model": "kimi-k2.6", "messages": [{"role": "user", "content": content}], "max_tokens": 8})
    out = router.exec("curl -s -w '\\n%%{http_code}' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
                      "-d '%s' %s/v1/chat/completions" % (key, body, ROUTER_URL)).stdout
    text, dummy, status = out.rpartition("\n")
    return int(status), text


def served_chats(replica):
    return replica.exec("journalctl -u sglang.service -o cat --no-pager | grep -c 'POST /v1/chat/completions'",
                        check=False).stdout.strip()


def router_invocation(router):
    return router.exec("systemctl show sglang-router.service -p InvocationID --value").stdout.strip()


def test_one_run_deploys_the_replicas_then_the_router(fleet):
    first, second, router, dummy, result = fleet
    assert result.exit_code == 0, result.to_json()
    assert result.hosts[first.name].ready and result.hosts[second.name].ready
    front = result.hosts[router.name]
    assert front.ready and front.reason == "ready" and front.endpoint == ROUTER_URL, front
    assert front.model_id == "kimi-k2.6" and front.unit == "sglang-router.service"
    assert front.workers == ["http://%s:30000" % first.name, "http://%s:30000" % second.name]
    assert "/readiness" in front.msg
    version = router.exec("/opt/sglang-router/venvs/smg-%s/bin/python -c \"import importlib.metadata as m; "
                          "print(m.version('smg'))\"" % ROLE_DEFAULTS["sglang_router_version"]).stdout.strip()
    assert version == ROLE_DEFAULTS["sglang_router_version"]


def test_requests_through_the_router_reach_every_replica(fleet):
    first, second, router, inventory, dummy = fleet
    key = key_of(inventory)
    for number in range(8):
        status, text = chat(router, key, "hello %d" % number)
        assert status == 200, text
        assert json.loads(text)["choices"][0]["message"]["content"]
    assert int(served_chats(first)) >= 1 and int(served_chats(second)) >= 1
    assert chat(router, "not-the-key", "hello")[0] == 401
    readiness = json.loads(router.exec("curl -s %s/readiness" % ROUTER_URL).stdout)
    assert readiness["status"] == "ready" and readiness["healthy_workers"] == 2


def test_the_key_is_in_no_argv_unit_or_journal(fleet):
    router, inventory = fleet[2], fleet[3]
    key = key_of(inventory)
    assert key not in router.exec("cat /etc/systemd/system/sglang-router.service").stdout
    pid = router.exec("systemctl show sglang-router.service -p MainPID --value").stdout.strip()
    assert pid != "0" and key not in router.exec("tr '\\0' ' ' < /proc/%s/cmdline" % pid).stdout
    assert key not in router.exec("journalctl --no-pager -o cat").stdout
    assert router.exec("stat -c '%U:%G %a' /etc/sglang-router/api_key").stdout.strip() == "root:sglang-router 640"
    # hardened: the unit's exposure as systemd-analyze rates it
    assert router.exec("systemd-analyze security --threshold=20 sglang-router.service", check=False).returncode == 0, \
        router.exec("systemd-analyze security sglang-router.service", check=False).stdout[-3000:]


def test_a_second_run_changes_nothing(fleet):
    router, inventory = fleet[2], fleet[3]
    before = router_invocation(router)
    again = k26deploy.deploy(inventory=inventory)
    assert again.exit_code == 0, again.to_json()
    assert again.hosts[router.name].ready and again.hosts[router.name].changed == 0
    assert router_invocation(router) == before


def test_a_router_key_other_than_the_replicas_is_refused_before_any_change(fleet):
    router, inventory = fleet[2], fleet[3]
    before = router_invocation(router)
    result = k26deploy.deploy(inventory=inventory, extra_vars={"sglang_router_api_key": "a-different-key"})
    host = result.hosts[router.name]
    assert result.exit_code == 2 and host.bad_input and host.changed == 0, result.to_json()
    assert "same one" in host.msg and "a-different-key" not in json.dumps(result.to_dict())
    assert router_invocation(router) == before


def test_a_router_that_cannot_start_fails_with_its_own_error(fleet):
    router, inventory = fleet[2], fleet[3]
    result = k26deploy.deploy(inventory=inventory, extra_vars={"sglang_router_extra_args": ["--no-such-flag"]})
    host = result.hosts[router.name]
    assert result.exit_code == 1 and host.ready is False, result.to_json()
    assert host.reason in ("unit_failed", "crash_loop"), host
    assert "unrecognized arguments: --no-such-flag" in host.journal_excerpt
    back = k26deploy.deploy(inventory=inventory)
    assert back.exit_code == 0 and back.hosts[router.name].ready, back.to_json()
