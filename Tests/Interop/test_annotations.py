"""Reactions, pins and mentions (issue 19; docs/api.md) against the real binary, with Python's
http.client for REST and `websockets` for the socket: what every member's device sees live,
what a device that was away catches up on (in order), what a non-member and bad input get,
and that none of it makes a conversation unread or moves it up the list."""
import urllib.parse
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


def group(owner, *others):
    status, room = owner.post("/v1/conversations", {"kind": "group", "title": "Trip", "members": [o.user["username"] for o in others]})
    assert status == 201, room
    return room


def path(room, message, rest=""):
    return f"/v1/conversations/{room['id']}/messages/{message['id']}{rest}"


def test_a_reaction_reaches_every_member_live_and_a_device_that_was_away_in_order(server):
    ana, ben, cy = person(server, "ana"), person(server, "ben"), person(server, "cy")
    room = group(ana, ben, cy)
    status, message = ana.send(room["id"], "lunch at 1?")
    assert status == 201
    # Cy's phone goes away after the message; Ana's stays connected.
    away = Device(server, cy.token)
    away.wait_ready()
    position = away.position
    away.close()
    online = Device(server, ana.token)
    online.wait_ready()

    status, reacted = ben.post(path(room, message, "/reactions"), {"emoji": "👍"})
    assert status == 201 and reacted["reactions"] == [{"emoji": "👍", "count": 1}] and reacted["myReactions"] == ["👍"]
    status, again = ben.post(path(room, message, "/reactions"), {"emoji": "👍"})
    assert status == 200 and again["reactions"] == [{"emoji": "👍", "count": 1}], "a repeat is answered 200 and changes nothing"
    # Over the socket too: the ack carries the message with its counts.
    ben_phone = Device(server, ben.token)
    ben_phone.wait_ready()
    answer = ben_phone.command("reaction.add", conversationId=room["id"], messageId=message["id"], emoji="🎉")
    assert answer["type"] == "ack" and answer["result"]["reactions"] == [{"emoji": "👍", "count": 1}, {"emoji": "🎉", "count": 1}]
    status, _ = ben.delete(path(room, message, "/reactions/" + urllib.parse.quote("👍")))
    assert status == 200

    seen = [online.wait_event(lambda e, kind=kind: e["type"] == kind)["event"] for kind in ("reaction.added", "reaction.added", "reaction.removed")]
    assert [(e["type"], e["emoji"], e["userId"]) for e in seen] == [
        ("reaction.added", "👍", ben.user["id"]), ("reaction.added", "🎉", ben.user["id"]), ("reaction.removed", "👍", ben.user["id"])]
    assert all("seq" not in e for e in seen) and seen[-1]["message"]["reactions"] == [{"emoji": "🎉", "count": 1}]

    # The device that was away resumes from its position and gets the same three, in order.
    back = Device(server, cy.token, position=position)
    back.wait_ready()
    status, feed = cy.get(f"/v1/events?after={position}")
    assert status == 200
    kinds = [e["type"] for e in feed["events"] if e["type"].startswith("reaction.")]
    assert kinds == ["reaction.added", "reaction.added", "reaction.removed"]
    replayed = [e for e in back.events if e["type"].startswith("reaction.")]
    assert [e["position"] for e in replayed] == [e["position"] for e in seen]

    # Nobody's unread count moved, and the conversation kept its place.
    status, conversation = ana.get(f"/v1/conversations/{room['id']}")
    assert conversation["unreadCount"] == 0 and conversation["lastSeq"] == message["seq"]
    for device in (online, ben_phone, back):
        device.close()


def test_who_reacted_pages_and_bad_reactions_change_nothing(server):
    ana, ben = person(server, "ana"), person(server, "ben")
    room = group(ana, ben)
    _, message = ana.send(room["id"], "vote")
    for emoji in ["👍", "❤️", "🇯🇵", "1️⃣", "👩🏽‍💻"]:
        status, answer = ben.post(path(room, message, "/reactions"), {"emoji": emoji})
        assert status == 201, (emoji, answer)
    ana.post(path(room, message, "/reactions"), {"emoji": "👍"})
    status, page = ana.get(path(room, message, "/reactions?limit=2"))
    assert status == 200 and len(page["reactions"]) == 2 and page["hasMore"]
    status, thumbs = ana.get(path(room, message, "/reactions?emoji=" + urllib.parse.quote("👍")))
    assert [r["user"]["username"] for r in thumbs["reactions"]] == [ben.user["username"], ana.user["username"]]
    for bad in ["", "a", "👍👍", "<script>", "\u200d", "👍" * 40, "1"]:
        status, error = ben.post(path(room, message, "/reactions"), {"emoji": bad})
        assert status == 400 and error["error"]["code"] == "invalid_request" and "emoji" in error["error"]["message"], bad
    status, error = ben.post(path(room, message, "/reactions"), {"emoji": 5})
    assert status == 400
    outsider = person(server, "eve")
    status, error = outsider.post(path(room, message, "/reactions"), {"emoji": "👍"})
    assert status == 404 and error["error"]["code"] == "conversation_not_found"
    status, after = ana.get(path(room, message))
    assert after["reactions"] == [{"emoji": "👍", "count": 2}, {"emoji": "❤️", "count": 1}, {"emoji": "🇯🇵", "count": 1},
                                  {"emoji": "1️⃣", "count": 1}, {"emoji": "👩🏽‍💻", "count": 1}], "❤️ keeps its selector (❤ alone shows as text)"
    ana.delete(path(room, message))
    status, error = ben.post(path(room, message, "/reactions"), {"emoji": "👍"})
    assert status == 409 and error["error"]["code"] == "message_deleted"


def test_pins_of_every_kind_are_listed_survive_edits_and_are_live(server):
    ana, ben = person(server, "ana"), person(server, "ben")
    room = group(ana, ben)
    _, text = ana.send(room["id"], "the plan")
    _, place = ana.send(room["id"], content={"type": "location", "latitude": 48.85, "longitude": 2.35, "caption": "meet here\nat 8"})
    assert place["content"]["caption"] == "meet here\nat 8"
    phone = Device(server, ana.token)
    phone.wait_ready()
    status, pinned = ben.request("PUT", path(room, place, "/pin"))
    assert status == 200 and pinned["pinnedBy"] == ben.user["id"] and pinned["pinnedAt"]
    event = phone.wait_event(lambda e: e["type"] == "message.pinned")["event"]
    assert event["actorId"] == ben.user["id"] and event["message"]["id"] == place["id"] and "seq" not in event
    ben.request("PUT", path(room, text, "/pin"))
    ana.patch(path(room, text), {"content": {"type": "text", "text": "the new plan"}})
    status, pins = ana.get(f"/v1/conversations/{room['id']}/pins")
    assert [m["id"] for m in pins["messages"]] == [text["id"], place["id"]]
    assert pins["messages"][0]["content"]["text"] == "the new plan" and pins["messages"][1]["content"]["type"] == "location"
    status, _ = ana.delete(path(room, text, "/pin"))
    assert status == 200
    phone.wait_event(lambda e: e["type"] == "message.unpinned" and e["message"]["id"] == text["id"])
    status, pins = ben.get(f"/v1/conversations/{room['id']}/pins")
    assert [m["id"] for m in pins["messages"]] == [place["id"]]
    phone.close()


def test_a_public_channel_member_cannot_pin_but_its_admin_can(server):
    owner, member = person(server, "own"), person(server, "mem")
    status, channel = owner.post("/v1/conversations", {"kind": "public", "title": f"news-{uuid.uuid4().hex[:6]}"})
    assert status == 201
    member.post(f"/v1/conversations/{channel['id']}/join")
    _, post = owner.send(channel["id"], "rules")
    status, error = member.request("PUT", path(channel, post, "/pin"))
    assert status == 403 and error["error"]["code"] == "forbidden"
    assert owner.request("PUT", path(channel, post, "/pin"))[0] == 200


def test_mentions_are_resolved_once_and_listed_for_the_mentioned(server):
    ana, ben = person(server, "ana"), person(server, "ben")
    stranger = person(server, "zed")
    room = group(ana, ben)
    text = f"@{ben.user['username'].upper()} see this; not @{stranger.user['username']} nor mail@{ben.user['username']}.com"
    status, message = ana.send(room["id"], text)
    assert status == 201
    assert message["mentions"] == [{"userId": ben.user["id"], "username": ben.user["username"]}]
    status, mine = ben.get("/v1/mentions")
    assert status == 200 and [m["id"] for m in mine["messages"]] == [message["id"]] and not mine["hasMore"]
    status, none = stranger.get("/v1/mentions")
    assert none["messages"] == []
    status, error = ben.get("/v1/mentions?before=m_nope")
    assert status == 400


def test_a_thread_over_rest_and_the_socket_with_its_own_unread_count(server):
    ana, ben, cy = person(server, "ana"), person(server, "ben"), person(server, "cy")
    room = group(ana, ben, cy)
    _, root = ana.send(room["id"], "weekend?")
    assert ana.post(f"/v1/conversations/{room['id']}/receipts", {"readSeq": root["seq"]})[0] == 200
    phone = Device(server, ana.token)
    phone.wait_ready()
    answer = Device(server, ben.token)
    answer.wait_ready()
    ack = answer.command("message.send", conversationId=room["id"],
                         message={"clientId": str(uuid.uuid4()), "content": {"type": "text", "text": "hike"}, "threadId": root["id"]})
    assert ack["type"] == "ack" and ack["result"]["message"]["threadId"] == root["id"]
    event = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == ack["result"]["message"]["id"])["event"]
    assert event["thread"]["rootId"] == root["id"] and event["thread"]["replyCount"] == 1 and event["seq"] > root["seq"]
    status, shared = cy.send(room["id"], "me too", threadId=root["id"], alsoInConversation=True)
    assert status == 201 and shared["alsoInConversation"] is True

    status, page = ana.get(f"/v1/conversations/{room['id']}/messages")
    ids = [m["id"] for m in page["messages"]]
    assert root["id"] in ids and shared["id"] in ids and ack["result"]["message"]["id"] not in ids
    shown_root = next(m for m in page["messages"] if m["id"] == root["id"])
    assert shown_root["replyCount"] == 2 and shown_root["lastReplyAt"] == shared["sentAt"]
    status, conversation = ana.get(f"/v1/conversations/{room['id']}")
    assert conversation["unreadCount"] == 1, "the thread-only reply is not unread in the conversation"
    status, thread = ana.get(f"/v1/conversations/{room['id']}/threads/{root['id']}")
    assert status == 200 and thread["unreadCount"] == 2 and thread["participating"] and thread["readSeq"] == 0
    status, replies = ana.get(f"/v1/conversations/{room['id']}/threads/{root['id']}/messages?limit=1")
    assert [m["id"] for m in replies["messages"]] == [shared["id"]] and replies["hasOlder"]
    status, read = ana.post(f"/v1/conversations/{room['id']}/threads/{root['id']}/read", {"seq": shared["seq"]})
    assert status == 200 and read["unreadCount"] == 0
    status, threads = ben.get(f"/v1/conversations/{room['id']}/threads")
    assert [t["root"]["id"] for t in threads["threads"]] == [root["id"]]
    # Bad input: a thread under a reply, alsoInConversation alone, an unknown root.
    status, error = ana.send(room["id"], "x", threadId=shared["id"])
    assert status == 400 and "threadId" in error["error"]["message"]
    status, error = ana.send(room["id"], "x", alsoInConversation=True)
    assert status == 400
    status, error = ana.send(room["id"], "x", threadId="m_nope")
    assert status == 404 and error["error"]["code"] == "message_not_found"
    phone.close()
    answer.close()


def test_exports_are_ndjson_attachments_curl_can_save(server, tmp_path):
    import json
    import subprocess
    ana, ben = person(server, "ana"), person(server, "ben")
    room = group(ana, ben)
    for index in range(3):
        ana.send(room["id"], f"note {index}")
    ben.send(room["id"], "ben's")
    target = tmp_path / "export.ndjson"
    result = subprocess.run(["curl", "-sS", "-D", "-", "-o", str(target), "-H", f"X-Parley-App-Key: {server.app_key}",
                             "-H", f"Authorization: Bearer {ana.token}", f"{server.url}/v1/me/export"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    headers = result.stdout.lower()
    assert "content-type: application/x-ndjson" in headers and 'attachment; filename="parley-export.ndjson"' in headers
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[0]["type"] == "account" and lines[0]["id"] == ana.user["id"]
    assert [line["message"]["content"]["text"] for line in lines if line["type"] == "message"] == ["note 0", "note 1", "note 2"]
    assert lines[-1] == {"type": "end", "counts": {"conversations": 1, "messages": 3, "media": 0, "drafts": 0, "scheduled": 0}}
    status, error = ben.get(f"/v1/conversations/{room['id']}/export")
    assert status == 403 and error["error"]["code"] == "forbidden"
    result = subprocess.run(["curl", "-sS", "-H", f"X-Parley-App-Key: {server.app_key}", "-H", f"Authorization: Bearer {ana.token}",
                             f"{server.url}/v1/conversations/{room['id']}/export"], capture_output=True, text=True, timeout=30)
    kinds = [json.loads(line)["type"] for line in result.stdout.splitlines()]
    assert kinds[0] == "conversation" and kinds.count("member") == 2 and kinds.count("message") >= 4 and kinds[-1] == "end"


def test_profile_and_group_photos_are_faces_any_img_tag_can_load(server):
    import subprocess
    import media
    ana, ben = person(server, "ana"), person(server, "ben")
    status, upload = ana.upload(media.jpeg(800, 600), "photo", "image/jpeg")
    assert status == 201, upload
    status, me = ana.request("PUT", "/v1/me/photo", {"attachmentId": upload["id"]})
    assert status == 200 and me["photoURL"] == f"/v1/avatars/{upload['id']}"
    room = group(ana, ben)
    status, sent = ana.send(room["id"], "look, a face")
    assert sent["sender"]["photoURL"] == me["photoURL"], "the send's answer carries it"
    status, page = ben.get(f"/v1/conversations/{room['id']}/messages")
    assert page["messages"][-1]["sender"]["photoURL"] == me["photoURL"], "and every history page"
    # No token, no app key: what an <img src> sends.
    fetched = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{content_type}", server.url + me["photoURL"]],
                             capture_output=True, text=True, timeout=30)
    assert fetched.stdout == "200 image/jpeg", fetched.stdout
    status, other = ben.upload(media.jpeg(64, 64), "photo", "image/jpeg")
    assert parley_status(server, f"/v1/avatars/{other['id']}") == 404, "an upload that is nobody's face is not served"
    status, error = ben.request("PUT", "/v1/me/photo", {"attachmentId": upload["id"]})
    assert status == 404, "someone else's upload cannot be one's face"
    status, text_file = ana.upload(b"plain words", "file", "text/plain", name="a.txt")
    status, error = ana.request("PUT", "/v1/me/photo", {"attachmentId": text_file["id"]})
    assert status == 400
    # A group's photo: an event for the members.
    phone = Device(server, ben.token)
    phone.wait_ready()
    status, conversation = ana.request("PUT", f"/v1/conversations/{room['id']}/photo", {"attachmentId": upload["id"]})
    assert status == 200 and conversation["photoURL"] == me["photoURL"]
    event = phone.wait_event(lambda e: e["type"] == "conversation.updated" and "photoURL" in e)["event"]
    assert event["photoURL"] == me["photoURL"] and event["actorId"] == ana.user["id"]
    assert ben.request("PUT", f"/v1/conversations/{room['id']}/photo", {"attachmentId": other["id"]})[0] == 403
    phone.close()
    # Removed from both, it is no longer served.
    assert ana.delete("/v1/me/photo")[0] == 200
    assert ana.delete(f"/v1/conversations/{room['id']}/photo")[0] == 200
    assert parley_status(server, me["photoURL"]) == 404


def parley_status(server, path):
    import urllib.request
    import urllib.error
    try:
        with urllib.request.urlopen(server.url + path, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
