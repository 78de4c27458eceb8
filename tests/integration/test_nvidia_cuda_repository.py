"""The nvidia_cuda role names no package registry: without nvidia_cuda_repo_base_url it adds no repository and takes
NVIDIA's packages from the host's own apt sources; where those lack them (the test image: Debian's archive only), it
fails with what to set, before anything on the host changed. The role runs whole, as on a host without a GPU that is
asked for the CUDA toolkit (nvidia_cuda_install_toolkit_without_gpu); apt reads Debian's archive for it."""

import os
import tempfile
from pathlib import Path

import pytest
import yaml

from harness import CONTAINER_HOST, run_playbook, systemd_container, task_results

pytestmark = pytest.mark.integration

APT_STATE = "ls -R /etc/apt/sources.list.d /etc/apt/preferences.d /etc/apt/keyrings 2>/dev/null; ls /usr/local"


def test_without_a_repository_url_the_role_stops_before_any_change_where_apt_lacks_nvidias_packages():
    with systemd_container("k26-it-nvidia-repo-%d" % os.getpid()) as box, tempfile.TemporaryDirectory() as tmp:
        before = box.exec(APT_STATE, check=False).stdout
        play = [{"hosts": "all", "gather_facts": True,
                 "roles": [{"role": "k26.deploy.nvidia_cuda", "vars": {"nvidia_cuda_install_toolkit_without_gpu": True}}]}]
        (Path(tmp) / "play.yml").write_text(yaml.safe_dump(play))
        (Path(tmp) / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {box.name: dict(CONTAINER_HOST)}}}))
        rc, data = run_playbook(str(Path(tmp) / "play.yml"), str(Path(tmp) / "hosts.yml"))
        failed = [(name, result) for name, result in task_results(data, box.name) if result.get("failed")]
        assert rc == 2 and [name for name, dummy in failed] == [
            "k26.deploy.nvidia_cuda : Fail when the host's apt sources do not carry NVIDIA's packages"], failed
        message = failed[0][1]["msg"]
        assert "cuda-toolkit-13-0 has no candidate" in message and "Set nvidia_cuda_repo_base_url" in message, message
        assert box.exec(APT_STATE, check=False).stdout == before
