"""The API key never leaves its file, and HTTPS where users need it: a real deployment into a container over TLS,
then a key change that fails to start and is rolled back; the journal holds no key at any point, while the
readiness excerpt still shows the error lines."""

import datetime
import ipaddress
import json
import os

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import k26deploy
from harness import demo_inventory, systemd_container

pytestmark = pytest.mark.integration

NEW_KEY = "k26-rotated-key-that-never-served-4e1d"


def write_pem(path, data):
    path.write_bytes(data)
    return str(path)


def certificates(directory):
    """A CA and a server certificate for 127.0.0.1 signed by it (what an operator's PKI hands over)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k26 test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sglang")])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return {
        "sglang_service_tls_ca": write_pem(directory / "ca.crt", ca.public_bytes(serialization.Encoding.PEM)),
        "sglang_service_tls_cert": write_pem(directory / "server.crt", cert.public_bytes(serialization.Encoding.PEM)),
        "sglang_service_tls_key": write_pem(directory / "server.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())),
    }


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    with systemd_container("k26-it-secrets-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        tls_vars = certificates(tmp_path_factory.mktemp("pki"))
        result = k26deploy.deploy(inventory=inventory, extra_vars=tls_vars)
        yield box, inventory, tls_vars, result


def key_of(inventory):
    with open(os.path.join(inventory, ".secrets", "api_key")) as handle:
        return handle.read().strip()


def journal(box):
    return box.exec("journalctl --no-pager -o cat").stdout


def test_the_endpoint_speaks_https_only(tls):
    box, inventory, dummy, result = tls
    assert result.exit_code == 0, result.to_json()
    host = result.hosts[box.name]
    assert host.ready and host.endpoint == "https://127.0.0.1:30000"
    key = key_of(inventory)
    models = box.exec("curl -s --cacert /etc/sglang/tls/ca.crt -H 'Authorization: Bearer %s' "
                      "https://127.0.0.1:30000/v1/models" % key).stdout
    assert [m["id"] for m in json.loads(models)["data"]] == ["kimi-k2.6"]
    assert box.exec("curl -s -o /dev/null http://127.0.0.1:30000/v1/models", check=False).returncode != 0
    for name in ("server.crt", "server.key", "ca.crt"):
        assert box.exec("stat -c '%U:%G %a' /etc/sglang/tls/" + name).stdout.strip() == "root:sglang 640"
    status = k26deploy.status(inventory=inventory, extra_vars=tls[2])
    assert status.exit_code == 0 and status.hosts[box.name].ready


def test_the_files_stay_private_and_the_unit_as_hardened_as_before(tls):
    box, inventory = tls[0], tls[1]
    for name in ("sglang.yaml", "sglang.env"):
        assert box.exec("stat -c '%U:%G %a' /etc/sglang/" + name).stdout.strip() == "root:sglang 640"
    # the key is in the config file only: not in the environment file, the unit or the service's environment
    key = key_of(inventory)
    assert key in box.exec("cat /etc/sglang/sglang.yaml").stdout
    assert key not in box.exec("cat /etc/sglang/sglang.env /etc/systemd/system/sglang.service").stdout
    pid = box.exec("systemctl show sglang.service -p MainPID --value").stdout.strip()
    assert pid != "0" and key not in box.exec("cat /proc/%s/environ" % pid).stdout
    # systemd-analyze's exposure score, times ten: 1.7 before TLS and the launcher, 1.5 with the allow-list, 1.4 with
    # PrivateUsers (and sched_setscheduler allowed again for libzmq)
    assert box.exec("systemd-analyze security --threshold=14 sglang.service", check=False).returncode == 0, \
        box.exec("systemd-analyze security sglang.service", check=False).stdout[-2000:]


def test_no_key_in_the_journal_after_a_failed_key_change_and_its_rollback(tls):
    box, inventory, tls_vars, dummy = tls
    change = dict(tls_vars, sglang_service_api_key=NEW_KEY,
                  sglang_service_environment={"SGLANG_SIM_LOAD_SECONDS": 2, "SGLANG_SIM_FAILURE": "crash_loading"})
    result = k26deploy.deploy(inventory=inventory, extra_vars=change)
    host = result.hosts[box.name]
    assert result.exit_code == 1 and host.rolled_back, result.to_json()
    assert "torch.OutOfMemoryError: CUDA out of memory." in host.journal_excerpt
    text = journal(box)
    assert "server_args=" in text and "'api_key': '********'" in text  # SGLang logged its arguments, masked
    assert key_of(inventory) not in text and NEW_KEY not in text
    assert NEW_KEY not in json.dumps(result.to_dict())


def tls_files(box):
    return box.exec("sha256sum /etc/sglang/tls/server.crt /etc/sglang/tls/server.key /etc/sglang/tls/ca.crt").stdout


def test_a_bad_certificate_alone_is_rolled_back_to_the_one_that_served(tls, tmp_path):
    box, inventory, tls_vars, dummy = tls
    served = tls_files(box)
    mismatched = dict(tls_vars, sglang_service_tls_cert=certificates(tmp_path)["sglang_service_tls_cert"])
    result = k26deploy.deploy(inventory=inventory, extra_vars=mismatched)
    host = result.hosts[box.name]
    assert result.exit_code == 1 and host.rolled_back, result.to_json()
    assert host.summary["rollback_outcome"].startswith("restored the previous configuration; it is serving again")
    assert tls_files(box) == served
    models = box.exec("curl -s --cacert /etc/sglang/tls/ca.crt -H 'Authorization: Bearer %s' "
                      "https://127.0.0.1:30000/v1/models" % key_of(inventory)).stdout
    assert [m["id"] for m in json.loads(models)["data"]] == ["kimi-k2.6"]
