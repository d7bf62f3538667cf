#!/usr/bin/env python3
"""What an app's CI does with `parley-server --test-mode` (docs/test-mode.md): tests of the app's
own rules that depend on time, each finished in seconds of wall time because the test moves the
server's clock instead of waiting.

    parley-server --test-mode --data-dir /tmp/ci-parley &
    python3 Examples/TestMode/app_ci.py --server http://127.0.0.1:8080 --app-key pk_… --app-secret sk_…

The tests:

- a member banned from a channel for an hour cannot join it, and can after an hour of test time;
- a message scheduled for tomorrow morning reaches a connected phone when the clock gets there,
  not before;
- a phone that is asleep gets a push (the server's built-in APNs keeps it), and the app's
  notification extension fetches the message the push names.

Each prints its steps and the wall time it took (at most 10 s each); the run ends with
"TestMode: ok" (exit 0), or says what did not happen (exit 1). Needs Python 3.9+ and the
`websockets` package (the phone's socket).
"""
import argparse
import datetime
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

from websockets.sync.client import connect


class Failed(Exception):
    pass


class Parley:
    """REST with a user's token or the app secret."""

    def __init__(self, server, app_key, token=None, secret=None):
        self.server, self.app_key, self.token, self.secret = server.rstrip("/"), app_key, token, secret

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.secret:
            headers["Authorization"] = f"Bearer {self.secret}"
        else:
            headers["X-Parley-App-Key"] = self.app_key
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.server + path, method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null"), response.headers
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null"), error.headers

    def register(self, name):
        status, signed_in, _ = self.call("POST", "/v1/users", {"username": name, "password": "correct horse battery", "device": "ci"})
        if status != 201:
            raise Failed(f"registering {name}: {status} {signed_in}")
        return Parley(self.server, self.app_key, token=signed_in["session"]["token"]), signed_in["user"]


def server_clock(backend):
    status, body, headers = backend.call("GET", "/v1/test/clock")
    if status == 404:
        raise Failed("this server is not in test mode: start it with parley-server --test-mode")
    if headers.get("Parley-Test-Mode") != "on":
        raise Failed("the server did not say Parley-Test-Mode: on")
    return datetime.datetime.fromisoformat(body["now"].replace("Z", "+00:00"))


def advance(backend, seconds):
    status, body, _ = backend.call("POST", "/v1/test/clock", {"advanceSeconds": seconds})
    if status != 200:
        raise Failed(f"moving the clock: {status} {body}")
    print(f"  … the server's clock moved {seconds} s (now {body['now']})")


def iso(when):
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def test_a_ban_for_an_hour_ends_after_an_hour(app, backend):
    owner, _ = app.register(f"mod{uuid.uuid4().hex[:6]}")
    bob, bob_user = app.register(f"bob{uuid.uuid4().hex[:6]}")
    status, channel, _ = owner.call("POST", "/v1/conversations", {"kind": "public", "title": f"town-{uuid.uuid4().hex[:6]}"})
    bob.call("POST", f"/v1/conversations/{channel['id']}/join")
    until = server_clock(backend) + datetime.timedelta(hours=1)
    status, _, _ = owner.call("POST", f"/v1/conversations/{channel['id']}/bans", {"userId": bob_user["id"], "until": iso(until)})
    if status != 201:
        raise Failed(f"the ban: {status}")
    print("  bob is banned for an hour")
    status, error, _ = bob.call("POST", f"/v1/conversations/{channel['id']}/join")
    if status != 403 or error["error"]["code"] != "user_banned":
        raise Failed(f"bob joined while banned: {status}")
    print("  bob cannot join (user_banned)")
    advance(backend, 3601)
    status, _, _ = bob.call("POST", f"/v1/conversations/{channel['id']}/join")
    if status != 200:
        raise Failed(f"an hour later bob still cannot join: {status}")
    print("  an hour later bob joins again")


def test_a_scheduled_message_arrives_at_its_time(app, backend):
    ana, _ = app.register(f"ana{uuid.uuid4().hex[:6]}")
    bob, bob_user = app.register(f"bob{uuid.uuid4().hex[:6]}")
    status, room, _ = ana.call("POST", "/v1/conversations", {"kind": "group", "title": "mornings", "members": [bob_user["username"]]})
    tomorrow = server_clock(backend) + datetime.timedelta(days=1)
    status, planned, _ = ana.call("POST", f"/v1/conversations/{room['id']}/scheduled", {
        "sendAt": iso(tomorrow), "message": {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "good morning"}}})
    if status != 201:
        raise Failed(f"scheduling: {status} {planned}")
    print(f"  ana schedules 'good morning' for {iso(tomorrow)}")
    url = app.server.replace("http", "ws", 1) + "/v1/realtime"
    with connect(url, additional_headers={"X-Parley-App-Key": app.app_key}, open_timeout=5) as phone:
        phone.send(json.dumps({"type": "auth", "token": bob.token}))
        while json.loads(phone.recv(timeout=5))["type"] != "ready":
            pass
        print("  bob's phone is connected")
        advance(backend, 12 * 3600)
        try:
            frame = json.loads(phone.recv(timeout=1.5))
            if frame.get("event", {}).get("type") == "message.created":
                raise Failed("the message came half a day early")
        except TimeoutError:
            print("  half a day later: nothing yet")
        advance(backend, 12 * 3600 + 1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            frame = json.loads(phone.recv(timeout=max(0.1, deadline - time.monotonic())))
            event = frame.get("event", {})
            if event.get("type") == "message.created" and event["message"]["content"].get("text") == "good morning":
                print("  the next morning bob's phone shows 'good morning'")
                return
        raise Failed("the scheduled message did not arrive")


def test_a_phone_asleep_gets_a_push_the_extension_can_resolve(app, backend):
    ana, _ = app.register(f"ana{uuid.uuid4().hex[:6]}")
    bob, bob_user = app.register(f"bob{uuid.uuid4().hex[:6]}")
    token = uuid.uuid4().hex + uuid.uuid4().hex
    status, _, _ = bob.call("POST", "/v1/devices", {"platform": "apns", "token": token})
    if status != 201:
        raise Failed(f"registering bob's iPhone: {status}")
    status, room, _ = ana.call("POST", "/v1/conversations", {"kind": "direct", "members": [bob_user["username"]]})
    status, message, _ = ana.call("POST", f"/v1/conversations/{room['id']}/messages",
                                  {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "are you up?"}})
    print("  ana writes to bob, whose phone is asleep")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        status, found, _ = backend.call("GET", f"/v1/test/pushes?token={token}")
        if found["pushes"]:
            break
        time.sleep(0.05)
    else:
        raise Failed("no push reached the built-in APNs")
    payload = found["pushes"][0]["payload"]
    print(f"  APNs got: {json.dumps(payload['aps']['alert'])}")
    # What the app's notification service extension does with the payload's `parley` keys.
    keys = payload["parley"]
    status, fetched, _ = bob.call("GET", f"/v1/conversations/{keys['conversationId']}/messages/{keys['messageId']}")
    if status != 200 or fetched["content"]["text"] != "are you up?":
        raise Failed(f"the extension could not fetch the message: {status}")
    print("  the extension fetches the message the push names")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="the test-mode server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--app-key", required=True, help="the app key (pk_…) the server printed")
    parser.add_argument("--app-secret", required=True, help="the app secret (sk_…): the test clock is the backend's")
    arguments = parser.parse_args()
    app = Parley(arguments.server, arguments.app_key)
    backend = Parley(arguments.server, arguments.app_key, secret=arguments.app_secret)
    try:
        for test in (test_a_ban_for_an_hour_ends_after_an_hour, test_a_scheduled_message_arrives_at_its_time,
                     test_a_phone_asleep_gets_a_push_the_extension_can_resolve):
            print(test.__name__.removeprefix("test_").replace("_", " "))
            started = time.monotonic()
            test(app, backend)
            took = time.monotonic() - started
            if took > 10:
                raise Failed(f"{test.__name__} took {took:.1f} s of wall time (at most 10)")
            print(f"  ok in {took:.2f} s")
    except (Failed, OSError) as error:
        print(f"TestMode: FAILED: {error}")
        return 1
    print("TestMode: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
