"""Running out of file descriptors (issue 31, item 1), for real: a server with a low descriptor
limit is flooded with idle connections, and through and after the flood every webhook and push
worker keeps delivering at once, `/metrics` shows each worker going round, and the log names
the limit.

These tests once filled the descriptor table itself (`--max-connections` far above the limit).
That brought the process down about once in twenty runs: libdispatch, which runs Swift's tasks,
checks its worker threads every second by opening `/proc/<tid>/stat` and aborts the process
(SIGILL in `_dispatch_workq_monitor_pools`) when it cannot. So client connections never fill
the table now: a `--max-connections` past the descriptor limit less the reserve is lowered to
it, with a warning, and the flood meets the connection limit instead."""
import resource
import socket
import time
import uuid

import pytest

from parley import ON_TLS, Server, wait_until
from test_server_api import Backend, user
from webhookreceiver import Receiver

LIMIT = 256


def low_descriptor_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def flood_to_the_limit(server, flood):
    """Idle connections into `flood`, more than the descriptor limit, until the server refuses
    them at its connection limit (it never lets them fill its table) and its log says so."""
    assert any("--max-connections is more than the descriptor limit allows" in line for line in server.log), \
        "the server says at start that it holds fewer connections than asked"
    for _ in range(LIMIT + 64):
        try:
            flood.append(socket.create_connection((server.host, server.port), timeout=2))
        except OSError:
            break
    wait_until(lambda: any("at the connection limit" in line for line in server.log), timeout=20, what="the log to name the limit")


def held_alive(server, seconds=3):
    """Holds the flood past libdispatch's one-second check of its threads: the process lives."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.process.poll() is None, f"the server died (exit code {server.process.poll()}); its log ends: {server.log[-10:]}"
        time.sleep(0.2)
    assert not [line for line in server.log if "out of descriptors" in line], "client connections filled the descriptor table"


def metric_lines(server, prefix):
    from parley import Client
    status, body, _ = Client(server).request_bytes("GET", "/metrics", authenticated=False)
    assert status == 200
    return [line for line in body.decode().splitlines() if line.startswith(prefix)]


@pytest.mark.skipif(ON_TLS, reason="plain sockets flood it; the TLS pass runs other files")
def test_workers_deliver_at_once_through_and_after_a_flood_past_the_descriptor_limit():
    server = Server("--webhooks-allow-private", "--webhook-first-retry", "100", "--server-api-requests-per-second", "1000",
                    "--max-connections", "100000", "--max-connections-per-address", "0", preexec_fn=low_descriptor_limit)
    receiver = Receiver()
    flood = []
    try:
        backend = Backend(server)
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["message.created"]})
        assert status == 201, hook
        receiver.secret = hook["secret"]
        names = [f"fd{uuid.uuid4().hex[:6]}{n}" for n in range(2)]
        for name in names:
            user(backend, name)
        status, room = backend.call("POST", "/v1/server/conversations", {"kind": "group", "title": "fds", "members": names})
        assert status == 201, room

        def send_and_time(text):
            started = time.monotonic()
            status, message = backend.call("POST", f"/v1/server/conversations/{room['id']}/messages",
                                           {"from": names[0], "clientId": uuid.uuid4().hex, "content": {"type": "text", "text": text}})
            assert status in (200, 201), message
            receiver.wait_for(lambda ds: any(d["data"]["message"]["id"] == message["id"] for d in ds if d["type"] == "message.created"),
                              timeout=30, what=text)
            return time.monotonic() - started

        assert send_and_time("before") < 3
        flood_to_the_limit(server, flood)
        # While the flood holds the server at its limit, on the connection the backend already
        # had: delivered at once, as a first attempt (there are descriptors for the request).
        took = send_and_time("during")
        held_alive(server)
        for raw in flood:
            raw.close()
        flood.clear()
        assert took < 3, "a delivery waited during the flood"
        during = [d for d in receiver.deliveries if d["type"] == "message.created" and d["data"]["message"]["content"].get("text") == "during"]
        assert during and during[0]["_headers"]["Parley-Webhook-Attempt"] == "1", during[:1]
        assert not [line for line in server.log if "webhook delivery failed" in line], "counted as the receiver's failure"
        # Afterwards every delivery goes at once, again and again.
        for n in range(5):
            assert send_and_time(f"after {n}") < 3, "a delivery waited after the descriptors came back"
        states = metric_lines(server, "parley_worker_state{")
        assert any('worker="webhooks/0",state="idle"} 1' in line or 'worker="webhooks/0",state="busy"} 1' in line for line in states), states
        assert not [line for line in states if 'state="stopped"} 1' in line], states
        quiet = [float(line.split()[-1]) for line in metric_lines(server, "parley_worker_quiet_seconds{")]
        assert quiet and max(quiet) < 5, quiet
        assert not [line for line in server.log if "stopped going round" in line]
    finally:
        for raw in flood:
            raw.close()
        receiver.close()
        server.stop()


def test_nothing_the_server_runs_calls_uuid():
    """Foundation's UUID() on Linux returns one constant when no descriptor is left
    (/dev/urandom cannot be opened): the cause of the stuck workers. The server's modules make
    ids with libsodium's random bytes (Crypto.randomToken) instead; the SDK, the benchmarks and
    the test helpers, which never run in the server, may use UUID()."""
    import os
    import re
    from parley import ROOT
    allowed = {"Parley", "parley", "parley-bench", "ParleyServerTesting", "ParleyChatTesting", "ParleyNetTesting", "ParleyTesting"}
    offenders = []
    sources = os.path.join(ROOT, "Sources")
    for module in sorted(os.listdir(sources)):
        if module in allowed or module.startswith("fuzz-"):
            continue
        for root, _, files in os.walk(os.path.join(sources, module)):
            for name in files:
                if not name.endswith(".swift"):
                    continue
                path = os.path.join(root, name)
                for number, line in enumerate(open(path, encoding="utf-8"), 1):
                    code = line.split("//", 1)[0]
                    if re.search(r"\bUUID\(\)", code):
                        offenders.append(f"{os.path.relpath(path, ROOT)}:{number}")
    assert not offenders, f"UUID() in code the server runs: {offenders}"


@pytest.mark.skipif(ON_TLS, reason="plain sockets flood it; the TLS pass runs other files")
def test_push_workers_deliver_at_once_through_and_after_a_flood_past_the_descriptor_limit():
    from fakepush import FakePush
    from parley import Client
    from tlscerts import Authority
    fake = FakePush(Authority())
    server = Server(*fake.server_flags(), "--max-connections", "100000", "--max-connections-per-address", "0",
                    preexec_fn=low_descriptor_limit)
    flood = []
    try:
        ana = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
        bob = Client(server).register(f"bob{uuid.uuid4().hex[:6]}")
        token = uuid.uuid4().hex + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201   # bob is offline: pushed
        status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
        assert status in (200, 201), room

        def send_and_time(text):
            started = time.monotonic()
            status, message = ana.send(room["id"], text)
            assert status == 201, message
            fake.wait_for(lambda pushes: any(p[1] == token and p[3].get("parley", {}).get("messageId") == message["id"] for p in pushes),
                          timeout=30)
            return time.monotonic() - started

        assert send_and_time("before") < 3
        flood_to_the_limit(server, flood)
        # While the flood holds the server at its limit, on ana's keep-alive connection: pushed at once.
        assert send_and_time("during") < 3, "a push waited during the flood"
        held_alive(server)
        for raw in flood:
            raw.close()
        flood.clear()
        for n in range(5):
            try:
                took = send_and_time(f"after {n}")
            except OSError as error:
                # When the flood filled the table, the server died here (libdispatch, see the
                # top): say whether it has, and what it logged last.
                raise AssertionError(f"send {n} after the flood failed ({error}); server exit code {server.process.poll()}, "
                                     f"its log ends: {server.log[-15:]}") from error
            assert took < 3, "a push waited after the descriptors came back"
        states = metric_lines(server, "parley_worker_state{")
        assert any('worker="push/apns",state="idle"} 1' in line or 'worker="push/apns",state="busy"} 1' in line for line in states), states
        assert not [line for line in states if 'state="stopped"} 1' in line], states
    finally:
        for raw in flood:
            raw.close()
        server.stop()
        fake.stop()
