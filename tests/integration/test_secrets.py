"""The API key never leaves its file, and HTTPS where users need it: a real deployment into a container over TLS,
then a key change that fails to start and is rolled back; the journal holds no key at any point, while the
readiness excerpt still shows the error lines. The package index's password and the hub's token reach pip and the
download through root-only files: the process table sampled during a run, the journal and the runner's artifacts
at -vvv hold neither."""

import base64
import datetime
import hashlib
import ipaddress
import json
import os
import re
import subprocess
import threading
import time
import zipfile

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
import yaml

import k26deploy
from harness import CONTAINER_HOST, ROOT, demo_inventory, key_of, systemd_container
from safetensors_shards import shard_bytes

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


ADMIN_KEY_FILE = "/etc/sglang/sglang.admin-key"


def admin_key_of(box):
    return box.exec("cat " + ADMIN_KEY_FILE).stdout.strip()


def status_of(box, path, key):
    return box.exec("curl -s -o /dev/null -w '%%{http_code}' --cacert /etc/sglang/tls/ca.crt -H 'Authorization: Bearer %s' "
                    "https://127.0.0.1:30000%s" % (key, path)).stdout


def test_an_admin_key_of_its_own_keeps_the_api_key_off_the_admin_endpoints(tls):
    """Issue 36 item 4: SGLang's admin routes (here /flush_cache, AuthLevel.ADMIN_OPTIONAL) take the generated admin
    key only; it is root's alone, in the config beside the API key, and masked in the journal like it."""
    box, inventory = tls[0], tls[1]
    assert box.exec("stat -c '%U:%G %a' " + ADMIN_KEY_FILE).stdout.strip() == "root:root 600"
    admin_key, key = admin_key_of(box), key_of(inventory)
    assert len(admin_key) >= 32 and admin_key != key
    assert yaml.safe_load(box.exec("cat /etc/sglang/sglang.yaml").stdout)["admin-api-key"] == admin_key
    assert status_of(box, "/flush_cache", key) == "401"
    assert status_of(box, "/flush_cache", admin_key) == "200"
    assert status_of(box, "/v1/models", key) == "200" and status_of(box, "/v1/models", admin_key) == "401"
    assert admin_key not in journal(box) and "'admin_api_key': '********'" in journal(box)


def test_an_admin_key_others_may_have_read_is_refused_before_anything_is_written(tls):
    """The key's file is looked at with the service's directories (one k26.deploy.paths_info run): a key another
    user could read stops the deploy with the path and what was seen, and the file is left as it was for the
    operator."""
    box, inventory, tls_vars = tls[0], tls[1], tls[2]
    admin_key, invocation = admin_key_of(box), box.invocation("sglang.service")
    box.exec("chmod 0644 " + ADMIN_KEY_FILE)
    try:
        result = k26deploy.deploy(inventory=inventory, extra_vars=tls_vars)
        msg = result.hosts[box.name].msg or ""
        assert result.exit_code != 0 and ADMIN_KEY_FILE in msg and "root 0644" in msg, result.to_json()
        assert admin_key_of(box) == admin_key and box.invocation("sglang.service") == invocation
    finally:
        box.exec("chmod 0600 " + ADMIN_KEY_FILE)


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
    admin_key = admin_key_of(box)
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
    # the admin key was kept through the change and its rollback, and is in none of the run's output
    assert admin_key_of(box) == admin_key and admin_key not in text and admin_key not in json.dumps(result.to_dict())


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


# --- Credentials that pip and the hub need: in a root-only file, never on a command line or in an environment
# prefix (Ansible turns a task's `environment:` into NAME=value before the remote command: every local user sees it
# in ps, sudo records it in the journal, -vvv prints it).

INDEX_PASSWORD = "pip-index-pw-5b1c0d93"
HUB_TOKEN = "hf_k26TestToken9f3e1a7c44"
INDEX_PORT = 8099
MODEL_DIR = "/srv/k26-model"
DEFAULTS = {role: yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
            for role in ("sglang", "sglang_benchmark", "sglang_router")}
HUB_FILES = {"config.json": b'{"model_type": "k26-test"}\n',
             "model-00001-of-00001.safetensors": shard_bytes(b"k26" * 64)}
# huggingface_hub as far as roles/sglang_model/files/hf_stage.py uses it, with a gated repository: it answers only
# with a token (the argument, else HF_TOKEN, else the token file, as the real one looks), takes a few seconds to
# download so that the process table is sampled meanwhile, and leaves the token's sha256 where the test reads it.
HUB_STUB = '''
import hashlib, os, time, types
FILES = %r
def _token(token):
    path = os.environ.get("HF_TOKEN_PATH") or os.path.expanduser("~/.cache/huggingface/token")
    if not token and not os.environ.get("HF_TOKEN") and os.path.exists(path):
        token = open(path).read().strip()
    token = token or os.environ.get("HF_TOKEN")
    if not token:
        raise PermissionError("401: a gated repository, and no token")
    return token
class HfApi:
    def __init__(self, token=None):
        self.token = token
    def model_info(self, repo, revision=None, files_metadata=False):
        _token(self.token)
        return types.SimpleNamespace(siblings=[types.SimpleNamespace(
            rfilename=name, size=len(data), lfs=types.SimpleNamespace(sha256=hashlib.sha256(data).hexdigest()))
            for name, data in FILES.items()])
def snapshot_download(repo_id, revision=None, local_dir=None, token=None):
    token = _token(token)
    time.sleep(3)
    os.makedirs(local_dir, exist_ok=True)
    for name, data in FILES.items():
        with open(os.path.join(local_dir, name), "wb") as out:
            out.write(data)
    with open("/var/tmp/k26-hub-token.sha256", "w") as out:
        out.write(hashlib.sha256(token.encode()).hexdigest())
    return local_dir
''' % (HUB_FILES,)
PACKAGES = {
    ("sglang", DEFAULTS["sglang"]["sglang_version"]): {"sglang/__init__.py": ""},
    ("huggingface_hub", "0.0.1"): {"huggingface_hub/__init__.py": HUB_STUB},
    ("aiperf", DEFAULTS["sglang_benchmark"]["sglang_benchmark_aiperf_version"]): {
        "aiperf/__init__.py": "", "aiperf/cli.py": ""},
    ("smg", DEFAULTS["sglang_router"]["sglang_router_version"]): {
        "smg/__init__.py": "", "smg/launch_router.py": "def launch_router(args):\n    pass\n"
                                                       "def parse_router_args(argv):\n    pass\n"},
}
# Every role that runs pip or the hub, as a deploy and a benchmark run them, through sudo (which records each
# command it runs in the journal).
CREDENTIAL_PLAY = [{
    "hosts": "all", "gather_facts": True, "become": True, "become_method": "sudo",
    "tasks": [
        {"name": "Install SGLang with pip", "ansible.builtin.include_role": {"name": "k26.deploy.sglang"}},
        {"name": "Download the model from the hub", "ansible.builtin.include_role": {"name": "k26.deploy.sglang_model"}},
        {"name": "Install AIPerf", "ansible.builtin.include_role": {"name": "k26.deploy.sglang_benchmark",
                                                                    "tasks_from": "install"}},
        {"name": "Install the router", "ansible.builtin.include_role": {"name": "k26.deploy.sglang_router",
                                                                        "tasks_from": "install"}},
    ]}]


def write_wheel(directory, name, version, files):
    """A pure-Python wheel NAME-VERSION holding FILES (path -> text), as pip installs it."""
    dist = "%s-%s" % (name, version)
    entries = dict(files)
    entries[dist + ".dist-info/METADATA"] = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    entries[dist + ".dist-info/WHEEL"] = "Wheel-Version: 1.0\nGenerator: k26-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = ["%s,sha256=%s,%d" % (path, base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
                                   .rstrip(b"=").decode(), len(text.encode())) for path, text in entries.items()]
    entries[dist + ".dist-info/RECORD"] = "\n".join(record + [dist + ".dist-info/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(directory / (dist + "-py3-none-any.whl"), "w") as wheel:
        for path, text in entries.items():
            wheel.writestr(path, text)


@pytest.fixture(scope="module")
def credentials_run(tmp_path_factory):
    """One run of every role that needs pip's index or the hub's token, with a password in the index URL (a package
    index on the container's loopback, which pip finds only through the roles' settings) and a token the hub stub
    demands, at -vvv, with the container's process table sampled every 50 ms meanwhile."""
    with systemd_container("k26-it-credentials-%d" % os.getpid()) as box:
        index = tmp_path_factory.mktemp("index")
        for (name, version), files in PACKAGES.items():
            write_wheel(index / "simple" / name.replace("_", "-"), name, version, files)
        subprocess.run(["podman", "cp", str(index), box.name + ":/srv/index"], check=True)
        box.exec("systemd-run --unit k26-index python3 -m http.server %d --bind 127.0.0.1 --directory /srv/index"
                 % INDEX_PORT)
        box.write_unit("sglang-router", "/bin/sleep infinity")
        box.exec("systemd-run --unit k26-ps-sampler /bin/sh -c "
                 "'while :; do ps -eww -o args >> /var/tmp/k26-ps-samples; sleep 0.05; done'")
        url = "http://k26:%s@127.0.0.1:%d/simple" % (INDEX_PASSWORD, INDEX_PORT)
        inventory = tmp_path_factory.mktemp("inventory")
        (inventory / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {box.name: dict(CONTAINER_HOST)}}}))
        playbook = inventory / "credentials.yml"
        playbook.write_text(yaml.safe_dump(CREDENTIAL_PLAY, sort_keys=False))
        settings = {
            "sglang_install_mode": "pip", "sglang_system_packages_debian": ["python3-venv"],
            "sglang_pip_index_url": url, "sglang_pip_extra_packages": ["huggingface_hub==0.0.1"],
            "sglang_benchmark_pip_index_url": url, "sglang_router_pip_index_url": url,
            "sglang_model_source": "huggingface", "sglang_model_path": MODEL_DIR, "sglang_model_repo": "k26/gated",
            "sglang_model_revision": "0123456789abcdef0123456789abcdef01234567", "sglang_model_hf_token": HUB_TOKEN,
        }
        pdd = tmp_path_factory.mktemp("runner")
        result = k26deploy.run("deploy", inventory=str(inventory / "hosts.yml"), extra_vars=settings,
                               playbook=str(playbook), verbosity=3, private_data_dir=str(pdd))
        box.exec("systemctl stop k26-ps-sampler")
        yield box, result, pdd


def test_pip_and_the_hub_got_their_credentials(credentials_run):
    box, result, dummy = credentials_run
    assert result.exit_code == 0, result.to_json()
    # pip found every package through the index URL (there is no other index), the hub stub got the token
    for python in ("/opt/sglang/venvs/sglang-%s/bin/python" % DEFAULTS["sglang"]["sglang_version"],):
        assert box.exec(python + " -c 'import sglang, huggingface_hub'").returncode == 0
    digest = box.exec("cat /var/tmp/k26-hub-token.sha256").stdout
    assert digest == hashlib.sha256(HUB_TOKEN.encode()).hexdigest()
    assert box.exec("cat %s/config.json" % MODEL_DIR).stdout == HUB_FILES["config.json"].decode()
    # and the files that handed them over are gone
    assert box.exec("ls /tmp | grep -c k26- || true").stdout.strip() == "0"


def test_no_credential_in_the_process_table_the_journal_or_the_runs_output(credentials_run):
    box, dummy, pdd = credentials_run
    samples = box.exec("cat /var/tmp/k26-ps-samples", timeout=120).stdout
    # the samples saw the installs and the download run
    assert "-m pip install" in samples and "hf_stage.py" in samples
    journal_text = box.exec("journalctl --no-pager -o verbose", timeout=120).stdout
    assert "COMMAND=" in journal_text  # sudo recorded the commands it ran
    outputs = {"process table": samples, "journal": journal_text}
    for path in pdd.rglob("*"):
        if path.is_file():
            outputs[str(path)] = path.read_text(errors="replace")
    assert any("<%s> EXEC" % box.name in text for text in outputs.values())  # -vvv's command lines are there
    for secret in (INDEX_PASSWORD, HUB_TOKEN):
        assert [where for where, text in outputs.items() if secret in text] == []


# --- The DeepGEMM precompile as sandboxed as the service: the same hardening (one list, for the unit and for
# systemd-run), and a network of its own, so that its keyless server is no one's on the host.

# An address allow-list, as Molecule's and most real inventories have: the precompile's systemd-run gets it too
# (systemd 252's systemd-run refused the unit file's keyword localhost).
PRECOMPILE_VARS = {"sglang_service_deepgemm_precompile": "always", "sglang_service_deepgemm_precompile_timeout": 120,
                   "sglang_service_ip_address_allow": ["10.88.0.0/16", "link-local"],
                   "sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 3, "SGLANG_SIM_GRAPH_SECONDS": 0.5,
                                                  "SGLANG_SIM_WARMUP_SECONDS": 0.5,
                                                  "SGLANG_SIM_COMPILE_SAFETY_SECONDS": 4}}
PROBE = "curl -s -o /dev/null -w '%%{http_code}' -m 2 http://127.0.0.1:%s/v1/models"


def exposure(box, unit):
    text = box.exec("systemd-analyze security --no-pager %s" % unit, check=False).stdout
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", text)
    return float(found.group(1)) if found else None


def watch_precompile(box, stop, seen):
    """Until STOP is set or the precompile's transient unit is done: its exposure, and its server's port tried as a
    local user (nobody) from the host's network and as root from the unit's own network namespace."""
    while not stop.is_set():
        if "unit" not in seen:
            names = box.exec("systemctl list-units --all --plain --no-legend 'sglang-deepgemm-*' "
                             "| awk '{print $1}'", check=False).stdout.split()
            if names:
                seen["unit"] = names[0]
            time.sleep(0.2)
            continue
        shown = dict(line.split("=", 1) for line in box.exec(
            "systemctl show %s -p ActiveState -p SubState -p MainPID -p ExecStart" % seen["unit"],
            check=False).stdout.splitlines() if "=" in line)
        if shown.get("ActiveState") != "active" or shown.get("SubState") == "exited":
            return
        if "exposure" not in seen:
            seen["exposure"] = exposure(box, seen["unit"])
        port = re.search(r"--port (\d+)", shown.get("ExecStart", ""))
        if port and shown.get("MainPID", "0") != "0":
            seen["outside"].append(box.exec("runuser -u nobody -- " + PROBE % port.group(1), check=False).stdout)
            seen["inside"].append(box.exec("nsenter -t %s -n %s" % (shown["MainPID"], PROBE % port.group(1)),
                                           check=False).stdout)
        time.sleep(0.3)


@pytest.fixture(scope="module")
def precompiled(tmp_path_factory):
    with systemd_container("k26-it-precompile-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        stop, seen = threading.Event(), {"outside": [], "inside": []}
        watcher = threading.Thread(target=watch_precompile, args=(box, stop, seen), daemon=True)
        watcher.start()
        try:
            result = k26deploy.deploy(inventory=inventory, extra_vars=PRECOMPILE_VARS)
        finally:
            stop.set()
            watcher.join(timeout=60)
        yield box, result, seen


def test_the_precompile_is_as_hardened_as_the_service(precompiled):
    box, result, seen = precompiled
    assert result.exit_code == 0, result.to_json()
    precompile = result.hosts[box.name].precompile
    assert precompile and precompile["unit"] == seen.get("unit"), (precompile, seen)
    service = exposure(box, "sglang.service")
    assert service is not None and seen.get("exposure") is not None, seen
    assert seen["exposure"] <= min(service + 0.2, 1.5), (seen["exposure"], service)


def test_no_local_user_reaches_the_precompiles_server(precompiled):
    dummy, dummy, seen = precompiled
    assert "200" in seen["inside"], seen  # its server served, inside its own network namespace
    assert set(seen["outside"]) == {"000"}, seen  # and was never reachable from the host's


# --- Root reads no file on the service account's behalf: the rollback store saves and restores only regular files
# of root's in directories root alone can write, and no configuration directory is the account's.

SHADOW_LINK = "/etc/sglang/tls/server.crt"


def store_and_live(box):
    return box.exec("sha256sum /var/lib/k26deploy/rollback/sglang/* /etc/sglang/sglang.yaml /etc/sglang/sglang.env "
                    "/etc/systemd/system/sglang.service 2>/dev/null; true").stdout


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A served container whose configuration directory the service account was given (as sglang_service_home:
    /etc/sglang made it), and the link to /etc/shadow the account put there in place of a managed file."""
    with systemd_container("k26-it-shadow-%d" % os.getpid()) as box:
        inventory = demo_inventory(box, tmp_path_factory.mktemp("inventory"))
        first = k26deploy.deploy(inventory=inventory)
        assert first.exit_code == 0, first.to_json()
        box.exec("chown sglang /etc/sglang")
        box.exec("runuser -u sglang -- sh -c 'mkdir -p /etc/sglang/tls && ln -s /etc/shadow %s'" % SHADOW_LINK)
        yield box, inventory


def test_the_service_accounts_link_to_etc_shadow_is_neither_saved_nor_restored(planted):
    box, inventory = planted
    shadow = box.exec("sha256sum < /etc/shadow").stdout.split()[0]
    before = store_and_live(box)
    # a change that reaches ready (the store would keep the live files), then one that fails (it would restore them)
    changed = k26deploy.deploy(inventory=inventory, extra_vars={
        "sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 1, "K26_TEST_CHANGE": "1"}})
    failed = k26deploy.deploy(inventory=inventory, extra_vars={
        "sglang_service_environment": {"SGLANG_SIM_LOAD_SECONDS": 1, "SGLANG_SIM_FAILURE": "crash_loading"}})
    stored = box.exec("sha256sum /var/lib/k26deploy/rollback/sglang/* | cut -d' ' -f1").stdout.split()
    readable = box.exec("runuser -u sglang -- sha256sum %s" % SHADOW_LINK, check=False).stdout.split()[:1]
    assert shadow not in stored and readable != [shadow], "root copied /etc/shadow for the service account"
    for result in (changed, failed):
        host = result.hosts[box.name]
        # (the deploy gives the configuration directory back to root first; the account's tls/ is left, and refused)
        assert result.exit_code == 1 and re.search(r"/etc/sglang/tls is owned by uid \d+, not root", host.msg or ""), \
            result.to_json()
    assert store_and_live(box) == before  # refused before anything was written, saved or restored


def test_a_configuration_directory_the_service_account_writes_is_refused(planted):
    box, inventory = planted
    result = k26deploy.deploy(inventory=inventory, extra_vars={"sglang_service_home": "/etc/sglang"})
    host = result.hosts[box.name]
    assert result.exit_code == 2 and host.bad_input, result.to_json()
    assert ("sglang_service_config_dir /etc/sglang is sglang_service_home /etc/sglang, which the service account "
            "can write") in host.msg, host.msg
