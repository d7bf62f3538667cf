"""Polls counted by the server (issue 33, item 4) against the real binary, with Python's
http.client for REST and `websockets` for the socket: what every member's device sees as
people vote and the poll closes, what an anonymous poll never tells, what a device that was
away catches up on, and that bad votes, votes on a closed poll and closings by the wrong
person are refused with nothing changed."""
import datetime
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


def ask(author, room, question="Lunch?", options=("Pizza", "Sushi", "Salad"), **extra):
    status, poll = author.post(f"/v1/conversations/{room['id']}/messages", {
        "clientId": uuid.uuid4().hex, "content": {"type": "poll", "question": question, "options": list(options), **extra}})
    assert status == 201, poll
    return poll


def vote(voter, room, poll, options):
    return voter.request("PUT", f"/v1/conversations/{room['id']}/messages/{poll['id']}/poll/vote", {"options": options})


def counts(message):
    return [option["votes"] for option in message["poll"]["options"]]


@pytest.fixture()
def trio(server):
    ana, ben, cy = person(server, "ana"), person(server, "ben"), person(server, "cy")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "Lunch", "members": [ben.user["username"], cy.user["username"]]})
    assert status == 201, room
    return ana, ben, cy, room


def test_votes_reach_every_member_live_with_the_servers_counts_and_a_device_that_was_away_catches_up(server, trio):
    ana, ben, cy, room = trio
    away = Device(server, cy.token)
    away.wait_ready()
    position = away.position
    away.close()
    phone = Device(server, ana.token)
    phone.wait_ready()
    poll = ask(ana, room)
    assert poll["content"]["type"] == "poll" and counts(poll) == [0, 0, 0] and poll["poll"]["voterCount"] == 0
    created = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == poll["id"])["event"]
    assert created["message"]["content"]["options"] == ["Pizza", "Sushi", "Salad"]

    status, voted = vote(ben, room, poll, [1])
    assert status == 200 and counts(voted) == [0, 1, 0] and voted["myVotes"] == [1]
    assert voted["poll"]["options"][1]["voterIds"] == [ben.user["id"]]
    event = phone.wait_event(lambda e: e["type"] == "poll.voted")["event"]
    assert "seq" not in event and event["actorId"] == ben.user["id"] and counts(event["message"]) == [0, 1, 0]
    assert "myVotes" not in event["message"], "one frame goes to every member: nobody's own votes in it"
    status, changed = vote(ben, room, poll, [2])
    assert status == 200 and counts(changed) == [0, 0, 1] and changed["poll"]["voterCount"] == 1, "a new vote replaces the old"
    assert counts(phone.wait_event(lambda e: e["type"] == "poll.voted" and counts(e["message"]) == [0, 0, 1])["event"]["message"]) == [0, 0, 1]

    # The poll does not make the conversation unread for anyone, nor move it.
    status, listed = cy.get(f"/v1/conversations/{room['id']}")
    assert status == 200 and listed["unreadCount"] == 1, "only the poll message itself is unread"

    # Cy's phone comes back: it catches up on the message and each vote, in order.
    back = Device(server, cy.token, position=position)
    back.wait_ready()
    kinds = [e["type"] for e in back.events if e["conversationId"] == room["id"]]
    assert kinds[-3:] == ["message.created", "poll.voted", "poll.voted"], kinds
    back.close()
    phone.close()


def test_an_anonymous_poll_never_tells_who_voted_not_even_its_author(server, trio):
    ana, ben, cy, room = trio
    phone = Device(server, ana.token)
    phone.wait_ready()
    poll = ask(ana, room, anonymous=True, multipleChoice=True)
    status, voted = vote(cy, room, poll, [0, 2])
    assert status == 200 and counts(voted) == [1, 0, 1] and voted["myVotes"] == [0, 2]
    assert all("voterIds" not in option for option in voted["poll"]["options"])
    event = phone.wait_event(lambda e: e["type"] == "poll.voted")["event"]
    assert "actorId" not in event and "userId" not in event and cy.user["id"] not in str(event)
    status, page = ana.get(f"/v1/conversations/{room['id']}/messages")
    assert status == 200 and cy.user["id"] not in str([m for m in page["messages"] if m["id"] == poll["id"]])
    status, feed = ana.get("/v1/events?after=0&limit=200")
    assert cy.user["id"] not in str([e for e in feed["events"] if e["type"] == "poll.voted"])
    phone.close()


def test_refused_votes_and_closings_change_nothing_and_a_closed_poll_takes_no_more(server, trio):
    ana, ben, cy, room = trio
    poll = ask(ben, room, closesAt=(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert vote(cy, room, poll, [0])[0] == 200
    for bad in ([0, 1], [3], [-1], [0, 0], "0", [1.5], None):
        status, answer = vote(cy, room, poll, bad)
        assert status == 400 and answer["error"]["code"] in ("invalid_request", "invalid_json"), (bad, status, answer)
    stranger = person(server, "dan")
    assert vote(stranger, room, poll, [1])[0] == 404
    status, answer = cy.post(f"/v1/conversations/{room['id']}/messages/{poll['id']}/poll/close", {})
    assert status == 403 and answer["error"]["code"] == "forbidden", "only its author or a moderator closes it"
    status, text = ana.send(room["id"], "not a poll")
    assert vote(cy, room, text, [0])[0] == 400
    status, edited = ben.patch(f"/v1/conversations/{room['id']}/messages/{poll['id']}", {"content": {"type": "text", "text": "no"}})
    assert status == 409, "a poll cannot be edited once sent"
    status, page = ana.get(f"/v1/conversations/{room['id']}/messages")
    assert counts(next(m for m in page["messages"] if m["id"] == poll["id"])) == [1, 0, 0], "nothing changed"

    status, closed = ben.post(f"/v1/conversations/{room['id']}/messages/{poll['id']}/poll/close", {})
    assert status == 200 and "closedAt" in closed["poll"] and counts(closed) == [1, 0, 0]
    status, answer = vote(cy, room, poll, [1])
    assert status == 409 and answer["error"]["code"] == "poll_closed"

    for bad in ({"question": "?", "options": ["only one"]}, {"question": "?", "options": ["a", "A"]},
                {"question": "", "options": ["a", "b"]}, {"question": "?", "options": ["a", "b"], "closesAt": "2001-01-01T00:00:00Z"},
                {"question": "?", "options": [f"o{i}" for i in range(11)]}):
        status, answer = ana.post(f"/v1/conversations/{room['id']}/messages", {"clientId": uuid.uuid4().hex, "content": {"type": "poll", **bad}})
        assert status == 400 and answer["error"]["code"] == "invalid_request", (bad, answer)
