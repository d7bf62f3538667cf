"""deploy/: the systemd unit passes `systemd-analyze verify` and `systemd-analyze security`
rates it OK; the server started the way the unit starts it (its environment, no flags)
answers the unit's own health check (deploy/parley-healthcheck, also the container's), over
HTTPS when TLS is on and on a host that is not loopback, then stops with 0 on SIGTERM as the
unit's KillSignal asks."""
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
HEALTHCHECK = os.path.join(ROOT, "deploy", "parley-healthcheck")


def unit_lines(key):
    with open(UNIT) as file:
        return [line.split("=", 1)[1].strip() for line in file if line.startswith(key + "=")]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_unit_verifies():
    directory = tempfile.mkdtemp(prefix="parley-unit-")
    unit = os.path.join(directory, "parley.service")
    with open(UNIT) as source, open(unit, "w") as target:
        target.write(source.read().replace("/usr/local/bin/parley-server", os.path.abspath(BINARY))
                     .replace("/usr/local/bin/parley-healthcheck", HEALTHCHECK))
    result = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
    problems = [line for line in (result.stdout + result.stderr).splitlines() if "parley.service" in line]
    assert result.returncode == 0 and not problems, problems
    # The sandbox: systemd's own rating (5.6 MEDIUM before issue 31; "OK" is below 2).
    rated = subprocess.run(["systemd-analyze", "security", "--offline=true", unit], capture_output=True, text=True)
    level = re.search(r"Overall exposure level for parley.service: ([0-9.]+)", rated.stdout)
    assert level and float(level.group(1)) <= 1.5, rated.stdout[-2000:]


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
        assert health_check_as_the_unit_runs_it(environment).returncode == 0
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0


def health_check_as_the_unit_runs_it(environment):
    (post,) = unit_lines("ExecStartPost")
    program, *arguments = post.split()
    assert program == "/usr/local/bin/parley-healthcheck"
    return subprocess.run([HEALTHCHECK, *arguments], env=environment, capture_output=True, text=True, timeout=40)


def free_port(host="127.0.0.1"):
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("tls,host", [(True, "0.0.0.0"), (False, "127.0.0.2"), (True, "127.0.0.2")])
def test_the_health_check_follows_the_servers_tls_and_address(tls, host):
    from tlscerts import Authority
    environment = dict(os.environ, PARLEY_HOST=host, PARLEY_PORT=str(free_port()), PARLEY_DATA_DIR=tempfile.mkdtemp(prefix="parley-unit-data-"),
                       PARLEY_ARGON2_PASSES="1", PARLEY_ARGON2_MEMORY_MIB="1")
    if tls:
        cert, key = Authority().issue()
        environment.update(PARLEY_TLS_CERT_FILE=cert, PARLEY_TLS_KEY_FILE=key)
    server = subprocess.Popen([BINARY], env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check = health_check_as_the_unit_runs_it(environment)
        assert check.returncode == 0, check.stderr
        # And a server that is not there fails it, saying where it asked (once: no waiting).
        gone = dict(environment, PARLEY_PORT=str(free_port()))
        failed = subprocess.run([HEALTHCHECK], env=gone, capture_output=True, text=True, timeout=20)
        assert failed.returncode == 1 and "/healthz did not answer 200" in failed.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0


def test_the_container_and_the_unit_share_the_health_check_and_the_build_context_is_small():
    with open(os.path.join(ROOT, "deploy", "Containerfile")) as file:
        container = file.read()
    assert 'HEALTHCHECK' in container and '"/usr/local/bin/parley-healthcheck"' in container
    assert re.search(r"^ARG SWIFT_IMAGE=swift:\d+\.\d+\.\d+-", container, re.M), "the build image is pinned to a release"
    with open(os.path.join(ROOT, ".dockerignore")) as file:
        ignored = file.read().split()
    assert {".build", ".venv", ".git"} <= set(ignored)
