"""Webhooks against a receiver written with Python's standard library: every delivery
signed, every event delivered in order per endpoint, failures retried with the same id, a
kill -9 losing nothing, a slow receiver slowing no one, and private addresses refused."""
import json
import socket
import threading
import time
import uuid

import pytest

import parley
from test_server_api import Backend, device_of, user
from webhookreceiver import Receiver, verify

pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")

FAST = ["--webhooks-allow-private", "--webhook-first-retry", "100", "--server-api-requests-per-second", "1000"]


@pytest.fixture(scope="module")
def server():
    running = parley.Server(*FAST)
    yield running
    assert running.stop() == 0


def endpoint(backend, url, events=("message.created",), **extra):
    status, answer = backend.call("POST", "/v1/server/webhooks", {"url": url, "events": list(events), **extra})
    assert status == 201, (status, answer)
    assert answer["secret"].startswith("whsec_")
    return answer


def group_of(backend, title, *names):
    for name in names:
        user(backend, name)
    status, group = backend.call("POST", "/v1/server/conversations", {"kind": "group", "title": title, "members": list(names)})
    assert status == 201, group
    return group["id"]


def send(backend, conversation, sender, text):
    status, message = backend.call("POST", f"/v1/server/conversations/{conversation}/messages",
                                   {"from": sender, "clientId": uuid.uuid4().hex, "content": {"type": "text", "text": text}})
    assert status in (200, 201), message
    return message


def test_every_event_arrives_signed_and_in_order(server):
    backend = Backend(server)
    receiver = Receiver()
    try:
        hook = endpoint(backend, receiver.url, ["message.created", "message.edited", "message.deleted", "member.added",
                                                "member.removed", "conversation.created", "user.created"])
        receiver.secret = hook["secret"]
        cid = group_of(backend, "Hooks", "wh-ann", "wh-ben")
        sent = [send(backend, cid, "wh-ann", f"message {n}") for n in range(20)]
        backend.call("PATCH", f"/v1/server/conversations/{cid}/messages/{sent[0]['id']}", {"content": {"type": "text", "text": "edited"}})
        backend.call("DELETE", f"/v1/server/conversations/{cid}/messages/{sent[1]['id']}")
        user(backend, "wh-cy")
        # A user who signs up on their own is announced too.
        parley.Client(server).register("wh-self")
        receiver.wait_for(lambda ds: len([d for d in ds if d["type"] == "user.created"]) >= 4, what="user.created x4")
        deliveries = receiver.wait_for(lambda ds: any(d["type"] == "message.deleted" for d in ds), what="message.deleted")
        assert receiver.bad_signatures == 0
        types = [d["type"] for d in deliveries]
        for kind in ("conversation.created", "member.added", "message.created", "message.edited", "message.deleted", "user.created"):
            assert kind in types, kind
        created = [d["data"]["message"]["id"] for d in deliveries if d["type"] == "message.created"]
        assert created == [m["id"] for m in sent], "message.created in the order the messages were sent"
        positions = [d["data"]["position"] for d in deliveries if "position" in d["data"]]
        assert positions == sorted(positions), "one endpoint hears events in the order they happened"
        assert len({d["id"] for d in deliveries}) == len(deliveries), "every delivery has an id of its own, never reused"
        first = deliveries[0]
        assert set(first) >= {"id", "type", "createdAt", "data"} and first["id"].startswith("whd_")
        headers = first["_headers"]
        assert headers["Parley-Webhook-Id"] == first["id"] and headers["Parley-Webhook-Attempt"] == "1"
        assert headers["Parley-Signature"].startswith("t=") and ",v1=" in headers["Parley-Signature"]
        names = [d["data"]["username"] for d in receiver.of_type("user.created")]
        assert {"wh-ann", "wh-ben", "wh-cy", "wh-self"} <= set(names)
    finally:
        receiver.close()


def test_every_delivery_verifies_with_the_standard_webhooks_library_as_it_is(server):
    """Beside Parley-Signature, each delivery carries webhook-id, webhook-timestamp and
    webhook-signature (standardwebhooks.com): the `standardwebhooks` package from PyPI checks it
    with the endpoint's standardWebhooksSecret, and refuses a changed body or another secret."""
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError
    backend = Backend(server)
    receiver = Receiver()
    try:
        hook = endpoint(backend, receiver.url, ["message.created"])
        receiver.secret = hook["secret"]
        assert hook["standardWebhooksSecret"].startswith("whsec_") and hook["standardWebhooksSecret"] != hook["secret"]
        cid = group_of(backend, "Standard", "sw-ann", "sw-ben")
        sent = send(backend, cid, "sw-ann", "checked by a library")
        delivered = receiver.wait_for(lambda ds: any(d["data"]["message"]["id"] == sent["id"] for d in ds), what="the delivery")[-1]
        headers = {k.lower(): v for k, v in delivered["_headers"].items()}
        assert headers["webhook-id"] == delivered["id"] and headers["webhook-signature"].startswith("v1,")
        raw = delivered["_raw"].encode()
        library = Webhook(hook["standardWebhooksSecret"])
        assert library.verify(raw, headers)["data"]["message"]["id"] == sent["id"]
        for tampered, wrong in ((raw + b" ", library), (raw, Webhook("whsec_" + "QUJD" * 8))):
            with pytest.raises(WebhookVerificationError):
                wrong.verify(tampered, headers)
        # A rotated secret signs the next delivery; the library takes the new one.
        status, rotated = backend.call("POST", f"/v1/server/webhooks/{hook['id']}/rotate-secret")
        assert status == 200 and rotated["standardWebhooksSecret"] != hook["standardWebhooksSecret"], rotated
        receiver.secret = rotated["secret"]
        again = send(backend, cid, "sw-ben", "after the rotation")
        delivered = receiver.wait_for(lambda ds: any(d["data"]["message"]["id"] == again["id"] for d in ds), what="the next delivery")[-1]
        headers = {k.lower(): v for k, v in delivered["_headers"].items()}
        assert Webhook(rotated["standardWebhooksSecret"]).verify(delivered["_raw"].encode(), headers)["data"]["message"]["id"] == again["id"]
    finally:
        receiver.close()


def test_signature_check_is_what_the_docs_say():
    body = b'{"id":"whd_1"}'
    import hashlib
    import hmac
    t = int(time.time())
    header = f"t={t},v1=" + hmac.new(b"whsec_k", f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert verify("whsec_k", header, body)
    assert not verify("whsec_other", header, body)
    assert not verify("whsec_k", header, body + b" ")
    assert not verify("whsec_k", header, body, now=t + 301), "an old delivery replayed later is refused"


def test_failures_are_retried_with_the_same_id_and_order_kept(server):
    backend = Backend(server)
    receiver = Receiver(fail_first=5)
    try:
        hook = endpoint(backend, receiver.url)
        receiver.secret = hook["secret"]
        cid = group_of(backend, "Retry", "wr-ann", "wr-ben")
        sent = [send(backend, cid, "wr-ann", f"r{n}") for n in range(10)]
        deliveries = receiver.wait_for(lambda ds: len(ds) >= 10, what="10 deliveries after 5 failures")
        assert [d["data"]["message"]["id"] for d in deliveries] == [m["id"] for m in sent]
        failed_ids = [a[0] for a in receiver.attempts if a[2] == 500]
        assert len(failed_ids) == 5 and len(set(failed_ids)) == 1, "the head is retried; nothing behind it is sent meanwhile"
        assert deliveries[0]["id"] == failed_ids[0] and deliveries[0]["_headers"]["Parley-Webhook-Attempt"] == "6"
        parley.wait_until(lambda: backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[1]["pending"] == 0, what="nothing pending")
        state = backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[1]
        assert state.get("failingSince") is None and state.get("lastError") is None
    finally:
        receiver.close()


def test_given_up_deliveries_pause_the_endpoint_and_can_be_replayed():
    server = parley.Server("--webhooks-allow-private", "--webhook-first-retry", "50", "--webhook-retry-window", "1")
    receiver = Receiver(status=503)
    try:
        backend = Backend(server)
        hook = endpoint(backend, receiver.url)
        cid = group_of(backend, "Dead", "wd-ann", "wd-ben")
        sent = [send(backend, cid, "wd-ann", f"d{n}") for n in range(3)]

        def paused():
            return backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[1]
        parley.wait_until(lambda: paused().get("pausedAt") is not None, what="the endpoint paused")
        state = paused()
        assert state["failed"] == 1 and state["pending"] == 2 and "HTTP 503" in state["lastError"]
        assert "retry window" in state["pausedReason"]
        status, failed = backend.call("GET", f"/v1/server/webhooks/{hook['id']}/deliveries?status=failed")
        assert status == 200 and len(failed["deliveries"]) == 1 and failed["deliveries"][0]["type"] == "message.created"
        status, pending = backend.call("GET", f"/v1/server/webhooks/{hook['id']}/deliveries?status=pending")
        assert len(pending["deliveries"]) == 2
        attempts_while_paused = len(receiver.attempts)
        # A paused endpoint is not hammered. Proved by a later event that must come after any
        # attempt it would have had: a delivery to another endpoint of a message sent now, which
        # the same workers claim after looking at every lane, the paused one too.
        witness = Receiver()
        try:
            endpoint(backend, witness.url)
            later = send(backend, cid, "wd-ann", "after the pause")
            witness.wait_for(lambda ds: any(d["data"]["message"]["id"] == later["id"] for d in ds), what="the witness's delivery")
        finally:
            witness.close()
        assert len(receiver.attempts) == attempts_while_paused
        metrics = parley.Client(server).request_bytes("GET", "/metrics", authenticated=False)
        assert b"parley_webhook_endpoints_paused 1" in metrics[1]
        # The receiver is fixed: replay the failed one and resume; the three, then the message sent
        # while it was paused, all arrive, in order.
        receiver.status = 200
        status, replayed = backend.call("POST", f"/v1/server/webhooks/{hook['id']}/replay")
        assert status == 200 and replayed["replayed"] == 1
        assert backend.call("PATCH", f"/v1/server/webhooks/{hook['id']}", {"paused": False})[0] == 200
        deliveries = receiver.wait_for(lambda ds: len(ds) >= 4, what="four deliveries after resuming")
        assert [d["data"]["message"]["id"] for d in deliveries] == [m["id"] for m in sent] + [later["id"]]
    finally:
        receiver.close()
        server.stop()


def test_a_kill_minus_nine_loses_no_delivery():
    server = parley.Server(*FAST)
    receiver = Receiver()
    try:
        backend = Backend(server)
        hook = endpoint(backend, receiver.url)
        receiver.secret = hook["secret"]
        cid = group_of(backend, "Crash", "wk-ann", "wk-ben")
        acknowledged = []
        stop = threading.Event()

        def sender():
            writer = Backend(server)
            n = 0
            while not stop.is_set():
                try:
                    acknowledged.append(send(writer, cid, "wk-ann", f"k{n}")["id"])
                except (ConnectionError, OSError, AssertionError):
                    return
                n += 1
        thread = threading.Thread(target=sender)
        thread.start()
        parley.wait_until(lambda: len(receiver.deliveries) >= 20, what="deliveries under way")
        server.kill()
        stop.set()
        thread.join()
        server.start()
        deliveries = receiver.wait_for(lambda ds: {d["data"]["message"]["id"] for d in ds} >= set(acknowledged), timeout=60,
                                       what=f"all {len(acknowledged)} acknowledged messages delivered after the restart")
        ids = [d["data"]["message"]["id"] for d in deliveries]
        # At least once: a delivery the receiver took just before the kill may come again, in order.
        deduplicated = list(dict.fromkeys(ids))
        assert deduplicated[:len(acknowledged)] == acknowledged
        assert receiver.bad_signatures == 0
        print(f"{len(acknowledged)} sent, {len(ids) - len(deduplicated)} delivered twice, none lost")
    finally:
        receiver.close()
        server.stop()


def test_a_stalled_receiver_never_slows_sending(server):
    backend = Backend(server)
    receiver = Receiver()
    receiver.stall = threading.Event()
    try:
        endpoint(backend, receiver.url)
        cid = group_of(backend, "Slow", "ws-ann", "ws-ben")
        for n in range(20):
            started = time.monotonic()
            send(backend, cid, "ws-ann", f"s{n}")
            assert time.monotonic() - started < 1.0
    finally:
        receiver.stall.set()
        receiver.close()


def test_private_addresses_are_refused_unless_allowed():
    server = parley.Server()
    receiver = Receiver()
    try:
        backend = Backend(server)
        for url in ("http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::1]:9/x", "http://10.1.2.3/x", "http://169.254.169.254/latest",
                    "http://[::ffff:127.0.0.1]/x", "http://192.168.1.1/x"):
            status, answer = backend.call("POST", "/v1/server/webhooks", {"url": url, "events": ["message.created"]})
            assert status == 400 and "--webhooks-allow-private" in answer["error"]["message"], url
        for url in ("ftp://example.com/x", "http://user:pw@example.com/x", "not a url", "http://example.com/" + "a" * 2100):
            assert backend.call("POST", "/v1/server/webhooks", {"url": url, "events": ["message.created"]})[0] == 400, url
        # A name that resolves to a private address passes the check at registration and is
        # refused when the delivery connects.
        name = socket.gethostname()
        addresses = {info[4][0] for info in socket.getaddrinfo(name, None)}
        if not all(a.startswith(("127.", "10.", "172.", "192.168.", "::1", "fe80")) for a in addresses):
            pytest.skip(f"{name} resolves to a public address here: {addresses}")
        port = receiver.url.rsplit(":", 1)[1]
        hook = endpoint(backend, f"http://{name}:{port}")
        cid = group_of(backend, "Guard", "wg-ann", "wg-ben")
        send(backend, cid, "wg-ann", "hello")
        parley.wait_until(lambda: backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[1].get("lastError") is not None,
                          what="the refused delivery recorded")
        error = backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[1]["lastError"]
        assert "private address" in error, error
        assert receiver.attempts == [], "nothing reached the receiver"
    finally:
        receiver.close()
        server.stop()


def test_endpoints_are_managed_and_validated(server):
    backend = Backend(server)
    status, answer = backend.call("POST", "/v1/server/webhooks", {"url": "http://127.0.0.1:9/", "events": []})
    assert status == 400
    status, answer = backend.call("POST", "/v1/server/webhooks", {"url": "http://127.0.0.1:9/", "events": ["channel_occupied"]})
    assert status == 400 and "pusher" in answer["error"]["message"]
    hook = endpoint(backend, "http://127.0.0.1:9/", ["message.created"], description="crm")
    status, listed = backend.call("GET", "/v1/server/webhooks")
    assert hook["id"] in [w["id"] for w in listed["webhooks"]] and all(w.get("secret") is None for w in listed["webhooks"])
    status, changed = backend.call("PATCH", f"/v1/server/webhooks/{hook['id']}", {"events": ["message.created", "user.created"], "paused": True})
    assert status == 200 and changed["events"] == ["message.created", "user.created"] and changed.get("pausedAt")
    status, rotated = backend.call("POST", f"/v1/server/webhooks/{hook['id']}/rotate-secret")
    assert status == 200 and rotated["secret"] != hook["secret"]
    status, answer = backend.call("POST", f"/v1/server/webhooks/{hook['id']}/deliveries/whd_nosuchdelivery/replay")
    assert status == 404 and answer["error"]["code"] == "delivery_not_found"
    status, answer = backend.call("GET", f"/v1/server/webhooks/{hook['id']}/deliveries?after=whd_nosuchdelivery")
    assert status == 400 and "after" in answer["error"]["message"]
    status, answer = backend.call("PATCH", f"/v1/server/webhooks/{hook['id']}", {"description": "x" * 201})
    assert status == 400 and "description" in answer["error"]["message"]
    assert backend.call("DELETE", f"/v1/server/webhooks/{hook['id']}")[0] == 204
    assert backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[0] == 404
    status, answer = backend.call("POST", f"/v1/server/webhooks/{hook['id']}/replay")
    assert status == 404 and answer["error"]["code"] == "webhook_not_found"


def test_pusher_format_webhooks_validate_with_the_pusher_library():
    from test_pusher import Raw, backend, channel_name, pusher_app_id
    server = parley.Server(*FAST)
    server.pusher_id = pusher_app_id(server)
    receiver = Receiver()
    try:
        hook = endpoint(Backend(server), receiver.url,
                        ["channel_occupied", "channel_vacated", "member_added", "member_removed", "client_event"], format="pusher")
        assert hook["format"] == "pusher"
        library = backend(server)
        presence = channel_name("presence-")
        socket = Raw(server).open()
        auth = library.authenticate(channel=presence, socket_id=socket.socket_id, custom_data={"user_id": "u-7"})
        assert socket.subscribe(presence, auth=auth["auth"], channel_data=auth["channel_data"])["event"].endswith("succeeded")
        socket.send("client-typing", {"who": "u-7"}, channel=presence)
        socket.send("pusher:unsubscribe", {"channel": presence})
        deliveries = receiver.wait_for(lambda ds: len(ds) >= 5, what="five Pusher webhooks")
        events = [event for d in deliveries for event in d["events"]]
        assert [e["name"] for e in events] == ["channel_occupied", "member_added", "client_event", "member_removed", "channel_vacated"]
        assert all(e["channel"] == presence for e in events)
        assert events[1]["user_id"] == "u-7" and events[3]["user_id"] == "u-7"
        client_event = events[2]
        assert client_event["event"] == "client-typing" and json.loads(client_event["data"]) == {"who": "u-7"}
        assert client_event["socket_id"] == socket.socket_id and client_event["user_id"] == "u-7"
        for delivery in deliveries:
            headers = delivery["_headers"]
            validated = library.validate_webhook(headers["X-Pusher-Key"], headers["X-Pusher-Signature"], delivery["_raw"])
            assert validated is not None and validated["events"] == delivery["events"]
        forged = deliveries[0]["_raw"].replace("channel_occupied", "channel_vacated")
        assert library.validate_webhook(deliveries[0]["_headers"]["X-Pusher-Key"], deliveries[0]["_headers"]["X-Pusher-Signature"], forged) is None
        socket.ws.close()
    finally:
        receiver.close()
        server.stop()


def test_a_receiver_that_does_not_answer_in_time_gets_the_delivery_again():
    server = parley.Server("--webhooks-allow-private", "--webhook-first-retry", "100", "--webhook-timeout", "1")
    receiver = Receiver()
    receiver.stall = threading.Event()       # the first request hangs past the timeout
    try:
        backend = Backend(server)
        hook = endpoint(backend, receiver.url)
        receiver.secret = hook["secret"]
        cid = group_of(backend, "Late", "wt-ann", "wt-ben")
        sent = send(backend, cid, "wt-ann", "are you there?")
        def last_error():
            return (backend.call("GET", f"/v1/server/webhooks/{hook['id']}")[1].get("lastError") or "").lower()
        parley.wait_until(lambda: "timeout" in last_error() or "timed out" in last_error(), what="the timeout recorded")
        receiver.stall.set()
        receiver.stall = None
        deliveries = receiver.wait_for(lambda ds: any(d["data"]["message"]["id"] == sent["id"] and int(d["_headers"]["Parley-Webhook-Attempt"]) >= 2
                                                      for d in ds), what="the delivery again, attempt 2 or later")
        assert deliveries[-1]["id"] == deliveries[0]["id"], "the same delivery id on every attempt"
    finally:
        if receiver.stall is not None:
            receiver.stall.set()
        receiver.close()
        server.stop()


def test_an_app_has_at_most_twenty_endpoints():
    server = parley.Server(*FAST)
    try:
        backend = Backend(server)
        hooks = [endpoint(backend, f"http://127.0.0.1:9/{n}") for n in range(20)]
        status, answer = backend.call("POST", "/v1/server/webhooks", {"url": "http://127.0.0.1:9/21", "events": ["message.created"]})
        assert status == 409 and answer["error"]["code"] == "too_many_webhooks"
        assert len(backend.call("GET", "/v1/server/webhooks")[1]["webhooks"]) == 20, "nothing was added by the refused request"
        assert backend.call("DELETE", f"/v1/server/webhooks/{hooks[0]['id']}")[0] == 204
        endpoint(backend, "http://127.0.0.1:9/21")
    finally:
        server.stop()
