import os

import pytest

from harness import systemd_container


@pytest.fixture(scope="session")
def container():
    """One systemd container for the session, with the SGLang simulator copied in."""
    with systemd_container("k26-it-%d" % os.getpid()) as box:
        box.install_simulator()
        yield box
