"""The `parley` terminal client's scripted commands, end to end against the real server, as a
person at a shell would run them: exit codes, output lines, state kept between runs."""
import json
import os
import queue
import re
import shlex
import subprocess
import threading
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
        env = clean_env(PARLEY_HOME=self.home)
        flags = ["--server", self.server.url, "--app-key", self.server.app_key] if server_flags else []
        return subprocess.run([CLI, *flags, *args], input=(password + "\n") if password else "", env=env,
                              capture_output=True, text=True, timeout=timeout)


def clean_env(**extra):
    """The environment without any PARLEY_ settings of the caller's, plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}, **extra}


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
    assert message_id.startswith("m_") and seq == "seq 4"  # after the two member.added and conversation.created
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
    env = clean_env(PARLEY_HOME=bob.home)
    listener = subprocess.Popen([CLI, "listen", "--json", "--conversation", conversation], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in listener.stdout], daemon=True).start()
    try:
        # Send until the listener prints it (it may still be connecting when the first goes out).
        deadline = time.monotonic() + 30
        seen, printed = None, []
        while seen is None and time.monotonic() < deadline:
            text = f"live {uuid.uuid4().hex[:6]}"
            assert ana.run("send", conversation, text).returncode == 0
            try:
                while seen is None:
                    event = json.loads(lines.get(timeout=2))
                    printed.append(event)
                    if event.get("type") == "message.created" and event["message"]["content"].get("text") == text:
                        seen = event
            except queue.Empty:
                pass
        assert seen is not None, f"listen printed: {printed!r}"
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
                          env=clean_env(PARLEY_HOME=shell.home), capture_output=True, text=True, timeout=60)
    assert down.returncode == 3 and "cannot reach the server" in down.stderr
    helped = shell.run("send", "--help")
    assert helped.returncode == 0 and "--to alice,bob" in helped.stdout
    overview = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=30)
    assert overview.returncode == 0 and "EXIT CODES" in overview.stdout
    # A server given without a scheme works; one that is no address, and the secret given as
    # the key, are explained in the options' words (exit 2), never "unexpected answer".
    bare = subprocess.run([CLI, "--server", f"{server.host}:{server.port}", "--app-key", server.app_key, "register", name("bare")],
                          input="correct horse battery\n", env=clean_env(PARLEY_HOME=tempfile.mkdtemp(prefix="parley-cli-")),
                          capture_output=True, text=True, timeout=60)
    assert bare.returncode == 0 and "signed in as" in bare.stdout, bare.stderr
    nowhere = shell.run("--server", "ftp://x", "--app-key", server.app_key, "whoami", server_flags=False)
    assert nowhere.returncode == 2 and "--server must be the server's address" in nowhere.stderr
    secret = subprocess.run([CLI, "--server", server.url, "--app-key", server.app_secret, "whoami"], env=clean_env(PARLEY_HOME=shell.home),
                            capture_output=True, text=True, timeout=60)
    assert secret.returncode == 2 and "--app-key is the app's public pk_" in secret.stderr and server.app_secret not in secret.stderr


def test_on_a_terminal_register_prompts_for_the_password_and_does_not_show_it(server):
    """Issue 34, item 2: on a terminal `parley register` asks `Password:` with echo off; from a
    pipe it keeps reading standard input (the other tests)."""
    import os
    import pty
    import select
    home = tempfile.mkdtemp(prefix="parley-cli-")
    controller, terminal = pty.openpty()
    process = subprocess.Popen([CLI, "--server", server.url, "--app-key", server.app_key, "register", name("tty")],
                               stdin=terminal, stdout=terminal, stderr=terminal, env=clean_env(PARLEY_HOME=home))
    os.close(terminal)
    seen = b""

    def read_until(marker, timeout=30):
        nonlocal seen
        import time
        deadline = time.monotonic() + timeout
        while marker not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
        return marker in seen

    try:
        assert read_until(b"Password: "), seen
        os.write(controller, b"correct horse battery\n")
        assert read_until(b"signed in as"), seen
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
    assert b"correct horse battery" not in seen, "the password was echoed"


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


class Tmux:
    """A terminal a person types into: a tmux session of 80 × 24 running one command."""

    def __init__(self, name, command, env):
        self.name = name
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "80", "-y", "24", f"env {exports} {command}"], check=True)

    def screen(self):
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True).stdout

    def wait_for(self, predicate, timeout=20):
        """Reads the screen until it shows what the test waits for (or fails with what it shows)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if predicate(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen never showed it:\n{screen}")
            time.sleep(0.1)

    def type(self, text, enter=True):
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)
        if enter:
            subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def keys(self, *names):
        subprocess.run(["tmux", "send-keys", "-t", self.name, *names], check=True)

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def test_the_chat_screen_as_a_person_uses_it(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, "--display-name", "Ana", password="correct horse battery")
    bob.run("register", bob_name, "--display-name", "Bob", password="correct horse battery")
    conversation = bob.run("send", "--to", ana_name, "hi Ana, this is Bob").stdout.strip().split("\t")[2]
    for i in range(0, 30, 10):  # history to scroll back through: each with 9 more lines between
        bob.run("send", conversation, f"old message {i}" + "".join(f"\nline {j}" for j in range(9)))
    env = {"PARLEY_HOME": ana.home, "PATH": os.environ.get("PATH", "")}
    screen = Tmux(f"ana-{uuid.uuid4().hex[:6]}", f"{CLI} chat {conversation}", env)
    bobs = None
    try:
        # The title shows Bob's presence (he has no socket open), and nothing of Ana's own
        # connection once it is live.
        shown = screen.wait_for(lambda s: "old message 20" in s and "(you:" not in s
                                and ("[last seen " in s.splitlines()[0] or "[offline]" in s.splitlines()[0]))
        assert "Bob" in shown and "▏ old message 20" in shown, "others' messages on the left with their name"

        screen.type("hello Bob, Ana here")
        mine = screen.wait_for(lambda s: "hello Bob, Ana here ▕" in s and "✓" in s)
        line = next(l for l in mine.splitlines() if "hello Bob, Ana here" in l)
        assert line.rstrip().endswith("▕") and line.startswith(" " * 20), "mine on the right"
        history = bob.run("history", conversation).stdout
        assert "hello Bob, Ana here" in history

        # Bob opens the same conversation: his screen marks it delivered and read; Ana sees ✓✓ read.
        # Bob opens it by Ana's name, as a person would (issue 34: @username, or a title).
        bobs = Tmux(f"bob-{uuid.uuid4().hex[:6]}", f"{CLI} chat @{ana_name}", {"PARLEY_HOME": bob.home, "PATH": env["PATH"]})
        bobs.wait_for(lambda s: "hello Bob, Ana here" in s)
        screen.wait_for(lambda s: "✓✓ read" in s)
        screen.wait_for(lambda s: "[online]" in s.splitlines()[0])   # Bob, now here

        # Bob types: Ana sees the typing line, then his message.
        bobs.type("typing something", enter=False)
        screen.wait_for(lambda s: "Bob is typing…" in s)
        bobs.keys("Enter")
        screen.wait_for(lambda s: "▏ typing something" in s)

        # React to and pin Bob's message by its number: both screens show it live.
        lines = screen.screen().splitlines()
        at = next(i for i, l in enumerate(lines) if "▏ typing something" in l)
        bobs_number = next(l for l in lines[at:] if l.strip().startswith("#")).split()[0]
        screen.type(f"/react {bobs_number[1:]} 👍")
        screen.wait_for(lambda s: "[👍 1]" in s)
        bobs.wait_for(lambda s: "👍 1" in s)
        screen.type(f"/pin {bobs_number[1:]}")
        bobs.wait_for(lambda s: "📌 typing something" in s)

        # Edit and delete one's own message by its number.
        number = next(l for l in screen.screen().splitlines() if "✓✓ read" in l).split()[0]
        screen.type(f"/edit {number[1:]} hello Bob (fixed)")
        screen.wait_for(lambda s: "hello Bob (fixed) (edited)" in s)
        bobs.wait_for(lambda s: "hello Bob (fixed) (edited)" in s)
        screen.type(f"/delete {number[1:]}")
        bobs.wait_for(lambda s: "(deleted)" in s and "hello Bob (fixed)" not in s)
        screen.type(f"/edit {bobs_number} not mine")   # "#N" works as well as "N"
        screen.wait_for(lambda s: "you can only edit your own messages" in s)

        # Bob asks a poll from his shell; Ana votes in it by its number.
        asked = bob.run("poll", conversation, "Lunch?", "Pizza", "Sushi")
        poll_number = next(l for l in bob.run("history", conversation).stdout.splitlines() if "📊 Lunch?" in l).split("\t")[0]
        screen.wait_for(lambda s: "📊 Lunch? 1) Pizza ·0  2) Sushi ·0" in s)
        screen.type(f"/vote #{poll_number} 2")
        screen.wait_for(lambda s: "2) Sushi ·1 ✓" in s and f"voted in #{poll_number}" in s)
        assert asked.returncode == 0

        # Scrolling back shows older history.
        screen.keys("PageUp")
        screen.keys("PageUp")
        screen.wait_for(lambda s: "old message 0" in s and "↑" in s)
        screen.type("/quit")
        deadline = time.monotonic() + 10
        while subprocess.run(["tmux", "has-session", "-t", screen.name], capture_output=True).returncode == 0:
            assert time.monotonic() < deadline, "/quit did not leave"
            time.sleep(0.1)
    finally:
        screen.close()
        if bobs:
            bobs.close()


def test_the_chat_screen_shows_the_servers_ticks_on_opening_and_reads_as_receipts_arrive(server):
    """Issue 34, item 2: ticks from the server's status when the chat opens (not ✓ for all), and
    every message of mine up to a peer's read watermark marked read as receipts arrive."""
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, "--display-name", "Ana", password="correct horse battery")
    bob.run("register", bob_name, "--display-name", "Bob", password="correct horse battery")
    first = ana.run("send", "--to", bob_name, "first, read already").stdout.strip().split("\t")
    conversation = first[2]
    second = ana.run("send", conversation, "second, not yet").stdout.strip().split("\t")
    reader = Client(server)
    reader.token = json.load(open(os.path.join(bob.home, "state.json")))["token"]
    first_seq = int(first[1].split()[1])
    assert reader.post(f"/v1/conversations/{conversation}/receipts", {"readSeq": first_seq})[0] == 200
    screen = Tmux(f"ana-{uuid.uuid4().hex[:6]}", f"{CLI} chat {conversation}", {"PARLEY_HOME": ana.home, "PATH": os.environ.get("PATH", "")})
    try:
        shown = screen.wait_for(lambda s: "first, read already" in s and "second, not yet" in s)
        lines = shown.splitlines()
        def status_after(text):
            at = next(i for i, line in enumerate(lines) if text in line)
            return next(line for line in lines[at + 1:] if line.strip().startswith("#"))
        assert "✓✓ read" in status_after("first, read already"), shown
        assert "✓✓ read" not in status_after("second, not yet"), shown
        # Bob reads the rest (on his phone, here the API): the screen follows at once.
        second_seq = int(second[1].split()[1])
        assert reader.post(f"/v1/conversations/{conversation}/receipts", {"readSeq": second_seq})[0] == 200
        screen.wait_for(lambda s: s.count("✓✓ read") >= 2)
    finally:
        screen.close()


def test_send_a_photo_and_a_file_then_download_them(server, tmp_path):
    import media
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    assert ana.run("register", ana_name, password="correct horse battery").returncode == 0
    assert bob.run("register", bob_name, password="correct horse battery").returncode == 0
    first = ana.run("send", "--to", bob_name, "hello")
    conversation = first.stdout.split("\t")[2].strip()
    photo = tmp_path / "beach.jpg"
    photo.write_bytes(media.jpeg(800, 600, orientation=1))
    sent = ana.run("send", conversation, "--photo", str(photo), "the", "beach")
    assert sent.returncode == 0, sent.stderr
    report = tmp_path / "report.pdf"
    report.write_bytes(media.pdf(5000))
    sent = ana.run("send", conversation, "--file", str(report))
    assert sent.returncode == 0, sent.stderr
    history = json.loads(bob.run("history", conversation, "--json").stdout)
    photo_content, file_content = history["messages"][-2]["content"], history["messages"][-1]["content"]
    assert photo_content["type"] == "photo" and photo_content["caption"] == "the beach" and photo_content["width"] == 800
    assert file_content == {"type": "file", "attachmentId": file_content["attachmentId"], "name": "report.pdf",
                            "mimeType": "application/pdf", "sizeBytes": len(report.read_bytes())}
    # Bob saves both; the photo no longer carries a location.
    saved = bob.run("download", photo_content["attachmentId"], "--output", str(tmp_path / "got.jpg"))
    assert saved.returncode == 0, saved.stderr
    assert media.exif_of((tmp_path / "got.jpg").read_bytes())[1] is False
    saved = subprocess.run([CLI, "download", file_content["attachmentId"]], cwd=tmp_path, env=clean_env(PARLEY_HOME=bob.home),
                           capture_output=True, text=True, timeout=60)
    assert saved.returncode == 0 and saved.stdout.strip().endswith("report.pdf"), saved.stderr
    assert (tmp_path / "report.pdf").read_bytes() == report.read_bytes()
    thumb = bob.run("download", photo_content["attachmentId"], "--thumbnail", "--output", str(tmp_path / "t.jpg"))
    assert thumb.returncode == 0 and (tmp_path / "t.jpg").read_bytes()[:2] == b"\xff\xd8"
    # A stranger gets the server's refusal and exit 1; a bad option, exit 2.
    eve = Shell(server)
    assert eve.run("register", name("eve"), password="correct horse battery").returncode == 0
    refused = eve.run("download", photo_content["attachmentId"], "--output", str(tmp_path / "no.jpg"))
    assert refused.returncode == 1 and "no such attachment" in refused.stderr
    assert ana.run("send", conversation, "--video", str(photo)).returncode == 2
    # As docs/media.md writes it: --thumbnail takes the still's path for send (for download it
    # is a switch). The flat option parser before per-command declarations took the path as
    # a caption word and refused the send.
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(media.mp4())
    sent = ana.run("send", conversation, "--video", str(clip), "--thumbnail", str(photo), "--duration", "12", "at", "sea")
    assert sent.returncode == 0, sent.stderr
    video = json.loads(bob.run("history", conversation, "--json").stdout)["messages"][-1]["content"]
    assert video["type"] == "video" and video["durationSeconds"] == 12 and video["caption"] == "at sea" and video["thumbnailId"]
    text = tmp_path / "notes.txt"
    text.write_text("not a picture")
    refused = ana.run("send", conversation, "--photo", str(text))
    assert refused.returncode == 1, refused.stderr
    assert "not image/jpeg as declared" in refused.stderr


def test_an_upload_cut_off_midway_is_resumed_by_the_client_from_where_the_server_stopped(server, tmp_path):
    import media
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    assert ana.run("register", ana_name, password="correct horse battery").returncode == 0
    assert bob.run("register", bob_name, password="correct horse battery").returncode == 0
    conversation = ana.run("send", "--to", bob_name, "a long report follows").stdout.split("\t")[2].strip()
    report = tmp_path / "report.pdf"
    report.write_bytes(media.pdf(3_000_000))
    from proxy import CuttingProxy
    proxy = CuttingProxy(server, cut=1_000_000)
    try:
        sent = subprocess.run([CLI, "--server", proxy.url, "--app-key", server.app_key, "send", conversation, "--file", str(report)],
                              env=clean_env(PARLEY_HOME=ana.home), capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr
        assert proxy.cut_done, "the first upload was cut off"
        heads = proxy.upload_heads()
        assert len(heads) == 2, heads
        size = len(report.read_bytes())
        assert "content-range" not in heads[0].lower() and f"content-length: {size}\r\n" in heads[0].lower()
        resumed = re.search(rf"content-range: bytes (\d+)-{size - 1}/{size}\r\n", heads[1].lower())
        assert resumed and 0 < int(resumed.group(1)) < size // 2, "only the rest was sent again"
    finally:
        proxy.close()
    history = json.loads(bob.run("history", conversation, "--json").stdout)
    content = history["messages"][-1]["content"]
    assert content["type"] == "file" and content["sizeBytes"] == len(report.read_bytes())
    saved = bob.run("download", content["attachmentId"], "--output", str(tmp_path / "got.pdf"))
    assert saved.returncode == 0, saved.stderr
    assert (tmp_path / "got.pdf").read_bytes() == report.read_bytes()


def test_a_push_token_is_registered_listed_and_removed_and_a_conversation_muted(server):
    bob, ana = Shell(server), Shell(server)
    bob_name = name("bob")
    assert bob.run("register", bob_name, password="correct horse battery").returncode == 0
    assert ana.run("register", name("ana"), password="correct horse battery").returncode == 0
    token = "AB" * 32
    registered = bob.run("push", "register", token, "--sandbox")
    assert registered.returncode == 0, registered.stderr
    device_id, platform, environment = registered.stdout.strip().split("\t")
    assert device_id.startswith("d_") and (platform, environment) == ("apns", "sandbox")
    assert bob.run("push", "register", "fcm:" + "x" * 40, "--fcm").returncode == 0
    listed = [line.split("\t") for line in bob.run("push", "list").stdout.splitlines()]
    assert sorted(line[1] for line in listed) == ["apns", "fcm"] and ["ab" * 32] == [l[3] for l in listed if l[1] == "apns"]
    bad = bob.run("push", "register", "xyz")
    assert bad.returncode == 2 and "--fcm" in bad.stderr
    assert bob.run("push", "unregister").returncode == 0
    assert bob.run("push", "list").stdout == ""
    conversation = ana.run("send", "--to", bob_name, "hi").stdout.strip().split("\t")[2]
    muted = bob.run("mute", conversation, "--hours", "2")
    assert muted.returncode == 0 and muted.stdout.startswith("muted until")
    assert bob.run("unmute", conversation).stdout.strip() == "unmuted"
    chosen = bob.run("notify", conversation, "mentions")
    assert chosen.stdout.strip() == "pushes here: mentions of you only", chosen.stderr
    assert bob.run("notify", conversation, "default").stdout.strip() == "pushes here: every new message"
    loud = bob.run("notify", conversation, "loud")
    assert loud.returncode == 2 and "all|mentions|default" in loud.stderr


def test_react_pin_and_mentions_from_the_shell(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob.run("register", bob_name, password="correct horse battery")
    sent = ana.run("send", "--to", bob_name, f"@{bob_name} lunch?")
    message_id, _, conversation = sent.stdout.strip().split("\t")
    reacted = bob.run("react", conversation, message_id, "👍")
    assert reacted.returncode == 0 and reacted.stdout.strip() == "[👍 1]", reacted.stderr
    assert ana.run("react", conversation, message_id, "👍").stdout.strip() == "[👍 2]"
    assert ana.run("react", conversation, message_id, "🎉").stdout.strip() == "[👍 2]  [🎉 1]"
    assert ana.run("react", conversation, message_id, "🎉", "--remove").stdout.strip() == "[👍 2]"
    bad = ana.run("react", conversation, message_id, "nope")
    assert bad.returncode == 1 and "emoji" in bad.stderr
    who = bob.run("reactions", conversation, message_id).stdout.splitlines()
    assert [line.split("\t")[:2] for line in who] == [["👍", bob_name], ["👍", ana_name]]
    assert bob.run("pin", conversation, message_id).stdout.strip() == f"{message_id}\tpinned"
    pins = ana.run("pins", conversation).stdout.splitlines()
    assert len(pins) == 1 and pins[0].split("\t")[1] == message_id and "📌" in pins[0] and "👍 2" in pins[0]
    assert bob.run("pin", conversation, message_id, "--remove").stdout.strip() == f"{message_id}\tunpinned"
    assert ana.run("pins", conversation).stdout == ""
    mentions = bob.run("mentions").stdout.splitlines()
    assert [line.split("\t")[1] for line in mentions] == [message_id]
    assert ana.run("mentions").stdout == ""
    assert "react <conversation> <message> <emoji>" in ana.run("react", "--help").stdout


def test_a_thread_from_the_shell(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob.run("register", bob_name, password="correct horse battery")
    root, _, conversation = ana.run("send", "--to", bob_name, "plans?").stdout.strip().split("\t")
    replied = bob.run("thread", conversation, root, "hike", "at", "9")
    assert replied.returncode == 0, replied.stderr
    reply_id = replied.stdout.split("\t")[0]
    shared = bob.run("thread", conversation, root, "everyone in?", "--also")
    assert shared.returncode == 0, shared.stderr
    shown = ana.run("thread", conversation, root).stdout.splitlines()
    assert shown[0].split("\t")[1] == root and "💬 2 replies" in shown[0]
    assert [line.strip().split("\t")[1] for line in shown[1:]] == [reply_id, shared.stdout.split("\t")[0]]
    history = ana.run("history", conversation).stdout
    assert "everyone in?" in history and "hike at 9" not in history, "only the reply also sent shows in the conversation"


def test_report_block_and_ban_from_the_shell(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob_id = bob.run("register", bob_name, password="correct horse battery").stdout.strip().split("(")[1].rstrip(")")
    message, _, direct = bob.run("send", "--to", ana_name, "buy now").stdout.strip().split("\t")
    reported = ana.run("report", direct, message, "spam", "--note", "ads")
    assert reported.returncode == 0 and reported.stdout.startswith("rp_"), reported.stderr
    bad = ana.run("report", direct, message, "boring")
    assert bad.returncode == 2 and "spam, abuse, inappropriate, other" in bad.stderr
    assert ana.run("block", bob_id).stdout.strip() == "blocked"
    assert ana.run("block", "--list").stdout.split("\t")[0] == bob_name
    assert ana.run("block", bob_id, "--remove").stdout.strip() == "unblocked"
    created = Client(server)
    created.token = json.load(open(os.path.join(ana.home, "state.json")))["token"]
    status, channel = created.post("/v1/conversations", {"kind": "public", "title": f"cli-{uuid.uuid4().hex[:6]}"})
    assert status == 201
    banned = ana.run("ban", channel["id"], bob_id, "--hours", "2", "--note", "spam")
    assert banned.returncode == 0 and banned.stdout.startswith(f"banned {bob_name} until "), banned.stderr
    refused = bob.run("history", channel["id"])
    assert refused.returncode == 1 and "user_banned" in refused.stderr
    assert ana.run("ban", channel["id"], bob_id, "--remove").stdout.strip() == "ban lifted"


def test_search_with_filters_from_the_shell_and_with_curl(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob.run("register", bob_name, password="correct horse battery")
    word = "kayak" + uuid.uuid4().hex[:6]
    _, _, room = bob.run("send", "--to", ana_name, f"{word} on saturday").stdout.strip().split("\t")
    assert ana.run("send", room, f"{word} sounds great").returncode == 0
    assert ana.run("send", room, "no words to find here").returncode == 0
    found = ana.run("search", word, "--from", bob_name)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].split("\t")[2] == bob_name and f"{word} on saturday" in lines[0]
    # No words, only a filter: newest first; pages by cursor.
    page = ana.run("search", "--from", ana_name, "--limit", "1").stdout.strip().splitlines()
    assert "no words to find here" in page[0] and page[1].startswith("next: ")
    more = ana.run("search", "--from", ana_name, "--limit", "1", "--cursor", page[1].split(": ")[1]).stdout.strip().splitlines()
    assert f"{word} sounds great" in more[0]
    assert ana.run("search", word, "--kind", "photo").stdout.strip() == ""
    bad = ana.run("search", word, "--after", "yesterday")
    assert bad.returncode == 2 and "--after must be a time" in bad.stderr
    refused = ana.run("search", word, "--kind", "sticker")
    assert refused.returncode == 1 and "kind must be one of" in refused.stderr
    assert ana.run("search", "--help").returncode == 0
    # The same with curl and the query parameters.
    token = json.load(open(os.path.join(ana.home, "state.json")))["token"]
    result = subprocess.run(["curl", "-sS", "-G", f"{server.url}/v1/search", "-H", f"Authorization: Bearer {token}",
                             "-H", f"X-Parley-App-Key: {server.app_key}", "--data-urlencode", f"q={word}",
                             "--data-urlencode", "hasAttachment=false", "--data-urlencode", "after=2000-01-01T00:00:00Z"],
                            capture_output=True, text=True, timeout=30)
    answer = json.loads(result.stdout)
    assert len(answer["messages"]) == 2 and "nextCursor" not in answer
    result = subprocess.run(["curl", "-sS", "-G", f"{server.url}/v1/search", "-H", f"Authorization: Bearer {token}",
                             "-H", f"X-Parley-App-Key: {server.app_key}", "--data-urlencode", "hasAttachment=maybe", "-w", "\n%{http_code}"],
                            capture_output=True, text=True, timeout=30)
    body, status = result.stdout.rsplit("\n", 1)
    assert status == "400" and "hasAttachment" in json.loads(body)["error"]["message"]


def test_conversations_filtered_by_custom_data_from_the_shell(server):
    ana = Shell(server)
    ana_name = name("ana")
    ana.run("register", ana_name, password="correct horse battery")
    client = Client(server)
    client.token = json.load(open(os.path.join(ana.home, "state.json")))["token"]
    for title, data in [("Red team", {"team": "red", "level": 3}), ("Blue team", {"team": "blue", "level": 3})]:
        assert client.post("/v1/conversations", {"kind": "group", "title": title, "customData": data})[0] == 201
    red = ana.run("conversations", "--custom-data", "team=red").stdout.strip().splitlines()
    assert len(red) == 1 and "Red team" in red[0]
    both = ana.run("conversations", "--custom-data", "level=3").stdout.strip().splitlines()
    assert len(both) == 2
    assert ana.run("conversations", "--custom-data", "team=red,level=4").stdout.strip() == ""
    bad = ana.run("conversations", "--custom-data", "team")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr


def test_pin_archive_and_mark_unread_conversations_from_the_shell(server):
    ana = Shell(server)
    ana.run("register", name("ana"), password="correct horse battery")
    client = Client(server)
    client.token = json.load(open(os.path.join(ana.home, "state.json")))["token"]
    ids = {}
    for title in ("Garden", "Books", "Trips"):
        status, room = client.post("/v1/conversations", {"kind": "group", "title": title})
        assert status == 201
        ids[title] = room["id"]
    assert "pinned to the top" in ana.run("pin", ids["Garden"]).stdout
    lines = ana.run("conversations").stdout.strip().splitlines()
    assert "📌 Garden" in lines[0] and len(lines) == 3
    assert "archived" in ana.run("archive", ids["Books"]).stdout
    assert "Books" not in ana.run("conversations").stdout
    assert "Books" in ana.run("conversations", "--archived").stdout
    assert "marked unread" in ana.run("mark-unread", ids["Trips"]).stdout
    assert "unread 0 marked" in [line for line in ana.run("conversations").stdout.splitlines() if "Trips" in line][0]
    assert "not marked" in ana.run("mark-unread", ids["Trips"], "--remove").stdout
    ordered = ana.run("pin", "--order", f"{ids['Trips']},{ids['Garden']}")
    assert ordered.returncode == 0, ordered.stderr
    lines = ana.run("conversations").stdout.strip().splitlines()
    assert "📌 Trips" in lines[0] and "📌 Garden" in lines[1]
    assert "unpinned" in ana.run("pin", ids["Trips"], "--remove").stdout
    assert ana.run("archive").returncode == 2
    # A draft saved in the shell shows in the list and on the account's other devices.
    # A conversation by its title, in any case, where a command takes one.
    assert ana.run("history", "garden").returncode == 0 and ana.run("history", "No Such Room").returncode == 2
    assert "draft saved: see you" in ana.run("draft", ids["Garden"], "see", "you").stdout
    assert ana.run("draft", ids["Garden"]).stdout.strip() == "see you"
    assert "Draft: see you" in [line for line in ana.run("conversations").stdout.splitlines() if "Garden" in line][0]
    assert client.get(f"/v1/conversations/{ids['Garden']}/draft")[1]["draft"]["text"] == "see you"
    assert "draft cleared" in ana.run("draft", ids["Garden"], "--clear").stdout
    assert "no draft" in ana.run("draft", ids["Garden"]).stderr
    # Scheduled from the shell: listed, cancelled.
    planned = ana.run("send", ids["Trips"], "--at", "2099-01-01T08:00:00Z", "happy", "new", "year")
    assert planned.returncode != 0 and "a year ahead" in planned.stderr, "more than a year ahead is refused"
    import datetime
    soon = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    planned = ana.run("send", ids["Trips"], "--at", soon, "pack", "the", "tent")
    assert planned.returncode == 0 and "scheduled for" in planned.stdout, planned.stderr
    scheduled_id = planned.stdout.split()[0]
    listed = ana.run("scheduled").stdout.strip().splitlines()
    assert len(listed) == 1 and scheduled_id in listed[0] and "pack the tent" in listed[0] and "scheduled" in listed[0]
    assert "cancelled" in ana.run("scheduled", "--cancel", scheduled_id).stdout
    assert ana.run("scheduled").stdout.strip() == ""


def test_export_from_the_shell(server, tmp_path):
    ana = Shell(server)
    ana.run("register", name("ana"), password="correct horse battery")
    bob_name = name("bob")
    Shell(server).run("register", bob_name, password="correct horse battery")
    ana.run("send", "--to", bob_name, "for the record")
    target = tmp_path / "mine.ndjson"
    saved = ana.run("export", "--output", str(target))
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.strip() == f"{target}\tconversations 1, drafts 0, media 0, messages 1, scheduled 0"
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["account", "conversation", "message", "end"]


def test_delete_account_needs_yes_and_the_password_then_frees_the_username(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    assert ana.run("register", ana_name, password="correct horse battery").returncode == 0
    assert bob.run("register", bob_name, password="correct horse battery").returncode == 0
    sent = ana.run("send", "--to", bob_name, "a word to take back")
    assert sent.returncode == 0, sent.stderr
    conversation = sent.stdout.split("\t")[2].strip()

    unconfirmed = ana.run("delete-account", password="correct horse battery")
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    wrong = ana.run("delete-account", "--yes", "--erase", password="wrong horse battery")
    assert wrong.returncode == 1 and "wrong username or password" in wrong.stderr
    assert ana.run("whoami").returncode == 0, "nothing changed"

    deleted = ana.run("delete-account", "--yes", "--erase", password="correct horse battery")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "account deleted, with every message you sent", deleted.stderr
    assert ana.run("whoami").returncode == 4, "signed out here"
    history = bob.run("history", conversation)
    assert history.returncode == 0 and "a word to take back" not in history.stdout and "(deleted)" in history.stdout
    assert Shell(server).run("register", ana_name, password="another horse battery").returncode == 0, "the username is free"


def test_a_poll_asked_voted_and_closed_from_the_shell(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob.run("register", bob_name, password="correct horse battery")
    conversation = ana.run("send", "--to", bob_name, "a question coming").stdout.strip().split("\t")[2]
    asked = ana.run("poll", conversation, "Lunch where?", "Pizza place", "Sushi", "--multiple")
    assert asked.returncode == 0, asked.stderr
    poll_id, line = asked.stdout.strip().split("\t", 1)
    assert line == "📊 Lunch where? 1) Pizza place ·0  2) Sushi ·0  (0 voted, several answers)"
    voted = bob.run("vote", conversation, poll_id, "1", "2")
    assert voted.returncode == 0 and voted.stdout.strip() == "📊 Lunch where? 1) Pizza place ·1 ✓  2) Sushi ·1 ✓  (1 voted, several answers)", voted.stdout + voted.stderr
    assert bob.run("vote", conversation, poll_id, "2").stdout.strip().endswith("1) Pizza place ·0  2) Sushi ·1 ✓  (1 voted, several answers)")
    bad = bob.run("vote", conversation, poll_id, "3")
    assert bad.returncode == 1 and "indexes 0–1" in bad.stderr, bad.stderr
    zero = bob.run("vote", conversation, poll_id, "0")
    assert zero.returncode == 2 and "from 1" in zero.stderr
    refused = bob.run("close-poll", conversation, poll_id)
    assert refused.returncode == 1 and "moderat" in refused.stderr, refused.stderr
    closed = ana.run("close-poll", conversation, poll_id)
    assert closed.returncode == 0 and closed.stdout.strip().endswith("(1 voted, several answers, closed)")
    late = bob.run("vote", conversation, poll_id, "1")
    assert late.returncode == 1 and "closed" in late.stderr
    history = bob.run("history", conversation).stdout
    assert "📊 Lunch where?" in history and "2) Sushi ·1 ✓" in history
    assert "poll <conversation> <question> <option>" in ana.run("poll", "--help").stdout
    few = ana.run("poll", conversation, "Only?", "one")
    assert few.returncode == 2 and "poll <conversation>" in few.stderr


def test_one_message_numbering_everywhere(server):
    ana, bob = Shell(server), Shell(server)
    ana_name, bob_name = name("ana"), name("bob")
    ana.run("register", ana_name, password="correct horse battery")
    bob.run("register", bob_name, password="correct horse battery")
    first, seq, conversation = ana.run("send", "--to", bob_name, "first").stdout.strip().split("\t")
    second = ana.run("send", conversation, "second").stdout.strip().split("\t")[0]
    numbers = {line.split("\t")[1]: line.split("\t")[0] for line in bob.run("history", f"@{ana_name}").stdout.splitlines()}
    assert numbers[first] == seq.removeprefix("seq "), "history's number is the seq send printed"
    number = "#" + numbers[second]
    # Every command that takes a message takes its number, in a conversation named as chat names it.
    assert bob.run("react", f"@{ana_name}", number, "👍").stdout.strip() == "[👍 1]"
    assert bob.run("reactions", f"@{ana_name}", number).stdout.split("\t")[:2] == ["👍", bob_name]
    assert bob.run("pin", f"@{ana_name}", number).stdout.strip() == f"{second}\tpinned"
    assert ana.run("pins", conversation).stdout.split("\t")[0] == numbers[second]
    edited = ana.run("edit", conversation, number, "second, edited")
    assert edited.returncode == 0 and edited.stdout.strip() == f"{second}\tedited", edited.stderr
    missing = ana.run("edit", conversation, "#999", "nothing")
    assert missing.returncode == 1 and "no message #999" in missing.stderr
    malformed = ana.run("edit", conversation, "#two", "nothing")
    assert malformed.returncode == 2 and "like #12" in malformed.stderr
    assert ana.run("delete", conversation, "#" + numbers[first]).stdout.strip() == "deleted 1"
    assert not any(line.split("\t")[1] == first and line.endswith("\tfirst") for line in bob.run("history", conversation).stdout.splitlines())
