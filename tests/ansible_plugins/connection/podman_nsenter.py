# Test plumbing, not part of the collection: tests/conftest.py and the Molecule scenarios put this directory on
# ANSIBLE_CONNECTION_PLUGINS.
from __future__ import annotations

DOCUMENTATION = r"""
name: podman_nsenter
short_description: Run tasks in a local podman container by entering its namespaces
description:
  - The test suite's connection to its systemd containers. C(containers.podman.podman) starts C(podman exec)
    three or four times a task (about 0.1 s of CPU each); this enters the container's init with C(nsenter), as
    C(community.docker.nsenter) does, for a few milliseconds.
  - The container is the host's C(ansible_host) (its inventory name by default); its init's PID is looked up with
    C(podman inspect) once and kept in a cache file, checked against the process's start time on every use.
  - Commands run with a clean environment (PATH, HOME, LANG), as a login over SSH would, not the controller's.
author: k26.deploy tests
options:
  pipelining:
    description: Send the module on the command's standard input (one command a task instead of three).
    type: boolean
    default: true
    vars:
      - name: ansible_pipelining
"""

import json
import os
import subprocess
import tempfile

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.utils.display import Display
from ansible_collections.community.docker.plugins.connection.nsenter import Connection as NsenterConnection

CLEAN_ENVIRONMENT = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "HOME=/root", "LANG=C.UTF-8"]
CACHE = os.path.join(tempfile.gettempdir(), "k26-podman-nsenter")
display = Display()


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _inspect(container):
    done = subprocess.run(["podman", "inspect", "--type", "container", "--format", "{{.State.Pid}}", container],
                          capture_output=True, text=True, check=False)
    pid = int(done.stdout.strip() or 0) if done.returncode == 0 else 0
    if pid <= 0:
        raise AnsibleConnectionFailure("container %s is not running: %s" % (container, done.stderr.strip()))
    return pid


def init_pid(container):
    """The PID (as the controller sees it) of the container's init, from the cache while that process lives."""
    path = os.path.join(CACHE, container)
    try:
        with open(path) as cached:
            entry = json.load(cached)
        if _start_time(entry["pid"]) == entry["start"]:
            return entry["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    pid = _inspect(container)
    os.makedirs(CACHE, mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=CACHE)
    with os.fdopen(fd, "w") as fresh:
        json.dump({"pid": pid, "start": _start_time(pid)}, fresh)
    os.replace(temporary, path)
    return pid


class Connection(NsenterConnection):
    transport = "podman_nsenter"
    has_pipelining = True

    def _connect(self):
        if not self._connected:
            self._play_context.remote_user = "root"  # nsenter keeps the controller's credentials
            self._nsenter_pid = init_pid(self._play_context.remote_addr)
            self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=True):
        if isinstance(cmd, (str, bytes)):
            prefix = " ".join(CLEAN_ENVIRONMENT) + " "
            cmd = prefix + cmd if isinstance(cmd, str) else prefix.encode() + cmd
        else:
            cmd = CLEAN_ENVIRONMENT + list(cmd)
        return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)

    def put_file(self, in_path, out_path):
        """Stream the file in (the parent reads it whole into memory and has tee echo it back: a wheelhouse is GBs)."""
        self._connect()
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self._play_context.remote_addr)
        argv = ["nsenter", "--ipc", "--mount", "--net", "--pid", "--uts", "--preserve-credentials",
                "--target=%d" % self._nsenter_pid, "--"] + CLEAN_ENVIRONMENT + ["dd", "of=" + out_path, "bs=4M",
                                                                                "status=none"]
        try:
            with open(in_path, "rb") as source:
                done = subprocess.run(argv, stdin=source, capture_output=True, check=False)
        except OSError as error:
            raise AnsibleError("failed to transfer %s to %s: %s" % (in_path, out_path, error)) from error
        if done.returncode != 0:
            raise AnsibleError("failed to transfer %s to %s: %s" % (in_path, out_path, done.stderr.decode(errors="replace")))
