"""deploy/: the systemd unit passes `systemd-analyze verify`, and the server started the way the
unit starts it (its environment, no flags) answers the unit's own health check, then stops
with 0 on SIGTERM as the unit's KillSignal asks."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

from parley import BINARY, ROOT

UNIT = os.path.join(ROOT, "deploy", "parley.service")


def unit_lines(key):
    with open(UNIT) as file:
        return [line.split("=", 1)[1].strip() for line in file if line.startswith(key + "=")]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_unit_verifies():
    directory = tempfile.mkdtemp(prefix="parley-unit-")
    unit = os.path.join(directory, "parley.service")
    with open(UNIT) as source, open(unit, "w") as target:
        target.write(source.read().replace("/usr/local/bin/parley-server", os.path.abspath(BINARY)))
    result = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
    problems = [line for line in (result.stdout + result.stderr).splitlines() if "parley.service" in line]
    assert result.returncode == 0 and not problems, problems


def test_started_as_the_unit_starts_it_the_health_check_passes_and_sigterm_exits_0():
    environment = dict(os.environ)
    for assignment in " ".join(unit_lines("Environment")).split():
        name, value = assignment.split("=", 1)
        environment[name] = value
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment.update(PARLEY_PORT=str(port), PARLEY_DATA_DIR=tempfile.mkdtemp(prefix="parley-unit-data-"),
                       PARLEY_ARGON2_PASSES="1", PARLEY_ARGON2_MEMORY_MIB="1")
    assert environment["PARLEY_HOST"] == "0.0.0.0"
    environment["PARLEY_HOST"] = "127.0.0.1"   # loopback only, in a test
    server = subprocess.Popen([BINARY], env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (post,) = unit_lines("ExecStartPost")
        # systemd turns $$ into $; the command runs under /bin/sh with the unit's environment.
        command = re.match(r"/bin/sh -c '(.*)'$", post).group(1).replace("$$", "$")
        check = subprocess.run(["/bin/sh", "-c", command], env=environment, capture_output=True, text=True, timeout=40)
        assert check.returncode == 0, check.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
