"""A realtime device for the tests: Python `websockets` (a client nobody here wrote) speaking
docs/protocol.md to the real server, with helpers that wait on frames with a timeout."""
import itertools
import json
import time
import uuid

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


class Device:
    """One device's realtime socket. Every frame received is kept in `frames`; events in
    `events`, so tests compare what devices saw."""

    _ids = itertools.count(1)

    def __init__(self, server, token, position=None, app_key=None, max_queue=256, authenticate=True, cursor=None):
        self.server = server
        self.token = token
        key = app_key or server.app_key
        secure = server.url.startswith("https://")
        self.socket = connect(f"{'wss' if secure else 'ws'}://{server.host}:{server.port}/v1/realtime",
                              additional_headers={"X-Parley-App-Key": key}, max_queue=max_queue,
                              open_timeout=10, close_timeout=5, max_size=None, legacy=True,
                              **({"ssl": server.ssl_context} if secure else {}))
        self.frames = []
        self.events = []
        self.backlog = []  # received while waiting for something else; `until` looks here first
        self.ready = None
        self.position = position
        self.cursor = list(cursor) if isinstance(cursor, list) else cursor  # one position per shard of the server's log, from `ready` and the events
        if authenticate:
            self.auth(position, cursor)

    def auth(self, position=None, cursor=None):
        frame = {"type": "auth", "token": self.token}
        if position is not None:
            frame["position"] = position
        if cursor is not None:
            frame["cursor"] = cursor
        self.socket.send(json.dumps(frame))

    def wait_ready(self, timeout=10):
        self.ready = self.until(lambda f: f["type"] in ("ready",), timeout)
        self.position = self.ready["position"]
        self.cursor = list(self.ready["cursor"])
        return self.ready

    def next(self, timeout=10):
        """The next frame (or raises TimeoutError / ConnectionClosed)."""
        text = self.socket.recv(timeout=timeout)
        frame = json.loads(text)
        self.frames.append(frame)
        if frame["type"] == "event":
            self.events.append(frame["event"])
            position = frame["event"]["position"]
            self.position = max(self.position or 0, position)
            if self.cursor:
                shard = position % len(self.cursor)
                self.cursor[shard] = max(self.cursor[shard], position)
        return frame

    def until(self, predicate, timeout=10):
        """The first frame not yet taken that matches, reading more as needed."""
        for index, frame in enumerate(self.backlog):
            if predicate(frame):
                return self.backlog.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching frame within the timeout; received: {self.frames[-5:]}")
            try:
                frame = self.next(timeout=remaining)
            except TimeoutError:
                raise TimeoutError(f"no matching frame within the timeout; received: {self.frames[-5:]}") from None
            if predicate(frame):
                return frame
            self.backlog.append(frame)

    def command(self, kind, timeout=10, **fields):
        """Sends a command and returns its answer (ack or error)."""
        command_id = f"c{next(self._ids)}"
        self.socket.send(json.dumps({"type": kind, "id": command_id, **fields}))
        return self.until(lambda f: f.get("id") == command_id and f["type"] in ("ack", "error", "pong"), timeout)

    def send_text(self, conversation_id, text, client_id=None):
        return self.command("message.send", conversationId=conversation_id,
                            message={"clientId": client_id or str(uuid.uuid4()), "content": {"type": "text", "text": text}})

    def wait_event(self, predicate, timeout=10):
        return self.until(lambda f: f["type"] == "event" and predicate(f["event"]), timeout)

    def drain(self, quiet=0.3):
        """Reads until nothing arrives for `quiet` seconds (only for asserting absence)."""
        try:
            while True:
                self.next(timeout=quiet)
        except TimeoutError:
            pass

    def close_code(self, timeout=10):
        """Reads until the server closes; returns the close code."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.next(timeout=deadline - time.monotonic())
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        raise TimeoutError("the server did not close")

    def close(self):
        self.socket.close()


def event_key(event):
    """What identifies an event across devices."""
    return (event["position"], event["type"], event.get("seq"), event.get("message", {}).get("id"))
