"""Starts the real parley-server binary for the interop tests and stops it with SIGTERM."""
import os
import signal
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("PARLEY_SERVER", os.path.join(ROOT, ".build", "debug", "parley-server"))


class Server:
    def __init__(self, *extra):
        self.data = tempfile.mkdtemp(prefix="parley-interop-")
        self.process = subprocess.Popen(
            [BINARY, "--port", "0", "--threads", "2", "--data-dir", self.data, "--enable-echo",
             "--max-body-bytes", str(16 << 20), "--max-message-bytes", str(16 << 20), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if "listening on http://" not in line:
            self.process.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.process.stderr.read()!r}")
        self.url = line.split("listening on ")[1].split()[0]
        self.host, port = self.url[len("http://"):].rsplit(":", 1)
        self.port = int(port)
        self.ws = f"ws://{self.host}:{self.port}"

    def stop(self, timeout=15):
        """SIGTERM, then wait for a clean exit; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


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
