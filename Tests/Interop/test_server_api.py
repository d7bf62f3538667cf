"""The server API (/v1/server/…) as an app's backend uses it, with the app secret, over real
HTTP against the real binary: users it authenticates itself, sessions it issues, conversations
and messages it manages, and the walls between apps and between the secret and user tokens."""
import datetime
import uuid

import pytest

import parley


class Backend:
    """The app's backend: requests with `Authorization: Bearer <app secret>` and no app key."""

    def __init__(self, server, secret=None):
        self.client = parley.Client(server, app_key="")
        self.client.app_key = None
        self.secret = secret or server.app_secret

    def call(self, method, path, body=None, secret=None):
        headers = {"Authorization": f"Bearer {secret or self.secret}"}
        return self.client.request(method, path, body, headers=headers)


@pytest.fixture(scope="module")
def server():
    running = parley.Server("--server-api-requests-per-second", "1000")
    yield running
    assert running.stop() == 0


def parse(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def user(backend, name, display=None):
    status, answer = backend.call("POST", "/v1/server/users", {"username": name, "displayName": display or name.title()})
    assert status in (200, 201), (status, answer)
    return answer


def device_of(server, backend, name):
    """A device signed in with a session the backend issued."""
    status, answer = backend.call("POST", f"/v1/server/users/{name}/sessions", {"device": "phone"})
    assert status == 201, (status, answer)
    client = parley.Client(server)
    client.token = answer["session"]["token"]
    return client


def test_the_secret_is_the_only_key_and_only_here(server):
    backend = Backend(server)
    assert backend.call("GET", "/v1/server/users")[0] == 200
    status, answer = backend.client.request("GET", "/v1/server/users")
    assert status == 401 and answer["error"]["code"] == "invalid_app_secret"
    status, answer = backend.call("GET", "/v1/server/users", secret="sk_" + "x" * 43)
    assert status == 401 and answer["error"]["code"] == "invalid_app_secret"
    # A user's token is refused here, and the secret is refused on user endpoints.
    alice = parley.Client(server).register("secretwall")
    status, answer = backend.call("GET", "/v1/server/users", secret=alice.token)
    assert status == 401 and "session token" in answer["error"]["message"]
    status, answer = alice.request("GET", "/v1/me", headers={"Authorization": f"Bearer {server.app_secret}"})
    assert status == 401 and "/v1/server" in answer["error"]["message"]
    # The log names the app, never the secret.
    # One line per request: the app named, never the secret.
    parley.wait_until(lambda: any("parley.http: request" in line and "app=default" in line and "path=/v1/server/users" in line
                                  and "status=200" in line for line in server.log), what="a log line")
    assert not any(server.app_secret in line for line in server.log)


def test_users_the_app_authenticates_itself(server):
    backend = Backend(server)
    status, created = backend.call("POST", "/v1/server/users", {"username": "byo-ann", "displayName": "Ann", "customData": {"plan": "pro"}})
    assert status == 201 and created["user"]["displayName"] == "Ann" and created.get("deactivatedAt") is None
    status, updated = backend.call("POST", "/v1/server/users", {"username": "BYO-ann", "displayName": "Ann B."})
    assert status == 200 and updated["user"]["id"] == created["user"]["id"] and updated["user"]["displayName"] == "Ann B."
    assert updated["user"]["customData"] == {"plan": "pro"}, "absent fields are kept"
    status, found = backend.call("GET", "/v1/server/users?query=byo-")
    assert status == 200 and [u["user"]["username"] for u in found["users"]] == ["byo-ann"]
    # No password: a sign-in with any password fails, a session the backend issues works.
    status, _ = parley.Client(server).post("/v1/sessions", {"username": "byo-ann", "password": "correct horse battery", "device": "x"})
    assert status == 401
    ann = device_of(server, backend, "byo-ann")
    status, me = ann.get("/v1/me")
    assert status == 200 and me["username"] == "byo-ann"
    status, answer = backend.call("POST", "/v1/server/users/byo-ann/sessions", {"expiresInSeconds": 5})
    assert status == 400 and "expiresInSeconds" in answer["error"]["message"]
    status, short = backend.call("POST", "/v1/server/users/byo-ann/sessions", {"expiresInSeconds": 120})
    assert status == 201
    lifetime = parse(short["session"]["expiresAt"]) - parse(short["session"]["createdAt"])
    assert 119 <= lifetime.total_seconds() <= 121
    status, answer = backend.call("POST", "/v1/server/users/nobody-here/sessions", {})
    assert status == 404 and answer["error"]["code"] == "user_not_found"
    status, answer = backend.call("POST", "/v1/server/users", {"username": "bad name!"})
    assert status == 400


def test_deactivate_ends_sessions_and_refuses_new_ones(server):
    backend = Backend(server)
    user(backend, "byo-dee")
    dee = device_of(server, backend, "byo-dee")
    assert dee.get("/v1/me")[0] == 200
    status, state = backend.call("POST", "/v1/server/users/byo-dee/deactivate")
    assert status == 200 and state["deactivatedAt"] and state["sessionCount"] == 0
    assert dee.get("/v1/me")[0] == 401, "a deactivated account's sessions end at once"
    status, answer = backend.call("POST", "/v1/server/users/byo-dee/sessions", {})
    assert status == 403 and answer["error"]["code"] == "user_deactivated"
    assert backend.call("POST", "/v1/server/users/byo-dee/reactivate")[0] == 200
    assert device_of(server, backend, "byo-dee").get("/v1/me")[0] == 200


def test_conversations_and_messages_as_the_app(server):
    backend = Backend(server)
    for name in ("byo-amy", "byo-bob", "byo-cat"):
        user(backend, name)
    status, group = backend.call("POST", "/v1/server/conversations",
                                 {"kind": "group", "title": "Book club", "members": ["byo-amy", "byo-bob"]})
    assert status == 201 and group["memberCount"] == 2
    cid = group["id"]
    amy = device_of(server, backend, "byo-amy")
    # As a member, as the system, and as someone who is not a member.
    status, sent = backend.call("POST", f"/v1/server/conversations/{cid}/messages",
                                {"from": "byo-amy", "clientId": "m1", "content": {"type": "text", "text": "hi from amy"}})
    assert status == 201 and sent["sender"]["username"] == "byo-amy"
    again = backend.call("POST", f"/v1/server/conversations/{cid}/messages",
                         {"from": "byo-amy", "clientId": "m1", "content": {"type": "text", "text": "hi from amy"}})
    assert again[0] == 200 and again[1]["id"] == sent["id"], "a retry with the same clientId is the same message"
    status, system = backend.call("POST", f"/v1/server/conversations/{cid}/messages",
                                  {"clientId": "s1", "content": {"type": "system", "text": "Bob joined the club"}})
    assert status == 201 and system["content"] == {"type": "system", "text": "Bob joined the club"}
    status, answer = backend.call("POST", f"/v1/server/conversations/{cid}/messages",
                                  {"from": "byo-cat", "clientId": "c1", "content": {"type": "text", "text": "let me in"}})
    assert status == 404
    # A user cannot pass a message off as the system's.
    status, answer = amy.post(f"/v1/conversations/{cid}/messages", {"clientId": "fake", "content": {"type": "system", "text": "free pizza"}})
    assert status == 403
    # Members, roles, history, edits and deletes as the app.
    status, added = backend.call("POST", f"/v1/server/conversations/{cid}/members", {"usernames": ["byo-cat"]})
    assert status == 201 and [m["user"]["username"] for m in added["members"]] == ["byo-cat"]
    status, member = backend.call("PATCH", f"/v1/server/conversations/{cid}/members/byo-cat", {"role": "owner"})
    assert status == 200 and member["role"] == "owner"
    status, history = backend.call("GET", f"/v1/server/conversations/{cid}/messages")
    assert status == 200 and [m["id"] for m in history["messages"]] == [sent["id"], system["id"]]
    status, edited = backend.call("PATCH", f"/v1/server/conversations/{cid}/messages/{sent['id']}",
                                  {"content": {"type": "text", "text": "hi (moderated)"}})
    assert status == 200 and edited["content"]["text"] == "hi (moderated)"
    status, deleted = backend.call("DELETE", f"/v1/server/conversations/{cid}/messages/{sent['id']}")
    assert status == 200 and deleted["deletedAt"]
    assert backend.call("DELETE", f"/v1/server/conversations/{cid}/members/byo-bob")[0] == 204
    status, listed = backend.call("GET", "/v1/server/users/byo-amy/conversations")
    assert status == 200 and cid in [c["id"] for c in listed["conversations"]]
    # The member saw it all live-readable: amy's history has the system message.
    status, seen = amy.get(f"/v1/conversations/{cid}/messages")
    assert status == 200 and any(m["content"]["type"] == "system" for m in seen["messages"] if m.get("content"))
    # Direct conversations need someone to start them.
    status, answer = backend.call("POST", "/v1/server/conversations", {"kind": "direct", "members": ["byo-amy"]})
    assert status == 400 and "createdBy" in answer["error"]["message"]
    status, direct = backend.call("POST", "/v1/server/conversations", {"kind": "direct", "members": ["byo-bob"], "createdBy": "byo-amy"})
    assert status == 201 and direct["kind"] == "direct"


def test_deleting_a_user_keeps_their_messages_without_their_name(server):
    backend = Backend(server)
    user(backend, "byo-gone", "Gone Soon")
    user(backend, "byo-stay")
    status, group = backend.call("POST", "/v1/server/conversations", {"kind": "group", "title": "G", "members": ["byo-gone", "byo-stay"]})
    cid = group["id"]
    backend.call("POST", f"/v1/server/conversations/{cid}/messages", {"from": "byo-gone", "clientId": "g1", "content": {"type": "text", "text": "bye"}})
    gone = device_of(server, backend, "byo-gone")
    assert backend.call("DELETE", "/v1/server/users/byo-gone")[0] == 204
    assert gone.get("/v1/me")[0] == 401
    assert backend.call("GET", "/v1/server/users/byo-gone")[0] == 404
    stay = device_of(server, backend, "byo-stay")
    status, history = stay.get(f"/v1/conversations/{cid}/messages")
    assert status == 200 and history["messages"][0]["content"]["text"] == "bye"
    assert history["messages"][0]["sender"]["displayName"] == "Deleted user"
    status, members = stay.get(f"/v1/conversations/{cid}/members")
    assert [m["user"]["username"] for m in members["members"]] == ["byo-stay"]
    # The name is free again.
    status, again = backend.call("POST", "/v1/server/users", {"username": "byo-gone"})
    assert status == 201 and again["user"]["id"] != history["messages"][0]["sender"]["id"]


def test_one_apps_secret_reads_nothing_of_another(server):
    created = server.apps("create", f"other-{uuid.uuid4().hex[:6]}")
    assert created.returncode == 0, created.stderr
    other_secret = created.stdout.split("app secret:")[1].split()[0]
    mine, theirs = Backend(server), Backend(server, secret=other_secret)
    user(mine, "byo-private")
    status, group = mine.call("POST", "/v1/server/conversations", {"kind": "group", "title": "Mine", "members": ["byo-private"]})
    cid = group["id"]
    assert theirs.call("GET", f"/v1/server/conversations/{cid}")[0] == 404
    assert theirs.call("GET", f"/v1/server/conversations/{cid}/messages")[0] == 404
    assert theirs.call("POST", f"/v1/server/conversations/{cid}/messages", {"clientId": "x", "content": {"type": "system", "text": "x"}})[0] == 404
    assert theirs.call("GET", "/v1/server/users/byo-private")[0] == 404
    assert theirs.call("POST", "/v1/server/users/byo-private/sessions", {})[0] == 404
    status, listed = theirs.call("GET", "/v1/server/users")
    assert status == 200 and all(u["user"]["username"] != "byo-private" for u in listed["users"])


def test_rotating_the_secret_keeps_the_old_one_for_the_grace_period():
    server = parley.Server()
    try:
        old = server.app_secret
        rotated = server.apps("rotate-secret", "default")
        assert rotated.returncode == 0, rotated.stderr
        new = rotated.stdout.split("app secret:")[1].split()[0]
        assert Backend(server, new).call("GET", "/v1/server/users")[0] == 200
        assert Backend(server, old).call("GET", "/v1/server/users")[0] == 200, "the old secret works during the grace period"
        leaked = server.apps("rotate-secret", "default", "--secret-grace", "0")
        newest = leaked.stdout.split("app secret:")[1].split()[0]
        assert Backend(server, newest).call("GET", "/v1/server/users")[0] == 200
        assert Backend(server, new).call("GET", "/v1/server/users")[0] == 401, "grace 0 ends the old secret at once"
        assert Backend(server, old).call("GET", "/v1/server/users")[0] == 401
    finally:
        server.stop()


def test_server_calls_are_budgeted_per_app():
    server = parley.Server("--server-api-requests-per-second", "5")
    try:
        backend = Backend(server)
        answers = [backend.call("GET", "/v1/server/users") for _ in range(30)]
        limited = [a for a in answers if a[0] == 429]
        assert limited and limited[0][1]["error"]["code"] == "rate_limited"
        assert "Retry-After" in backend.client.last_headers
    finally:
        server.stop()


def admin(server, *args, secret=None, password=None):
    """`parley-server admin …` against the running server."""
    import os
    import subprocess
    env = dict(os.environ, PARLEY_URL=server.url, PARLEY_APP_SECRET=secret or server.app_secret)
    if password:
        env["PARLEY_PASSWORD"] = password
    return subprocess.run([parley.BINARY, "admin", *args], capture_output=True, text=True, timeout=30, env=env)


def test_the_admin_tool_does_what_an_operator_does_by_hand(server):
    import json
    backend = Backend(server)
    user(backend, "adm-olga", "Olga")
    olga = device_of(server, backend, "adm-olga")
    listed = admin(server, "users", "adm-")
    assert listed.returncode == 0 and "adm-olga\tOlga" in listed.stdout and "active" in listed.stdout
    as_json = json.loads(admin(server, "users", "adm-", "--json").stdout)
    assert [u["user"]["username"] for u in as_json["users"]] == ["adm-olga"]
    # A reset password signs her out; the new one works.
    reset = admin(server, "reset-password", "adm-olga", password="a brand new passphrase")
    assert reset.returncode == 0, reset.stderr
    assert olga.get("/v1/me")[0] == 401
    status, _ = parley.Client(server).post("/v1/sessions", {"username": "adm-olga", "password": "a brand new passphrase", "device": "x"})
    assert status == 201
    assert admin(server, "deactivate", "adm-olga").returncode == 0
    assert "deactivated" in admin(server, "user", "adm-olga").stdout
    status, answer = parley.Client(server).post("/v1/sessions", {"username": "adm-olga", "password": "a brand new passphrase", "device": "x"})
    assert status == 403 and answer["error"]["code"] == "user_deactivated"
    assert admin(server, "reactivate", "adm-olga").returncode == 0
    assert admin(server, "sign-out", "adm-olga").returncode == 0
    status, group = backend.call("POST", "/v1/server/conversations", {"kind": "group", "title": "Ops", "members": ["adm-olga"]})
    shown = admin(server, "conversation", group["id"])
    assert shown.returncode == 0 and "Ops" in shown.stdout and "adm-olga" in shown.stdout
    assert admin(server, "webhooks").returncode == 0
    missing = admin(server, "user", "adm-nobody")
    assert missing.returncode == 1 and "user_not_found" in missing.stderr
    wrong = admin(server, "users", secret="sk_" + "0" * 43)
    assert wrong.returncode == 1 and "invalid_app_secret" in wrong.stderr
    # Deleting, as an operator does for a deletion asked for by e-mail: only with --yes.
    user(backend, "adm-gone")
    gone = device_of(server, backend, "adm-gone")
    unconfirmed = admin(server, "delete-user", "adm-gone")
    assert unconfirmed.returncode == 64 and "--yes" in unconfirmed.stderr
    deleted = admin(server, "delete-user", "adm-gone", "--yes", "--erase")
    assert deleted.returncode == 0 and "erased" in deleted.stdout, deleted.stderr
    assert gone.get("/v1/me")[0] == 401 and backend.call("GET", "/v1/server/users/adm-gone")[0] == 404
    usage = subprocess_run_admin_without_secret()
    assert usage.returncode == 64 and "PARLEY_APP_SECRET" in usage.stderr


def subprocess_run_admin_without_secret():
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if k != "PARLEY_APP_SECRET"}
    return subprocess.run([parley.BINARY, "admin", "users"], capture_output=True, text=True, timeout=30, env=env)
