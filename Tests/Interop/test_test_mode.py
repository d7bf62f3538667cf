"""Test mode (issue 35, item 2; docs/test-mode.md): `parley-server --test-mode` says so on every
response and in its banner, is refused with TLS on a public address, and gives an app's CI a
clock it moves (`POST /v1/test/clock`) that every timed rule follows: a ban ends after an hour
of test time, a scheduled message goes out at its time, a session ends after its lifetime;
and, with no Apple or Google account, built-in APNs and FCM that keep the exact requests a
provider would get (`GET /v1/test/pushes`) and answer a token declared dead as Apple does."""
import datetime
import subprocess
import tempfile
import time
import uuid

import pytest

from parley import BINARY, Client, Server
from realtime import Device
from test_server_api import Backend


@pytest.fixture(scope="module")
def server():
    running = Server("--test-mode", "--server-api-requests-per-second", "1000")
    yield running
    assert running.stop() == 0


def person(server, name):
    return Client(server).register(f"{name}{uuid.uuid4().hex[:6]}")


def clock(server):
    status, body = Backend(server).call("GET", "/v1/test/clock")
    assert status == 200, body
    return body


def advance(server, seconds):
    status, body = Backend(server).call("POST", "/v1/test/clock", {"advanceSeconds": seconds})
    assert status == 200, body
    return body


def iso(text, seconds=0):
    when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00")) + datetime.timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def test_every_response_says_test_mode_and_a_server_without_it_has_no_test_routes(server):
    client = Client(server)
    for path, authenticated in (("/healthz", False), ("/v1/nope", False), ("/v1/me", False)):
        status, _, headers = client.request_bytes("GET", path, authenticated=authenticated)
        assert headers.get("parley-test-mode") == "on", (path, status)
    plain = Server()
    try:
        status, _, headers = Client(plain).request_bytes("GET", "/healthz", authenticated=False)
        assert "parley-test-mode" not in headers
        assert Backend(plain).call("GET", "/v1/test/clock")[0] == 404
        assert Backend(plain).call("POST", "/v1/test/clock", {"advanceSeconds": 60})[0] == 404
    finally:
        plain.stop()


def test_the_banner_says_it_and_tls_on_a_public_address_is_refused():
    data = tempfile.mkdtemp(prefix="parley-test-mode-")
    refused = subprocess.run([BINARY, "--test-mode", "--host", "0.0.0.0", "--port", "0", "--data-dir", data,
                              "--tls-cert-file", "/nonexistent/cert.pem", "--tls-key-file", "/nonexistent/key.pem"],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "--test-mode" in refused.stderr and "0.0.0.0" in refused.stderr
    running = Server("--test-mode")
    try:
        assert any("TEST MODE" in line for line in running.banner)
    finally:
        running.stop()


def test_only_the_backend_moves_the_clock_and_only_forward(server):
    before = clock(server)
    user = person(server, "ana")
    assert user.post("/v1/test/clock", {"advanceSeconds": 60})[0] == 401
    for bad in (0, -5, 315_360_001, "soon", None):
        status, error = Backend(server).call("POST", "/v1/test/clock", {"advanceSeconds": bad})
        assert status == 400, (bad, error)
    moved = advance(server, 90)
    assert moved["offsetSeconds"] == pytest.approx(before["offsetSeconds"] + 90)
    assert iso(moved["now"]) >= iso(before["now"], 90)


def test_a_ban_for_an_hour_ends_after_an_hour_of_test_time(server):
    owner, bob = person(server, "own"), person(server, "bob")
    status, channel = owner.post("/v1/conversations", {"kind": "public", "title": f"town-{uuid.uuid4().hex[:6]}"})
    assert status == 201 and bob.post(f"/v1/conversations/{channel['id']}/join")[0] == 200
    until = iso(clock(server)["now"], 3600)
    status, ban = owner.post(f"/v1/conversations/{channel['id']}/bans", {"userId": bob.user["id"], "until": until})
    assert status == 201, ban
    status, error = bob.post(f"/v1/conversations/{channel['id']}/join")
    assert status == 403 and error["error"]["code"] == "user_banned"
    advance(server, 1800)
    assert bob.post(f"/v1/conversations/{channel['id']}/join")[0] == 403, "half an hour in: still banned"
    advance(server, 1801)
    assert bob.post(f"/v1/conversations/{channel['id']}/join")[0] == 200, "an hour and a second in: the ban is over"
    assert bob.send(channel["id"], "back")[0] == 201


def test_a_scheduled_message_goes_out_at_its_test_time(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "later", "members": [bob.user["username"]]})
    assert status == 201
    send_at = iso(clock(server)["now"], 86_400)
    status, planned = ana.post(f"/v1/conversations/{room['id']}/scheduled",
                               {"sendAt": send_at, "message": {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "good morning"}}})
    assert status == 201, planned
    phone = Device(server, bob.token)
    try:
        phone.wait_ready()
        advance(server, 3600)
        assert phone.command("ping")["type"] == "pong"
        assert not [e for e in phone.events if e["type"] == "message.created"], "not yet: an hour of the day passed"
        started = time.monotonic()
        advance(server, 86_400)
        event = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["content"]["text"] == "good morning", timeout=5)
        assert time.monotonic() - started < 5 and event["event"]["actorId"] == ana.user["id"]
    finally:
        phone.close()


def test_a_session_ends_after_its_lifetime_of_test_time():
    running = Server("--test-mode")
    try:
        ana = person(running, "ana")
        assert ana.get("/v1/me")[0] == 200
        advance(running, 29 * 86_400)
        assert ana.get("/v1/me")[0] == 200, "29 days in: still signed in"
        advance(running, 2 * 86_400)
        status, error = ana.get("/v1/me")
        assert status == 401, "a session lasts 30 days (docs/api.md)"
    finally:
        running.stop()


def pushes(server, token):
    status, body = Backend(server).call("GET", f"/v1/test/pushes?token={token}")
    assert status == 200, body
    return body["pushes"]


def wait_for_push(server, token, count=1, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pushes(server, token)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no push to {token[:8]}… within {timeout} s")


def test_a_phone_asleep_gets_the_push_apns_and_fcm_would_get_without_any_account(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    apns, fcm = uuid.uuid4().hex + uuid.uuid4().hex, "fcm:" + uuid.uuid4().hex
    assert bob.post("/v1/devices", {"platform": "apns", "token": apns})[0] == 201
    assert bob.post("/v1/devices", {"platform": "fcm", "token": fcm})[0] == 201
    status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
    assert status in (200, 201)
    status, message = ana.send(room["id"], "dinner at 8?")
    assert status == 201
    [to_iphone] = wait_for_push(server, apns)
    assert to_iphone["platform"] == "apns" and to_iphone["payload"]["aps"]["alert"]["body"] == "dinner at 8?"
    assert to_iphone["payload"]["parley"]["messageId"] == message["id"] and to_iphone["payload"]["aps"]["mutable-content"] == 1
    assert to_iphone["headers"]["apns-push-type"] == "alert" and to_iphone["headers"]["apns-collapse-id"] == message["id"]
    assert "authorization" not in to_iphone["headers"] and len(to_iphone["providerId"]) == 36
    [to_android] = wait_for_push(server, fcm)
    assert to_android["payload"]["message"]["token"] == fcm and to_android["payload"]["message"]["data"]["messageId"] == message["id"]
    assert to_android["providerId"].startswith("projects/parley-test/messages/")
    # Users cannot read pushes.
    assert bob.get(f"/v1/test/pushes?token={apns}")[0] == 401


def test_an_id_only_push_is_resolved_by_the_app_as_its_notification_extension_would(server):
    assert server.apps("push-content", "default", "id-only").returncode == 0
    try:
        ana, bob = person(server, "ana"), person(server, "bob")
        token = uuid.uuid4().hex + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201
        status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
        status, message = ana.send(room["id"], "the secret plan")
        assert status == 201
        [push] = wait_for_push(server, token)
        assert "the secret plan" not in str(push["payload"]), "id-only: no text leaves the server"
        keys = push["payload"]["parley"]
        # What PushPayload + message(for:) do in the app's notification service extension:
        status, fetched = bob.get(f"/v1/conversations/{keys['conversationId']}/messages/{keys['messageId']}")
        assert status == 200 and fetched["content"]["text"] == "the secret plan"
    finally:
        server.apps("push-content", "default", "full")


def test_a_token_declared_dead_is_answered_as_apple_would_and_the_device_removed(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    token = uuid.uuid4().hex + uuid.uuid4().hex
    assert bob.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201
    assert Backend(server).call("PUT", f"/v1/test/push-tokens/{token}/dead")[0] == 204
    status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
    status, message = ana.send(room["id"], "anyone there?")
    assert status == 201
    deadline = time.monotonic() + 10
    while bob.get("/v1/devices")[1]["devices"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert bob.get("/v1/devices")[1]["devices"] == [], "410 Unregistered removes the device"
    assert pushes(server, token) == []
    assert Backend(server).call("DELETE", f"/v1/test/push-tokens/{token}/dead")[0] == 204
    assert Backend(server).call("DELETE", "/v1/test/pushes")[0] == 204
    assert pushes(server, uuid.uuid4().hex * 2) == []


def test_a_store_made_unavailable_answers_503_and_a_retried_send_lands_once_when_it_is_back(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "outage", "members": [bob.user["username"]]})
    assert status == 201
    phone = Device(server, ana.token)
    try:
        phone.wait_ready()
        assert Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": 2})[0] == 204
        status, error = ana.post(f"/v1/conversations/{room['id']}/messages",
                                 {"clientId": "during-the-outage", "content": {"type": "text", "text": "are you there?"}})
        assert status == 503 and error["error"]["code"] == "store_unavailable"
        answer = phone.command("message.send", conversationId=room["id"],
                               message={"clientId": "from-the-phone", "content": {"type": "text", "text": "hello?"}})
        assert answer["type"] == "error" and answer["error"]["code"] == "store_unavailable", answer
        # What an app's outbox does: the same sends again once the store is back.
        deadline = time.monotonic() + 10
        while True:
            status, sent = ana.post(f"/v1/conversations/{room['id']}/messages",
                                    {"clientId": "during-the-outage", "content": {"type": "text", "text": "are you there?"}})
            if status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert status == 201, sent
        again = phone.send_text(room["id"], "hello?", client_id="from-the-phone")
        assert again["type"] == "ack" and again["result"]["created"] is True
        status, history = bob.get(f"/v1/conversations/{room['id']}/messages")
        assert sorted(m["clientId"] for m in history["messages"] if m.get("clientId")) == ["during-the-outage", "from-the-phone"]
    finally:
        phone.close()
    for bad in (-1, 3601, "long"):
        assert Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": bad})[0] == 400
    # A long outage can be ended early.
    assert Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": 600})[0] == 204
    assert ana.get("/v1/me")[0] == 503
    assert Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": 0})[0] == 204
    assert ana.get("/v1/me")[0] == 200


def test_a_receipt_while_the_store_is_unavailable_is_refused_moves_nothing_and_lands_when_it_is_back(server):
    # Receipts gather and then wait to ride the next write (decision 0026 part 3): the refusal
    # must still reach the phone as a temporary error, and nothing may move.
    ana, bob = person(server, "ana"), person(server, "bob")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "read later", "members": [bob.user["username"]]})
    assert status == 201
    status, sent = ana.send(room["id"], "read me when you can")
    assert status == 201
    phone = Device(server, bob.token)
    try:
        phone.wait_ready()
        assert Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": 600})[0] == 204
        answer = phone.command("receipt.read", conversationId=room["id"], seq=sent["seq"])
        assert answer["type"] == "error" and answer["error"]["code"] == "store_unavailable", answer
        assert Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": 0})[0] == 204
        status, listed = ana.get(f"/v1/conversations/{room['id']}/receipts")
        assert status == 200
        bobs = [r for r in listed["receipts"] if r["userId"] == bob.user["id"]]
        assert all(r.get("readSeq", 0) < sent["seq"] for r in bobs), f"a refused receipt moved nothing: {bobs}"
        # What an app does: the same receipt again once the store is back.
        again = phone.command("receipt.read", conversationId=room["id"], seq=sent["seq"])
        assert again["type"] == "ack" and again["result"]["readSeq"] == sent["seq"], again
        status, message = ana.get(f"/v1/conversations/{room['id']}/messages/{sent['id']}")
        assert status == 200 and message["status"] == "read"
    finally:
        phone.close()
        Backend(server).call("POST", "/v1/test/faults/store", {"unavailableSeconds": 0})


def test_a_users_connections_dropped_come_back_and_resume_what_they_missed(server):
    from websockets.exceptions import ConnectionClosed
    ana, bob = person(server, "ana"), person(server, "bob")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "tunnel", "members": [bob.user["username"]]})
    phone = Device(server, bob.token)
    phone.wait_ready()
    position = phone.ready["position"]
    status, dropped = Backend(server).call("POST", "/v1/test/faults/drop-connections", {"username": bob.user["username"]})
    assert status == 200 and dropped["dropped"] == 1
    with pytest.raises(ConnectionClosed) as closed:
        phone.socket.recv(timeout=5)
    assert closed.value.rcvd is None, "no close frame: the network dropped it"
    status, missed = ana.send(room["id"], "while you were in the tunnel")
    back = Device(server, bob.token, position=position)
    try:
        back.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == missed["id"])
    finally:
        back.close()
    assert Backend(server).call("POST", "/v1/test/faults/drop-connections", {"username": "nobody-here"})[0] == 404


def test_a_webhook_endpoint_made_to_fail_is_retried_and_delivered_once_healed():
    from webhookreceiver import Receiver
    running = Server("--test-mode", "--webhooks-allow-private", "--webhook-first-retry", "100")
    receiver = Receiver()
    try:
        backend = Backend(running)
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["message.created"]})
        assert status == 201
        receiver.secret = hook["secret"]
        status, error = backend.call("PUT", "/v1/test/faults/webhooks/wh_nosuchendpoint")
        assert status == 404 and error["error"]["code"] == "webhook_not_found", "a typo fails loudly"
        assert backend.call("PUT", f"/v1/test/faults/webhooks/{hook['id']}")[0] == 204
        ana, bob = person(running, "ana"), person(running, "bob")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "hooks", "members": [bob.user["username"]]})
        status, message = ana.send(room["id"], "heard?")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            status, listed = backend.call("GET", "/v1/server/webhooks")
            endpoint = next(w for w in listed["webhooks"] if w["id"] == hook["id"])
            if endpoint.get("failingSince"):
                break
            time.sleep(0.05)
        assert endpoint.get("failingSince") and "503" in endpoint.get("lastError", ""), endpoint
        assert receiver.deliveries == [], "nothing reached the receiver while it was made to fail"
        assert backend.call("DELETE", f"/v1/test/faults/webhooks/{hook['id']}")[0] == 204
        deadline = time.monotonic() + 10
        while not any(d["data"].get("message", {}).get("id") == message["id"] for d in receiver.deliveries) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [d["data"]["message"]["id"] for d in receiver.deliveries if d["type"] == "message.created"] == [message["id"]]
    finally:
        receiver.close()
        running.stop()


def test_a_reset_empties_the_data_between_tests_and_keeps_the_apps_setup():
    running = Server("--test-mode", "--server-api-requests-per-second", "1000")
    try:
        backend = Backend(running)
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": "https://example.com/hooks", "events": ["message.created"]})
        assert status == 201
        ana, bob = person(running, "ana"), person(running, "bob")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "before", "members": [bob.user["username"]]})
        token = uuid.uuid4().hex + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201
        assert ana.send(room["id"], "from the last test")[0] == 201
        wait_for_push(running, token)
        phone = Device(running, bob.token)
        phone.wait_ready()
        advance(running, 86_400)
        status, reset = backend.call("POST", "/v1/test/reset")
        assert status == 200 and reset["removedRows"] > 10, reset
        # The last test's people, sessions, sockets, conversations and pushes are gone …
        assert ana.get("/v1/me")[0] == 401 and bob.get("/v1/me")[0] == 401
        from websockets.exceptions import ConnectionClosed
        with pytest.raises(ConnectionClosed):
            while True:
                phone.socket.recv(timeout=5)
        assert pushes(running, token) == []
        assert clock(running)["offsetSeconds"] == 0
        # … the app's setup stays: the same key and secret, its webhook endpoint, its system sender.
        status, listed = backend.call("GET", "/v1/server/webhooks")
        assert [w["id"] for w in listed["webhooks"]] == [hook["id"]]
        again = person(running, "ana")  # the same username is free again
        status, room = backend.call("POST", "/v1/server/conversations", {"kind": "group", "title": "after", "members": [again.user["username"]]})
        assert status == 201, room
        status, said = backend.call("POST", f"/v1/server/conversations/{room['id']}/messages",
                                    {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "from the app"}})
        assert status == 201, said
        assert [c["id"] for c in again.get("/v1/conversations")[1]["conversations"]] == [room["id"]]
    finally:
        running.stop()


def test_with_real_provider_options_pushes_go_to_those_providers_not_the_built_in_ones():
    from fakepush import FakePush
    from tlscerts import Authority
    fake = FakePush(Authority())
    running = Server("--test-mode", *fake.server_flags())
    try:
        assert Backend(running).call("GET", "/v1/test/pushes")[0] == 404, "no built-in providers: nothing kept here"
        assert not any("built-in APNs" in line for line in running.banner)
        ana, bob = person(running, "ana"), person(running, "bob")
        token = uuid.uuid4().hex + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201
        status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
        assert ana.send(room["id"], "through the configured APNs")[0] == 201
        fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))
    finally:
        running.stop()
        fake.stop()
