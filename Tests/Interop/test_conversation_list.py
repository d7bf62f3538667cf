"""Each user's own conversation list (issue 33, item 2), over HTTP and a real WebSocket client:
pinned conversations first in the order the user saved, archived ones listed apart until a new
message arrives (unless muted), unread marks that leave the read watermark where it was; each
change reaches the user's other devices at once (`state.updated`) and nobody else's."""
import uuid

import pytest

from parley import Client, Server
from realtime import Device


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    assert running.stop() == 0


def person(server, name):
    return Client(server).register(f"{name}{uuid.uuid4().hex[:6]}")


def group(owner, title, *members):
    status, conversation = owner.post("/v1/conversations", {"kind": "group", "title": title,
                                                            "members": [m.user["username"] for m in members]})
    assert status == 201, conversation
    return conversation


def titles(client, **query):
    seen, cursor = [], None
    while True:
        path = "/v1/conversations?limit=2" + "".join(f"&{k}={v}" for k, v in query.items()) + (f"&before={cursor}" if cursor else "")
        status, page = client.get(path)
        assert status == 200, page
        seen += [c["title"] for c in page["conversations"]]
        cursor = page.get("nextCursor")
        if not cursor:
            return seen


def test_a_pin_an_archive_and_an_unread_mark_show_on_the_users_other_device_and_nowhere_else(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    rooms = {title: group(ana, title, bob) for title in ("one", "two", "three", "four")}
    for title, room in rooms.items():
        assert ana.send(room["id"], f"hello in {title}")[0] == 201
    laptop = Device(server, Client(server).sign_in(ana.user["username"]).token)
    bobs = Device(server, bob.token)
    try:
        laptop.wait_ready()
        bobs.wait_ready()
        status, pinned = ana.patch(f"/v1/conversations/{rooms['two']['id']}/state", {"pinned": True})
        assert status == 200 and pinned["pinnedRank"] == 0 and "archived" not in pinned
        event = laptop.wait_event(lambda e: e["type"] == "state.updated")["event"]
        assert event == {**event, "conversationId": rooms["two"]["id"], "userId": ana.user["id"], "pinnedRank": 0,
                         "archived": False, "markedUnread": False}
        assert "seq" not in event
        assert ana.patch(f"/v1/conversations/{rooms['one']['id']}/state", {"archived": True})[0] == 200
        assert laptop.wait_event(lambda e: e["type"] == "state.updated" and e["archived"])["event"]["conversationId"] == rooms["one"]["id"]
        status, marked = ana.patch(f"/v1/conversations/{rooms['three']['id']}/state", {"markedUnread": True})
        assert status == 200 and marked["markedUnread"] is True and marked["unreadCount"] == 0
        assert laptop.wait_event(lambda e: e["type"] == "state.updated" and e["markedUnread"])["event"]["conversationId"] == rooms["three"]["id"]

        # Pinned first, archived apart; pages of two cross from the pinned part to the rest.
        assert titles(ana) == ["two", "four", "three"]
        assert titles(ana, archived="true") == ["one"]
        assert titles(bob) == ["four", "three", "two", "one"], "bob's list is his own"

        # Reordered by dragging, in one request; GET gives the order back.
        order = [rooms["three"]["id"], rooms["two"]["id"]]
        status, saved = ana.request("PUT", "/v1/me/pinned-conversations", {"conversationIds": order})
        assert status == 200 and saved["conversationIds"] == order
        assert ana.get("/v1/me/pinned-conversations")[1]["conversationIds"] == order
        assert titles(ana) == ["three", "two", "four"]

        # Bob writes in the archived one: it is back in ana's list, and the laptop says so too.
        status, message = bob.send(rooms["one"]["id"], "still there?")
        assert status == 201
        laptop.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])
        assert titles(ana) == ["three", "two", "one", "four"]
        assert "archived" not in ana.get(f"/v1/conversations/{rooms['one']['id']}")[1]

        # Reading past the mark clears it; bob heard none of this.
        status, last = bob.send(rooms["three"]["id"], "read me")
        assert ana.post(f"/v1/conversations/{rooms['three']['id']}/receipts", {"readSeq": last["seq"]})[0] == 200
        assert "markedUnread" not in ana.get(f"/v1/conversations/{rooms['three']['id']}")[1]
        seen = []
        status, after = ana.send(rooms["four"]["id"], "barrier")
        bobs.wait_event(lambda e: seen.append(e["type"]) or e.get("message", {}).get("id") == after["id"])
        assert "state.updated" not in seen
    finally:
        laptop.close()
        bobs.close()


def test_bad_requests_change_nothing(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    mine, theirs = group(ana, "mine", bob), group(bob, "theirs")
    cases = [
        ("PATCH", f"/v1/conversations/{mine['id']}/state", {"pinned": True, "archived": True}, 400),
        ("PATCH", f"/v1/conversations/{mine['id']}/state", {"pinned": "yes"}, 400),
        ("PATCH", f"/v1/conversations/{theirs['id']}/state", {"pinned": True}, 404),   # a group one is not in is not there
        ("PUT", "/v1/me/pinned-conversations", {"conversationIds": [mine["id"], mine["id"]]}, 400),
        ("PUT", "/v1/me/pinned-conversations", {"conversationIds": [mine["id"], theirs["id"]]}, 404),
        ("PUT", "/v1/me/pinned-conversations", {"conversationIds": [f"c_{n}" for n in range(51)]}, 400),
        ("PUT", "/v1/me/pinned-conversations", {}, 400),
    ]
    for method, path, body, want in cases:
        status, answer = ana.request(method, path, body)
        assert status == want, (method, path, body, answer)
        assert answer["error"]["message"], answer
    assert ana.get("/v1/me/pinned-conversations")[1]["conversationIds"] == []
    assert ana.get(f"/v1/conversations/{mine['id']}")[1].get("pinnedRank") is None
    assert ana.get("/v1/conversations?before=p")[0] == 400


def test_a_draft_follows_the_user_to_their_other_device_and_goes_with_the_send_that_carries_it(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    room = group(ana, "drafts", bob)
    laptop = Device(server, Client(server).sign_in(ana.user["username"]).token)
    bobs = Device(server, bob.token)
    try:
        laptop.wait_ready()
        bobs.wait_ready()
        status, saved = ana.request("PUT", f"/v1/conversations/{room['id']}/draft",
                                    {"text": "See you at", "clientId": "draft-1", "updatedAt": "2026-01-01T10:00:00Z"})
        assert status == 200 and saved == {"text": "See you at", "clientId": "draft-1", "updatedAt": "2026-01-01T10:00:00.000Z"}
        event = laptop.wait_event(lambda e: e["type"] == "draft.updated")["event"]
        assert event["draft"] == saved and event["userId"] == ana.user["id"] and "seq" not in event
        # A late save stamped earlier loses; the answer is the draft in effect.
        status, kept = ana.request("PUT", f"/v1/conversations/{room['id']}/draft",
                                   {"text": "older", "updatedAt": "2026-01-01T09:00:00Z"})
        assert status == 200 and kept == saved
        assert ana.get(f"/v1/conversations/{room['id']}")[1]["draft"] == saved
        assert ana.get(f"/v1/conversations/{room['id']}/draft")[1] == {"draft": saved}
        assert "draft" not in bob.get(f"/v1/conversations/{room['id']}")[1]
        # A thread's draft is the thread's.
        status, root = bob.send(room["id"], "plans?")
        status, in_thread = ana.request("PUT", f"/v1/conversations/{room['id']}/draft",
                                        {"text": "yes!", "threadId": root["id"], "updatedAt": "2026-01-01T10:00:01Z"})
        assert status == 200 and in_thread["threadId"] == root["id"]
        assert ana.get(f"/v1/conversations/{room['id']}/draft?threadId={root['id']}")[1]["draft"]["text"] == "yes!"
        # Sent over the laptop's socket with the draft's client id: gone everywhere.
        sent = laptop.send_text(room["id"], "See you at 8", client_id="draft-1")["result"]["message"]
        assert sent["clientId"] == "draft-1"
        assert "draft" not in ana.get(f"/v1/conversations/{room['id']}")[1]
        assert ana.get(f"/v1/conversations/{room['id']}/draft")[1] == {}
        assert ana.get(f"/v1/conversations/{room['id']}/draft?threadId={root['id']}")[1]["draft"]["text"] == "yes!"
        seen = []
        bobs.wait_event(lambda e: seen.append(e["type"]) or e.get("message", {}).get("id") == sent["id"])
        assert "draft.updated" not in seen, "bob never hears of ana's drafts"
        for body, want in [({"text": "x"}, 400), ({"text": 5, "updatedAt": "2026-01-01T10:00:00Z"}, 400),
                           ({"text": "x", "updatedAt": "yesterday"}, 400),
                           ({"text": "x" * 10001, "updatedAt": "2026-01-01T10:00:00Z"}, 400),
                           ({"text": "x", "threadId": "m_nope", "updatedAt": "2026-01-01T10:00:00Z"}, 404)]:
            status, answer = ana.request("PUT", f"/v1/conversations/{room['id']}/draft", body)
            assert status == want, (body, answer)
    finally:
        laptop.close()
        bobs.close()
