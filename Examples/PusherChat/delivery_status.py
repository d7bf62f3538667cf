#!/usr/bin/env python3
"""The Pusher tutorial ("message delivery status in iOS using Pusher") run unchanged against
Parley: only the host, port and keys differ from what the tutorial configured.

Its two halves, as the tutorial wrote them:

- the backend (the tutorial's Express `index.js`, here Python's standard http.server with
  Pusher's own server library): `POST /messages {text, sender}` stores the message in its own
  SQLite database, which gives it an ID, and triggers `new_message` on `chatroom`;
  `POST /delivered {ID}` triggers `message_delivered`;
- the app (PusherSwift in the tutorial, here the `pysher` client): anonymous senders; a
  message shows "Sending" until the backend answers with its ID ("Sent"), and every other
  phone that receives `new_message` confirms by POSTing `/delivered`, which turns the
  sender's bubble "Delivered". The app's POSTs are form bodies, as Alamofire sends them.

    python3 Examples/PusherChat/delivery_status.py --server http://127.0.0.1:8080 \\
        --app-key pk_… --app-secret sk_… --pusher-app-id 243088142

Prints each bubble's status as it changes and ends with "PusherChat: ok" (exit 0), or says
what did not happen (exit 1).
"""
import argparse
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pusher
import pysher
import pysher.channel


def start_backend(pusher_client):
    """The tutorial's index.js: two routes over its own SQLite file."""
    database = sqlite3.connect(os.path.join(tempfile.mkdtemp(prefix="pusher-chat-"), "database.sqlite"),
                               check_same_thread=False)
    database.execute("CREATE TABLE Messages (ID INTEGER PRIMARY KEY, Sender TEXT, Message TEXT)")
    lock = threading.Lock()

    class Routes(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(length).decode()).items()}
            if self.path == "/messages":
                payload = {"text": body["text"], "sender": body["sender"]}
                with lock:
                    cursor = database.execute("INSERT INTO Messages (Sender, Message) VALUES (?, ?)", (payload["sender"], payload["text"]))
                    database.commit()
                payload["ID"] = cursor.lastrowid
                pusher_client.trigger("chatroom", "new_message", payload)
                payload["success"] = 200
                self.answer(payload)
            elif self.path == "/delivered":
                pusher_client.trigger("chatroom", "message_delivered", {"ID": str(body["ID"])})
                self.answer({"success": 200})
            else:
                self.send_error(404)

        def answer(self, value):
            data = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Routes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


class Phone:
    """The tutorial's ChatViewController: an anonymous sender on `chatroom`."""

    def __init__(self, name, api_endpoint, host, port, key):
        self.sender_id = f"anon-{uuid.uuid4().hex[:6]}"
        self.name = name
        self.api = api_endpoint
        self.messages = []          # [{"id", "text", "sender", "status"}]
        self.delivered_early = set()  # confirmations that beat the backend's answer to this phone
        self.changed = threading.Condition()
        self.pusher = pysher.Pusher(key, custom_host=host, port=port, secure=False, log_level=40)
        connected = threading.Event()
        self.pusher.connection.bind("pusher:connection_established", lambda _: connected.set())
        self.pusher.connect()
        if not connected.wait(10):
            raise SystemExit(f"{name} could not connect to {host}:{port}")
        subscribed = threading.Event()
        # pysher 1.0.8's subscribe() sends pusher:subscribe before it registers the channel, so
        # a fast server's answer can arrive for a channel it does not know yet and be dropped.
        # Register (and bind) first, then subscribe, as PusherSwift and pusher-js do.
        channel = pysher.channel.Channel("chatroom", self.pusher.connection)
        self.pusher.channels["chatroom"] = channel
        channel.bind("pusher_internal:subscription_succeeded", lambda *_: subscribed.set())
        channel.bind("new_message", self.on_new_message)
        channel.bind("message_delivered", self.on_delivered)
        self.pusher.connection.send_event("pusher:subscribe", {"channel": "chatroom"})
        if not subscribed.wait(10):
            raise SystemExit(f"{name} could not subscribe to chatroom")

    def hit_endpoint(self, path, parameters):
        """Alamofire's default: a form-encoded POST."""
        request = urllib.request.Request(self.api + path, data=urllib.parse.urlencode(parameters).encode(), method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def send(self, text):
        bubble = {"id": None, "text": text, "sender": self.sender_id, "status": "Sending"}
        self.update(bubble, None)
        answer = self.hit_endpoint("/messages", {"text": text, "sender": self.sender_id})
        with self.changed:
            bubble["id"] = answer["ID"]
            self.update(bubble, "Sent")
            if bubble["id"] in self.delivered_early:
                self.update(bubble, "Delivered")
        return bubble

    def on_new_message(self, data):
        message = json.loads(data)
        if message["sender"] == self.sender_id:
            return
        bubble = {"id": message["ID"], "text": message["text"], "sender": message["sender"], "status": "Delivered"}
        self.update(bubble, None)
        self.hit_endpoint("/delivered", {"ID": message["ID"]})

    def on_delivered(self, data):
        delivered = int(json.loads(data)["ID"])
        with self.changed:
            mine = [b for b in self.messages if b["sender"] == self.sender_id and b["id"] == delivered]
            if not mine:
                self.delivered_early.add(delivered)
            for bubble in mine:
                if bubble["status"] != "Delivered":
                    self.update(bubble, "Delivered")

    def update(self, bubble, status):
        with self.changed:
            if status is None:
                self.messages.append(bubble)
            else:
                bubble["status"] = status
            print(f"  {self.name}: [{bubble['status']}] {bubble['sender']}: {bubble['text']}", flush=True)
            self.changed.notify_all()

    def wait_for(self, predicate, what, timeout=15):
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self.messages), timeout=timeout):
                raise SystemExit(f"{self.name} never saw {what}; it has {self.messages}")

    def close(self):
        self.pusher.disconnect(timeout=5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="Parley's URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--app-key", required=True, help="the app key (Pusher's key)")
    parser.add_argument("--app-secret", required=True, help="the app secret (Pusher's secret)")
    parser.add_argument("--pusher-app-id", required=True, help="the numeric pusher app id parley-server printed")
    options = parser.parse_args()
    host, port = urllib.parse.urlsplit(options.server).hostname, urllib.parse.urlsplit(options.server).port or 80

    client = pusher.Pusher(app_id=options.pusher_app_id, key=options.app_key, secret=options.app_secret,
                           host=host, port=port, ssl=False)
    api, backend = start_backend(client)
    print(f"Backend (the tutorial's index.js) on {api}; Pusher endpoint {host}:{port}")
    phones = [Phone(name, api, host, port, options.app_key) for name in ("phone A", "phone B", "phone C")]
    a, b, c = phones
    try:
        sent = a.send("Is anyone in the chatroom?")
        print(f"  stored by the backend with ID {sent['id']}")
        for phone in (b, c):
            phone.wait_for(lambda messages: any(m["id"] == sent["id"] for m in messages), "A's message")
        a.wait_for(lambda messages: any(m["id"] == sent["id"] and m["status"] == "Delivered" for m in messages),
                   "its own message marked Delivered")
        reply = b.send("Yes, B here")
        a.wait_for(lambda messages: any(m["id"] == reply["id"] for m in messages), "B's reply")
        b.wait_for(lambda messages: any(m["id"] == reply["id"] and m["status"] == "Delivered" for m in messages),
                   "its reply marked Delivered")
        statuses = [m["status"] for m in a.messages if m["sender"] == a.sender_id]
        if statuses != ["Delivered"]:
            raise SystemExit(f"A's bubble ended {statuses}, not Delivered")
    finally:
        for phone in phones:
            phone.close()
        backend.shutdown()
    print("PusherChat: ok")


if __name__ == "__main__":
    sys.exit(main())
