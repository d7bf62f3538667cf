"""Starts the real parley-server binary for the interop tests and stops it with SIGTERM."""
import pytest

import parley
from fakepush import FakePush
from parley import BINARY, ROOT  # noqa: F401 (tests import them from here)
from tlscerts import Authority


class Server(parley.Server):
    """The real binary with the conformance endpoints on and 16 MiB limits for big messages."""

    def __init__(self, *extra):
        super().__init__("--enable-echo", "--max-body-bytes", str(16 << 20), "--max-message-bytes", str(16 << 20), *extra)
        self.ws = f"ws://{self.host}:{self.port}"


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    assert running.stop() == 0, "parley-server must exit 0 on SIGTERM"


@pytest.fixture()
def fresh_server():
    running = Server()
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture(scope="module")
def fake():
    """Fake APNs and FCM (Tests/Interop/fakepush.py) for one test module: give a server
    `*fake.server_flags()`."""
    running = FakePush(Authority())
    yield running
    running.stop()
