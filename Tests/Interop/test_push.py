"""Push notifications (issue 17; docs/push.md) from the real binary to local fake APNs and FCM
servers (fakepush.py: HTTP/2 over TLS with a test CA, ES256 and RS256 tokens checked with the
public keys). A member who is not connected is pushed within 2 s of a message; one whose
device confirmed delivery is not; a muted conversation is not; the sender never is; a 410 or
UNREGISTERED removes the device; a 500 is retried and then delivered; a kill -9 between the
commit and the push still pushes exactly once after restart."""
import json
import tempfile
import time
import uuid

import pytest

from parley import Client, Server, wait_until
from realtime import Device


@pytest.fixture(scope="module")
def server(fake):
    running = Server(*fake.server_flags())
    yield running
    assert running.stop() == 0


def apns_token():
    return uuid.uuid4().hex + uuid.uuid4().hex


def person(server, name, display=None):
    return Client(server).register(f"{name}{uuid.uuid4().hex[:6]}", display_name=display)


def register(client, platform, token, **extra):
    status, device = client.post("/v1/devices", {"platform": platform, "token": token, **extra})
    assert status == 201, device
    return device


def direct(a, b):
    status, conversation = a.post("/v1/conversations", {"kind": "direct", "members": [b.user["username"]]})
    assert status in (200, 201), conversation
    return conversation


def barrier(fake, server, offline_too=None):
    """A message to a fresh offline member, pushed after anything due before it: once it
    arrives, earlier pushes that were going to happen have happened."""
    sender, target = person(server, "barrier"), person(server, "target")
    token = apns_token()
    register(target, "apns", token)
    status, _ = sender.send(direct(sender, target)["id"], "barrier")
    assert status == 201
    fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))


def test_the_start_banner_says_which_providers_push_or_that_push_is_off(server):
    assert "Push: apns, fcm" in server.banner
    plain = Server()
    try:
        assert any(line.startswith("Push: off") and "--apns-key-file" in line for line in plain.banner)
    finally:
        plain.stop()


def delivered_count(server, platform):
    """`/metrics`' send → delivered count for one platform (issue 35)."""
    metrics = Client(server).request_bytes("GET", "/metrics", authenticated=False)[1].decode()
    name = f'parley_send_to_delivered_seconds_count{{platform="{platform}"}}'
    return int(float(next(line.split()[1] for line in metrics.splitlines() if line.startswith(name))))


def test_an_offline_member_is_pushed_within_two_seconds_with_what_apns_expects(fake, server):
    ana, bob = person(server, "ana", "Ana"), person(server, "bob", "Bob")
    pushed_before = delivered_count(server, "apns")
    token = apns_token()
    device = register(bob, "apns", token.upper())
    assert device["token"] == token and device["environment"] == "production"
    register(ana, "apns", apns_token())            # the sender's own device: never pushed
    room = direct(ana, bob)
    started = time.monotonic()
    status, message = ana.send(room["id"], "Dinner at 8?")
    assert status == 201
    pushes = fake.wait_for(lambda pushes: any(p[1] == token for p in pushes), timeout=2.5)
    assert time.monotonic() - started < 2.5
    _, _, headers, payload = next(p for p in pushes if p[1] == token)
    aps = payload["aps"]
    assert aps["alert"] == {"title": "Ana", "body": "Dinner at 8?"}
    assert aps["thread-id"] == room["id"] and aps["mutable-content"] == 1 and aps["badge"] == 1 and aps["sound"] == "default"
    assert payload["parley"] == {"conversationId": room["id"], "messageId": message["id"], "seq": message["seq"],
                                 "position": payload["parley"]["position"]}
    assert headers["apns-collapse-id"] == message["id"] and headers["apns-priority"] == "10"
    assert int(headers["apns-expiration"]) > time.time()
    wait_until(lambda: delivered_count(server, "apns") >= pushed_before + 1, what="the push in send → delivered")
    barrier(fake, server)
    wait_until(lambda: delivered_count(server, "apns") >= pushed_before + 2, what="the barrier's push in send → delivered")
    assert len(fake.pushes_to(token)) == 1, "once"
    assert not [r for r in fake.refusals if r[1] in (400, 403)], f"the fake refused a request: {fake.refusals}"
    assert not [p for p in fake.pushes if p[3].get("parley", {}).get("messageId") == message["id"] and p[1] != token], \
        "the sender's own device was not pushed"
    # The provider's acceptance counts in send → delivered, once, as APNs (and the barrier's push).
    assert delivered_count(server, "apns") == pushed_before + 2


def test_groups_say_who_and_where_and_kinds_say_what(fake, server):
    ana, bob = person(server, "ana", "Ana"), person(server, "bob", "Bob")
    token = apns_token()
    register(bob, "apns", token)
    status, group = ana.post("/v1/conversations", {"kind": "group", "title": "Weekend trip", "members": [bob.user["username"]]})
    assert status == 201
    ana.send(group["id"], content={"type": "location", "latitude": 48.85, "longitude": 2.35})
    pushes = fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))
    alert = next(p for p in pushes if p[1] == token)[3]["aps"]["alert"]
    assert alert == {"title": "Weekend trip", "subtitle": "Ana", "body": "📍 Location"}


def test_a_member_whose_device_confirmed_delivery_is_not_pushed(fake, server):
    ana, bob = person(server, "ana"), person(server, "bob")
    token = apns_token()
    register(bob, "apns", token)
    room = direct(ana, bob)
    phone = Device(server, bob.token)
    try:
        phone.wait_ready()                       # live from here: the message comes after it
        status, message = ana.send(room["id"], "you are online")
        assert status == 201
        phone.wait_event(lambda e: e.get("type") == "message.created" and e["message"]["id"] == message["id"])
        status, _ = bob.post(f"/v1/conversations/{room['id']}/receipts", {"deliveredSeq": message["seq"]})
        assert status == 200
        barrier(fake, server)
        assert fake.pushes_to(token) == []
    finally:
        phone.close()


def test_a_muted_conversation_is_not_pushed_until_unmuted(fake, server):
    ana, bob = person(server, "ana"), person(server, "bob")
    token = apns_token()
    register(bob, "apns", token)
    room = direct(ana, bob)
    status, muted = bob.request("PUT", f"/v1/conversations/{room['id']}/mute", {})
    assert status == 200 and muted["mutedUntil"].startswith("9999-12-31")
    ana.send(room["id"], "shh")
    barrier(fake, server)
    assert fake.pushes_to(token) == []
    assert bob.delete(f"/v1/conversations/{room['id']}/mute")[0] == 204
    ana.send(room["id"], "and now?")
    fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))


def test_a_mute_shows_at_once_on_the_members_other_devices_and_nowhere_else(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    room = direct(ana, bob)
    laptop = Device(server, Client(server).sign_in(bob.user["username"]).token)
    ana_phone = Device(server, ana.token)
    try:
        laptop.wait_ready()
        ana_phone.wait_ready()
        status, muted = bob.request("PUT", f"/v1/conversations/{room['id']}/mute", {"until": "2099-01-01T00:00:00Z"})
        assert status == 200
        event = laptop.wait_event(lambda e: e.get("type") == "notifications.updated")["event"]
        assert event["until"] == muted["mutedUntil"] == "2099-01-01T00:00:00.000Z"
        assert event["userId"] == bob.user["id"] and event["conversationId"] == room["id"] and "seq" not in event
        assert bob.delete(f"/v1/conversations/{room['id']}/mute")[0] == 204
        event = laptop.wait_event(lambda e: e.get("type") == "notifications.updated")["event"]
        assert "until" not in event, "unmuted"
        status, message = bob.send(room["id"], "after")
        assert status == 201
        seen = []
        ana_phone.wait_event(lambda e: seen.append(e.get("type")) or e.get("message", {}).get("id") == message["id"])
        assert "notifications.updated" not in seen, "ana never hears that bob muted their chat"
    finally:
        laptop.close()
        ana_phone.close()


def test_a_410_removes_the_device_and_a_500_is_retried_until_delivered(fake, server):
    ana, bob, cy = person(server, "ana"), person(server, "bob"), person(server, "cy")
    gone, flaky = apns_token(), apns_token()
    fake.answers[gone] = [410]
    fake.answers[flaky] = [500, 503]
    register(bob, "apns", gone)
    register(cy, "apns", flaky)
    ana.send(direct(ana, bob)["id"], "hello?")
    ana.send(direct(ana, cy)["id"], "hello!")
    wait_until(lambda: bob.get("/v1/devices")[1]["devices"] == [], what="the dead token's device to be removed")
    pushes = fake.wait_for(lambda pushes: any(p[1] == flaky for p in pushes), timeout=15)
    assert len([p for p in pushes if p[1] == flaky]) == 1
    metrics = Client(server).request_bytes("GET", "/metrics", authenticated=False)[1].decode()
    sample = lambda name: int(next(line.split()[1] for line in metrics.splitlines() if line.startswith(name + '{provider="apns"}')))
    assert sample("parley_push_devices_removed_total") >= 1 and sample("parley_push_retried_total") >= 2


def test_fcm_is_pushed_with_an_oauth_token_and_unregistered_removes_the_device(fake, server):
    ana, bob, cy = person(server, "ana", "Ana"), person(server, "bob"), person(server, "cy")
    token, dead = "fcm:" + uuid.uuid4().hex * 2, "fcm:" + uuid.uuid4().hex * 2
    fake.answers[dead] = [404]
    register(bob, "fcm", token)
    register(cy, "fcm", dead)
    room = direct(ana, bob)
    pushed_before = delivered_count(server, "fcm")
    status, message = ana.send(room["id"], "via Firebase")
    ana.send(direct(ana, cy)["id"], "to a dead token")
    pushes = fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))
    sent = next(p for p in pushes if p[1] == token)[3]
    assert sent["notification"] == {"title": "Ana", "body": "via Firebase"}
    assert sent["data"] == {"conversationId": room["id"], "messageId": message["id"], "seq": str(message["seq"]),
                            "position": sent["data"]["position"]}
    assert sent["android"]["collapse_key"] == message["id"] and sent["apns"]["payload"]["aps"]["thread-id"] == room["id"]
    assert fake.tokens_issued >= 1
    wait_until(lambda: cy.get("/v1/devices")[1]["devices"] == [], what="the UNREGISTERED token's device to be removed")
    # Only the push FCM accepted counts in send → delivered (not the dead token's).
    wait_until(lambda: delivered_count(server, "fcm") >= pushed_before + 1, what="the push in send → delivered")
    barrier(fake, server)
    assert delivered_count(server, "fcm") == pushed_before + 1


def test_bad_devices_are_refused_with_nothing_stored(server):
    bob = person(server, "bob")
    for body in ({"platform": "apns", "token": "not-hex"}, {"platform": "fcm", "token": "x" * 40, "environment": "sandbox"},
                 {"platform": "webpush", "token": "x" * 64}, {"platform": "apns"}):
        status, answer = bob.post("/v1/devices", body)
        assert status == 400, (body, answer)
    assert bob.get("/v1/devices")[1]["devices"] == []
    assert bob.delete("/v1/devices/d_nothing")[0] == 404


def test_a_kill_9_between_commit_and_push_still_pushes_exactly_once_after_restart(fake):
    # A long confirmation window keeps the row waiting while the server dies.
    node = Server(*fake.server_flags(), "--push-window", "5")
    try:
        ana, bob = person(node, "ana"), person(node, "bob")
        token = apns_token()
        register(bob, "apns", token)
        status, message = ana.send(direct(ana, bob)["id"], "acknowledged, then the server died")
        assert status == 201
        node.kill()
        assert fake.pushes_to(token) == []
        node.start()
        fake.wait_for(lambda pushes: any(p[1] == token for p in pushes), timeout=15)
        barrier(fake, node)
        assert len(fake.pushes_to(token)) == 1
    finally:
        node.stop()


def test_push_options_given_by_halves_are_refused_with_what_to_add(fake):
    import subprocess
    from parley import BINARY
    result = subprocess.run([BINARY, "--apns-key-file", fake.key_file, "--port", "0"], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "--apns-key-id" in result.stderr
    # Files that cannot be used are named at start, before anything listens.
    data = tempfile.mkdtemp(prefix="parley-push-data-")
    flags = fake.server_flags(fcm=False)
    for swap, bad in (("--outbound-ca-file", "/nonexistent/ca.pem"), ("--apns-key-file", fake.credentials_file)):
        changed = list(flags)
        changed[changed.index(swap) + 1] = bad
        result = subprocess.run([BINARY, "--port", "0", "--data-dir", data, *changed], capture_output=True, text=True, timeout=30)
        # The extra CA serves every outbound client (before-send hooks and key sets too): the
        # first to read it names it.
        wanted = "cannot set up" if swap == "--outbound-ca-file" else "cannot set up push"
        assert result.returncode != 0 and wanted in result.stderr and bad in result.stderr, result.stderr


def test_an_id_only_app_sends_no_text(fake, server):
    changed = server.apps("push-content", "default", "id-only")
    assert changed.returncode == 0, changed.stderr
    try:
        ana, bob = person(server, "ana", "Ana"), person(server, "bob")
        token = apns_token()
        register(bob, "apns", token)
        room = direct(ana, bob)
        status, message = ana.send(room["id"], "a secret the provider must not see")
        pushes = fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))
        payload = next(p for p in pushes if p[1] == token)[3]
        assert payload["aps"]["alert"] == {"body": "New message"} and payload["aps"]["mutable-content"] == 1
        assert payload["parley"]["messageId"] == message["id"], "the extension fetches the message by id"
        assert "secret" not in json.dumps(payload) and "Ana" not in json.dumps(payload)
    finally:
        assert server.apps("push-content", "default", "full").returncode == 0


def test_an_expired_provider_token_is_renewed_once_and_the_push_goes(fake, server):
    ana, bob = person(server, "ana"), person(server, "bob")
    token = apns_token()
    fake.answers[token] = [403]                 # answered "ExpiredProviderToken" once
    register(bob, "apns", token)
    before = len([r for r in fake.refusals if r[2] == "ExpiredProviderToken"])
    ana.send(direct(ana, bob)["id"], "after a renewal")
    fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))
    assert len([r for r in fake.refusals if r[2] == "ExpiredProviderToken"]) == before + 1
    assert len(fake.pushes_to(token)) == 1


def messages_to_slow_phones(fake, server, sender, count, delay):
    """A message from `sender` to each of `count` new phones whose provider answers take
    `delay` seconds; their tokens."""
    tokens = []
    for _ in range(count):
        phone = person(server, "slow")
        token = apns_token()
        fake.delays[token] = delay
        register(phone, "apns", token)
        tokens.append(token)
        assert sender.send(direct(sender, phone)["id"], "answered slowly")[0] == 201
    return tokens


def test_a_provider_that_does_not_answer_never_slows_sending(fake, server):
    ana = person(server, "ana")
    stuck = messages_to_slow_phones(fake, server, ana, 8, 4)
    fake.wait_pending(lambda held: held >= 1)    # a sender is waiting on the provider now
    bob = person(server, "bob")
    room = direct(ana, bob)
    times = []
    for index in range(20):
        started = time.monotonic()
        assert ana.send(room["id"], f"still fast {index}")[0] == 201
        times.append(time.monotonic() - started)
    assert fake.pending >= 1, "the provider was still holding a request while the messages went"
    assert max(times) < 1.0, f"a send waited on the provider: {max(times):.2f} s"
    fake.wait_pending(lambda held: held == 0)
    fake.wait_for(lambda pushes: all(any(p[1] == token for p in pushes) for token in stuck), timeout=15)


def test_slow_answers_hold_up_no_other_push(fake, server):
    # 24 phones whose provider answers take 8 s: more than one request at a time per
    # connection could ever carry. A push to anyone else still goes out at once beside them.
    ana = person(server, "ana")
    slow = messages_to_slow_phones(fake, server, ana, 24, 8)
    fake.wait_pending(lambda held: held >= 24)
    bob = person(server, "bob")
    token = apns_token()
    register(bob, "apns", token)
    sent = time.monotonic()
    assert ana.send(direct(ana, bob)["id"], "not stuck behind them")[0] == 201
    fake.wait_for(lambda pushes: any(p[1] == token for p in pushes), timeout=4)
    assert time.monotonic() - sent < 3, "pushed within the window and a round trip"
    assert fake.pending >= 24, "the slow answers were all still outstanding"
    fake.wait_for(lambda pushes: all(any(p[1] == t for p in pushes) for t in slow), timeout=20)
    fake.wait_pending(lambda held: held == 0)


def test_a_mention_is_pushed_through_a_mute_and_a_public_channel_pushes_only_mentions(fake, server):
    ana, bob, cy = person(server, "ana", "Ana"), person(server, "bob"), person(server, "cy")
    bob_token, cy_token = apns_token(), apns_token()
    register(bob, "apns", bob_token)
    register(cy, "apns", cy_token)
    status, group = ana.post("/v1/conversations", {"kind": "group", "title": "Crew", "members": [bob.user["username"], cy.user["username"]]})
    assert status == 201
    assert bob.request("PUT", f"/v1/conversations/{group['id']}/mute", {})[0] == 200
    _, quiet = ana.send(group["id"], "nothing for bob")
    _, called = ana.send(group["id"], f"@{bob.user['username']} your turn")
    pushes = fake.wait_for(lambda pushes: any(p[1] == bob_token for p in pushes))
    to_bob = [p[3]["parley"]["messageId"] for p in pushes if p[1] == bob_token]
    assert to_bob == [called["id"]], "muted, bob hears only the message that mentions him"
    fake.wait_for(lambda pushes: len([p for p in pushes if p[1] == cy_token]) == 2)

    status, channel = ana.post("/v1/conversations", {"kind": "public", "title": f"town-{uuid.uuid4().hex[:6]}"})
    assert status == 201
    for member in (bob, cy):
        assert member.post(f"/v1/conversations/{channel['id']}/join")[0] == 200
    _, everyone = ana.send(channel["id"], "hello all")
    status, for_cy = ana.send(channel["id"], f"hi @{cy.user['username']}")
    assert status == 201, for_cy
    fake.wait_for(lambda pushes: any(p[1] == cy_token and p[3]["parley"]["messageId"] == for_cy["id"] for p in pushes))
    barrier(fake, server)
    channel_pushes = [p for p in fake.pushes if p[3].get("parley", {}).get("conversationId") == channel["id"]]
    assert [(p[1], p[3]["parley"]["messageId"]) for p in channel_pushes] == [(cy_token, for_cy["id"])]
    assert quiet["id"] not in [p[3]["parley"]["messageId"] for p in fake.pushes if p[1] == bob_token]
    assert everyone["id"] not in [p[3].get("parley", {}).get("messageId") for p in fake.pushes]


def test_a_member_chooses_every_message_or_mentions_only(fake, server):
    ana, bob, cy = person(server, "ana", "Ana"), person(server, "bob"), person(server, "cy")
    bob_token, cy_token = apns_token(), apns_token()
    register(bob, "apns", bob_token)
    register(cy, "apns", cy_token)
    status, group = ana.post("/v1/conversations", {"kind": "group", "title": "Crew", "members": [bob.user["username"], cy.user["username"]]})
    assert status == 201 and group["notifications"] == "all"
    status, chosen = bob.request("PUT", f"/v1/conversations/{group['id']}/notifications", {"level": "mentions"})
    assert status == 200 and chosen["notifications"] == "mentions"
    _, plain = ana.send(group["id"], "for whoever wants everything")
    _, called = ana.send(group["id"], f"@{bob.user['username']} this one is yours")
    fake.wait_for(lambda pushes: len([p for p in pushes if p[1] == cy_token]) == 2)
    fake.wait_for(lambda pushes: any(p[1] == bob_token for p in pushes))
    barrier(fake, server)
    assert [p[3]["parley"]["messageId"] for p in fake.pushes_to(bob_token)] == [called["id"]], "mentions only"

    status, channel = ana.post("/v1/conversations", {"kind": "public", "title": f"news-{uuid.uuid4().hex[:6]}"})
    assert status == 201
    for member in (bob, cy):
        assert member.post(f"/v1/conversations/{channel['id']}/join")[0] == 200
    status, chosen = cy.request("PUT", f"/v1/conversations/{channel['id']}/notifications", {"level": "all"})
    assert status == 200 and chosen["notifications"] == "all"
    assert bob.get(f"/v1/conversations/{channel['id']}")[1]["notifications"] == "mentions", "a public channel's default"
    _, news = ana.send(channel["id"], "read all about it")
    fake.wait_for(lambda pushes: any(p[1] == cy_token and p[3]["parley"]["messageId"] == news["id"] for p in pushes))
    barrier(fake, server)
    assert news["id"] not in [p[3]["parley"]["messageId"] for p in fake.pushes_to(bob_token)]

    # Back to the default; a level that does not exist changes nothing.
    status, back = cy.request("PUT", f"/v1/conversations/{channel['id']}/notifications", {"level": "default"})
    assert status == 200 and back["notifications"] == "mentions"
    for bad in ({"level": "loud"}, {}, {"level": None}):
        status, error = cy.request("PUT", f"/v1/conversations/{channel['id']}/notifications", bad)
        assert status == 400, (bad, status, error)
    assert cy.get(f"/v1/conversations/{channel['id']}")[1]["notifications"] == "mentions"


def test_a_thread_only_reply_pushes_the_threads_participants_only(fake, server):
    ana, bob, cy = person(server, "ana"), person(server, "bob"), person(server, "cy")
    ana_token, cy_token = apns_token(), apns_token()
    register(ana, "apns", ana_token)
    register(cy, "apns", cy_token)
    status, group = ana.post("/v1/conversations", {"kind": "group", "title": "Plans", "members": [bob.user["username"], cy.user["username"]]})
    assert status == 201
    _, root = ana.send(group["id"], "saturday?")
    fake.wait_for(lambda pushes: any(p[1] == cy_token and p[3]["parley"]["messageId"] == root["id"] for p in pushes))
    _, reply = bob.send(group["id"], "hike", threadId=root["id"])
    fake.wait_for(lambda pushes: any(p[1] == ana_token and p[3]["parley"]["messageId"] == reply["id"] for p in pushes))
    barrier(fake, server)
    assert reply["id"] not in [p[3]["parley"]["messageId"] for p in fake.pushes if p[1] == cy_token], \
        "cy wrote neither the root nor a reply: the thread's reply is not pushed to her"


def test_a_member_is_never_pushed_what_someone_they_blocked_says_even_a_mention(fake, server):
    ana, bob, cy = person(server, "ana"), person(server, "bob"), person(server, "cy")
    token = apns_token()
    register(ana, "apns", token)
    status, room = bob.post("/v1/conversations", {"kind": "group", "title": "Pushy",
                                                  "members": [ana.user["username"], cy.user["username"]]})
    assert status == 201
    assert ana.request("PUT", f"/v1/me/blocks/{bob.user['id']}")[0] == 204
    bob.send(room["id"], f"hey @{ana.user['username']}, look")
    barrier(fake, server)
    assert fake.pushes_to(token) == []
    # Someone else's message is pushed, and its badge leaves the blocked person's out.
    cy.send(room["id"], "dinner?")
    pushes = fake.wait_for(lambda pushes: any(p[1] == token for p in pushes))
    payload = [p for p in pushes if p[1] == token][0][3]
    assert payload["aps"]["badge"] == 1 and payload["aps"]["alert"]["body"] == "dinner?"
    assert ana.delete(f"/v1/me/blocks/{bob.user['id']}")[0] == 204
    bob.send(room["id"], "unblocked now")
    fake.wait_for(lambda pushes: any(p[1] == token and p[3]["aps"]["alert"]["body"] == "unblocked now" for p in pushes))
