"""Errors that say what to do (issue 34, item 3), as a developer meets them with curl and a
WebSocket on their first hour: each mistake gets a message naming the mistake and the fix."""
import json
import subprocess
import uuid

import pytest

from parley import Client, Server
from realtime import Device


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    assert running.stop() == 0


def curl(server, method, path, *args):
    """(status, JSON answer, headers text) of a curl request."""
    done = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/stdout", "-X", method, server.url + path, *args],
                          capture_output=True, text=True, timeout=30)
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    return int(head.split()[1]), (json.loads(body) if body.strip().startswith("{") else body), head


def message(answer):
    return answer["error"]["message"]


def test_json_sent_as_a_form_says_to_send_it_as_json(server):
    # `curl -d` labels the body application/x-www-form-urlencoded.
    status, answer, _ = curl(server, "POST", "/v1/users", "-H", f"X-Parley-App-Key: {server.app_key}",
                             "-d", json.dumps({"username": "formjson", "password": "correct horse battery"}))
    assert status == 400 and "looks like JSON" in message(answer) and "Content-Type: application/json" in message(answer), answer


def test_the_three_key_mistakes_get_three_messages(server):
    body = ["--json", json.dumps({"username": "keyless", "password": "correct horse battery"})]
    status, missing, _ = curl(server, "POST", "/v1/users", *body)
    status2, secret, _ = curl(server, "POST", "/v1/users", "-H", f"X-Parley-App-Key: {server.app_secret}", *body)
    status3, unknown, _ = curl(server, "POST", "/v1/users", "-H", "X-Parley-App-Key: pk_nope", *body)
    assert (status, status2, status3) == (401, 401, 401)
    assert "missing" in message(missing)
    assert "app secret" in message(secret) and "pk_" in message(secret)
    assert "no app has the key" in message(unknown)
    assert server.app_secret not in json.dumps(secret), "the secret is not echoed"


def test_the_three_token_mistakes_get_three_messages(server):
    key = ["-H", f"X-Parley-App-Key: {server.app_key}"]
    status, missing, _ = curl(server, "GET", "/v1/me", *key)
    status2, scheme, _ = curl(server, "GET", "/v1/me", *key, "-H", "Authorization: some-token")
    status3, bad, _ = curl(server, "GET", "/v1/me", *key, "-H", "Authorization: Bearer nope")
    assert (status, status2, status3) == (401, 401, 401)
    assert "sign in first" in message(missing) and "Bearer" in message(missing)
    assert "the word Bearer" in message(scheme)
    assert message(bad) != message(missing) and message(bad) != message(scheme)


def test_bodies_say_which_field_is_wrong_and_how(server):
    ana = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
    status, answer = ana.post("/v1/messages", {"to": "bob", "clientId": "x", "content": {"type": "text", "text": "hi"}})
    assert status == 400 and message(answer) == "field 'to' must be a list", answer
    status, answer = ana.post("/v1/messages", {"conversationId": "c_x", "clientId": "x", "content": {"type": "text", "text": "hi"}})
    assert status == 400 and "POST /v1/conversations/{id}/messages" in message(answer), answer
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "errors", "members": []})
    status, answer = ana.post(f"/v1/conversations/{room['id']}/messages", {"clientId": "s", "content": {"type": "sticker", "id": 4}})
    assert status == 400 and "unknown content type 'sticker'" in message(answer) and "markdown" in message(answer), answer
    status, answer = ana.post(f"/v1/conversations/{room['id']}/messages", {"clientId": "s"})
    assert status == 400 and message(answer) == "missing field 'content'", answer


def test_a_send_to_names_some_of_which_match_nobody_says_where_it_went(server):
    ana = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
    bob = Client(server).register(f"bob{uuid.uuid4().hex[:6]}")
    status, sent = ana.post("/v1/messages", {"to": [bob.user["username"], "bobby_nobody"], "clientId": uuid.uuid4().hex,
                                             "content": {"type": "text", "text": "hi"}})
    assert status == 201 and sent["invalidUsernames"] == ["bobby_nobody"]
    assert sent["note"] == f"sent to the direct chat with {bob.user['username']}; not found: bobby_nobody", sent
    status, sent = ana.post("/v1/messages", {"to": [bob.user["username"]], "clientId": uuid.uuid4().hex,
                                             "content": {"type": "text", "text": "again"}})
    assert "note" not in sent, "nothing to say when every name matched"


def test_a_plain_request_to_the_websocket_and_a_command_before_auth(server):
    status, answer, head = curl(server, "GET", "/v1/realtime", "-H", f"X-Parley-App-Key: {server.app_key}")
    assert status == 426 and "WebSocket endpoint" in message(answer), answer
    assert "upgrade: websocket" in head.lower()
    device = Device(server, token="unused", authenticate=False)
    try:
        answer = device.command("typing.start", conversationId="c_1")
        assert answer["type"] == "error" and '{"type":"auth"' in answer["error"]["message"], answer
    finally:
        device.socket.close()
