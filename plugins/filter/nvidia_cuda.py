# -*- coding: utf-8 -*-
# Copyright (c) 2026, k26deploy maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for the nvidia_cuda role: NVIDIA CUDA repository and package facts as pure functions.

What the host has (GPUs, driver, toolkits) comes from the nvidia_gpu_facts module (module_utils/nvidia_smi.py).
Everything here is a pure function of its arguments (facts, file contents, command output), so the
per-distro knowledge of the role is unit-tested in tests/unit/plugins/filter/test_nvidia_cuda.py instead of
being spread over Jinja expressions. The values follow NVIDIA's CUDA 13.0 installation guide:

* NVIDIA repository path ``<base>/<distro>/<arch>/`` with distro ids ``ubuntu2204``, ``ubuntu2404``,
  ``debian12``, ``rhel9`` (RHEL, Rocky and AlmaLinux 9), ``rhel8`` and arch ``x86_64`` or ``sbsa``
  (ARM servers, Ansible's ``aarch64``).
* apt: ``cuda-keyring_1.1-1_all.deb`` from that path; dnf: ``cuda-<distro>.repo`` from that path.
* Toolkit ``cuda-toolkit-X-Y``; open driver ``nvidia-open`` pinned to its branch by
  ``nvidia-driver-pinning-<branch>`` (apt) or the dnf module stream ``nvidia-driver:<branch>-open``.
* Fabric Manager ``nvidia-fabricmanager-<branch>``, only where NVSwitch devices exist.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.k26.deploy.plugins.module_utils.nvidia_smi import version_at_least, version_tuple

# distro id -> package manager family of NVIDIA's repository for it
REPO_DISTROS = {
    "ubuntu2204": "apt",
    "ubuntu2404": "apt",
    "debian12": "apt",
    "rhel9": "dnf",
    "rhel8": "dnf",
}

# (ansible_distribution, major version) -> distro id
_DISTRO_IDS = {
    ("Ubuntu", "22"): "ubuntu2204",
    ("Ubuntu", "24"): "ubuntu2404",
    ("Debian", "12"): "debian12",
    ("RedHat", "9"): "rhel9",
    ("Rocky", "9"): "rhel9",
    ("AlmaLinux", "9"): "rhel9",
    ("RedHat", "8"): "rhel8",
    ("Rocky", "8"): "rhel8",
    ("AlmaLinux", "8"): "rhel8",
}

# Ubuntu is only supported on its LTS point releases .04
_UBUNTU_MINOR = "04"

# ansible_architecture -> NVIDIA repository arch
_ARCHES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "sbsa",
    "arm64": "sbsa",
    "sbsa": "sbsa",
}

_SUPPORTED_TEXT = "Ubuntu 22.04/24.04, Debian 12, RHEL/Rocky/AlmaLinux 9 (and 8)"


def _fail(msg):
    raise AnsibleFilterError("nvidia_cuda: " + msg)


def _check_distro(distro):
    if distro not in REPO_DISTROS:
        _fail(
            "unknown NVIDIA repository distro id %r; expected one of %s"
            % (distro, ", ".join(sorted(REPO_DISTROS)))
        )
    return distro


def repo_distro(facts, override=""):
    """NVIDIA repository distro id (``ubuntu2404``, ``rhel9``...) from Ansible facts.

    ``facts`` is ``ansible_facts`` (keys ``distribution``, ``distribution_version``,
    ``distribution_major_version``). A non-empty ``override`` wins and is only validated.
    """
    if override:
        return _check_distro(str(override))
    if not isinstance(facts, dict):
        _fail("repo_distro expects ansible_facts (a mapping), got %r" % type(facts).__name__)
    name = facts.get("distribution") or facts.get("ansible_distribution")
    version = str(facts.get("distribution_version") or facts.get("ansible_distribution_version") or "")
    major = str(
        facts.get("distribution_major_version")
        or facts.get("ansible_distribution_major_version")
        or version.split(".", maxsplit=1)[0]
    )
    distro = _DISTRO_IDS.get((name, major))
    if distro and name == "Ubuntu":
        minor = version.split(".")[1] if "." in version else ""
        if minor != _UBUNTU_MINOR:
            distro = None
    if not distro:
        _fail(
            "%s %s is not supported by NVIDIA's CUDA 13 repository in this role (supported: %s); "
            "set nvidia_cuda_repo_distro to one of %s to force a repository"
            % (name, version or major, _SUPPORTED_TEXT, ", ".join(sorted(REPO_DISTROS)))
        )
    return distro


def repo_family(distro):
    """Package manager family of NVIDIA's repository for a distro id: ``apt`` or ``dnf``."""
    return REPO_DISTROS[_check_distro(distro)]


def repo_arch(architecture, override=""):
    """NVIDIA repository arch from ``ansible_architecture``: x86_64 -> x86_64, aarch64 -> sbsa."""
    value = str(override or architecture or "")
    if value not in _ARCHES:
        _fail(
            "architecture %r has no NVIDIA CUDA repository in this role (supported: x86_64, aarch64 as sbsa)"
            % value
        )
    return _ARCHES[value]


def repo_url(base_url, distro, arch):
    """Repository directory URL ``<base>/<distro>/<arch>/`` (always with a trailing slash)."""
    base = str(base_url or "").strip()
    if not re.match(r"^(https?|file)://\S+$", base):
        _fail("repository base URL %r must be an http(s):// or file:// URL" % base_url)
    if arch not in set(_ARCHES.values()):
        _fail("repository arch %r must be x86_64 or sbsa" % arch)
    return "%s/%s/%s/" % (base.rstrip("/"), _check_distro(distro), arch)


def keyring_url(base_url, distro, arch, keyring_version="1.1-1"):
    """URL of the ``cuda-keyring_<version>_all.deb`` package (apt distros only)."""
    if repo_family(distro) != "apt":
        _fail("the cuda-keyring .deb exists only for apt distros, not %s" % distro)
    return "%scuda-keyring_%s_all.deb" % (repo_url(base_url, distro, arch), keyring_version)


def repo_file_url(base_url, distro, arch):
    """URL of the ``cuda-<distro>.repo`` file (dnf distros only)."""
    if repo_family(distro) != "dnf":
        _fail("the cuda-<distro>.repo file exists only for dnf distros, not %s" % distro)
    return "%scuda-%s.repo" % (repo_url(base_url, distro, arch), distro)


def _toolkit_xy(toolkit_version):
    match = re.match(r"^(\d+)\.(\d+)$", str(toolkit_version))
    if not match:
        _fail("CUDA toolkit version %r must look like 13.0 (major.minor)" % (toolkit_version,))
    return match.group(1), match.group(2)


def _branch(driver_branch):
    value = str(driver_branch)
    if not re.match(r"^\d{3,4}$", value):
        _fail("driver branch %r must be a number such as 580" % (driver_branch,))
    return value


def toolkit_package(toolkit_version):
    """Pinned toolkit package: 13.0 -> ``cuda-toolkit-13-0``."""
    major, minor = _toolkit_xy(toolkit_version)
    return "cuda-toolkit-%s-%s" % (major, minor)


def toolkit_home(toolkit_version):
    """Install prefix of a toolkit: 13.0 -> ``/usr/local/cuda-13.0``."""
    major, minor = _toolkit_xy(toolkit_version)
    return "/usr/local/cuda-%s.%s" % (major, minor)


def packages(distro, toolkit_version="13.0", driver_branch=580, kernel=""):
    """Package plan for a distro id.

    Returns a dict with ``family`` (apt/dnf), ``toolkit``, ``driver`` (open kernel modules),
    ``driver_pinning`` (apt pin package, empty on dnf), ``driver_module_stream`` (dnf module
    stream, empty on apt), ``kernel_headers`` (for the running ``kernel``, empty if no kernel
    is given) and ``fabricmanager``; every package entry is a list.
    """
    family = repo_family(distro)
    branch = _branch(driver_branch)
    kernel = str(kernel or "").strip()
    plan = {
        "family": family,
        "toolkit": [toolkit_package(toolkit_version)],
        "driver": ["nvidia-open"],
        "fabricmanager": ["nvidia-fabricmanager-%s" % branch],
    }
    if family == "apt":
        plan["driver_pinning"] = ["nvidia-driver-pinning-%s" % branch]
        plan["driver_module_stream"] = ""
        plan["kernel_headers"] = ["linux-headers-%s" % kernel] if kernel else []
    else:
        plan["driver_pinning"] = []
        plan["driver_module_stream"] = "nvidia-driver:%s-open" % branch
        plan["kernel_headers"] = ["kernel-devel-%s" % kernel] if kernel else []
    return plan


def driver_version_satisfies(version, minimum):
    """True when driver ``version`` >= ``minimum`` (numeric, dot-separated). Unparseable -> False."""
    if version_tuple(minimum) is None or not re.match(r"^\d+(\.\d+)*$", str(minimum).strip()):
        _fail("minimum driver version %r must look like 580.65.06" % (minimum,))
    if not re.match(r"^\d+(\.\d+)*$", str(version or "").strip()):
        return False
    return version_at_least(version, minimum)


def debian_contrib_sources(text, release, exclude_file=""):
    """Debian apt sources that serve ``main`` but not ``contrib`` for ``release`` (and its -updates/-security).

    ``text`` is the output of ``apt-get indextargets --no-release-info --format
    '$(REPO_URI) $(RELEASE) $(COMPONENT) $(TARGET_OF) $(SOURCESENTRY)'``. Entries that come from
    ``exclude_file`` (the role's own drop-in) are ignored, so the answer is the same before and after
    the drop-in exists. Returns ``[{"uri": ..., "suites": [...]}]``, sorted; empty when every such
    source already has contrib.
    """
    release = str(release or "").strip()
    if not release:
        _fail("debian_contrib_sources needs the release codename (ansible_distribution_release)")
    components = {}
    for line in str(text or "").splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[3] != "deb":
            continue
        if exclude_file and len(fields) > 4 and fields[4].rsplit(":", 1)[0] == exclude_file:
            continue
        uri, suite, component = fields[0], fields[1], fields[2]
        if suite != release and not suite.startswith(release + "-"):
            continue
        components.setdefault((uri, suite), set()).add(component)
    wanted = {}
    for (uri, suite), comps in components.items():
        if "main" in comps and "contrib" not in comps:
            wanted.setdefault(uri, set()).add(suite)
    return [{"uri": uri, "suites": sorted(suites)} for uri, suites in sorted(wanted.items())]


class FilterModule:
    """NVIDIA CUDA repository, package and detection filters for the nvidia_cuda role."""

    def filters(self):
        return {
            "nvidia_cuda_repo_distro": repo_distro,
            "nvidia_cuda_repo_arch": repo_arch,
            "nvidia_cuda_repo_url": repo_url,
            "nvidia_cuda_keyring_url": keyring_url,
            "nvidia_cuda_repo_file_url": repo_file_url,
            "nvidia_cuda_toolkit_home": toolkit_home,
            "nvidia_cuda_packages": packages,
            "nvidia_cuda_driver_version_satisfies": driver_version_satisfies,
            "nvidia_cuda_debian_contrib_sources": debian_contrib_sources,
        }
