"""The `parley` terminal client's scripted commands, end to end against the real server, as a
person at a shell would run them: exit codes, output lines, state kept between runs."""
import json
import os
import subprocess
import tempfile
import time
import uuid

import pytest

from parley import ROOT, Client, Server

CLI = os.environ.get("PARLEY_CLI", os.path.join(ROOT, ".build", "debug", "parley"))


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.stop()


class Shell:
    """One person's terminal: their own PARLEY_HOME."""

    def __init__(self, server):
        self.server = server
        self.home = tempfile.mkdtemp(prefix="parley-cli-")

    def run(self, *args, password=None, server_flags=True, timeout=60):
        env = dict(os.environ, PARLEY_HOME=self.home)
        env.pop("PARLEY_PASSWORD", None)
        flags = ["--server", self.server.url, "--app-key", self.server.app_key] if server_flags else []
        return subprocess.run([CLI, *flags, *args], input=(password + "\n") if password else "", env=env,
                              capture_output=True, text=True, timeout=timeout)


def name(prefix):
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def test_register_login_whoami_search_send_history_edit_delete(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    registered = ana.run("register", ana_name, "--display-name", "Ana Lima", password="correct horse battery")
    assert registered.returncode == 0, registered.stderr
    assert registered.stdout.startswith(f"signed in as {ana_name}")
    assert bob.run("register", bob_name, password="correct horse battery").returncode == 0
    state = os.path.join(ana.home, "state.json")
    assert oct(os.stat(state).st_mode & 0o777) == "0o600", "the token is readable by its owner only"

    # Later commands need no server flags: register saved them.
    whoami = ana.run("whoami", server_flags=False)
    assert whoami.returncode == 0 and whoami.stdout.split("\t")[:2] == [ana_name, "Ana Lima"]
    found = ana.run("users", "search", bob_name[:5])
    assert any(line.split("\t")[0] == bob_name for line in found.stdout.splitlines())

    sent = ana.run("send", "--to", f"{bob_name},nobody-{uuid.uuid4().hex[:4]}", "hello", "Bob")
    assert sent.returncode == 0, sent.stderr
    assert "no user named" in sent.stderr
    message_id, seq, conversation = sent.stdout.strip().split("\t")
    assert message_id.startswith("m_") and seq == "seq 1" or seq.startswith("seq ")
    located = bob.run("send", conversation, "--location", "52.52,13.405")
    assert located.returncode == 0, located.stderr
    conversations = bob.run("conversations")
    assert conversations.stdout.startswith(conversation) and ana_name in conversations.stdout

    assert ana.run("edit", conversation, message_id, "hello", "again").returncode == 0
    history = bob.run("history", conversation)
    lines = [line.split("\t") for line in history.stdout.splitlines()]
    assert [line[2] for line in lines] == [ana_name, bob_name]
    assert lines[0][4] == "hello again (edited)" and lines[1][4].startswith("📍 52.52,13.405")
    page = json.loads(bob.run("history", conversation, "--json").stdout)
    assert [m["id"] for m in page["messages"]][0] == message_id

    refused = bob.run("delete", conversation, message_id)  # not Bob's
    assert refused.returncode == 1 and "forbidden" in refused.stderr
    assert ana.run("delete", conversation, message_id).returncode == 0
    assert "(deleted)" in bob.run("history", conversation).stdout


def test_listen_prints_events_as_json_lines_as_they_arrive(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob.run("register", bob_name, password="correct horse battery")
    conversation = ana.run("send", "--to", bob_name, "first").stdout.strip().split("\t")[2]
    env = dict(os.environ, PARLEY_HOME=bob.home)
    listener = subprocess.Popen([CLI, "listen", "--json", "--conversation", conversation], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Send until the listener shows it (it may still be connecting when the first goes out).
        deadline = time.monotonic() + 30
        seen = None
        os.set_blocking(listener.stdout.fileno(), False)
        buffer = ""
        while seen is None and time.monotonic() < deadline:
            text = f"live {uuid.uuid4().hex[:6]}"
            assert ana.run("send", conversation, text).returncode == 0
            wait_until = time.monotonic() + 2
            while time.monotonic() < wait_until and seen is None:
                chunk = listener.stdout.read() or ""
                buffer += chunk
                for line in buffer.splitlines():
                    event = json.loads(line)
                    if event.get("type") == "message.created" and event["message"]["content"].get("text") == text:
                        seen = event
                if seen is None:
                    time.sleep(0.05)
        assert seen is not None, f"listen printed: {buffer!r}"
        assert seen["conversationId"] == conversation and seen["position"] > 0
    finally:
        listener.terminate()
        listener.wait(timeout=10)


def test_exit_codes_say_what_went_wrong(server):
    shell = Shell(server)
    assert shell.run("whoami").returncode == 4, "not signed in"
    assert shell.run("frobnicate").returncode == 2
    assert shell.run("send").returncode == 2
    wrong = shell.run("login", name("ghost"), password="wrong password!")
    assert wrong.returncode == 1 and "wrong username or password" in wrong.stderr
    down = subprocess.run([CLI, "--server", "http://127.0.0.1:9", "--app-key", "pk_x", "login", "x"], input="pw\n",
                          env=dict(os.environ, PARLEY_HOME=shell.home), capture_output=True, text=True, timeout=60)
    assert down.returncode == 3 and "cannot reach the server" in down.stderr
    helped = shell.run("send", "--help")
    assert helped.returncode == 0 and "--to alice,bob" in helped.stdout
    overview = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=30)
    assert overview.returncode == 0 and "EXIT CODES" in overview.stdout


def test_a_send_while_the_server_is_down_is_queued_and_goes_with_the_next_command():
    running = Server()
    try:
        ana, bob = Shell(running), Shell(running)
        ana_name, bob_name = name("ana"), name("bob")
        ana.run("register", ana_name, password="correct horse battery")
        bob.run("register", bob_name, password="correct horse battery")
        conversation = ana.run("send", "--to", bob_name, "before").stdout.strip().split("\t")[2]
        running.kill()
        queued = ana.run("send", conversation, "while", "down", timeout=90)
        assert queued.returncode == 3, queued.stderr
        running.start()  # same data; the port may differ
        ana.server = running
        after = ana.run("send", conversation, "after")
        assert after.returncode == 0, after.stderr
        texts = [line.split("\t")[4] for line in bob.run("history", conversation).stdout.splitlines()]
        assert texts == ["before", "while down", "after"], "the queued message went first, once"
    finally:
        running.kill()
