"""Guarantees 1–3 under a crash: concurrent senders, kill -9 mid-run, restart.

Every message acknowledged before the kill is there after the restart exactly once, with
the id and seq it was acknowledged with; every conversation's event seq runs 1, 2, 3, …
with no gap; and retrying the sends that were in flight when the server died stores each
of them exactly once.
"""
import glob
import os
import socket
import threading
import time

import pytest

import media

from parley import Client, Server

SENDERS = 8
CONVERSATIONS = 4
ACKS_BEFORE_KILL = 600


def all_pages(client, path, key, cursor_field="seq"):
    """Pages through a seq-ordered listing (events or messages) from the start."""
    items, after = [], 0
    while True:
        status, page = client.get(f"{path}?after={after}&limit=200")
        assert status == 200, page
        items += page[key]
        more = page.get("hasMore", page.get("hasNewer"))
        if not more or not page[key]:
            return items
        after = page[key][-1][cursor_field]


@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_kill_9_mid_run_loses_no_acknowledged_message(synchronous):
    # Both settings promise this for a process crash (docs/storage.md); they differ on power loss.
    server = Server("--sqlite-synchronous", synchronous)
    try:
        owner = Client(server).register("owner")
        names = [f"sender{i}" for i in range(SENDERS)]
        for name in names:
            Client(server).register(name)
        rooms = [owner.post("/v1/conversations", {"kind": "group", "title": f"room {i}", "members": names})[1]["id"]
                 for i in range(CONVERSATIONS)]

        acked = {}          # clientId -> (conversation, message id, seq)
        in_flight = {}      # thread -> (conversation, clientId, text) not yet answered
        lock = threading.Lock()
        stop = threading.Event()
        enough = threading.Event()

        def sender(index):
            client = Client(server).sign_in(names[index])
            sequence = 0
            while not stop.is_set():
                room = rooms[(index + sequence) % CONVERSATIONS]
                client_id = f"t{index}-{sequence}"
                text = f"message {sequence} from sender {index}"
                with lock:
                    in_flight[index] = (room, client_id, text)
                try:
                    status, answer = client.send(room, text, client_id=client_id)
                except Exception:
                    return  # the server died under us; this send stays in flight
                assert status == 201, answer
                with lock:
                    acked[client_id] = (room, answer["id"], answer["seq"])
                    del in_flight[index]
                    if len(acked) >= ACKS_BEFORE_KILL:
                        enough.set()
                sequence += 1

        threads = [threading.Thread(target=sender, args=(i,), daemon=True) for i in range(SENDERS)]
        for thread in threads:
            thread.start()
        assert enough.wait(timeout=120), f"only {len(acked)} acks before the timeout"
        server.kill()  # kill -9 while every sender has a request in flight
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        with lock:
            acknowledged = dict(acked)
            pending = list(in_flight.values())

        server.start()
        owner = Client(server).sign_in("owner")
        by_client_id = {}
        for room in rooms:
            events = all_pages(owner, f"/v1/conversations/{room}/events", "events")
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "gap or repeat in the event log"
            messages = all_pages(owner, f"/v1/conversations/{room}/messages", "messages")
            for message in messages:
                assert message["clientId"] not in by_client_id, f"{message['clientId']} stored twice"
                by_client_id[message["clientId"]] = (room, message["id"], message["seq"])
        for client_id, stored in acknowledged.items():
            assert by_client_id.get(client_id) == stored, f"acknowledged {client_id} lost or changed"

        # The senders retry what was in flight: each ends up stored exactly once.
        for room, client_id, text in pending:
            sender_name = names[int(client_id[1:].split("-")[0])]
            status, answer = Client(server).sign_in(sender_name).send(room, text, client_id=client_id)
            assert status in (200, 201), answer
            assert status == (200 if client_id in by_client_id else 201)
        for room in rooms:
            messages = all_pages(owner, f"/v1/conversations/{room}/messages", "messages")
            ids = [m["clientId"] for m in messages]
            assert len(ids) == len(set(ids))
            events = all_pages(owner, f"/v1/conversations/{room}/events", "events")
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        print(f"{len(acknowledged)} acknowledged before kill -9, {len(pending)} in flight, all accounted for")
    finally:
        server.kill()


def test_kill_9_under_realtime_load_then_every_device_resumes_and_sees_every_acknowledged_message_once():
    """Guarantees 1–3 on the socket: devices send over the realtime WebSocket and listen, the
    server is killed mid-run and restarted, every device resumes from the last position it
    processed; each member's device then has every acknowledged message exactly once, and
    each conversation's messages in seq order."""
    from websockets.exceptions import ConnectionClosed

    from realtime import Device

    server = Server("--commands-per-second", "100000")
    try:
        owner = Client(server).register("owner")
        names = [f"sender{i}" for i in range(6)]
        senders = [Client(server).register(name) for name in names]
        rooms = [owner.post("/v1/conversations", {"kind": "group", "title": f"room {i}", "members": names})[1]["id"]
                 for i in range(3)]
        listeners = [Device(server, owner.token), Device(server, Client(server).sign_in("owner").token)]
        devices = [Device(server, sender.token) for sender in senders]
        for device in listeners + devices:
            device.wait_ready()

        acked, in_flight = {}, {}
        lock = threading.Lock()
        enough = threading.Event()

        def send_loop(index):
            device, sequence = devices[index], 0
            while True:
                room, client_id, text = rooms[sequence % len(rooms)], f"w{index}-{sequence}", f"{sequence} from {index}"
                with lock:
                    in_flight[index] = (room, client_id, text)
                try:
                    answer = device.send_text(room, text, client_id=client_id)
                except (ConnectionClosed, TimeoutError, OSError):
                    return
                assert answer["type"] == "ack", answer
                with lock:
                    acked[client_id] = answer["result"]["message"]["id"]
                    del in_flight[index]
                    if len(acked) >= 400:
                        enough.set()
                sequence += 1

        def listen_loop(device):
            try:
                while True:
                    device.next(timeout=60)
            except (ConnectionClosed, TimeoutError, OSError):
                return

        threads = [threading.Thread(target=send_loop, args=(i,), daemon=True) for i in range(len(devices))]
        threads += [threading.Thread(target=listen_loop, args=(d,), daemon=True) for d in listeners]
        for thread in threads:
            thread.start()
        assert enough.wait(timeout=120), f"only {len(acked)} acks before the timeout"
        server.kill()
        for thread in threads:
            thread.join(timeout=30)
        with lock:
            acknowledged, pending = dict(acked), list(in_flight.items())

        server.start()
        everyone = listeners + devices
        resumed = []
        for device in everyone:
            again = Device(server, device.token, position=device.position)
            again.wait_ready(timeout=30)
            again.events = device.events + again.events  # what this device has processed, in order
            resumed.append(again)
        # The senders retry what was in flight, with the same client id: stored at most once.
        expected = set(acknowledged)
        for index, (room, client_id, text) in pending:
            answer = resumed[len(listeners) + index].send_text(room, text, client_id=client_id)
            assert answer["type"] == "ack", answer
            expected.add(client_id)
        for device in resumed:
            seen = lambda: {e["message"]["clientId"] for e in device.events if e["type"] == "message.created"}
            while not expected <= seen():
                device.next(timeout=30)
            created = [e for e in device.events if e["type"] == "message.created"]
            client_ids = [e["message"]["clientId"] for e in created]
            assert len(client_ids) == len(set(client_ids)), "a device saw a message twice"
            assert set(client_ids) == expected
            for client_id, message_id in acknowledged.items():
                assert next(e for e in created if e["message"]["clientId"] == client_id)["message"]["id"] == message_id
            for room in rooms:
                seqs = [e["seq"] for e in created if e["conversationId"] == room]
                assert seqs == sorted(seqs), "messages out of seq order"
        print(f"{len(acknowledged)} acknowledged over the socket before kill -9, {len(pending)} in flight; "
              f"{len(resumed)} devices resumed with every one exactly once")
    finally:
        server.kill()


def test_kill_9_during_uploads_keeps_every_acknowledged_file_and_leaves_no_partial_one():
    server = Server()
    try:
        alice, bob = Client(server).register("alice"), Client(server).register("bob")
        status, room = alice.post("/v1/conversations", {"kind": "direct", "members": ["bob"]})
        acknowledged = []
        for index in range(6):
            photo = media.jpeg(320, 240, color=(index * 30, 10, 10))
            status, info = alice.upload(photo, "photo", "image/jpeg", client_id=f"photo-{index}")
            assert status == 201, info
            if index % 2 == 0:
                status, _ = alice.send(room["id"], content={"type": "photo", "attachmentId": info["id"]})
                assert status == 201
            acknowledged.append((info, index % 2 == 0))
        # An upload in the middle of its body when the server dies.
        raw = socket.create_connection((server.host, server.port), timeout=10)
        data = media.pdf(400_000)
        raw.sendall((f"POST /v1/media?kind=file&name=half.pdf HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {server.app_key}\r\n"
                     f"Authorization: Bearer {alice.token}\r\nContent-Type: application/pdf\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:200_000])
        staging = os.path.join(server.data, "media", "staging")
        deadline = time.monotonic() + 10
        while not os.listdir(staging) and time.monotonic() < deadline:  # wait for the file to appear
            time.sleep(0.02)
        assert os.listdir(staging), "the half upload was being written"
        server.kill()
        raw.close()
        server.start()
        assert os.listdir(staging) == [], "a half-written upload is removed at start"
        blobs = glob.glob(os.path.join(server.data, "media", "blobs", "*", "*", "*"))
        assert len(blobs) == 12, "six photos and six thumbnails, nothing partial"
        alice.sign_in("alice")
        bob.sign_in("bob")
        for index, (info, sent) in enumerate(acknowledged):
            status, body, _ = alice.download(info["id"])
            assert status == 200 and len(body) == info["sizeBytes"]
            assert bob.download(info["id"])[0] == (200 if sent else 404)
            # The retry of an acknowledged upload finds it.
            status, again = alice.upload(b"irrelevant", "photo", "image/jpeg", client_id=f"photo-{index}")
            assert status == 200 and again["id"] == info["id"]
    finally:
        server.kill()
