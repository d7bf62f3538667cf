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
from webhookreceiver import Receiver, verify

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


class Hook:
    """An app's before-send hook written with the standard library: it checks each question's
    Parley-Signature, records it, waits `delay` seconds when told to, and answers what
    `decide(question)` returns (a dict, or an int for a bare status)."""

    def __init__(self, decide):
        import http.server
        import threading
        self.decide = decide
        self.secret = None
        self.delay = 0
        self.questions = []
        self.bad_signatures = 0
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One write per answer, sent at once (Nagle would hold the body for the delayed ACK).
            disable_nagle_algorithm = True
            wbufsize = 65536

            def do_POST(self):
                import time
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if hook.secret and not verify(hook.secret, self.headers.get("Parley-Signature", ""), body):
                    hook.bad_signatures += 1
                question = json.loads(body)
                hook.questions.append(question)
                if hook.delay:
                    time.sleep(hook.delay)
                answer = hook.decide(question)
                status, payload = (answer, b"") if isinstance(answer, int) else (200, json.dumps(answer).encode())
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/before-send"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def group_of_two(server):
    ana_name, bob_name = name("ana"), name("bob")
    ana = parley.Client(server).register(ana_name)
    bob = parley.Client(server).register(bob_name)
    status, group = ana.post("/v1/conversations", {"kind": "group", "members": [bob_name], "title": "Filtered"})
    assert status == 201, group
    return ana, bob, group["id"]


def admin(server, *args, stdin=""):
    return subprocess.run([parley.BINARY, "admin", *args, "--url", server.url, "--secret", server.app_secret],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_a_blocklist_set_with_the_admin_tool_refuses_and_masks_on_every_path(server):
    backend = Backend(server)
    receiver = Receiver()
    try:
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["message.created"]})
        assert status == 201
        receiver.secret = hook["secret"]
        listed = admin(server, "blocklist-set", "spam", "reject", "-",
                       stdin="# what this app refuses\nreason: no spam here\nbuy followers\n/cheap\\s+pills?/\n")
        assert listed.returncode == 0, listed.stderr
        assert "buy followers" in listed.stdout and "/cheap\\s+pills?/" in listed.stdout
        assert admin(server, "blocklist-set", "mild", "mask", "-", stdin="darn\n").returncode == 0
        refused = admin(server, "blocklist-set", "bad", "reject", "-", stdin="/(a)\\1/\n")
        assert refused.returncode == 1 and "back-references" in refused.stderr
        assert "spam\treject\t1 words, 1 regexes" in admin(server, "blocklists").stdout

        ana, bob, cid = group_of_two(server)
        bob_socket = Device(server, bob.token)
        bob_socket.wait_ready()
        ana_socket = Device(server, ana.token)
        ana_socket.wait_ready()
        # Over REST and over the socket: a typed refusal with the list's reason, and nothing written.
        status, answer = ana.send(cid, "Buy followers, cheap!")
        assert status == 422 and answer["error"] == {"code": "content_rejected", "message": "no spam here"}
        refused = ana_socket.send_text(cid, "CHEAP   PILLS")
        assert refused["type"] == "error" and refused["error"]["code"] == "content_rejected"
        status, answer = ana.post("/v1/messages", {"to": [bob.user["username"]],
                                                   "clientId": "to-1", "content": {"type": "text", "text": "buy followers"}})
        assert status == 422
        # Masked: written with the word starred, live and in history; search does not find the word.
        status, masked = ana.send(cid, "darn it")
        assert status == 201 and masked["content"]["text"] == "**** it"
        seen = bob_socket.wait_event(lambda e: e["type"] == "message.created")["event"]
        assert seen["message"]["content"]["text"] == "**** it", "the refused messages never reached bob's device"
        assert [m["content"]["text"] for m in bob.get(f"/v1/conversations/{cid}/messages")[1]["messages"]] == ["**** it"]
        assert bob.get("/v1/search?q=darn")[1]["messages"] == []
        # The backend heard only the one that was written.
        deliveries = receiver.wait_for(lambda ds: any(d["type"] == "message.created" for d in ds), what="message.created")
        assert [d["data"]["message"]["content"]["text"] for d in deliveries if d["type"] == "message.created"] == ["**** it"]
        assert admin(server, "blocklist-delete", "spam").returncode == 0
        assert admin(server, "blocklist-delete", "mild").returncode == 0
        assert ana.send(cid, "buy followers")[0] == 201, "deleted lists refuse nothing (this node drops its copy at once)"
        bob_socket.close()
        ana_socket.close()
    finally:
        receiver.close()


def test_the_before_send_hook_accepts_refuses_and_replaces_and_a_hanging_one_costs_only_its_budget(server):
    backend = Backend(server)

    def decide(question):
        text = question["content"].get("text", "")
        if "reject" in text:
            return {"action": "reject", "reason": "the moderators said no"}
        if "replace" in text:
            return {"action": "replace", "content": {"type": "text", "text": "[removed by the app]"}}
        if "garbage" in text:
            return 500
        if "blank swap" in text:
            return {"action": "replace", "content": {"type": "text", "text": ""}}
        if "notice swap" in text:
            return {"action": "replace", "content": {"type": "system", "text": "an official-looking notice"}}
        return {"action": "accept"}

    hook = Hook(decide)
    try:
        status, answer = backend.call("PUT", "/v1/server/before-send", {"url": hook.url, "timeoutMilliseconds": 300})
        assert status == 200 and answer["secret"].startswith("whsec_") and answer["onFailure"] == "accept", answer
        hook.secret = answer["secret"]
        assert "secret" not in backend.call("GET", "/v1/server/before-send")[1]
        ana, bob, cid = group_of_two(server)
        bob_socket = Device(server, bob.token)
        bob_socket.wait_ready()

        assert ana.send(cid, "hello")[0] == 201
        status, answer = ana.send(cid, "please reject this")
        assert status == 422 and answer["error"]["message"] == "the moderators said no"
        status, replaced = ana.send(cid, "please replace this")
        assert status == 201 and replaced["content"]["text"] == "[removed by the app]"
        # A broken answer follows onFailure (accept here).
        assert ana.send(cid, "garbage answer")[0] == 201
        texts = [bob_socket.wait_event(lambda e: e["type"] == "message.created")["event"]["message"]["content"]["text"] for _ in range(3)]
        assert texts == ["hello", "[removed by the app]", "garbage answer"]
        # A replacement that is not valid content, or would be a system message, is a broken
        # answer too: onFailure decides (accept: the message as written).
        for text in ("a blank swap", "a notice swap"):
            status, kept = ana.send(cid, text)
            assert status == 201 and kept["content"] == {"type": "text", "text": text}, kept
        question = hook.questions[0]
        assert question["type"] == "message.send" and question["conversationId"] == cid
        assert question["user"]["username"] == ana.user["username"] and question["content"] == {"type": "text", "text": "hello"}
        assert hook.bad_signatures == 0
        # An edit is asked about too.
        status, edited = ana.patch(f"/v1/conversations/{cid}/messages/{replaced['id']}", {"content": {"type": "text", "text": "reject me"}})
        assert status == 422 and hook.questions[-1]["type"] == "message.edit" and hook.questions[-1]["messageId"] == replaced["id"]
        # The server API's sends are not asked unless the app says so.
        asked = len(hook.questions)
        status, _ = backend.call("POST", f"/v1/server/conversations/{cid}/messages",
                                 {"from": ana.user["username"], "clientId": "srv-1", "content": {"type": "text", "text": "reject from backend"}})
        assert status == 201 and len(hook.questions) == asked

        # A hook that hangs: each send waits its 300 ms budget at most, then onFailure decides.
        import time
        hook.delay = 3
        started = time.monotonic()
        assert ana.send(cid, "while it hangs")[0] == 201
        assert time.monotonic() - started < 2.0
        assert backend.call("PUT", "/v1/server/before-send", {"url": hook.url, "timeoutMilliseconds": 300, "onFailure": "reject"})[0] == 200
        started = time.monotonic()
        status, answer = ana.send(cid, "while it still hangs")
        assert status == 422 and "could not check" in answer["error"]["message"]
        assert time.monotonic() - started < 2.0
        # Another app, without a hook, is not slowed by this one's.
        other_name = f"other-{uuid.uuid4().hex[:6]}"
        created = server.apps("create", other_name)
        assert created.returncode == 0, created.stderr
        other_key = created.stdout.split("app key:")[1].split()[0]
        other = parley.Client(server, app_key=other_key)
        other.register(name("cy"))
        status, room = other.post("/v1/conversations", {"kind": "group", "members": [], "title": "Fast"})
        assert status == 201, room
        started = time.monotonic()
        for index in range(5):
            assert other.send(room["id"], f"quick {index}")[0] == 201
        assert time.monotonic() - started < 1.0, "the other app's sends do not wait for this app's hook"
        hook.delay = 0
        assert backend.call("DELETE", "/v1/server/before-send")[0] == 204
        assert ana.send(cid, "reject is fine now")[0] == 201
        bob_socket.close()
    finally:
        hook.close()


def test_a_hook_on_a_private_address_is_refused_unless_the_operator_allows_it():
    running = parley.Server()
    try:
        backend = Backend(running)
        status, answer = backend.call("PUT", "/v1/server/before-send", {"url": "http://127.0.0.1:9/hook"})
        assert status == 400 and "private" in answer["error"]["message"].lower(), answer
        status, answer = backend.call("PUT", "/v1/server/before-send", {"url": "http://10.1.2.3/hook", "timeoutMilliseconds": 5000})
        assert status == 400
    finally:
        running.stop()


def metric(server, name):
    import urllib.request
    text = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")), None)


def test_a_report_is_heard_by_the_backend_at_once_counted_and_listed_oldest_first(server):
    backend = Backend(server)
    receiver = Receiver()
    try:
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["report.created", "report.resolved"]})
        assert status == 201, hook
        receiver.secret = hook["secret"]
        ana, bob, cid = group_of_two(server)   # ana owns the group: its moderator
        status, rude = bob.send(cid, "something rude")
        assert status == 201
        open_before = metric(server, "parley_reports_open") or 0
        status, first = ana.post(f"/v1/conversations/{cid}/messages/{rude['id']}/reports", {"reason": "abuse", "note": "not ok"})
        assert status == 201, first
        created = receiver.wait_for(lambda ds: any(d["type"] == "report.created" for d in ds), what="report.created")
        notice = next(d for d in created if d["type"] == "report.created")["data"]
        assert notice["id"] == first["id"] and notice["reason"] == "abuse" and notice["conversationId"] == cid
        assert notice["message"]["id"] == rude["id"] and notice["reporter"]["username"] == ana.user["username"]
        assert metric(server, "parley_reports_open") == open_before + 1
        assert metric(server, "parley_reports_oldest_open_seconds") is not None

        # The backend's queue across conversations, and the admin tool's, oldest first.
        status, second_message = bob.send(cid, "something else rude")
        status, second = ana.post(f"/v1/conversations/{cid}/messages/{second_message['id']}/reports", {"reason": "spam"})
        assert status == 201
        status, queue = backend.call("GET", "/v1/server/reports?state=open")
        assert status == 200
        ours = [r["id"] for r in queue["reports"] if r["conversationId"] == cid]
        assert ours == [first["id"], second["id"]]
        listed = admin(server, "reports")
        assert listed.returncode == 0, listed.stderr
        lines = [line for line in listed.stdout.splitlines() if cid in line]
        assert [line.split("\t")[0] for line in lines] == [first["id"], second["id"]] and "abuse" in lines[0]

        # Resolving is heard too, and leaves the queue; the time it took is in the histogram.
        resolved_before = metric(server, "parley_report_resolution_seconds_count") or 0
        status, _ = ana.post(f"/v1/conversations/{cid}/reports/{first['id']}/resolve", {"resolution": "message_deleted"})
        assert status == 200
        done = receiver.wait_for(lambda ds: any(d["type"] == "report.resolved" for d in ds), what="report.resolved")
        resolved = next(d for d in done if d["type"] == "report.resolved")["data"]
        assert resolved["id"] == first["id"] and resolved["resolution"] == "message_deleted" and resolved["state"] == "resolved"
        assert metric(server, "parley_report_resolution_seconds_count") == resolved_before + 1
        status, queue = backend.call("GET", "/v1/server/reports?state=open")
        assert [r["id"] for r in queue["reports"] if r["conversationId"] == cid] == [second["id"]]
        assert receiver.bad_signatures == 0
    finally:
        receiver.close()


class KeySet:
    """An identity provider's JWKS endpoint (the standard library's HTTP server) and its keys,
    made with `cryptography`; tokens are signed with PyJWT, as an app's backend would."""

    def __init__(self):
        import http.server
        import threading
        self.keys = {}      # kid -> private key
        self.fetches = 0
        keyset = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            wbufsize = 65536

            def do_GET(self):
                keyset.fetches += 1
                body = json.dumps(keyset.jwks()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, kid, kind):
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA" else ec.generate_private_key(ec.SECP256R1())

    def jwks(self):
        import jwt as pyjwt
        keys = []
        for kid, key in self.keys.items():
            algorithm = pyjwt.algorithms.RSAAlgorithm if hasattr(key, "private_numbers") and hasattr(key.private_numbers(), "p") else pyjwt.algorithms.ECAlgorithm
            public = json.loads(algorithm.to_jwk(key.public_key()))
            keys.append({**public, "kid": kid, "use": "sig"})
        return {"keys": keys}

    def token(self, kid, claims):
        import jwt as pyjwt
        key = self.keys[kid]
        algorithm = "RS256" if hasattr(key.private_numbers(), "p") else "ES256"
        return pyjwt.encode(claims, key, algorithm=algorithm, headers={"kid": kid})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_sign_in_with_the_apps_own_tokens_from_pyjwt_hs256_rs256_and_es256(server):
    import time
    import jwt as pyjwt
    backend = Backend(server)
    keyset = KeySet()
    try:
        # HS256 with a key the app sets, checking issuer and audience: exchanged for a session.
        secret = "an app secret of at least 32 bytes, shared with Parley"
        status, settings = backend.call("PUT", "/v1/server/jwt", {"hs256Secret": secret, "issuer": "https://auth.example", "audience": "parley"})
        assert status == 200 and settings["algorithms"] == ["HS256"] and "hs256Secret" not in json.dumps(settings), settings
        subject = f"firebase-{uuid.uuid4().hex[:8]}"
        claims = {"sub": subject, "name": "Fern Example", "iss": "https://auth.example", "aud": "parley", "exp": int(time.time()) + 3600}
        token = pyjwt.encode(claims, secret, algorithm="HS256")
        client = parley.Client(server)
        status, signed_in = client.post("/v1/sessions/jwt", {"token": token, "device": "iphone"})
        assert status == 201 and signed_in["user"]["username"] == subject and signed_in["user"]["displayName"] == "Fern Example", signed_in
        client.token = signed_in["session"]["token"]
        assert client.get("/v1/me")[1]["id"] == signed_in["user"]["id"]
        # The JWT itself is a bearer token, over REST and on the socket.
        direct = parley.Client(server)
        direct.token = token
        assert direct.get("/v1/me")[1]["id"] == signed_in["user"]["id"]
        socket = Device(server, token)
        assert socket.wait_ready()["type"] == "ready"
        socket.close()
        # What is refused, and why.
        for bad, why in [({**claims, "aud": "someone-else"}, "aud"), ({**claims, "exp": int(time.time()) - 3600}, "expired"),
                         ({k: v for k, v in claims.items() if k != "exp"}, "exp")]:
            status, answer = parley.Client(server).post("/v1/sessions/jwt", {"token": pyjwt.encode(bad, secret, algorithm="HS256")})
            assert status == 401 and answer["error"]["code"] == "invalid_token" and why in answer["error"]["message"], answer
        forged = pyjwt.encode(claims, "another secret that is also 32 bytes long!", algorithm="HS256")
        assert parley.Client(server).post("/v1/sessions/jwt", {"token": forged})[1]["error"]["code"] == "invalid_token"
        unsigned = pyjwt.encode(claims, None, algorithm="none")
        assert parley.Client(server).post("/v1/sessions/jwt", {"token": unsigned})[0] == 401
        refused = Device(server, forged)
        assert refused.close_code() == 4001

        # RS256 and ES256 against a key set fetched from a URL (replacing the HS256 key).
        keyset.add("rsa-1", "RSA")
        keyset.add("ec-1", "EC")
        status, settings = backend.call("PUT", "/v1/server/jwt", {"jwksUrl": keyset.url, "audience": "parley"})
        assert status == 200 and sorted(settings["keyIds"]) == ["ec-1", "rsa-1"] and settings["algorithms"] == ["ES256", "RS256"], settings
        for kid in ("rsa-1", "ec-1"):
            user = f"{kid}-{uuid.uuid4().hex[:6]}"
            token = keyset.token(kid, {"sub": user, "aud": "parley", "exp": int(time.time()) + 600})
            status, answer = parley.Client(server).post("/v1/sessions/jwt", {"token": token})
            assert status == 201 and answer["user"]["username"] == user, answer
        status, answer = parley.Client(server).post("/v1/sessions/jwt", {"token": pyjwt.encode(claims, secret, algorithm="HS256")})
        assert status == 401 and "HS256" in answer["error"]["message"], "the HS256 key was replaced"
        # An inline key set works the same (ES256 here).
        inline = KeySet()
        inline.add("inline", "EC")
        inline.close()
        assert backend.call("PUT", "/v1/server/jwt", {"jwks": inline.jwks()})[0] == 200
        token = inline.token("inline", {"sub": f"inline-{uuid.uuid4().hex[:6]}", "exp": int(time.time()) + 600})
        assert parley.Client(server).post("/v1/sessions/jwt", {"token": token})[0] == 201
        assert backend.call("DELETE", "/v1/server/jwt")[0] == 204
        assert parley.Client(server).post("/v1/sessions/jwt", {"token": token})[0] == 401
    finally:
        keyset.close()


def test_a_key_set_url_on_a_private_address_is_refused_unless_allowed():
    running = parley.Server()
    try:
        status, answer = Backend(running).call("PUT", "/v1/server/jwt", {"jwksUrl": "http://127.0.0.1:9/jwks.json"})
        assert status == 400 and "private" in answer["error"]["message"].lower(), answer
    finally:
        running.stop()


def test_a_report_reaches_the_moderators_devices_only(server):
    ana, bob, cid = group_of_two(server)   # ana owns the group
    ana_socket = Device(server, ana.token)
    ana_socket.wait_ready()
    bob_socket = Device(server, bob.token)
    bob_socket.wait_ready()
    status, said = ana.send(cid, "a message bob dislikes")
    assert status == 201
    status, report = bob.post(f"/v1/conversations/{cid}/messages/{said['id']}/reports", {"reason": "inappropriate"})
    assert status == 201
    event = ana_socket.wait_event(lambda e: e["type"] == "report.created")["event"]
    assert event["reportId"] == report["id"] and event["reason"] == "inappropriate" and event["message"]["id"] == said["id"]
    assert event["actorId"] == bob.user["id"] and event["userId"] == ana.user["id"] and "seq" not in event
    bob_socket.drain()
    assert not [e for e in bob_socket.events if e["type"] == "report.created"], "the reporter's devices hear nothing"
    # On resume too: only the moderator's feed has it.
    assert any(e["type"] == "report.created" for e in ana.get("/v1/events?after=0&limit=200")[1]["events"])
    assert not any(e["type"] == "report.created" for e in bob.get("/v1/events?after=0&limit=200")[1]["events"])
    ana_socket.close()
    bob_socket.close()


def test_pusher_client_events_go_through_the_blocklists(server):
    from test_pusher import Raw, backend as pusher_backend, channel_name, pusher_app_id
    server.pusher_id = pusher_app_id(server)
    backend = Backend(server)
    assert backend.call("PUT", "/v1/server/blocklists/pusher", {"mode": "reject", "words": ["scam"], "reason": "no scams"})[0] == 200
    assert backend.call("PUT", "/v1/server/blocklists/pusher-soft", {"mode": "mask", "words": ["darn"]})[0] == 200
    try:
        channel = channel_name("private-")
        sockets = []
        for _ in range(2):
            socket = Raw(server).open()
            auth = pusher_backend(server).authenticate(channel=channel, socket_id=socket.socket_id)
            socket.subscribe(channel, auth=auth["auth"])
            sockets.append(socket)
        ana, bob = sockets
        ana.send("client-note", {"text": "what a scam", "n": 1}, channel=channel)
        refused = ana.until(lambda f: f["event"] == "pusher:error")
        assert refused["data"]["code"] == 4301 and "no scams" in refused["data"]["message"]
        ana.send("client-note", {"text": "darn it", "nested": ["darn"], "n": 2}, channel=channel)
        got = bob.until(lambda f: f["event"] == "client-note")
        assert got["data"] == {"text": "**** it", "nested": ["****"], "n": 2}, "the refused one never arrived; the other masked"
        ana.close(), bob.close()
    finally:
        backend.call("DELETE", "/v1/server/blocklists/pusher")
        backend.call("DELETE", "/v1/server/blocklists/pusher-soft")


def test_a_pusher_client_event_sent_at_once_after_connecting_meets_the_blocklist_just_set(server):
    # A connection learns its socket id only once its node has the app's blocklists as they
    # are now: a client event sent straight away is neither refused nor let through unchecked.
    from test_pusher import Raw, backend as pusher_backend, channel_name, pusher_app_id
    server.pusher_id = pusher_app_id(server)
    backend = Backend(server)
    try:
        for round in range(8):
            word = f"fresh{round}word"
            assert backend.call("PUT", "/v1/server/blocklists/pusher-fresh", {"mode": "mask", "words": [word]})[0] == 200
            channel = channel_name("private-")
            sockets = []
            for _ in range(2):
                socket = Raw(server).open()
                auth = pusher_backend(server).authenticate(channel=channel, socket_id=socket.socket_id)
                socket.subscribe(channel, auth=auth["auth"])
                sockets.append(socket)
            ana, bob = sockets
            ana.send("client-note", {"text": f"say {word}"}, channel=channel)
            got = bob.until(lambda f: f["event"] == "client-note")
            assert got["data"] == {"text": "say " + "*" * len(word)}, f"round {round}"
            ana.send("pusher:ping")
            answer = ana.until(lambda f: f["event"] in ("pusher:pong", "pusher:error"))
            assert answer["event"] == "pusher:pong", answer
            ana.close(), bob.close()
    finally:
        backend.call("DELETE", "/v1/server/blocklists/pusher-fresh")


@pytest.mark.skipif(not parley.ON_POSTGRES, reason="holds a lock on the server's PostgreSQL table")
def test_a_pusher_connection_is_established_only_once_its_node_has_the_blocklists():
    # The blocklists cannot be read (a lock holds the table): the client does not get its socket
    # id, so it cannot send a client event the node would have to refuse or let through unchecked.
    from test_pusher import Raw, backend as pusher_backend, channel_name, pusher_app_id
    server = parley.Server()
    lock = None
    try:
        server.pusher_id = pusher_app_id(server)
        backend = Backend(server)
        assert backend.call("PUT", "/v1/server/blocklists/locked", {"mode": "mask", "words": ["lockedword"]})[0] == 200
        lock = subprocess.Popen(["psql", "-qtA", parley.database_for(server.data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        lock.stdin.write("BEGIN; LOCK TABLE blocklist IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
        lock.stdin.flush()
        assert lock.stdout.readline().strip() == "locked"
        ana = Raw(server)
        with pytest.raises(TimeoutError):
            ana.next(timeout=0.5)
        lock.stdin.write("COMMIT;\n")
        lock.stdin.close()
        lock.wait(timeout=10)
        ana.established = json.loads(ana.until(lambda f: f["event"] == "pusher:connection_established")["data"])
        bob = Raw(server).open()
        channel = channel_name("private-")
        for socket in (ana, bob):
            socket.subscribe(channel, auth=pusher_backend(server).authenticate(channel=channel, socket_id=socket.socket_id)["auth"])
        ana.send("client-note", {"text": "lockedword"}, channel=channel)
        assert bob.until(lambda f: f["event"] == "client-note")["data"] == {"text": "**********"}
        ana.close(), bob.close()
    finally:
        if lock and lock.poll() is None:
            lock.kill()
        server.stop()


def test_a_block_hides_a_person_in_a_group_live_on_resume_and_in_every_read(server):
    ana = parley.Client(server).register(name("ana"))
    bob = parley.Client(server).register(name("bob"))
    cy = parley.Client(server).register(name("cy"))
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "Dinner",
                                                  "members": [bob.user["username"], cy.user["username"]]})
    assert status == 201
    cid = room["id"]
    phone = Device(server, ana.token)
    phone.wait_ready()
    bobs = Device(server, bob.token)
    bobs.wait_ready()
    cys = Device(server, cy.token)
    cys.wait_ready()
    assert ana.request("PUT", f"/v1/me/blocks/{bob.user['id']}")[0] == 204

    # Live: bob's message reaches ana's socket as a stub; cy gets it whole.
    sent = bobs.send_text(cid, "tacos tonight?")
    assert sent["type"] == "ack"
    mid = sent["result"]["message"]["id"]
    stub = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == mid)["event"]["message"]
    assert stub["hidden"] == "blocked" and "content" not in stub and stub["sender"]["id"] == bob.user["id"]
    whole = cys.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == mid)["event"]["message"]
    assert whole["content"]["text"] == "tacos tonight?" and "hidden" not in whole
    # Bob's reaction and typing never reach ana; cy's message after them does, in order.
    assert bobs.command("reaction.add", conversationId=cid, messageId=mid, emoji="🌮")["type"] == "ack"
    assert bobs.command("typing.start", conversationId=cid)["type"] == "ack"
    marker = cys.send_text(cid, "marker")["result"]["message"]["id"]
    phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == marker)
    seen = [f for f in phone.frames if f["type"] == "typing" or (f["type"] == "event" and f["event"]["type"] == "reaction.added")]
    assert seen == [], "ana saw bob's reaction or typing"
    answer = phone.command("presence.query", userIds=[bob.user["id"], cy.user["id"]])
    assert [u["userId"] for u in answer["result"]["users"]] == [cy.user["id"]], "bob's presence is not ana's to see"
    cys.wait_event(lambda e: e["type"] == "reaction.added" and e.get("userId") == bob.user["id"])
    # Reads: history stub, search and unread leave it out.
    status, page = ana.get(f"/v1/conversations/{cid}/messages")
    hidden = [m for m in page["messages"] if m["id"] == mid]
    assert hidden and hidden[0]["hidden"] == "blocked" and "content" not in hidden[0] and "reactions" not in hidden[0]
    status, found = ana.get("/v1/search?q=tacos")
    assert status == 200 and found["messages"] == []
    assert [m["id"] for m in cy.get("/v1/search?q=tacos")[1]["messages"]] == [mid]
    status, view = ana.get(f"/v1/conversations/{cid}")
    assert view["unreadCount"] == 1, "cy's marker only"

    # Resume: a device that was away catches up with the stub, and without the reaction.
    away = phone.position
    phone.close()
    _, later = bob.send(cid, "tacos at 8")
    tablet = Device(server, ana.token, position=away)
    tablet.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == later["id"])
    replayed = [e for e in tablet.events if e["type"] == "message.created" and e["message"]["id"] == later["id"]][0]["message"]
    assert replayed["hidden"] == "blocked" and "content" not in replayed
    status, feed = ana.get(f"/v1/events?after={away}")
    assert [e["message"]["hidden"] for e in feed["events"] if e["type"] == "message.created"] == ["blocked"]

    # Bob cannot add ana anywhere new; he is not told why.
    status, refused = bob.post("/v1/conversations", {"kind": "group", "title": "Party", "members": [ana.user["username"]]})
    assert status == 403 and "block" not in refused["error"]["message"]

    # Unblocked: live frames and history are whole again.
    assert ana.request("DELETE", f"/v1/me/blocks/{bob.user['id']}")[0] == 204
    again = bobs.send_text(cid, "burritos then")["result"]["message"]["id"]
    shown = tablet.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == again)["event"]["message"]
    assert shown["content"]["text"] == "burritos then" and "hidden" not in shown
    status, page = ana.get(f"/v1/conversations/{cid}/messages")
    assert all("hidden" not in m for m in page["messages"])
    for device in (tablet, bobs, cys):
        device.close()
