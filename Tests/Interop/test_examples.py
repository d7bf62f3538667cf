"""Each tutorial's flow in Examples/, run as the programs they are against the real server:
each must print its steps and end with exit 0 (they check what the tutorial's user would see)."""
import os
import subprocess

import pytest

from parley import ROOT, Server


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.stop()


@pytest.mark.parametrize("example", ["MessageMe", "SyncanoChat", "DeliveryStatus", "BackendlessChat"])
def test_the_example_runs_its_tutorials_flow(server, example):
    binary = os.path.join(ROOT, ".build", "debug", example)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    result = subprocess.run([binary, "--server", server.url, "--app-key", server.app_key], capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, f"{example} failed:\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip().endswith(f"{example}: ok")


def test_the_pusher_tutorial_runs_unchanged_over_the_pusher_endpoint(server):
    """Examples/PusherChat: the tutorial's backend (Pusher's server library) and its app (a Pusher
    client), with only host, port and keys changed; the sender's bubble ends Delivered."""
    listing = server.apps("list")
    pusher_id = next(line for line in listing.stdout.splitlines() if line.startswith("default\t")).split("pusher app id ")[1].split()[0]
    script = os.path.join(ROOT, "Examples", "PusherChat", "delivery_status.py")
    result = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), script, "--server", server.url, "--app-key", server.app_key,
                             "--app-secret", server.app_secret, "--pusher-app-id", pusher_id],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"PusherChat failed:\n{result.stdout}\n{result.stderr}"
    assert "[Sending]" in result.stdout and "[Sent]" in result.stdout and "[Delivered]" in result.stdout
    assert result.stdout.strip().endswith("PusherChat: ok")


def test_the_pusher_tutorials_backend_runs_over_the_server_api_and_webhooks():
    """Examples/PusherBackend: the tutorial's backend over the server API: users it creates,
    messages posted as them, each heard back by a signed webhook, a phone on an issued token."""
    server = Server("--webhooks-allow-private", "--webhook-first-retry", "100")
    try:
        script = os.path.join(ROOT, "Examples", "PusherBackend", "backend_flow.py")
        result = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), script, "--server", server.url, "--app-key", server.app_key,
                                 "--app-secret", server.app_secret], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"PusherBackend failed:\n{result.stdout}\n{result.stderr}"
        assert result.stdout.count("[Webhook message.created]") == 3
        assert result.stdout.strip().endswith("PusherBackend: ok")
    finally:
        server.stop()


def test_an_apps_ci_moves_the_test_mode_clock_instead_of_waiting():
    """Examples/TestMode: a ban of an hour, a message scheduled for tomorrow and a push to a
    sleeping phone, each tested in seconds against `parley-server --test-mode` (docs/test-mode.md)."""
    server = Server("--test-mode")
    try:
        script = os.path.join(ROOT, "Examples", "TestMode", "app_ci.py")
        result = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), script, "--server", server.url, "--app-key", server.app_key,
                                 "--app-secret", server.app_secret], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"TestMode failed:\n{result.stdout}\n{result.stderr}"
        assert result.stdout.count("  ok in ") == 3 and result.stdout.strip().endswith("TestMode: ok")
    finally:
        server.stop()
    # Against a server that is not in test mode it says what to start.
    plain = Server()
    try:
        result = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), script, "--server", plain.url, "--app-key", plain.app_key,
                                 "--app-secret", plain.app_secret], capture_output=True, text=True, timeout=120)
        assert result.returncode == 1 and "--test-mode" in result.stdout
    finally:
        plain.stop()


def test_an_ios_apps_ci_suite_with_the_sdk_runs_against_test_mode():
    """Examples/TestModeSuite: the SDK against `--test-mode` — an id-only push the extension
    resolves, a ban of an hour, a scheduled message, the outbox through a store outage."""
    server = Server("--test-mode")
    try:
        assert server.apps("push-content", "default", "id-only").returncode == 0
        binary = os.path.join(ROOT, ".build", "debug", "TestModeSuite")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        result = subprocess.run([binary, "--server", server.url, "--app-key", server.app_key, "--app-secret", server.app_secret],
                                capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, f"TestModeSuite failed:\n{result.stdout}\n{result.stderr}"
        assert result.stdout.count("  ok in ") == 4 and result.stdout.strip().endswith("TestModeSuite: ok")
    finally:
        server.stop()


def test_an_example_without_a_server_says_how_to_run_it():
    result = subprocess.run([os.path.join(ROOT, ".build", "debug", "MessageMe")], capture_output=True, text=True, timeout=30,
                            env={k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")})
    assert result.returncode == 2 and "--server" in result.stdout
