"""Verify what a user of the deployment depends on, inside the converged container."""

import json
import os
from pathlib import Path

import yaml

KEY = "molecule-test-key-0123456789"
CONFIG = "/etc/sglang/sglang.yaml"
UNIT = "/etc/systemd/system/sglang.service"


def unit_properties(host, *names):
    out = host.check_output("systemctl show sglang.service " + " ".join("--property=" + n for n in names))
    return dict(line.split("=", 1) for line in out.splitlines())


def test_unit_starts_sglang_with_the_config_file_only(host):
    unit = host.file(UNIT)
    assert unit.user == "root" and unit.mode == 0o644
    exec_start = [line for line in unit.content_string.splitlines() if line.startswith("ExecStart=")]
    assert exec_start == ["ExecStart=/usr/bin/python3 /opt/sglang/launcher/sglang_launcher.py "
                          "/opt/sglang/simulator/sglang_simulator.py --config %s" % CONFIG]
    assert KEY not in unit.content_string


def test_hardening_as_systemd_applies_it(host):
    """What systemd loaded, not what the file says: a misspelt directive would only be a warning in the journal."""
    props = unit_properties(host, "User", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp",
                            "CapabilityBoundingSet", "AmbientCapabilities", "DevicePolicy", "PrivateDevices",
                            "RestrictNamespaces", "LimitNOFILE", "Restart", "ReadWritePaths", "UMask",
                            "SystemCallFilter", "ProtectKernelModules", "ProtectProc", "SystemCallErrorNumber",
                            "PrivateMounts", "IPAddressDeny", "IPAddressAllow")
    assert props["User"] == "sglang"
    assert props["NoNewPrivileges"] == "yes" and props["ProtectSystem"] == "strict"
    assert props["ProtectHome"] == "yes" and props["PrivateTmp"] == "yes"
    assert props["CapabilityBoundingSet"] == "" and props["AmbientCapabilities"] == ""
    assert props["DevicePolicy"] == "closed" and props["PrivateDevices"] == "yes"  # no GPU in the container
    assert props["RestrictNamespaces"] == "yes" and props["ProtectKernelModules"] == "yes"
    assert props["ProtectProc"] == "invisible" and props["UMask"] == "0077"
    assert props["LimitNOFILE"] == "16384" and props["Restart"] == "on-failure"
    assert set(props["ReadWritePaths"].split()) == {"/var/cache/sglang", "/var/lib/sglang",
                                                    "/var/cache/sglang/huggingface"}
    # an allow-list (@system-service) less @privileged and @resources; a refused call fails with EPERM
    allowed = set(props["SystemCallFilter"].split())
    assert {"read", "openat", "mmap", "ioctl", "clone3"} <= allowed
    assert not {"reboot", "mount", "chroot", "sched_setaffinity", "set_mempolicy"} & allowed
    assert props["SystemCallErrorNumber"] == "1" and props["PrivateMounts"] == "yes"  # 1: EPERM
    # sglang_service_ip_address_allow (molecule.yml): nothing else reaches the service
    assert set(props["IPAddressDeny"].split()) == {"0.0.0.0/0", "::/0"}
    assert set(props["IPAddressAllow"].split()) == {"127.0.0.0/8", "::1/128", "10.88.0.0/16"}


def test_config_carries_the_k26_profile_and_the_key_privately(host):
    config = host.file(CONFIG)
    assert (config.user, config.group, config.mode) == ("root", "sglang", 0o640)
    options = yaml.safe_load(config.content_string)
    assert options["pp-size"] == 8
    assert options["pp-async-batch-depth"] == 8
    assert options["tool-call-parser"] == "kimi_k2" and options["reasoning-parser"] == "kimi_k2"
    assert options["trust-remote-code"] is True
    assert "disable-cuda-graph" not in options
    assert options["api-key"] == KEY


def test_environment_file(host):
    env = host.file("/etc/sglang/sglang.env")
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o640)
    # every value double-quoted, as systemd's EnvironmentFile= reads it (plugins/module_utils/systemd_unit_values.py)
    assert 'SGLANG_CACHE_DIR="/var/cache/sglang"' in env.content_string.splitlines()


def test_service_user_and_cache_directories(host):
    user = host.user("sglang")
    assert user.exists and user.shell == "/usr/sbin/nologin" and user.home == "/var/lib/sglang"
    for path in ("/var/cache/sglang", "/var/cache/sglang/huggingface", "/var/lib/sglang"):
        d = host.file(path)
        assert d.is_directory and d.user == "sglang"


def test_service_is_active_and_enabled(host):
    service = host.service("sglang")
    assert service.is_running and service.is_enabled


def test_models_endpoint_answers_with_the_model_id(host):
    out = host.check_output("curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:30000/v1/models" % KEY)
    assert [m["id"] for m in json.loads(out)["data"]] == ["kimi-k2.6"]


def test_key_is_required(host):
    code = host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:30000/v1/models")
    assert code == "401"


def test_key_is_not_in_argv_or_systemctl_show(host):
    pid = host.check_output("systemctl show sglang.service --property=MainPID --value")
    cmdline = host.file("/proc/%s/cmdline" % pid).content_string
    assert KEY not in cmdline and CONFIG in cmdline
    assert KEY not in host.check_output("systemctl show sglang.service")


def test_idempotent_converge_did_not_restart_the_service(host):
    record = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "service-identity"
    lines = record.read_text().splitlines()
    assert len(lines) == 2, "expected one record per converge (converge + idempotence), got %r" % lines
    assert lines[0] == lines[1], "the service was restarted by the second converge: %r" % lines
    now = " ".join(sorted(host.check_output(
        "systemctl show sglang.service --property=InvocationID --property=MainPID").splitlines()))
    assert now == lines[1]
