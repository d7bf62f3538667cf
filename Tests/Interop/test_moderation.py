"""Moderation (issue 19; docs/api.md, "Moderation") against the real binary, with Python's
http.client, `websockets`, a stdlib webhook receiver and the fake push providers: a
non-moderator cannot ban; a banned user's socket stops receiving the channel at once and the
ban keeps them out; a muted member reads but cannot post; slow mode answers 429 with
Retry-After; a shadow-banned user's message reaches no one else, no phone and no webhook; a
block hides a direct chat's messages; reports queue for moderators and resolutions act."""
import uuid

import pytest

import parley
from realtime import Device
from test_server_api import Backend
from webhookreceiver import Receiver

pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")


@pytest.fixture(scope="module")
def server(fake):
    running = parley.Server(*fake.server_flags(), "--webhooks-allow-private", "--server-api-requests-per-second", "1000")
    yield running
    assert running.stop() == 0


def person(server, name):
    return parley.Client(server).register(f"{name}{uuid.uuid4().hex[:6]}")


def channel_of(owner, *members):
    status, channel = owner.post("/v1/conversations", {"kind": "public", "title": f"town-{uuid.uuid4().hex[:6]}"})
    assert status == 201, channel
    for member in members:
        assert member.post(f"/v1/conversations/{channel['id']}/join")[0] == 200
    return channel


def test_a_banned_users_socket_stops_receiving_at_once_and_the_ban_keeps_them_out(server):
    owner, bob, carol = person(server, "own"), person(server, "bob"), person(server, "cy")
    channel = channel_of(owner, bob, carol)
    status, error = carol.post(f"/v1/conversations/{channel['id']}/bans", {"userId": bob.user["id"]})
    assert status == 403 and error["error"]["code"] == "forbidden", "a plain member cannot ban"
    phone = Device(server, bob.token)
    phone.wait_ready()
    status, ban = owner.post(f"/v1/conversations/{channel['id']}/bans", {"userId": bob.user["id"], "reason": "spam"})
    assert status == 201 and ban["user"]["id"] == bob.user["id"] and ban["bannedBy"] == owner.user["id"]
    banned = phone.wait_event(lambda e: e["type"] == "member.banned")["event"]
    assert banned["userId"] == bob.user["id"] and banned["actorId"] == owner.user["id"] and banned["reason"] == "spam"
    phone.wait_event(lambda e: e["type"] == "member.removed" and e["userId"] == bob.user["id"])
    _, after = owner.send(channel["id"], "said after the ban")
    # The next thing Bob's socket gets is the answer to a ping: nothing of the channel came first.
    assert phone.command("ping")["type"] == "pong"
    assert not [e for e in phone.events if e.get("message", {}).get("id") == after["id"]]
    status, error = bob.post(f"/v1/conversations/{channel['id']}/join")
    assert status == 403 and error["error"]["code"] == "user_banned"
    status, error = bob.get(f"/v1/conversations/{channel['id']}/messages")
    assert status == 403
    status, bans = owner.get(f"/v1/conversations/{channel['id']}/bans")
    assert [b["user"]["id"] for b in bans["bans"]] == [bob.user["id"]]
    assert owner.delete(f"/v1/conversations/{channel['id']}/bans/{bob.user['id']}")[0] == 204
    assert bob.post(f"/v1/conversations/{channel['id']}/join")[0] == 200
    for bad in [{"userId": bob.user["id"], "until": "tomorrow"}, {"userId": bob.user["id"], "until": "2001-01-01T00:00:00Z"},
                {"userId": bob.user["id"], "reason": "x" * 501}, {"userId": "u_nobody"}, {}]:
        status, error = owner.post(f"/v1/conversations/{channel['id']}/bans", bad)
        assert status in (400, 404), (bad, error)
    status, members = owner.get(f"/v1/conversations/{channel['id']}/members")
    assert bob.user["id"] in [m["user"]["id"] for m in members["members"]], "a refused ban removed nobody"
    status, ban = owner.post(f"/v1/conversations/{channel['id']}/bans", {"userId": bob.user["id"], "until": "2999-01-01T00:00:00.000Z"})
    assert status == 201 and ban["until"] == "2999-01-01T00:00:00.000Z"
    phone.close()


def test_a_muted_member_reads_but_cannot_post_and_slow_mode_says_when(server):
    owner, bob = person(server, "own"), person(server, "bob")
    channel = channel_of(owner, bob)
    status, member = owner.request("PUT", f"/v1/conversations/{channel['id']}/members/{bob.user['id']}/mute", {})
    assert status == 200 and member["mutedUntil"].startswith("9999")
    status, error = bob.send(channel["id"], "hello?")
    assert status == 403 and error["error"]["code"] == "member_muted"
    owner.send(channel["id"], "announcement")
    status, page = bob.get(f"/v1/conversations/{channel['id']}/messages")
    assert page["messages"][-1]["content"]["text"] == "announcement"
    assert owner.delete(f"/v1/conversations/{channel['id']}/members/{bob.user['id']}/mute")[0] == 200
    assert bob.send(channel["id"], "thanks")[0] == 201
    status, updated = owner.patch(f"/v1/conversations/{channel['id']}", {"slowModeSeconds": 30})
    assert status == 200 and updated["slowModeSeconds"] == 30
    status, error = bob.send(channel["id"], "too soon after 'thanks'")
    assert status == 429 and error["error"]["code"] == "rate_limited" and 1 <= int(bob.last_headers["Retry-After"]) <= 30
    assert owner.send(channel["id"], "moderators are exempt")[0] == 201


def test_a_shadow_banned_users_message_reaches_no_one_no_phone_and_no_webhook(server, fake):
    backend = Backend(server)
    receiver = Receiver()
    try:
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["message.created"]})
        assert status == 201, hook
        ana, mal = person(server, "ana"), person(server, "mal")
        token = uuid.uuid4().hex + uuid.uuid4().hex
        assert ana.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201
        status, room = mal.post("/v1/conversations", {"kind": "direct", "members": [ana.user["username"]]})
        assert status in (200, 201)
        phone = Device(server, ana.token)
        phone.wait_ready()
        assert backend.call("PUT", f"/v1/server/users/{mal.user['username']}/shadow-ban")[0] == 204
        status, hidden = mal.send(room["id"], "click my link")
        assert status == 201, "the sender is not told"
        status, own = mal.get(f"/v1/conversations/{room['id']}/messages")
        assert hidden["id"] in [m["id"] for m in own["messages"]]
        assert backend.call("DELETE", f"/v1/server/users/{mal.user['username']}/shadow-ban")[0] == 204
        status, seen = mal.send(room["id"], "a real one")
        # The next message arrives everywhere; the hidden one arrived nowhere before it.
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == seen["id"])
        assert hidden["id"] not in [e.get("message", {}).get("id") for e in phone.events]
        receiver.wait_for(lambda ds: any(d["data"]["message"]["id"] == seen["id"] for d in ds))
        assert hidden["id"] not in [d["data"]["message"]["id"] for d in receiver.deliveries]
        fake.wait_for(lambda pushes: any(p[1] == token and p[3]["parley"]["messageId"] == seen["id"] for p in pushes))
        assert hidden["id"] not in [p[3]["parley"]["messageId"] for p in fake.pushes if p[1] == token]
        status, page = ana.get(f"/v1/conversations/{room['id']}/messages")
        assert hidden["id"] not in [m["id"] for m in page["messages"]]
        status, error = ana.get(f"/v1/conversations/{room['id']}/messages/{hidden['id']}")
        assert status == 404
        phone.close()
    finally:
        receiver.close()


def test_a_block_hides_a_direct_chats_messages_from_the_blocker(server):
    ana, bob = person(server, "ana"), person(server, "bob")
    status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
    assert bob.request("PUT", f"/v1/me/blocks/{ana.user['id']}")[0] == 204
    status, blocks = bob.get("/v1/me/blocks")
    assert [u["id"] for u in blocks["users"]] == [ana.user["id"]]
    _, unseen = ana.send(room["id"], "hello?")
    status, page = bob.get(f"/v1/conversations/{room['id']}/messages")
    assert unseen["id"] not in [m["id"] for m in page["messages"]]
    assert bob.delete(f"/v1/me/blocks/{ana.user['id']}")[0] == 204
    _, seen = ana.send(room["id"], "now?")
    status, page = bob.get(f"/v1/conversations/{room['id']}/messages")
    assert seen["id"] in [m["id"] for m in page["messages"]]
    assert bob.request("PUT", f"/v1/me/blocks/u_nobody")[0] == 404


def test_reports_queue_for_moderators_and_bad_reports_change_nothing(server):
    owner, bob, carol = person(server, "own"), person(server, "bob"), person(server, "cy")
    channel = channel_of(owner, bob, carol)
    _, rude = bob.send(channel["id"], "rude words")
    path = f"/v1/conversations/{channel['id']}/messages/{rude['id']}/reports"
    for bad in [{"reason": "boring"}, {"reason": "other", "note": "x" * 1001}, {}, {"reason": "spam", "note": "\u0000"}]:
        status, error = carol.post(path, bad)
        assert status == 400, (bad, error)
    status, report = carol.post(path, {"reason": "abuse", "note": "insults"})
    assert status == 201 and report["state"] == "open" and report["message"]["id"] == rude["id"]
    assert carol.post(path, {"reason": "abuse"})[0] == 409
    assert carol.get(f"/v1/conversations/{channel['id']}/reports")[0] == 403
    status, queue = owner.get(f"/v1/conversations/{channel['id']}/reports")
    assert [r["id"] for r in queue["reports"]] == [report["id"]]
    status, resolved = owner.post(f"/v1/conversations/{channel['id']}/reports/{report['id']}/resolve", {"resolution": "message_deleted"})
    assert status == 200 and resolved["resolution"] == "message_deleted" and resolved["message"]["deletedAt"]
    status, queue = owner.get(f"/v1/conversations/{channel['id']}/reports?state=resolved")
    assert [r["resolvedBy"] for r in queue["reports"]] == [owner.user["id"]]
    # The app's backend sees the same queue.
    status, app_queue = Backend(server).call("GET", f"/v1/server/conversations/{channel['id']}/reports?state=resolved")
    assert status == 200 and [r["id"] for r in app_queue["reports"]] == [report["id"]]


@pytest.mark.skipif(parley.ON_POSTGRES, reason="reads the SQLite file; on PostgreSQL the rows are deleted and the dead tuples go with VACUUM")
def test_retention_really_removes_old_messages_from_the_database_file():
    import os
    import sqlite3
    server = parley.Server("--server-api-requests-per-second", "1000")
    try:
        ana, ben = person(server, "ana"), person(server, "ben")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "Old", "members": [ben.user["username"]]})
        secret_word = "zqxjvortexplumb" + uuid.uuid4().hex[:6]
        _, old = ana.send(room["id"], f"the {secret_word} recipe")
        ben.post(f"/v1/conversations/{room['id']}/messages/{old['id']}/reactions", {"emoji": "👍"})
        _, kept = ana.send(room["id"], "still here")
        status, policy = Backend(server).call("PUT", "/v1/server/retention", {"days": 1})
        assert status == 200 and policy == {"days": 1}
        server.stop()
        # Age the first message by three days, as if the sweep ran later.
        database = sqlite3.connect(os.path.join(server.data, "parley.sqlite"))
        database.execute("UPDATE message SET created_at = created_at - 3 * 86400000 WHERE public_id = ?", (old["id"],))
        database.commit()
        database.close()
        server.extra += ["--retention-interval", "1"]
        server.start()
        parley.wait_until(lambda: any("parley.retention: old messages removed" in line and "messages=1" in line for line in server.log),
                          what="the sweep")
        watcher = Device(server, ben.token, position=0)
        expired = watcher.wait_event(lambda e: e["type"] == "messages.expired")["event"]
        assert expired["throughSeq"] == old["seq"] and expired["count"] == 1
        assert old["id"] not in [e.get("message", {}).get("id") for e in watcher.events], "its events are gone from the log"
        watcher.close()
        status, page = ben.get(f"/v1/conversations/{room['id']}/messages")
        assert [m["id"] for m in page["messages"]] == [kept["id"]]
        server.stop()
        # Not in the file, the write-ahead log or the search index: the bytes are gone.
        for name in os.listdir(server.data):
            if name.startswith("parley.sqlite"):
                with open(os.path.join(server.data, name), "rb") as file:
                    assert secret_word.encode() not in file.read(), f"{name} still holds the removed text"
    finally:
        if server.process.poll() is None:
            server.stop()
