"""The delivery trace (issue 35, item 1; docs/trace.md): `GET /v1/server/messages/{id}/trace`
and `parley-server admin trace` answer, per recipient and device, whether a message reached a
connected socket, came on resume, was pushed (with the fake providers' answers, each attempt
and a dead token's removal), or why no push was sent; with the device's receipts and the
app's webhook attempts. Only the app's backend reads it."""
import subprocess
import uuid

import pytest

from parley import BINARY, Client, Server, wait_until
from realtime import Device
from test_server_api import Backend
from webhookreceiver import Receiver


@pytest.fixture(scope="module")
def server(fake):
    running = Server(*fake.server_flags(), "--webhooks-allow-private", "--webhook-first-retry", "100",
                     "--node-name", "node-a", "--server-api-requests-per-second", "1000")
    yield running
    assert running.stop() == 0


def person(server, name):
    return Client(server).register(f"{name}{uuid.uuid4().hex[:6]}")


def apns_token():
    return uuid.uuid4().hex + uuid.uuid4().hex


def register(client, token, platform="apns"):
    status, device = client.post("/v1/devices", {"platform": platform, "token": token})
    assert status == 201, device
    return device


def group(owner, *others, kind="group"):
    body = {"kind": kind, "title": f"t-{uuid.uuid4().hex[:6]}"}
    if kind != "public":
        body["members"] = [o.user["username"] for o in others]
    status, conversation = owner.post("/v1/conversations", body)
    assert status == 201, conversation
    if kind == "public":
        for other in others:
            assert other.post(f"/v1/conversations/{conversation['id']}/join")[0] == 200
    return conversation["id"]


def trace(server, message_id):
    status, body = Backend(server).call("GET", f"/v1/server/messages/{message_id}/trace")
    assert status == 200, body
    return body


def recipient(body, client):
    return next(r for r in body["recipients"] if r["userId"] == client.user["id"])


def wait_recipient(server, message_id, client, predicate, what):
    """Traces are written once a second: wait for the step, never sleep."""
    found = {}

    def holds():
        found["body"] = trace(server, message_id)
        return predicate(recipient(found["body"], client))
    wait_until(holds, timeout=20, what=what)
    return recipient(found["body"], client), found["body"]


def test_a_connected_device_is_traced_live_with_its_receipts_and_only_the_backend_reads_it(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    room = group(ana, bob)
    phone = Device(server, bob.token)
    try:
        phone.wait_ready()
        status, message = ana.send(room, "hello")
        assert status == 201
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])
        assert bob.post(f"/v1/conversations/{room}/receipts", {"deliveredSeq": message["seq"], "readSeq": message["seq"]})[0] == 200
        seen, body = wait_recipient(server, message["id"], bob, lambda r: any(s["step"] == "receipt" for s in r["steps"]),
                                    "the live delivery and the receipt in the trace")
        assert body["messageId"] == message["id"] and body["conversationId"] == room and body["seq"] == message["seq"]
        assert body["authorId"] == ana.user["id"] and body["committedOn"] == "node-a" and body["shadow"] is False
        assert [r["userId"] for r in body["recipients"]] == [bob.user["id"]], "the author is not a recipient"
        assert seen["outcome"] == "socket"
        routed = [s for s in seen["steps"] if s["step"] == "routed"]
        assert len(routed) == 1 and routed[0]["node"] == "node-a" and routed[0]["session"].startswith("s_")
        receipt = next(s for s in seen["steps"] if s["step"] == "receipt")
        assert receipt["deliveredSeq"] == message["seq"] and receipt["readSeq"] == message["seq"]
        assert body["keptUntil"] > body["createdAt"]
        # Nobody but the app's backend: a user's token, a wrong secret, another app's message.
        assert ana.get(f"/v1/server/messages/{message['id']}/trace")[0] == 401
        assert Backend(server).call("GET", f"/v1/server/messages/{message['id']}/trace", secret="sk_wrong")[0] == 401
        status, missing = Backend(server).call("GET", "/v1/server/messages/m_nosuchmessage/trace")
        assert status == 404 and missing["error"]["code"] == "message_not_found"
        # The command line says the same.
        result = subprocess.run([BINARY, "admin", "trace", message["id"], "--url", server.url, "--secret", server.app_secret],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert f"{bob.user['id']}: socket" in result.stdout and "routed  on node-a" in result.stdout
        assert "delivered through" in result.stdout and "hello" not in result.stdout, "never the message's text"
    finally:
        phone.close()


def test_a_device_that_was_away_is_traced_on_resume(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    room = group(ana, bob)
    phone = Device(server, bob.token)
    phone.wait_ready()
    position = phone.ready["position"]
    phone.close()
    status, message = ana.send(room, "while you were away")
    assert status == 201
    back = Device(server, bob.token, position=position)
    try:
        back.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])
        seen, _ = wait_recipient(server, message["id"], bob, lambda r: r["outcome"] == "replayed", "the replay in the trace")
        assert [s["step"] for s in seen["steps"] if s["step"] in ("routed", "replayed")] == ["replayed"]
    finally:
        back.close()


def test_pushes_are_traced_with_the_providers_answers_and_a_dead_token_removed(fake, server):
    ana, bob, cy, dee = person(server, "ana"), person(server, "bob"), person(server, "cy"), person(server, "dee")
    good, dead, flaky = apns_token(), apns_token(), apns_token()
    fake.answers[dead] = [410]
    fake.answers[flaky] = [500]
    register(bob, good)
    register(cy, dead)
    android = "fcm:" + uuid.uuid4().hex * 2
    register(dee, flaky)
    register(dee, android, platform="fcm")
    room = group(ana, bob, cy, dee)
    status, message = ana.send(room, "pushed")
    assert status == 201
    got, body = wait_recipient(server, message["id"], bob, lambda r: r["outcome"] == "pushed", "bob's push in the trace")
    attempt = next(s for s in got["steps"] if s["step"] == "push.attempt")
    assert attempt["platform"] == "apns" and attempt["status"] == 200 and attempt["outcome"] == "sent"
    assert attempt["providerId"] == next(p for p in fake.pushes_to(good))[2].get("apns-id", attempt["providerId"])
    assert len(attempt["providerId"]) == 36, "APNs's apns-id, a UUID"
    assert any(s["step"] == "push.queued" and s["device"].startswith("d_") for s in got["steps"])
    gone, _ = wait_recipient(server, message["id"], cy, lambda r: any(s["step"] == "push.removed" for s in r["steps"]),
                             "cy's dead token in the trace")
    refused = next(s for s in gone["steps"] if s["step"] == "push.attempt")
    assert gone["outcome"] == "push_failed" and refused["status"] == 410 and "Unregistered" in refused["reason"]
    assert refused["outcome"] == "removed"
    # Dee: APNs answered 500 once (retried, then sent); FCM took the other device at once.
    retried, _ = wait_recipient(server, message["id"], dee,
                                lambda r: len([s for s in r["steps"] if s["step"] == "push.attempt" and s["platform"] == "apns"]) == 2,
                                "dee's retried push in the trace")
    apns = [s for s in retried["steps"] if s["step"] == "push.attempt" and s["platform"] == "apns"]
    assert [(s["status"], s["outcome"]) for s in apns] == [(500, "retry"), (200, "sent")]
    fcm = next(s for s in retried["steps"] if s["step"] == "push.attempt" and s["platform"] == "fcm")
    assert fcm["outcome"] == "sent" and fcm["providerId"].startswith("projects/")
    assert retried["outcome"] == "pushed"


def test_why_no_push_went_is_traced_for_each_member(fake, server):
    ana, muted, quiet, online, blocker, bare = (person(server, n) for n in ("ana", "mu", "qu", "on", "bl", "ba"))
    for member in (muted, quiet, online, blocker):
        register(member, apns_token())
    room = group(ana, muted, quiet, online, blocker, bare)
    assert muted.request("PUT", f"/v1/conversations/{room}/mute", {})[0] == 200
    assert quiet.request("PUT", f"/v1/conversations/{room}/notifications", {"level": "mentions"})[0] == 200
    assert blocker.request("PUT", f"/v1/me/blocks/{ana.user['id']}")[0] == 204
    phone = Device(server, online.token)
    try:
        phone.wait_ready()
        status, message = ana.send(room, "who gets a push?")
        assert status == 201
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])
        assert online.post(f"/v1/conversations/{room}/receipts", {"deliveredSeq": message["seq"]})[0] == 200
        expected = {muted: "muted", quiet: "mentions_only", blocker: "blocked", bare: "no_device", online: "delivered"}
        for member, reason in expected.items():
            seen, _ = wait_recipient(server, message["id"], member, lambda r: r.get("notPushed") is not None, f"why {reason}")
            assert seen["notPushed"] == reason, (reason, seen)
            skipped = next(s for s in seen["steps"] if s["step"] == "push.skipped")
            assert skipped["reason"] == reason
        online_seen, _ = wait_recipient(server, message["id"], online, lambda r: True, "the online member")
        assert online_seen["outcome"] == "socket"
        for member in (muted, quiet, blocker, bare):
            assert recipient(trace(server, message["id"]), member)["outcome"] == "not_pushed"
    finally:
        phone.close()


def test_a_thread_reply_says_who_does_not_follow_the_thread(fake, server):
    ana, bob, cy = person(server, "ana"), person(server, "bob"), person(server, "cy")
    for member in (bob, cy):
        register(member, apns_token())
    room = group(ana, bob, cy)
    _, root = bob.send(room, "saturday?")
    status, reply = ana.send(room, "hike", threadId=root["id"])
    assert status == 201
    pushed, _ = wait_recipient(server, reply["id"], bob, lambda r: r["outcome"] == "pushed", "the thread's starter pushed")
    left_out, _ = wait_recipient(server, reply["id"], cy, lambda r: r.get("notPushed") is not None, "cy left out")
    assert left_out["notPushed"] == "thread_not_followed" and left_out["outcome"] == "not_pushed"


def test_on_a_server_without_push_the_trace_says_push_is_off():
    server = Server()
    try:
        ana, bob = person(server, "ana"), person(server, "bob")
        status, message = ana.send(group(ana, bob), "no push here")
        assert status == 201
        seen, body = wait_recipient(server, message["id"], bob, lambda r: r.get("notPushed") == "push_off", "push_off")
        assert seen["outcome"] == "not_pushed" and seen["steps"] == []
        wait_until(lambda: trace(server, message["id"]).get("committedOn"), what="the committing node")
    finally:
        server.stop()


def test_an_id_only_push_and_a_webhook_are_traced(fake, server):
    backend = Backend(server)
    receiver = Receiver()
    try:
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["message.created", "message.edited"]})
        assert status == 201
        receiver.secret = hook["secret"]
        assert server.apps("push-content", "default", "id-only").returncode == 0
        ana, bob = person(server, "ana"), person(server, "bob")
        register(bob, apns_token())
        room = group(ana, bob)
        status, message = ana.send(room, "secret plans")
        assert status == 201
        seen, body = wait_recipient(server, message["id"], bob, lambda r: r["outcome"] == "pushed", "the id-only push")
        queued = next(s for s in seen["steps"] if s["step"] == "push.queued")
        assert queued["idOnly"] is True
        # Its later edit's delivery is the message's too.
        assert ana.patch(f"/v1/conversations/{room}/messages/{message['id']}", {"content": {"type": "text", "text": "plans"}})[0] == 200
        wait_until(lambda: {w["event"] for w in trace(server, message["id"])["webhooks"] if w["outcome"] == "sent"}
                   == {"message.created", "message.edited"}, what="both webhook attempts")
        attempts = trace(server, message["id"])["webhooks"]
        assert [w["event"] for w in attempts] == ["message.created", "message.edited"]
        assert all(w["endpoint"] == hook["id"] and w["status"] == 200 and w["node"] == "node-a" for w in attempts)
    finally:
        server.apps("push-content", "default", "full")
        backend.call("DELETE", f"/v1/server/webhooks/{hook['id']}")
        receiver.close()


def test_a_shadow_banned_senders_message_is_traced_as_seen_by_no_one(server):
    backend = Backend(server)
    mal, bob = person(server, "mal"), person(server, "bob")
    room = group(bob, mal)
    assert backend.call("PUT", f"/v1/server/users/{mal.user['username']}/shadow-ban")[0] == 204
    status, message = mal.send(room, "spam")
    assert status == 201
    body = trace(server, message["id"])
    assert body["shadow"] is True


def test_with_tracing_off_nothing_is_recorded_and_the_trace_says_so():
    server = Server("--trace-retention", "0")
    try:
        ana, bob = person(server, "ana"), person(server, "bob")
        room = group(ana, bob)
        phone = Device(server, bob.token)
        phone.wait_ready()
        status, message = ana.send(room, "untraced")
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])
        phone.close()
        body = trace(server, message["id"])
        assert "committedOn" not in body and recipient(body, bob)["steps"] == []
        assert body["keptUntil"] == body["createdAt"]
    finally:
        server.stop()
