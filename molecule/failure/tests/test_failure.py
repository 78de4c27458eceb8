"""After a failed change: the previous configuration is back and serving."""

import json

KEY = "molecule-test-key-0123456789"


def test_previous_files_are_restored_byte_for_byte(host):
    for path in ("/etc/systemd/system/sglang.service", "/etc/sglang/sglang.yaml", "/etc/sglang/sglang.env"):
        saved = host.file("/root/previous-good/" + path.rsplit("/", 1)[1])
        live = host.file(path)
        assert saved.exists and live.sha256sum == saved.sha256sum, path
    assert "SGLANG_SIM_FAILURE" not in host.file("/etc/sglang/sglang.env").content_string


def test_service_is_serving_again(host):
    assert host.service("sglang").is_running
    out = host.check_output("curl -sf -H 'Authorization: Bearer %s' http://127.0.0.1:30000/v1/models" % KEY)
    assert [m["id"] for m in json.loads(out)["data"]] == ["kimi-k2.6"]
    assert host.run("curl -sf http://127.0.0.1:30000/ready").rc == 0


def test_the_crash_is_in_the_journal(host):
    journal = host.check_output("journalctl -u sglang.service --no-pager")
    assert "torch.OutOfMemoryError: CUDA out of memory." in journal
