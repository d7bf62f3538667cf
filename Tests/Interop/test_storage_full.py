"""A full disk (issue 31, item 3), for real: the data directory on a small tmpfs that fills.
Every write path answers `storage_full` (REST 507 and the realtime socket's error frame), the
log says so once per interval, `/healthz` says `"storage": "full"`, `/metrics` counts the
answers, nothing acknowledged is lost, nothing refused is stored, and the server carries on
by itself once there is space again."""
import json
import os
import subprocess
import tempfile
import uuid

import pytest

from parley import ON_POSTGRES, Client, Server, wait_until
from realtime import Device


def mount_tmpfs(size):
    """A fresh tmpfs of `size`, or None where this user cannot mount one."""
    if os.geteuid() != 0:
        return None
    point = tempfile.mkdtemp(prefix="parley-full-")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", point], capture_output=True).returncode != 0:
        os.rmdir(point)
        return None
    return point


@pytest.fixture
def small_disk():
    point = mount_tmpfs("24m")
    if point is None:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    yield point
    subprocess.run(["umount", "-l", point], capture_output=True)
    os.rmdir(point)


def health(server):
    status, answer = Client(server).get("/healthz")
    assert status == 200, answer
    return answer


def metric(server, prefix):
    status, body, _ = Client(server).request_bytes("GET", "/metrics", authenticated=False)
    assert status == 200
    return sum(float(line.split()[-1]) for line in body.decode().splitlines() if line.startswith(prefix))


@pytest.mark.skipif(ON_POSTGRES, reason="the database is on the data directory's disk only with SQLite")
def test_a_full_disk_is_answered_storage_full_everywhere_and_nothing_acknowledged_is_lost(small_disk):
    server = Server(data=os.path.join(small_disk, "data"))
    try:
        alice = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
        status, room = alice.post("/v1/conversations", {"kind": "group", "title": "full", "members": []})
        assert status == 201, room
        device = Device(server, alice.token)
        device.wait_ready()
        assert health(server)["storage"] == "ok"
        # Leave the database about a megabyte.
        filler = os.path.join(small_disk, "filler")
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        with open(filler, "wb") as file:
            file.write(b"\0" * max(0, free - 1_000_000))
        text = "x" * 3000
        acknowledged, refused = [], None
        for index in range(2000):
            client_id = f"m{index}"
            status, answer = alice.send(room["id"], text, client_id=client_id)
            if status == 201:
                acknowledged.append(client_id)
                continue
            assert status == 507 and answer["error"]["code"] == "storage_full", (status, answer)
            refused = client_id
            break
        assert refused is not None, "the disk filled"
        assert acknowledged, "some were stored before it did"
        # The socket says the same, for a send …
        device.socket.send(json.dumps({"type": "message.send", "id": "s1", "conversationId": room["id"],
                                       "message": {"clientId": "socket-1", "content": {"type": "text", "text": text}}}))
        frame = device.until(lambda f: f.get("id") == "s1")
        assert frame["type"] == "error" and frame["error"]["code"] == "storage_full", frame
        # … and the operator sees it: health, metrics and one log line, not one per request.
        assert health(server)["storage"] == "full"
        assert metric(server, 'parley_errors_total{code="storage_full",via="rest"}') >= 1
        assert metric(server, 'parley_errors_total{code="storage_full",via="realtime"}') >= 1
        assert metric(server, "parley_storage_writable") == 0
        wait_until(lambda: any("the disk is full" in line for line in server.log), what="the log line")
        assert sum("the disk is full" in line for line in server.log) == 1, [line for line in server.log if "disk" in line]
        # Space again: the refused sends go through on their retries, by themselves.
        os.remove(filler)
        status, answer = alice.send(room["id"], text, client_id=refused)
        assert status == 201, answer
        device.socket.send(json.dumps({"type": "message.send", "id": "s2", "conversationId": room["id"],
                                       "message": {"clientId": "socket-1", "content": {"type": "text", "text": text}}}))
        assert device.until(lambda f: f.get("id") == "s2")["type"] == "ack"
        assert health(server)["storage"] == "ok"
        assert metric(server, "parley_storage_writable") == 1
        stored, before = [], None
        while True:
            path = f"/v1/conversations/{room['id']}/messages?limit=100" + (f"&before={before}" if before else "")
            status, page = alice.get(path)
            assert status == 200, page
            stored = [m["clientId"] for m in page["messages"]] + stored
            if not page["hasOlder"]:
                break
            before = page["messages"][0]["seq"]
        assert stored == acknowledged + [refused, "socket-1"], "every acknowledged send once, in order, and nothing refused twice"
        device.close()
    finally:
        server.stop()
