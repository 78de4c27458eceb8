"""Unit tests of plugins/filter/nvidia_cuda.py against NVIDIA's CUDA 13.0 installation guide and release notes.

The cases are data: one row per distro (facts in, repository id/URLs/packages out). Adding a distro
means adding a row here and a line to the filter's tables.
"""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.k26.deploy.plugins.filter import nvidia_cuda as nc

BASE = "https://mirror.example.internal/cuda/repos"
MIRROR = "https://mirror.example.internal/nvidia/cuda/repos/"


def facts(distribution, version, architecture="x86_64"):
    return {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
        "architecture": architecture,
    }


# distribution, version, distro id, family
DISTROS = [
    ("Ubuntu", "22.04", "ubuntu2204", "apt"),
    ("Ubuntu", "24.04", "ubuntu2404", "apt"),
    ("Debian", "12", "debian12", "apt"),
    ("Debian", "12.7", "debian12", "apt"),
    ("RedHat", "9.4", "rhel9", "dnf"),
    ("Rocky", "9.5", "rhel9", "dnf"),
    ("AlmaLinux", "9.4", "rhel9", "dnf"),
    ("RedHat", "8.10", "rhel8", "dnf"),
    ("Rocky", "8.10", "rhel8", "dnf"),
]


@pytest.mark.parametrize("distribution,version,distro,family", DISTROS)
def test_repo_distro_and_family(distribution, version, distro, family):
    assert nc.repo_distro(facts(distribution, version)) == distro
    assert nc.repo_family(distro) == family


@pytest.mark.parametrize(
    "distribution,version",
    [
        ("Ubuntu", "20.04"),
        ("Ubuntu", "24.10"),
        ("Debian", "11"),
        ("Debian", "13"),
        ("Rocky", "10.0"),
        ("Fedora", "41"),
        ("Archlinux", "rolling"),
    ],
)
def test_unsupported_distro_raises_with_clear_message(distribution, version):
    with pytest.raises(AnsibleFilterError, match="not supported.*nvidia_cuda_repo_distro"):
        nc.repo_distro(facts(distribution, version))


def test_repo_distro_override_wins_and_is_validated():
    assert nc.repo_distro(facts("Fedora", "41"), "rhel9") == "rhel9"
    with pytest.raises(AnsibleFilterError, match="unknown NVIDIA repository distro id 'ubuntu2004'"):
        nc.repo_distro(facts("Ubuntu", "24.04"), "ubuntu2004")


@pytest.mark.parametrize(
    "architecture,expected",
    [("x86_64", "x86_64"), ("amd64", "x86_64"), ("aarch64", "sbsa"), ("arm64", "sbsa")],
)
def test_repo_arch(architecture, expected):
    assert nc.repo_arch(architecture) == expected


def test_repo_arch_override_and_unsupported():
    assert nc.repo_arch("x86_64", "sbsa") == "sbsa"
    with pytest.raises(AnsibleFilterError, match="ppc64le"):
        nc.repo_arch("ppc64le")


# distro id, arch, repository URL, keyring .deb URL (apt) or .repo file URL (dnf)
REPO_URLS = [
    (
        "ubuntu2204",
        "x86_64",
        BASE + "/ubuntu2204/x86_64/",
        BASE + "/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb",
    ),
    (
        "ubuntu2404",
        "x86_64",
        BASE + "/ubuntu2404/x86_64/",
        BASE + "/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb",
    ),
    ("ubuntu2404", "sbsa", BASE + "/ubuntu2404/sbsa/", BASE + "/ubuntu2404/sbsa/cuda-keyring_1.1-1_all.deb"),
    ("debian12", "x86_64", BASE + "/debian12/x86_64/", BASE + "/debian12/x86_64/cuda-keyring_1.1-1_all.deb"),
    ("rhel9", "x86_64", BASE + "/rhel9/x86_64/", BASE + "/rhel9/x86_64/cuda-rhel9.repo"),
    ("rhel9", "sbsa", BASE + "/rhel9/sbsa/", BASE + "/rhel9/sbsa/cuda-rhel9.repo"),
    ("rhel8", "x86_64", BASE + "/rhel8/x86_64/", BASE + "/rhel8/x86_64/cuda-rhel8.repo"),
]


@pytest.mark.parametrize("distro,arch,repo,source", REPO_URLS)
def test_repository_urls(distro, arch, repo, source):
    assert nc.repo_url(BASE, distro, arch) == repo
    if nc.repo_family(distro) == "apt":
        assert nc.keyring_url(BASE, distro, arch) == source
        with pytest.raises(AnsibleFilterError, match="only for dnf"):
            nc.repo_file_url(BASE, distro, arch)
    else:
        assert nc.repo_file_url(BASE, distro, arch) == source
        with pytest.raises(AnsibleFilterError, match="only for apt"):
            nc.keyring_url(BASE, distro, arch)


@pytest.mark.parametrize("distro,arch,repo,source", REPO_URLS)
def test_mirror_base_url_replaces_only_the_base(distro, arch, repo, source):
    mirrored = source.replace(BASE, MIRROR.rstrip("/"))
    if nc.repo_family(distro) == "apt":
        assert nc.keyring_url(MIRROR, distro, arch) == mirrored
    else:
        assert nc.repo_file_url(MIRROR, distro, arch) == mirrored


def test_keyring_version_is_1_1_not_1_0():
    # keyring 1.0 returns 404 on Ubuntu 24.04
    assert "cuda-keyring_1.1-1_all.deb" in nc.keyring_url(BASE, "ubuntu2404", "x86_64")


@pytest.mark.parametrize("base", ["", "mirror.example.internal/cuda", "ftp://x/y", None])
def test_repo_url_rejects_non_urls(base):
    with pytest.raises(AnsibleFilterError, match="base URL"):
        nc.repo_url(base, "debian12", "x86_64")


def test_file_url_base_for_local_mirrors():
    assert nc.repo_url("file:///srv/mirror/", "debian12", "x86_64") == "file:///srv/mirror/debian12/x86_64/"


KERNEL = "6.8.0-45-generic"

# distro id, expected package plan for toolkit 13.0, branch 580, running kernel KERNEL
PACKAGE_PLANS = [
    (
        "ubuntu2204",
        {
            "family": "apt",
            "toolkit": ["cuda-toolkit-13-0"],
            "driver": ["nvidia-open"],
            "driver_pinning": ["nvidia-driver-pinning-580"],
            "driver_module_stream": "",
            "kernel_headers": ["linux-headers-" + KERNEL],
            "fabricmanager": ["nvidia-fabricmanager-580"],
        },
    ),
    (
        "ubuntu2404",
        {
            "family": "apt",
            "toolkit": ["cuda-toolkit-13-0"],
            "driver": ["nvidia-open"],
            "driver_pinning": ["nvidia-driver-pinning-580"],
            "driver_module_stream": "",
            "kernel_headers": ["linux-headers-" + KERNEL],
            "fabricmanager": ["nvidia-fabricmanager-580"],
        },
    ),
    (
        "debian12",
        {
            "family": "apt",
            "toolkit": ["cuda-toolkit-13-0"],
            "driver": ["nvidia-open"],
            "driver_pinning": ["nvidia-driver-pinning-580"],
            "driver_module_stream": "",
            "kernel_headers": ["linux-headers-" + KERNEL],
            "fabricmanager": ["nvidia-fabricmanager-580"],
        },
    ),
    (
        "rhel9",
        {
            "family": "dnf",
            "toolkit": ["cuda-toolkit-13-0"],
            "driver": ["nvidia-open"],
            "driver_pinning": [],
            "driver_module_stream": "nvidia-driver:580-open",
            "kernel_headers": ["kernel-devel-" + KERNEL],
            "fabricmanager": ["nvidia-fabricmanager-580"],
        },
    ),
]


@pytest.mark.parametrize("distro,expected", PACKAGE_PLANS)
def test_package_plan(distro, expected):
    assert nc.packages(distro, "13.0", 580, KERNEL) == expected


def test_package_plan_without_kernel_has_no_headers():
    assert nc.packages("debian12", "13.0", 580)["kernel_headers"] == []


def test_package_plan_accepts_branch_as_string_and_other_toolkits():
    plan = nc.packages("rhel9", "13.1", "590")
    assert plan["toolkit"] == ["cuda-toolkit-13-1"]
    assert plan["driver_module_stream"] == "nvidia-driver:590-open"
    assert plan["fabricmanager"] == ["nvidia-fabricmanager-590"]


@pytest.mark.parametrize("branch", ["abc", "58", "", "580-open", None])
def test_package_plan_rejects_bad_branch(branch):
    with pytest.raises(AnsibleFilterError, match="driver branch"):
        nc.packages("debian12", "13.0", branch)


@pytest.mark.parametrize("version", ["13", "13.0.1", "thirteen", ""])
def test_toolkit_rejects_bad_version(version):
    with pytest.raises(AnsibleFilterError, match="toolkit version"):
        nc.toolkit_package(version)


def test_toolkit_package_and_home():
    assert nc.toolkit_package("13.0") == "cuda-toolkit-13-0"
    assert nc.toolkit_home("13.0") == "/usr/local/cuda-13.0"


@pytest.mark.parametrize(
    "version,minimum,ok",
    [
        ("580.65.06", "580.65.06", True),  # CUDA 13.0 GA minimum itself
        ("580.95.05", "580.65.06", True),
        ("580.159.04", "580.65.06", True),  # numeric, not string, comparison
        ("580.65.5", "580.65.06", False),
        ("575.57.08", "580.65.06", False),
        ("590.44", "580.65.06", True),
        ("580.65", "580.65.06", False),
        ("", "580.65.06", False),
        ("garbage", "580.65.06", False),
    ],
)
def test_driver_version_satisfies(version, minimum, ok):
    assert nc.driver_version_satisfies(version, minimum) is ok


def test_driver_version_satisfies_rejects_bad_minimum():
    with pytest.raises(AnsibleFilterError, match="minimum driver version"):
        nc.driver_version_satisfies("580.95.05", "latest")


DROPIN = "/etc/apt/sources.list.d/nvidia-cuda-debian-contrib.sources"


@pytest.mark.parametrize(
    "lines,expected",
    [
        (  # debootstrap default: one-line source with main only
            ["http://deb.example/debian/ bookworm main deb /etc/apt/sources.list:1"],
            [{"uri": "http://deb.example/debian/", "suites": ["bookworm"]}],
        ),
        (  # deb822 debian.sources with updates and security, main only
            [
                "http://deb.example/debian/ bookworm main deb /etc/apt/sources.list.d/debian.sources:1",
                "http://deb.example/debian/ bookworm-updates main deb /etc/apt/sources.list.d/debian.sources:1",
                "http://sec.example/debian-security/ bookworm-security main deb /etc/apt/sources.list.d/debian.sources:7",
                "http://deb.example/debian/ bookworm main deb-src /etc/apt/sources.list.d/debian.sources:1",
            ],
            [
                {"uri": "http://deb.example/debian/", "suites": ["bookworm", "bookworm-updates"]},
                {"uri": "http://sec.example/debian-security/", "suites": ["bookworm-security"]},
            ],
        ),
        (  # contrib already there: nothing to add
            [
                "http://deb.example/debian/ bookworm main deb /etc/apt/sources.list:1",
                "http://deb.example/debian/ bookworm contrib deb /etc/apt/sources.list:1",
            ],
            [],
        ),
        (  # contrib only from the role's own drop-in: the answer stays the same (idempotent)
            [
                "http://deb.example/debian/ bookworm main deb /etc/apt/sources.list:1",
                "http://deb.example/debian/ bookworm contrib deb %s:4" % DROPIN,
            ],
            [{"uri": "http://deb.example/debian/", "suites": ["bookworm"]}],
        ),
        (  # NVIDIA's flat repository and other releases are left alone
            [
                "https://nv.example/repos/debian12/x86_64/ / deb /etc/apt/sources.list.d/cuda-debian12-x86_64.list:1",
                "http://deb.example/debian/ trixie main deb /etc/apt/sources.list:2",
            ],
            [],
        ),
    ],
)
def test_debian_contrib_sources(lines, expected):
    assert nc.debian_contrib_sources("\n".join(lines), "bookworm", DROPIN) == expected


def test_debian_contrib_sources_needs_release():
    with pytest.raises(AnsibleFilterError, match="codename"):
        nc.debian_contrib_sources("", "")


def test_filters_are_registered_with_role_prefix():
    filters = nc.FilterModule().filters()
    assert filters and all(name.startswith("nvidia_cuda_") for name in filters)
    assert filters["nvidia_cuda_packages"] is nc.packages
