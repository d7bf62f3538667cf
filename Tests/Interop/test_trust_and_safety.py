"""What App Review asks of an app with accounts and user-generated content
(docs/trust-and-safety.md), against the real binary with real clients: Python's HTTP client,
curl, `websockets` and a webhook receiver written with the standard library."""
import json
import subprocess
import uuid

import pytest

import parley
from realtime import Device
from test_server_api import Backend
from webhookreceiver import Receiver

pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")


@pytest.fixture(scope="module")
def server():
    running = parley.Server("--webhooks-allow-private", "--webhook-first-retry", "100", "--server-api-requests-per-second", "1000")
    yield running
    assert running.stop() == 0


def name(prefix):
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def curl(server, method, path, token, body):
    """One request with curl; returns (status, parsed body or None)."""
    done = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method, server.url + path,
                           "-H", f"X-Parley-App-Key: {server.app_key}", "-H", f"Authorization: Bearer {token}",
                           "-H", "Content-Type: application/json", "--data-binary", json.dumps(body)],
                          capture_output=True, text=True, timeout=30, check=True)
    text, _, status = done.stdout.rpartition("\n")
    return int(status), (json.loads(text) if text.strip() else None)


def test_a_user_deletes_their_account_and_erases_what_they_said(server):
    backend = Backend(server)
    receiver = Receiver()
    try:
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["user.deleted"]})
        assert status == 201, hook
        receiver.secret = hook["secret"]
        ana_name, bob_name = name("ana"), name("bob")
        ana = parley.Client(server).register(ana_name)
        bob = parley.Client(server).register(bob_name)
        status, group = ana.post("/v1/conversations", {"kind": "group", "members": [bob_name], "title": "Before"})
        assert status == 201, group
        for text in ("walrus one", "walrus two"):
            assert ana.send(group["id"], text)[0] == 201
        ana_socket = Device(server, ana.token)
        ana_socket.wait_ready()
        bob_socket = Device(server, bob.token)
        bob_socket.wait_ready()

        # Without the password, or with a wrong one: refused, and nothing changed.
        status, answer = ana.request("DELETE", "/v1/me", {"erase": True})
        assert status == 400 and "password" in answer["error"]["message"]
        status, answer = ana.request("DELETE", "/v1/me", {"password": "wrong horse battery", "erase": True})
        assert status == 401 and answer["error"]["code"] == "wrong_credentials"
        assert ana.get("/v1/me")[0] == 200
        assert len(bob.get("/v1/search?q=walrus")[1]["messages"]) == 2

        status, _ = ana.request("DELETE", "/v1/me", {"password": "correct horse battery", "erase": True})
        assert status == 204
        assert ana_socket.close_code() == 4001, "her open socket closes as signed out"
        assert ana.get("/v1/me")[0] == 401
        # Bob's device hears both messages become tombstones and her leaving the group, live.
        deleted = [bob_socket.wait_event(lambda e: e["type"] == "message.deleted")["event"] for _ in range(2)]
        assert all(e.get("message", {}).get("content") is None and e["actorId"] == ana.user["id"] for e in deleted), deleted
        bob_socket.wait_event(lambda e: e["type"] == "member.removed")
        status, history = bob.get(f"/v1/conversations/{group['id']}/messages")
        assert status == 200 and all(m.get("deletedAt") and m["sender"]["displayName"] == "Deleted user"
                                     for m in history["messages"] if m["sender"]["username"] != bob_name)
        assert bob.get("/v1/search?q=walrus")[1]["messages"] == []
        export = bob.request_bytes("GET", "/v1/me/export")
        assert b"walrus" not in export[1]
        # The backend hears it once, with the old username.
        deliveries = receiver.wait_for(lambda ds: any(d["type"] == "user.deleted" for d in ds), what="user.deleted")
        notice = [d for d in deliveries if d["type"] == "user.deleted"]
        assert len(notice) == 1 and notice[0]["data"]["username"] == ana_name and notice[0]["data"]["erased"] is True
        assert notice[0]["data"]["deletedBy"] == "user"
        # Her username is free for someone new.
        assert parley.Client(server).register(ana_name).user["id"] != ana.user["id"]
        bob_socket.close()
    finally:
        receiver.close()


def test_a_guest_deletes_itself_with_curl_and_a_backend_made_user_needs_a_fresh_session(server):
    guest = parley.Client(server)
    status, answer = guest.post("/v1/sessions/guest", {"displayName": "Passing by"})
    assert status == 201
    token = answer["session"]["token"]
    assert curl(server, "DELETE", "/v1/me", token, {}) == (204, None)
    assert curl(server, "DELETE", "/v1/me", token, {})[0] == 401

    backend = Backend(server)
    username = name("byo")
    assert backend.call("POST", "/v1/server/users", {"username": username})[0] == 201
    status, issued = backend.call("POST", f"/v1/server/users/{username}/sessions", {"device": "phone"})
    assert status == 201
    # A session issued just now is recent enough: the account goes.
    assert curl(server, "DELETE", "/v1/me", issued["session"]["token"], {"erase": False}) == (204, None)
    assert backend.call("GET", f"/v1/server/users/{username}")[0] == 404
