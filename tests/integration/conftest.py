import os

import pytest

from harness import SystemdContainer


@pytest.fixture(scope="session")
def container():
    """One systemd container for the session, with the SGLang simulator copied in."""
    box = SystemdContainer("k26-it-%d" % os.getpid())
    try:
        box.install_simulator()
        yield box
    finally:
        box.remove()
