"""Guarantees 1–3 under a crash: concurrent senders, kill -9 mid-run, restart.

Every message acknowledged before the kill is there after the restart exactly once, with
the id and seq it was acknowledged with; every conversation's event seq runs 1, 2, 3, …
with no gap; and retrying the sends that were in flight when the server died stores each
of them exactly once.
"""
import threading

import pytest

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
