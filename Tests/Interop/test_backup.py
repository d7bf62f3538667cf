"""Backups (issue 16, operator part): `parley-server backup <file>` while the server runs and
takes sends, `parley-server restore <file>` with it stopped, and a new epoch after a restore,
against the real binary and its SQLite file."""
import os
import sqlite3
import subprocess
import tempfile
import threading
import uuid

import pytest

from parley import BINARY, ON_POSTGRES, Client, Server, database_for, wait_until
from realtime import Device

sqlite_only = pytest.mark.skipif(ON_POSTGRES, reason="copies the SQLite file; PostgreSQL is backed up with pg_dump "
                                 "(test_on_postgres_backup_and_restore_point_to_pg_dump)")


def run(*args, timeout=60):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout)


@sqlite_only
def test_an_online_backup_is_one_consistent_snapshot_and_a_restore_brings_it_back_with_a_new_epoch():
    server = Server()
    backup = os.path.join(tempfile.mkdtemp(prefix="parley-backup-"), "parley-backup.sqlite")
    try:
        ana = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
        bob = Client(server).register(f"bob{uuid.uuid4().hex[:6]}")
        status, sent = ana.post("/v1/messages", {"to": [bob.user["username"]], "clientId": "before", "content": {"type": "text", "text": "before the backup"}})
        assert status == 201
        conversation = sent["conversation"]["id"]
        # Sends keep coming while the backup runs: the copy is one snapshot, never half a write.
        stop = threading.Event()
        acknowledged = []

        def keep_sending():
            n = 0
            while not stop.is_set() and n < 2000:
                status, _ = ana.send(conversation, f"during {n}", client_id=f"during-{n}")
                if status == 201:
                    acknowledged.append(n)
                n += 1

        sender = threading.Thread(target=keep_sending)
        sender.start()
        wait_until(lambda: len(acknowledged) >= 20, what="sends under way before the backup")
        result = run("backup", backup, "--data-dir", server.data)
        stop.set()
        sender.join()
        assert result.returncode == 0, result.stderr
        assert "one consistent snapshot" in result.stdout and "blobs" in result.stdout, result.stdout
        assert not os.path.exists(backup + ".partial")

        # The copy is a healthy SQLite file whose every conversation's seqs are gap-free.
        copy = sqlite3.connect(backup)
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        seqs = [row[0] for row in copy.execute("SELECT seq FROM event WHERE seq IS NOT NULL AND conversation_id = "
                                               "(SELECT id FROM conversation WHERE public_id = ?) ORDER BY seq", (conversation,))]
        assert seqs == list(range(1, len(seqs) + 1))
        in_copy = {row[0] for row in copy.execute("SELECT client_id FROM message")}
        copy.close()
        assert "before" in in_copy and len(acknowledged) > len(in_copy) - 1 > 0, "taken mid-load: some sends before, some after"

        # Restore refuses while the server runs, and changes nothing.
        refused = run("restore", backup, "--data-dir", server.data)
        assert refused.returncode != 0 and "stop it first" in refused.stderr
        status, _ = ana.send(conversation, "after the backup", client_id="after")
        assert status == 201
        old_epoch = Device(server, ana.token)
        old_epoch.wait_ready()
        ready = next(f for f in old_epoch.frames if f["type"] == "ready")
        old_epoch.close()
        assert server.stop() == 0

        restored = run("restore", backup, "--data-dir", server.data)
        assert restored.returncode == 0, restored.stderr
        assert "New epoch" in restored.stdout and "before-restore" in restored.stdout
        kept = [name for name in os.listdir(server.data) if ".before-restore-" in name]
        assert kept, "the replaced database is kept beside it"

        server.start()
        # What the backup held is back; what came after it is not.
        status, page = ana.get(f"/v1/conversations/{conversation}/messages?limit=100&order=desc")
        assert status == 200
        texts = {m["clientId"] for m in page["messages"]}
        assert "before" in texts and "after" not in texts
        # A device that remembers a position from before the restore is told to resync.
        device = Device(server, ana.token, position=ready["position"], authenticate=False)
        device.socket.send('{"type":"auth","token":"%s","position":%d,"epoch":"%s"}' % (ana.token, ready["position"], ready["epoch"]))
        resync = device.until(lambda f: f["type"] in ("resync", "ready"))
        assert resync["type"] == "resync" and resync["epoch"] != ready["epoch"]
        device.close()
    finally:
        server.stop()


def test_restore_refuses_what_is_not_a_parley_backup_and_changes_nothing():
    server = Server()
    try:
        name = f"ana{uuid.uuid4().hex[:6]}"
        Client(server).register(name)
        assert server.stop() == 0
        garbage = os.path.join(tempfile.mkdtemp(), "garbage.sqlite")
        with open(garbage, "wb") as file:
            file.write(b"not a database at all" * 100)
        other = os.path.join(tempfile.mkdtemp(), "other.sqlite")
        sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
        for path in (garbage, other, "/nonexistent/backup.sqlite"):
            result = run("restore", path, "--data-dir", server.data)
            assert result.returncode != 0, result.stdout
            assert "nothing was changed" in result.stderr or "does not exist" in result.stderr, result.stderr
        assert not [entry for entry in os.listdir(server.data) if ".before-restore-" in entry]
        server.start()
        assert Client(server).sign_in(name).user["username"] == name, "the database is the one it was"
    finally:
        server.stop()


def test_two_servers_cannot_share_a_data_directory():
    first = Server()
    try:
        # On PostgreSQL the same database: refused by the node claim, not the directory's lock.
        second = subprocess.run([BINARY, "--port", "0", "--data-dir", first.data, *first.database_flags()],
                                capture_output=True, text=True, timeout=30)
        assert second.returncode != 0 and "another parley-server is using" in second.stderr
    finally:
        first.stop()


def test_backup_and_restore_say_how_to_use_them():
    for command in ("backup", "restore"):
        result = run(command)
        assert result.returncode == 64 and f"parley-server {command} <file>" in result.stderr


@pytest.mark.skipif(not ON_POSTGRES, reason="the PostgreSQL pass only")
def test_on_postgres_backup_and_restore_point_to_pg_dump():
    server = Server()
    try:
        for command in ("backup", "restore"):
            result = run(command, "/tmp/never-written.sqlite", "--data-dir", server.data, *server.database_flags())
            assert result.returncode != 0 and "pg_dump" in result.stderr and "docs/operations.md" in result.stderr
            assert not os.path.exists("/tmp/never-written.sqlite")
    finally:
        server.stop()


@sqlite_only
def test_a_backup_never_overwrites_a_file_unless_told_to():
    server = Server()
    try:
        Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
        target = os.path.join(tempfile.mkdtemp(), "kept.sqlite")
        with open(target, "wb") as file:
            file.write(b"yesterday's backup")
        refused = run("backup", target, "--data-dir", server.data)
        assert refused.returncode != 0 and "already exists" in refused.stderr and "--overwrite" in refused.stderr, refused.stderr
        with open(target, "rb") as file:
            assert file.read() == b"yesterday's backup", "nothing was written"
        replaced = run("backup", target, "--overwrite", "--data-dir", server.data)
        assert replaced.returncode == 0, replaced.stderr
        assert sqlite3.connect(target).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        server.stop()


def test_apps_list_in_an_empty_directory_creates_nothing_and_says_what_to_pass():
    parent = tempfile.mkdtemp()
    missing = os.path.join(parent, "data")
    result = subprocess.run([BINARY, "apps", "list", "--data-dir", missing], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "--data-dir" in result.stderr and "nothing was created" in result.stderr, result.stderr
    assert not os.path.exists(missing)
    # In the working directory too (the default --data-dir is ./data).
    result = subprocess.run([os.path.abspath(BINARY), "apps", "list"], capture_output=True, text=True, timeout=30, cwd=parent,
                            env={k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")})
    assert result.returncode != 0 and os.listdir(parent) == [], os.listdir(parent)


def test_a_refused_database_connection_is_not_called_busy():
    # A port nothing listens on: PostgreSQL refuses the connection.
    result = subprocess.run([BINARY, "--port", "0", "--database-url", "postgres://parley@127.0.0.1:9/parley"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "busy" not in result.stderr and "PostgreSQL" in result.stderr, result.stderr


@sqlite_only
def test_the_data_directory_and_every_file_in_it_are_for_the_servers_user_alone():
    import stat as stats
    parent = tempfile.mkdtemp()
    data = os.path.join(parent, "data")    # made by the server
    server = Server(data=data)
    try:
        alice = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
        bob = Client(server).register(f"bo{uuid.uuid4().hex[:6]}")
        status, room = alice.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
        assert status == 201, room
        alice.send(room["id"], "a secret between us")
        backup = os.path.join(parent, "nightly.sqlite")
        assert run("backup", backup, "--data-dir", data).returncode == 0

        def mode(path):
            return stats.S_IMODE(os.stat(path).st_mode)
        assert mode(data) == 0o700
        for name in ("parley.sqlite", "parley.sqlite-wal", "parley.sqlite-shm"):
            assert mode(os.path.join(data, name)) == 0o600, name
        assert mode(backup) == 0o600, "a backup holds everything the database does"
        for root, directories, files in os.walk(data):
            for name in directories:
                assert mode(os.path.join(root, name)) & 0o077 == 0, os.path.join(root, name)
            for name in files:
                assert mode(os.path.join(root, name)) & 0o077 == 0, os.path.join(root, name)
        assert not [line for line in server.log if "other users of this machine can read" in line]
    finally:
        server.stop()
    # A directory from before (or made by hand) that others can read: the operator is told how to fix it.
    os.chmod(data, 0o755)
    os.chmod(os.path.join(data, "parley.sqlite"), 0o644)
    server = Server(data=data)
    try:
        wait_until(lambda: sum("other users of this machine can read" in line for line in server.log) >= 2, what="the warnings")
        warnings = [line for line in server.log if "other users of this machine can read" in line]
        assert any(f"chmod 700 {data}" in line for line in warnings), warnings
        assert any(f"chmod 600 {os.path.join(data, 'parley.sqlite')}" in line for line in warnings), warnings
    finally:
        server.stop()


def test_the_first_apps_secret_never_reaches_a_log_only_a_terminal_or_a_private_file():
    import pty
    import stat as stats
    # Output to a pipe (a journal, a container log): the secret is in a 0600 file, not the output.
    server = Server()
    try:
        printed = "\n".join(server.banner)
        path = os.path.join(server.data, "first-app-secret")
        assert f"app secret: written to {path}" in printed
        with open(path) as file:
            secret = file.read().strip()
        assert secret.startswith("sk_") and secret not in printed
        assert stats.S_IMODE(os.stat(path).st_mode) == 0o600
        assert server.app_secret == secret
    finally:
        server.stop()
    # On a terminal, a person reads it there, and no file is left behind.
    data = tempfile.mkdtemp(prefix="parley-tty-")
    controller, terminal = pty.openpty()
    process = subprocess.Popen([BINARY, "--port", "0", "--data-dir", data, "--argon2-passes", "1", "--argon2-memory-mib", "1"],
                               stdout=terminal, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(terminal)
    output = b""
    try:
        while b"Health:" not in output:
            chunk = os.read(controller, 4096)
            if not chunk:
                break
            output += chunk
    finally:
        process.terminate()
        process.wait(timeout=15)
        os.close(controller)
    text = output.decode(errors="replace")
    assert "app secret: sk_" in text, text
    assert not os.path.exists(os.path.join(data, "first-app-secret"))


def test_a_first_start_that_fails_makes_no_app_so_the_next_one_shows_its_secret():
    """Issue 34, item 4: a first start that cannot listen (the port is taken) used to make app
    'default' and its secret, then exit before showing them: the secret was lost. The app is
    made once the server listens, so the next start is the first start, secret and all."""
    import socket
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    data = tempfile.mkdtemp(prefix="parley-first-")
    try:
        failed = subprocess.run([BINARY, "--port", str(taken.getsockname()[1]), "--data-dir", data, *(["--database-url", database_for(data)] if ON_POSTGRES else [])],
                                capture_output=True, text=True, timeout=60)
        assert failed.returncode != 0 and "already in use" in failed.stderr, failed.stderr
    finally:
        taken.close()
    assert not os.path.exists(os.path.join(data, "first-app-secret"))
    server = Server(data=data)
    try:
        printed = "\n".join(server.banner)
        assert "First start: created app 'default'" in printed and os.path.exists(os.path.join(data, "first-app-secret")), printed
        assert server.app_secret and server.app_secret.startswith("sk_")
    finally:
        server.stop()


@sqlite_only
def test_secrets_are_sealed_so_a_copied_database_gives_none_away_and_another_key_is_refused():
    from test_server_api import Backend
    server = Server("--webhooks-allow-private")
    try:
        backend = Backend(server)
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": "http://127.0.0.1:9/hooks", "events": ["message.created"]})
        assert status == 201, hook
        backup = os.path.join(tempfile.mkdtemp(), "copy.sqlite")
        assert run("backup", backup, "--data-dir", server.data).returncode == 0
        for database in (os.path.join(server.data, "parley.sqlite"), backup):
            connection = sqlite3.connect(database)
            (app_secret,) = connection.execute("SELECT secret FROM app").fetchone()
            (hook_secret,) = connection.execute("SELECT secret FROM webhook_endpoint").fetchone()
            assert app_secret.startswith("sealed:v1:") and server.app_secret not in app_secret
            assert hook_secret.startswith("sealed:v1:") and hook["secret"] not in hook_secret
            with open(database, "rb") as file:
                raw = file.read()
            assert server.app_secret.encode() not in raw and hook["secret"].encode() not in raw
        key = os.path.join(server.data, "secrets.key")
        import stat as stats
        assert stats.S_IMODE(os.stat(key).st_mode) == 0o600
    finally:
        server.stop()
    # The same database with another key: refused, saying which key it needs.
    other = os.path.join(tempfile.mkdtemp(), "other.key")
    refused = subprocess.run([BINARY, "--port", "0", "--data-dir", server.data, "--secrets-key-file", other],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "sealed with another key" in refused.stderr and "--secrets-key-file" in refused.stderr, refused.stderr
    # With its own key it starts again.
    server.start()
    server.stop()
