#!/usr/bin/env python3
"""The Pusher tutorial's backend (its Express `index.js`), rewritten against Parley's server
API instead of Pusher's HTTP API: the app's backend owns its users and talks to Parley with
the app secret; Parley tells it about every message by webhook.

What the tutorial's backend did, and what it does here:

- `POST /messages {text, sender}` stored the message in its SQLite file (for an ID) and
  triggered `new_message`. Here the backend creates the sender as a Parley user the first
  time (`POST /v1/server/users`: no Parley password, the app knows its users), posts as them
  into the `chatroom` channel (`POST /v1/server/conversations/{id}/messages` with `from`), and
  answers Parley's message id as the ID;
- the phones were anonymous Pusher clients. Here each phone asks the backend to log in
  (`POST /login {name}`) and gets a Parley session token the backend issued
  (`POST /v1/server/users/{name}/sessions`); with it the phone reads the room like any client;
- the backend hears every message, its own and those sent from phones, by a signed webhook
  (`message.created`), verified with the endpoint's secret as docs/webhooks.md says.

    python3 Examples/PusherBackend/backend_flow.py --server http://127.0.0.1:8080 --app-key pk_… --app-secret sk_…

The server must be able to reach this backend on 127.0.0.1: start it with
`--webhooks-allow-private` (on a real deployment the backend has a public https URL).
Prints each step and ends with "PusherBackend: ok" (exit 0), or says what did not happen (exit 1).
"""
import argparse
import hashlib
import hmac
import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Parley:
    """The server API with the app secret."""

    def __init__(self, server, secret):
        self.server = server.rstrip("/")
        self.secret = secret

    def call(self, method, path, body=None, token=None, app_key=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token or self.secret}")
        if app_key:
            request.add_header("X-Parley-App-Key", app_key)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


def verify(secret, header, body, tolerance=300):
    """docs/webhooks.md, "Verifying a delivery"."""
    fields = [part.split("=", 1) for part in header.split(",") if "=" in part]
    timestamp = int(dict(fields).get("t", "0"))
    if abs(time.time() - timestamp) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return any(key == "v1" and hmac.compare_digest(expected, value) for key, value in fields)


class Backend:
    """The tutorial's backend: its routes, and a webhook receiver beside them."""

    def __init__(self, parley):
        self.parley = parley
        self.webhook_secret = None
        self.heard = []                  # message.created deliveries, in arrival order
        self.seen_ids = set()            # at least once: a repeat is acknowledged and ignored
        self.arrived = threading.Condition()
        backend = self

        class Routes(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/parley-webhook":
                    status = backend.webhook(self.headers, body)
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                fields = json.loads(body or b"{}")
                if self.path == "/login":
                    status, answer = backend.login(fields["name"])
                elif self.path == "/messages":
                    status, answer = backend.message(fields["text"], fields["sender"])
                else:
                    status, answer = 404, {"error": "no such route"}
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Routes)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def setup(self):
        """At start: the room, and the webhook that tells the backend about every message."""
        status, room = self.parley.call("POST", "/v1/server/conversations", {"kind": "public", "title": f"chatroom {uuid.uuid4().hex[:6]}"})
        assert status == 201, (status, room)
        self.room = room["id"]
        status, hook = self.parley.call("POST", "/v1/server/webhooks", {"url": self.url + "/parley-webhook", "events": ["message.created"],
                                                                         "description": "PusherBackend example"})
        assert status == 201, (status, hook)
        self.hook = hook["id"]
        self.webhook_secret = hook["secret"]
        print(f"backend: room {self.room}, webhook {self.hook}")

    def ensure_user(self, name):
        status, user = self.parley.call("POST", "/v1/server/users", {"username": name, "displayName": name.title()})
        assert status in (200, 201), (status, user)
        # Everyone who talks is in the room.
        self.parley.call("POST", f"/v1/server/conversations/{self.room}/members", {"usernames": [name]})
        return user

    def login(self, name):
        self.ensure_user(name)
        return self.parley.call("POST", f"/v1/server/users/{name}/sessions", {"device": f"{name}-phone"})

    def message(self, text, sender):
        self.ensure_user(sender)
        status, message = self.parley.call("POST", f"/v1/server/conversations/{self.room}/messages",
                                           {"from": sender, "clientId": uuid.uuid4().hex, "content": {"type": "text", "text": text}})
        if status not in (200, 201):
            return status, message
        return 200, {"ID": message["id"], "text": text, "sender": sender}

    def webhook(self, headers, body):
        if not verify(self.webhook_secret or "", headers.get("Parley-Signature", ""), body):
            return 400
        delivery = json.loads(body)
        with self.arrived:
            if delivery["id"] not in self.seen_ids:
                self.seen_ids.add(delivery["id"])
                self.heard.append(delivery)
                self.arrived.notify_all()
        return 204

    def wait_for(self, count, timeout=20):
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.heard) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.arrived.wait(remaining)
        return True


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True)
    parser.add_argument("--app-key", required=True, help="the app key the phones' build carries")
    parser.add_argument("--app-secret", required=True, help="the app secret, for the backend only")
    args = parser.parse_args()
    parley = Parley(args.server, args.app_secret)
    backend = Backend(parley)
    backend.setup()
    names = [f"neo{uuid.uuid4().hex[:4]}", f"trinity{uuid.uuid4().hex[:4]}"]

    # The phones log in through the backend, which hands them Parley tokens.
    tokens = {name: post(backend.url + "/login", {"name": name})["session"]["token"] for name in names}
    print(f"phones: {', '.join(names)} logged in with tokens the backend issued")

    # The tutorial's POST /messages: the backend posts as the sender and answers the ID.
    sent = []
    for index, (name, text) in enumerate([(names[0], "Hello"), (names[1], "Hi there"), (names[0], "How are you?")]):
        answer = post(backend.url + "/messages", {"text": text, "sender": name})
        sent.append(answer["ID"])
        print(f"[Sent] {name}: {text} (ID {answer['ID']})")

    # The backend hears each message by webhook, in order.
    if not backend.wait_for(len(sent)):
        print(f"the backend heard {len(backend.heard)} of {len(sent)} messages by webhook")
        return 1
    heard = [d["data"]["message"]["id"] for d in backend.heard]
    if heard[:len(sent)] != sent:
        print(f"the webhook order {heard} is not the send order {sent}")
        return 1
    for delivery in backend.heard:
        message = delivery["data"]["message"]
        print(f"[Webhook {delivery['type']}] {message['sender']['username']}: {message['content']['text']}")

    # A phone reads the room with the token the backend issued (and the app key its build
    # carries), as any client does: the SDK's `signIn(token:)`.
    status, history = parley.call("GET", f"/v1/conversations/{backend.room}/messages", token=tokens[names[1]], app_key=args.app_key)
    if status != 200 or [m["id"] for m in history["messages"]] != sent:
        print(f"{names[1]}'s phone does not see the three messages: {status} {history}")
        return 1
    print(f"phone: {names[1]} reads the room: {', '.join(m['content']['text'] for m in history['messages'])}")
    parley.call("DELETE", f"/v1/server/webhooks/{backend.hook}")
    print("PusherBackend: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
