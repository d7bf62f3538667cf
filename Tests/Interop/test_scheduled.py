"""Scheduled messages (issue 33, item 5) against the real server: sent once at their time as a
normal send, surviving kill -9 between scheduling and sending; listed, edited and cancelled by
their author, whose other devices hear each change (`scheduled.updated`); refused with the
reason when the author can no longer post at their time."""
import datetime
import time
import uuid

from parley import Client, Server, wait_until
from realtime import Device


def at(seconds):
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def person(server, name):
    return Client(server).register(f"{name}{uuid.uuid4().hex[:6]}")


def schedule(client, conversation, seconds, text, client_id=None):
    return client.post(f"/v1/conversations/{conversation}/scheduled",
                       {"sendAt": at(seconds), "message": {"clientId": client_id or uuid.uuid4().hex, "content": {"type": "text", "text": text}}})


def test_a_scheduled_message_survives_kill_9_and_is_sent_once_at_its_time():
    server = Server()
    try:
        ana, ben = person(server, "ana"), person(server, "ben")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "later", "members": [ben.user["username"]]})
        assert status == 201
        status, planned = schedule(ana, room["id"], 3, "good morning", client_id="sched-1")
        assert status == 201 and planned["status"] == "scheduled" and planned["id"].startswith("sm_"), planned
        started = time.monotonic()
        server.kill()   # kill -9 between scheduling and sending
        server.start()
        ana.sign_in(ana.user["username"])
        ben.sign_in(ben.user["username"])
        wait_until(lambda: ben.get(f"/v1/conversations/{room['id']}/messages")[1]["messages"], timeout=20, what="the scheduled message")
        assert time.monotonic() - started >= 2.5, "not before its time"
        messages = ben.get(f"/v1/conversations/{room['id']}/messages")[1]["messages"]
        assert [(m["content"]["text"], m["clientId"], m["sender"]["id"]) for m in messages] == [("good morning", "sched-1", ana.user["id"])]
        # Recorded as sent just after the send commits.
        wait_until(lambda: ana.get("/v1/scheduled")[1] == {"scheduled": []}, timeout=10, what="recorded as sent")
        # Once: nothing more arrives after it, and the client id cannot be scheduled again.
        assert schedule(ana, room["id"], 60, "again", client_id="sched-1")[0] == 409
        assert len(ben.get(f"/v1/conversations/{room['id']}/messages")[1]["messages"]) == 1
    finally:
        server.stop()


def test_the_author_lists_edits_and_cancels_and_their_other_device_follows():
    server = Server()
    try:
        ana, ben = person(server, "ana"), person(server, "ben")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "plans", "members": [ben.user["username"]]})
        laptop = Device(server, Client(server).sign_in(ana.user["username"]).token)
        bobs = Device(server, ben.token)
        laptop.wait_ready()
        bobs.wait_ready()
        status, planned = schedule(ana, room["id"], 600, "draft words")
        assert status == 201
        event = laptop.wait_event(lambda e: e["type"] == "scheduled.updated")["event"]
        assert event["scheduled"]["id"] == planned["id"] and event["scheduled"]["status"] == "scheduled" and "seq" not in event
        status, edited = ana.patch(f"/v1/scheduled/{planned['id']}", {"content": {"type": "text", "text": "final words"}, "sendAt": at(2)})
        assert status == 200 and edited["message"]["content"]["text"] == "final words"
        assert laptop.wait_event(lambda e: e["type"] == "scheduled.updated" and e["scheduled"]["message"]["content"]["text"] == "final words")
        assert ana.get(f"/v1/scheduled?conversationId={room['id']}")[1]["scheduled"][0]["id"] == planned["id"]
        assert ben.patch(f"/v1/scheduled/{planned['id']}", {"content": {"type": "text", "text": "mine"}})[0] == 404
        assert ben.delete(f"/v1/scheduled/{planned['id']}")[0] == 404
        # At its time: sent, and the laptop hears "sent" with the message's id.
        sent = laptop.wait_event(lambda e: e["type"] == "scheduled.updated" and e["scheduled"]["status"] == "sent", timeout=15)["event"]
        message = bobs.wait_event(lambda e: e["type"] == "message.created")["event"]["message"]
        assert sent["scheduled"]["messageId"] == message["id"] and message["content"]["text"] == "final words"
        # Cancelled: never sent.
        status, other = schedule(ana, room["id"], 2, "never mind")
        assert ana.delete(f"/v1/scheduled/{other['id']}")[0] == 204
        assert laptop.wait_event(lambda e: e["type"] == "scheduled.updated" and e["scheduled"]["status"] == "cancelled")
        assert ana.delete(f"/v1/scheduled/{other['id']}")[0] == 409
        # Refused up front, changing nothing.
        for body, want in [({"sendAt": at(-5), "message": {"clientId": "p", "content": {"type": "text", "text": "past"}}}, 400),
                           ({"sendAt": at(400 * 86400), "message": {"clientId": "f", "content": {"type": "text", "text": "far"}}}, 400),
                           ({"sendAt": "tomorrow", "message": {"clientId": "t", "content": {"type": "text", "text": "x"}}}, 400),
                           ({"message": {"clientId": "n", "content": {"type": "text", "text": "x"}}}, 400),
                           ({"sendAt": at(60), "message": {"clientId": "a", "content": {"type": "photo", "attachmentId": "x"}}}, 400)]:
            status, answer = ana.post(f"/v1/conversations/{room['id']}/scheduled", body)
            assert status == want, (body, answer)
        laptop.close()
        bobs.close()
    finally:
        server.stop()


def test_one_whose_author_was_removed_fails_with_the_reason_and_stays_listed_until_dismissed():
    server = Server()
    try:
        ana, ben = person(server, "ana"), person(server, "ben")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "out", "members": [ben.user["username"]]})
        status, planned = schedule(ben, room["id"], 2, "am I still here?")
        assert status == 201
        assert ana.delete(f"/v1/conversations/{room['id']}/members/{ben.user['id']}")[0] == 204
        wait_until(lambda: ben.get("/v1/scheduled")[1]["scheduled"][0]["status"] == "failed", timeout=15, what="the failure")
        failed = ben.get("/v1/scheduled")[1]["scheduled"][0]
        assert failed["id"] == planned["id"] and failed["error"], failed
        assert ana.get(f"/v1/conversations/{room['id']}/messages")[1]["messages"] == []
        assert ben.delete(f"/v1/scheduled/{planned['id']}")[0] == 204
        assert ben.get("/v1/scheduled")[1] == {"scheduled": []}
    finally:
        server.stop()
