"""The Pusher Channels protocol (issue 15, part 1; docs/pusher.md) against the real
parley-server binary, spoken by clients nobody here wrote: Pusher's server library `pusher`
(the Pusher tutorial's backend used its Node twin) and the `pysher` client, plus raw
`websockets` frames for the error paths a stock client never sends.
"""
import json
import queue
import threading
import time
import uuid

import pusher
import pysher
import pysher.channel
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from parley import Server, wait_until

# websockets 17 would rather its sync client were a context manager; these tests close sockets themselves.
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")


@pytest.fixture(scope="module")
def server():
    running = Server("--pusher-history", "5", "--pusher-client-events-per-second", "5")
    running.pusher_id = pusher_app_id(running)
    yield running
    assert running.stop() == 0


def pusher_app_id(server):
    listing = server.apps("list")
    assert listing.returncode == 0, listing.stderr
    line = next(line for line in listing.stdout.splitlines() if line.startswith("default\t"))
    return line.split("pusher app id ")[1].split()[0]


def backend(server, **overrides):
    """Pusher's server library, pointed at Parley: only host, port and the keys change."""
    options = dict(app_id=server.pusher_id, key=server.app_key, secret=server.app_secret,
                   host=server.host, port=server.port, ssl=False, timeout=10)
    options.update(overrides)
    return pusher.Pusher(**options)


def channel_name(prefix=""):
    return f"{prefix}room-{uuid.uuid4().hex[:10]}"


class Raw:
    """A raw Pusher socket: frames as sent, for what stock clients never do."""

    def __init__(self, server, key=None, protocol="7", query=None):
        self.server = server
        url = f"ws://{server.host}:{server.port}/app/{key or server.app_key}"
        url += query if query is not None else f"?protocol={protocol}&client=raw&version=1.0"
        # max_queue=None: a socket the test does not read (a presence member while others join)
        # keeps reading anyway, so its close handshake is not stuck behind unread frames.
        self.ws = connect(url, open_timeout=10, max_size=2 ** 20, max_queue=None)
        self.established = None

    def open(self):
        frame = self.next()
        assert frame["event"] == "pusher:connection_established", frame
        self.established = json.loads(frame["data"])
        return self

    @property
    def socket_id(self):
        return self.established["socket_id"]

    def send(self, event, data=None, channel=None):
        frame = {"event": event, "data": data if data is not None else {}}
        if channel is not None:
            frame["channel"] = channel
        self.ws.send(json.dumps(frame))

    def next(self, timeout=10):
        return json.loads(self.ws.recv(timeout=timeout))

    def until(self, predicate, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            frame = self.next(timeout=max(0.01, deadline - time.monotonic()))
            if predicate(frame):
                return frame

    def subscribe(self, channel, auth=None, channel_data=None, position=None, expect="pusher_internal:subscription_succeeded"):
        data = {"channel": channel}
        if auth is not None:
            data["auth"] = auth
        if channel_data is not None:
            data["channel_data"] = channel_data
        if position is not None:
            data["position"] = position
        self.send("pusher:subscribe", data)
        return self.until(lambda f: f.get("channel") == channel and f["event"] in (expect, "pusher:subscription_error")
                          or f["event"] == "pusher:error")

    def silent(self, seconds=0.3):
        """Nothing arrives for `seconds` (used after a barrier, never as a wait)."""
        try:
            frame = self.ws.recv(timeout=seconds)
        except TimeoutError:
            return True
        raise AssertionError(f"unexpected frame {frame}")

    def close(self):
        self.ws.close()


class Listener:
    """A pysher client (the library the Pusher docs list for Python) bound to events, with a queue."""

    def __init__(self, server, user_data=None):
        self.events = queue.Queue()
        self.connected = threading.Event()
        self.client = pysher.Pusher(server.app_key, custom_host=server.host, port=server.port, secure=False,
                                    secret=server.app_secret, user_data=user_data, log_level=40)
        self.client.connection.bind("pusher:connection_established", lambda _: self.connected.set())
        self.client.connect()
        assert self.connected.wait(10), "pysher did not connect"

    def listen(self, channel, *events):
        """Subscribes as pysher does, but with the channel registered and bound first: pysher
        1.0.8 sends pusher:subscribe before registering the channel, so a fast answer can be
        dropped (PusherSwift and pusher-js register first). The signing is pysher's own."""
        subscribed = threading.Event()
        ch = pysher.channel.Channel(channel, self.client.connection)
        self.client.channels[channel] = ch
        ch.bind("pusher_internal:subscription_succeeded", lambda *_: subscribed.set())
        for event in events:
            ch.bind(event, lambda data, event=event, *rest: self.events.put((event, data, rest)))
        data = {"channel": channel}
        if channel.startswith("private-"):
            data["auth"] = self.client._generate_auth_token(channel)
        self.client.connection.send_event("pusher:subscribe", data)
        assert subscribed.wait(10), f"pysher could not subscribe to {channel}"
        return ch

    def next(self, timeout=10):
        return self.events.get(timeout=timeout)

    def close(self):
        self.client.disconnect(timeout=5)


# ---------------------------------------------------------------- the tutorial's own calls

def test_a_triggered_event_reaches_pysher_as_pusher_would_deliver_it(server):
    room = channel_name()
    phone = Listener(server)
    try:
        phone.listen(room, "new_message")
        assert backend(server).trigger(room, "new_message", {"text": "hi", "sender": "anon-1", "ID": 1}) == {}
        event, data, _ = phone.next()
        assert event == "new_message" and json.loads(data) == {"text": "hi", "sender": "anon-1", "ID": 1}
    finally:
        phone.close()


def test_one_trigger_to_many_channels_and_a_batch(server):
    rooms = [channel_name() for _ in range(3)]
    raw = Raw(server).open()
    for room in rooms:
        assert raw.subscribe(room)["event"] == "pusher_internal:subscription_succeeded"
    backend(server).trigger(rooms, "fanned", {"n": 1})
    seen = {raw.until(lambda f: f["event"] == "fanned")["channel"] for _ in rooms}
    assert seen == set(rooms)
    answer = backend(server).trigger_batch([{"channel": rooms[0], "name": "b1", "data": "one"},
                                            {"channel": rooms[1], "name": "b2", "data": {"two": 2}}])
    assert answer == {}
    first = raw.until(lambda f: f["event"] == "b1")
    second = raw.until(lambda f: f["event"] == "b2")
    assert first["data"] == "one" and json.loads(second["data"]) == {"two": 2}
    # Parley's extra field: each stored event carries its position, in order.
    assert isinstance(first["position"], int) and second["position"] > first["position"]
    raw.close()


def test_socket_id_excludes_the_sender(server):
    room = channel_name()
    sender, other = Raw(server).open(), Raw(server).open()
    for socket in (sender, other):
        socket.subscribe(room)
    backend(server).trigger(room, "echo", {"x": 1}, socket_id=sender.socket_id)
    assert other.until(lambda f: f["event"] == "echo")["channel"] == room
    backend(server).trigger(room, "barrier", {})
    assert sender.until(lambda f: f["event"] in ("echo", "barrier"))["event"] == "barrier"
    sender.close(), other.close()


def test_channel_queries(server):
    room, presence = channel_name(), channel_name("presence-")
    client = backend(server)
    a, b = Raw(server).open(), Raw(server).open()
    a.subscribe(room), b.subscribe(room)
    for socket, user in ((a, "u1"), (b, "u2")):
        auth = client.authenticate(channel=presence, socket_id=socket.socket_id, custom_data={"user_id": user})
        assert socket.subscribe(presence, auth=auth["auth"], channel_data=auth["channel_data"])["event"].endswith("succeeded")
    assert client.channel_info(room, ["subscription_count"]) == {"occupied": True, "subscription_count": 2}
    assert client.channel_info(presence, ["user_count", "subscription_count"]) == {
        "occupied": True, "user_count": 2, "subscription_count": 2}
    assert client.channel_info(channel_name(), []) == {"occupied": False}
    listed = client.channels_info(prefix_filter="presence-", attributes=["user_count"])["channels"]
    assert listed[presence] == {"user_count": 2}
    assert room in client.channels_info()["channels"]
    assert sorted(u["id"] for u in client.users_info(presence)["users"]) == ["u1", "u2"]
    # user_count is only for presence channels, as Pusher says.
    with pytest.raises(pusher.errors.PusherBadRequest):
        client.channels_info(attributes=["user_count"])
    with pytest.raises(pusher.errors.PusherBadRequest):
        client.users_info(room)
    a.close(), b.close()
    wait_until(lambda: client.channel_info(room, [])["occupied"] is False, what="the room to empty")


# ---------------------------------------------------------------- private and presence channels

def test_pysher_signs_a_private_channel_and_receives_on_it(server):
    room = channel_name("private-")
    phone = Listener(server)
    try:
        phone.listen(room, "secret")
        backend(server).trigger(room, "secret", "only for you")
        assert phone.next()[:2] == ("secret", "only for you")
    finally:
        phone.close()


def test_private_and_presence_subscriptions_need_a_valid_signature(server):
    room, presence = channel_name("private-"), channel_name("presence-")
    raw = Raw(server).open()
    other = Raw(server).open()
    good = backend(server).authenticate(channel=room, socket_id=other.socket_id)  # another socket's signature
    refusals = [
        raw.subscribe(room),                                                        # none
        raw.subscribe(room, auth=good["auth"]),                                     # made for another socket
        raw.subscribe(room, auth=f"{server.app_key}:{'0' * 64}"),                  # forged
        raw.subscribe(room, auth="not-a-signature"),
    ]
    presence_auth = backend(server).authenticate(channel=presence, socket_id=raw.socket_id, custom_data={"user_id": "7"})
    refusals.append(raw.subscribe(presence, auth=presence_auth["auth"], channel_data='{"user_id":"8"}'))  # data changed
    refusals.append(raw.subscribe(presence, auth=presence_auth["auth"]))                                # data missing
    for frame in refusals:
        assert frame["event"] == "pusher:subscription_error", frame
        assert frame["data"]["status"] == 401 and frame["data"]["type"] == "AuthError"
    # Nothing was subscribed by a refused request: a trigger reaches nobody here.
    backend(server).trigger(room, "leak", {})
    backend(server).trigger(channel_name(), "barrier", {})
    assert raw.silent()
    mine = backend(server).authenticate(channel=room, socket_id=raw.socket_id)
    assert raw.subscribe(room, auth=mine["auth"])["event"] == "pusher_internal:subscription_succeeded"
    raw.close(), other.close()


def test_presence_members_are_announced_on_the_first_and_last_socket_only(server):
    presence = channel_name("presence-")
    client = backend(server)

    def join(user, name):
        socket = Raw(server).open()
        auth = client.authenticate(channel=presence, socket_id=socket.socket_id,
                                   custom_data={"user_id": user, "user_info": {"name": name}})
        frame = socket.subscribe(presence, auth=auth["auth"], channel_data=auth["channel_data"])
        return socket, json.loads(frame["data"])["presence"]

    ana, members = join("ana", "Ana")
    assert members == {"ids": ["ana"], "hash": {"ana": {"name": "Ana"}}, "count": 1}
    bob, members = join("bob", "Bob")
    assert members["count"] == 2 and members["hash"]["bob"] == {"name": "Bob"}
    added = ana.until(lambda f: f["event"] == "pusher_internal:member_added")
    assert json.loads(added["data"]) == {"user_id": "bob", "user_info": {"name": "Bob"}}
    # Bob's second device: no second member_added, the count stays 2.
    bob_tablet, members = join("bob", "Bob")
    assert members["count"] == 2
    bob_tablet.close()                           # one of Bob's two sockets: still present
    backend(server).trigger(presence, "barrier", {})
    assert ana.until(lambda f: f["event"] in ("barrier", "pusher_internal:member_removed"))["event"] == "barrier"
    bob.close()                                  # his last: member_removed
    removed = ana.until(lambda f: f["event"] == "pusher_internal:member_removed")
    assert json.loads(removed["data"]) == {"user_id": "bob"}
    ana.close()


# ---------------------------------------------------------------- client events

def test_client_events_go_to_the_others_with_the_presence_user_and_are_rate_limited(server):
    presence = channel_name("presence-")
    client = backend(server)
    sockets = []
    for user in ("ana", "bob"):
        socket = Raw(server).open()
        auth = client.authenticate(channel=presence, socket_id=socket.socket_id, custom_data={"user_id": user})
        socket.subscribe(presence, auth=auth["auth"], channel_data=auth["channel_data"])
        sockets.append(socket)
    ana, bob = sockets
    ana.send("client-typing", {"typing": True}, channel=presence)
    typed = bob.until(lambda f: f["event"] == "client-typing")
    assert typed["data"] == {"typing": True} and typed["user_id"] == "ana" and "position" not in typed
    # Not echoed to the sender.
    backend(server).trigger(presence, "barrier", {})
    assert ana.until(lambda f: f["event"] in ("client-typing", "barrier"))["event"] == "barrier"
    # Rate limited (5 a second here): a burst past it is refused with 4301, not delivered.
    for n in range(12):
        ana.send("client-burst", {"n": n}, channel=presence)
    refused = ana.until(lambda f: f["event"] == "pusher:error")
    assert refused["data"]["code"] == 4301
    backend(server).trigger(presence, "barrier2", {})
    received = []
    while True:
        frame = bob.next()
        if frame["event"] == "barrier2":
            break
        if frame["event"] == "client-burst":
            received.append(frame["data"]["n"])
    assert 0 < len(received) < 12 and received == sorted(received)
    ana.close(), bob.close()


def test_client_events_are_refused_where_pusher_refuses_them(server):
    public, private = channel_name(), channel_name("private-")
    raw = Raw(server).open()
    raw.subscribe(public)
    raw.send("client-hello", {}, channel=public)
    assert raw.until(lambda f: f["event"] == "pusher:error")["data"]["code"] == 4301        # public channel
    raw.send("client-hello", {}, channel=private)
    assert raw.until(lambda f: f["event"] == "pusher:error")["data"]["code"] == 4301        # not subscribed
    auth = backend(server).authenticate(channel=private, socket_id=raw.socket_id)
    raw.subscribe(private, auth=auth["auth"])
    raw.send("client-big", {"x": "a" * 11_000}, channel=private)
    assert raw.until(lambda f: f["event"] == "pusher:error")["data"]["code"] == 4301        # over 10 KB
    raw.send("client-" + "x" * 200, {}, channel=private)
    assert raw.until(lambda f: f["event"] == "pusher:error")["data"]["code"] == 4301        # name over 200
    raw.close()


# ---------------------------------------------------------------- the connection's own rules

def test_unknown_app_and_bad_protocol_versions_close_with_pushers_codes(server):
    for raw, code in [(Raw(server, key="pk_nobody"), 4001),
                      (Raw(server, query="?client=raw"), 4008),
                      (Raw(server, protocol="4"), 4007),
                      (Raw(server, protocol="8"), 4007)]:
        frame = raw.next()
        assert frame["event"] == "pusher:error" and frame["data"]["code"] == code, frame
        with pytest.raises(ConnectionClosed) as closed:
            raw.next()
        assert closed.value.rcvd.code == code
    # Protocol 5, 6 and 7 are all accepted.
    for version in ("5", "6", "7"):
        Raw(server, protocol=version).open().close()


def test_bad_frames_get_errors_and_the_socket_stays_usable(server):
    raw = Raw(server).open()
    for bad in ["not json", "[]", '{"data":{}}', '{"event":"pusher:subscribe","data":{}}', '{"event":"pusher:nonsense"}']:
        raw.ws.send(bad)
        assert raw.until(lambda f: f["event"] == "pusher:error")["data"]["message"]
    refused = raw.subscribe("room with spaces")
    assert refused["event"] == "pusher:subscription_error" and refused["data"]["status"] == 400
    raw.send("pusher:ping")
    assert raw.until(lambda f: f["event"] == "pusher:pong")
    assert raw.subscribe(channel_name())["event"] == "pusher_internal:subscription_succeeded"
    # An oversize frame (past 32 KiB) closes with 1009, as RFC 6455 says.
    raw.ws.send(json.dumps({"event": "client-x", "data": "a" * 40_000}))
    with pytest.raises(ConnectionClosed) as closed:
        raw.until(lambda f: False)
    assert closed.value.rcvd.code == 1009


def test_a_silent_client_is_pinged_and_closed_with_4201_unless_it_answers():
    server = Server("--pusher-activity-timeout", "1", "--pusher-pong-timeout", "1")
    try:
        answering, silent = Raw(server).open(), Raw(server).open()
        assert answering.established["activity_timeout"] == 1
        assert answering.until(lambda f: f["event"] == "pusher:ping", timeout=5)
        answering.send("pusher:pong")
        assert silent.until(lambda f: f["event"] == "pusher:ping", timeout=5)
        with pytest.raises(ConnectionClosed) as closed:
            silent.until(lambda f: False, timeout=5)
        assert closed.value.rcvd.code == 4201
        # The one that answered is still there and is pinged again.
        assert answering.until(lambda f: f["event"] == "pusher:ping", timeout=5)
        answering.close()
    finally:
        assert server.stop() == 0


def test_signin_server_to_user_and_terminate_connections(server):
    client = backend(server)
    user = f"user-{uuid.uuid4().hex[:6]}"
    raw = Raw(server).open()
    signed = client.authenticate_user(raw.socket_id, {"id": user, "user_info": {"name": "Ana"}})
    raw.send("pusher:signin", {"user_data": signed["user_data"], "auth": signed["auth"]})
    assert raw.until(lambda f: f["event"] == "pusher:signin_success")
    client.send_to_user(user, "notice", {"hello": user})
    notice = raw.until(lambda f: f["event"] == "notice")
    assert json.loads(notice["data"]) == {"hello": user}
    forged = Raw(server).open()
    forged.send("pusher:signin", {"user_data": json.dumps({"id": user}), "auth": signed["auth"]})
    assert forged.until(lambda f: f["event"] == "pusher:error")["data"]["code"] == 4009
    # One user per connection: signing the same socket in as someone else is refused.
    other = client.authenticate_user(raw.socket_id, {"id": user + "-other"})
    raw.send("pusher:signin", {"user_data": other["user_data"], "auth": other["auth"]})
    assert "another user" in raw.until(lambda f: f["event"] == "pusher:error")["data"]["message"]
    assert client.terminate_user_connections(user) == {}
    with pytest.raises(ConnectionClosed) as closed:
        raw.until(lambda f: False)
    assert closed.value.rcvd.code == 4009
    # The forged socket was never signed in: still open.
    forged.send("pusher:ping")
    assert forged.until(lambda f: f["event"] == "pusher:pong")
    forged.close()


# ---------------------------------------------------------------- the HTTP API's signatures and limits

def test_the_http_api_refuses_bad_signatures_and_bad_input_and_stores_nothing(server):
    room = channel_name()
    raw = Raw(server).open()
    raw.subscribe(room)
    wrong_secret = backend(server, secret="sk_wrong")
    with pytest.raises(pusher.errors.PusherBadAuth):
        wrong_secret.trigger(room, "forged", {})
    wrong_key = backend(server, key="pk_wrong")
    with pytest.raises(pusher.errors.PusherBadAuth):
        wrong_key.trigger(room, "forged", {})
    with pytest.raises(pusher.errors.PusherBadStatus):
        backend(server, app_id="1").trigger(room, "forged", {})            # no such app: 404
    client = backend(server)
    with pytest.raises(ValueError):
        client.trigger([channel_name() for _ in range(101)], "too-many", {})   # the library checks 100 itself
    for bad in ["room with spaces", "x" * 165]:
        with pytest.raises((pusher.errors.PusherBadRequest, ValueError)):
            client.trigger(bad, "e", {})
    with pytest.raises((pusher.errors.PusherBadStatus, ValueError)):
        client.trigger(room, "big", "a" * 10_241)
    with pytest.raises((pusher.errors.PusherBadRequest, ValueError)):
        client.trigger_batch([{"channel": room, "name": f"e{n}", "data": "x"} for n in range(11)])
    with pytest.raises((pusher.errors.PusherBadRequest, ValueError)):
        client.trigger(room, "pusher:connection_established", {})
    # None of the refused requests sent or stored anything.
    client.trigger(room, "barrier", {})
    assert raw.until(lambda f: f["event"] != "pusher:pong")["event"] == "barrier"
    assert [e["event"] for e in history(server, room)["events"]] == ["barrier"]
    raw.close()


def signed_request(server, method, path, query=None, body=b"", headers=False):
    """A request signed the Pusher way by hand: for the history read, which no library has, and
    for bodies the library refuses to send (it checks some limits itself). With `headers`, the
    answer's headers come third."""
    import hashlib
    import hmac
    import http.client
    import urllib.parse
    params = {"auth_key": server.app_key, "auth_timestamp": str(int(time.time())), "auth_version": "1.0", **(query or {})}
    if body:
        params["body_md5"] = hashlib.md5(body).hexdigest()
    signed = "\n".join([method, path, "&".join(f"{k}={v}" for k, v in sorted(params.items()))])
    params["auth_signature"] = hmac.new(server.app_secret.encode(), signed.encode(), hashlib.sha256).hexdigest()
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    connection.request(method, path + "?" + urllib.parse.urlencode(params), body=body or None,
                       headers={"Content-Type": "application/json"} if body else {})
    response = connection.getresponse()
    answer = response.read()
    connection.close()
    if headers:
        return response.status, json.loads(answer) if answer else None, {k.lower(): v for k, v in response.getheaders()}
    return response.status, json.loads(answer) if answer else None


def test_the_server_itself_enforces_the_http_apis_limits(server):
    """What the library checks before sending, the server checks again: a backend written with
    another library, or none, meets the same limits (400 or 413, nothing stored or sent)."""
    room = channel_name()
    raw = Raw(server).open()
    raw.subscribe(room)
    path = f"/apps/{server.pusher_id}/events"

    def post(body, endpoint=path):
        return signed_request(server, "POST", endpoint, body=json.dumps(body).encode())

    cases = [
        ({"name": "e", "data": "x", "channels": [channel_name() for _ in range(101)]}, 400, "1–100 channels"),
        ({"name": "e", "data": "x", "channels": []}, 400, "1–100 channels"),
        ({"name": "e", "data": "a" * 10_241, "channel": room}, 413, "10240 bytes"),
        ({"name": "e", "data": "x", "channel": "room with spaces"}, 400, "channel name"),
        ({"name": "e", "data": "x", "channel": "x" * 165}, 400, "1–164"),
        ({"name": "x" * 201, "data": "x", "channel": room}, 400, "event name"),
        ({"name": "pusher:connection_established", "data": "x", "channel": room}, 400, "protocol's own"),
        ({"name": "e", "data": "x", "channel": room, "channels": [room]}, 400, "not both"),
        ({"name": "e", "data": "x"}, 400, "'channels'"),
        ({"name": "e", "data": {"not": "a string"}, "channel": room}, 400, "data"),
        ({"name": "e", "channel": room}, 400, "missing field 'data'"),
        ({"name": "e", "data": "x", "channel": room, "socket_id": "not-a-socket"}, 400, "socket_id"),
        ({"name": "e", "data": "x", "channel": room, "info": "nonsense"}, 400, "info"),
    ]
    for body, status, words in cases:
        got, answer = post(body)
        assert got == status and words in answer["error"]["message"], (body if len(json.dumps(body)) < 300 else words, got, answer)
    got, answer = post({"batch": [{"channel": room, "name": f"e{n}", "data": "x"} for n in range(11)]}, path.replace("events", "batch_events"))
    assert got == 400 and "1–10 events" in answer["error"]["message"]
    got, answer = post({"batch": [{"channels": [room], "name": "e", "data": "x"}]}, path.replace("events", "batch_events"))
    assert got == 400 and "one 'channel'" in answer["error"]["message"]
    # Nothing of it was sent or stored.
    backend(server).trigger(room, "barrier", {})
    assert raw.until(lambda f: f["event"] not in ("pusher:pong",))["event"] == "barrier"
    assert [e["event"] for e in history(server, room)["events"]] == ["barrier"]
    # And what the library never sends: a stale or unsigned query.
    status, answer = signed_request(server, "GET", f"/apps/{server.pusher_id}/channels", {"auth_timestamp": "0"})
    assert status == 401 and "auth_timestamp" in answer["error"]["message"]
    raw.close()


def test_a_socket_and_a_presence_channel_have_limits():
    server = Server()
    server.pusher_id = pusher_app_id(server)
    try:
        # 100 channels a socket; the 101st is refused with 4100 and the socket goes on.
        raw = Raw(server).open()
        for n in range(100):
            raw.send("pusher:subscribe", {"channel": f"many-{n}"})
        for n in range(100):
            raw.until(lambda f: f["event"] == "pusher_internal:subscription_succeeded")
        refused = raw.subscribe("one-too-many")
        assert refused["event"] == "pusher:error" and refused["data"]["code"] == 4100
        raw.send("pusher:ping")
        assert raw.until(lambda f: f["event"] == "pusher:pong")
        raw.close()
        # 100 members a presence channel; the 101st user is refused, a 100th user's second socket is not.
        client = backend(server)
        presence = channel_name("presence-")
        sockets = []
        for n in range(101):
            socket = Raw(server).open()
            auth = client.authenticate(channel=presence, socket_id=socket.socket_id, custom_data={"user_id": f"u{n}"})
            frame = socket.subscribe(presence, auth=auth["auth"], channel_data=auth["channel_data"])
            sockets.append((socket, frame))
        assert all(frame["event"] == "pusher_internal:subscription_succeeded" for _, frame in sockets[:100])
        last = sockets[100][1]
        assert last["event"] == "pusher:subscription_error" and last["data"]["type"] == "LimitReached"
        again = Raw(server).open()
        auth = client.authenticate(channel=presence, socket_id=again.socket_id, custom_data={"user_id": "u7"})
        assert again.subscribe(presence, auth=auth["auth"], channel_data=auth["channel_data"])["event"].endswith("succeeded")
        assert len(client.users_info(presence)["users"]) == 100
        # channel_data over 10 KB is refused before anything else.
        big = Raw(server).open()
        data = json.dumps({"user_id": "big", "user_info": {"bio": "a" * 10_300}})
        signature = client.authenticate(channel=channel_name("presence-"), socket_id=big.socket_id, custom_data=json.loads(data))
        refused = big.subscribe(channel_name("presence-"), auth=signature["auth"], channel_data=data)
        assert refused["event"] == "pusher:subscription_error" and "10240 bytes" in refused["data"]["error"]
        for socket, _ in sockets:
            socket.close()
        again.close(), big.close()
    finally:
        assert server.stop() == 0


def test_the_http_api_is_rate_limited_per_app():
    server = Server("--pusher-api-requests-per-second", "2")
    server.pusher_id = pusher_app_id(server)
    try:
        answers = [signed_request(server, "GET", f"/apps/{server.pusher_id}/channels", headers=True) for _ in range(8)]
        statuses = [status for status, _, _ in answers]
        assert statuses[:4] == [200] * 4, statuses      # a burst of twice the rate
        limited = next(answer for answer in answers if answer[0] == 429)
        assert limited[1]["error"]["code"] == "rate_limited" and int(limited[2]["retry-after"]) >= 1
    finally:
        assert server.stop() == 0


def history(server, channel, after=0):
    status, answer = signed_request(server, "GET", f"/apps/{server.pusher_id}/channels/{channel}/events", {"after": str(after)})
    assert status == 200, answer
    return answer


def test_stale_timestamps_and_tampered_bodies_are_refused(server):
    import hashlib
    import hmac
    import http.client
    import urllib.parse
    body = json.dumps({"name": "e", "channels": [channel_name()], "data": "{}"}).encode()
    path = f"/apps/{server.pusher_id}/events"
    for timestamp, sent_body in [(int(time.time()) - 700, body), (int(time.time()), body.replace(b"{}", b"[]"))]:
        params = {"auth_key": server.app_key, "auth_timestamp": str(timestamp), "auth_version": "1.0",
                  "body_md5": hashlib.md5(body).hexdigest()}
        signed = "\n".join(["POST", path, "&".join(f"{k}={v}" for k, v in sorted(params.items()))])
        params["auth_signature"] = hmac.new(server.app_secret.encode(), signed.encode(), hashlib.sha256).hexdigest()
        connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
        connection.request("POST", path + "?" + urllib.parse.urlencode(params), body=sent_body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 401 and answer["error"]["code"] == "bad_request_signature", answer
        assert ("auth_timestamp" in answer["error"]["message"]) == (sent_body == body)


# ---------------------------------------------------------------- beyond Pusher: the log

def test_a_client_that_was_away_gets_what_it_missed_even_after_a_restart():
    server = Server("--pusher-history", "5")
    server.pusher_id = pusher_app_id(server)
    try:
        room = channel_name()
        raw = Raw(server).open()
        raw.subscribe(room)
        backend(server).trigger(room, "m", "1")
        first = raw.until(lambda f: f["event"] == "m")
        raw.close()
        for n in range(2, 5):
            backend(server).trigger(room, "m", str(n))
        server.restart()
        back = Raw(server).open()
        assert back.subscribe(room, position=first["position"])["event"] == "pusher_internal:subscription_succeeded"
        missed = [back.until(lambda f: f["event"] == "m") for _ in range(3)]
        assert [m["data"] for m in missed] == ["2", "3", "4"]
        assert [m["position"] for m in missed] == sorted(m["position"] for m in missed)
        backend(server).trigger(room, "m", "5")                      # then live, once
        assert back.until(lambda f: f["event"] == "m")["data"] == "5"
        # The log keeps the newest 5; a client further behind is told, then gets what is kept.
        for n in range(6, 10):
            backend(server).trigger(room, "m", str(n))
        kept = history(server, room)
        assert [json.loads('"' + e["data"] + '"') if False else e["data"] for e in kept["events"]] == ["5", "6", "7", "8", "9"]
        assert kept["oldest_position"] == kept["events"][0]["position"] and kept["has_more"] is False
        late = Raw(server).open()
        late.subscribe(room, position=first["position"])
        notice = late.until(lambda f: f["event"] == "parley_internal:history_truncated")
        assert json.loads(notice["data"])["oldest_position"] == kept["oldest_position"]
        assert [late.until(lambda f: f["event"] == "m")["data"] for _ in range(5)] == ["5", "6", "7", "8", "9"]
        # A stock client (no position) gets only what comes next.
        stock = Raw(server).open()
        stock.subscribe(room)
        backend(server).trigger(room, "m", "10")
        assert stock.until(lambda f: f["event"] == "m")["data"] == "10"
        for socket in (back, late, stock):
            socket.close()
    finally:
        assert server.stop() == 0


def test_events_triggered_during_a_resume_arrive_once_and_in_order(server):
    room = channel_name()
    client = backend(server)
    client.trigger(room, "n", "0")
    start = history(server, room)["events"][-1]["position"]
    stop = threading.Event()
    sent = []

    def trigger_continuously():
        n = 1
        while not stop.is_set() and n <= 200:
            client.trigger(room, "n", str(n))
            sent.append(str(n))
            n += 1

    worker = threading.Thread(target=trigger_continuously)
    worker.start()
    wait_until(lambda: len(sent) >= 20, what="triggers under way")
    raw = Raw(server).open()
    raw.subscribe(room, position=start)
    stop.set()
    worker.join()
    client.trigger(room, "done", "")
    got = []
    while True:
        frame = raw.until(lambda f: f["event"] in ("n", "done"))
        if frame["event"] == "done":
            break
        got.append(frame["data"])
    # History keeps 5 per channel here, so a resume that began 20+ events back starts where the
    # log does; from there, every event once, in order, through the switch to live.
    numbers = [int(n) for n in got]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and numbers[-1] == int(sent[-1])
    raw.close()


def test_rotating_a_secret_keeps_the_pusher_app_id_and_the_old_secret_stops_working():
    server = Server()
    server.pusher_id = pusher_app_id(server)
    try:
        rotated = server.apps("rotate-secret", "default")
        assert rotated.returncode == 0 and f"pusher app id: {server.pusher_id}" in rotated.stdout
        old = backend(server)
        with pytest.raises(pusher.errors.PusherBadAuth):
            old.trigger(channel_name(), "e", {})
        server.app_secret = rotated.stdout.split("app secret:")[1].split()[0]
        assert backend(server).trigger(channel_name(), "e", {}) == {}
    finally:
        assert server.stop() == 0
