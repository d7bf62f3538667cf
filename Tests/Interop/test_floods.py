"""Floods (issue 31, item 2), against the real binary: one address cannot take more than its
share of connections, the server as a whole stops at its limit with a quick close instead of
running out of descriptors, a body that trickles in below the floor rate is cut, and through
all of it a normal client is served. Flooders connect from 127.0.0.2 (the loopback network is
a /8), the normal client from 127.0.0.1."""
import socket
import time

from parley import Client, Server, wait_until

FLOODER = "127.0.0.2"


def connect_from(server, source=FLOODER):
    raw = socket.create_connection((server.host, server.port), timeout=10, source_address=(source, 0))
    return raw


def closed_by_server(raw, timeout=10):
    """True when the server closes the socket (EOF or reset) within `timeout`."""
    raw.settimeout(timeout)
    try:
        return raw.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def served(raw):
    """A GET /healthz on an open socket is answered 200."""
    raw.settimeout(10)
    raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    return raw.recv(4096).startswith(b"HTTP/1.1 200")


def metric(server, name):
    status, body, _ = Client(server).request_bytes("GET", "/metrics", authenticated=False)
    assert status == 200
    return sum(float(line.split()[-1]) for line in body.decode().splitlines() if line.startswith(name))


def healthy(server):
    return Client(server).get("/healthz")[0] == 200


def test_one_address_gets_its_share_and_no_more_and_others_are_served():
    server = Server("--max-connections-per-address", "5")
    try:
        held = [connect_from(server) for _ in range(5)]
        assert all(served(raw) for raw in held), "five from one address are served"
        extra = connect_from(server)
        assert closed_by_server(extra), "a sixth from the same address is closed at once"
        assert healthy(server), "another address is served meanwhile"
        assert metric(server, 'parley_connections_refused_total{limit="address"}') >= 1
        wait_until(lambda: any("an address is at its connection limit" in line for line in server.log), what="the log line")
        # A place comes back when one of them closes.
        held.pop().close()
        wait_until(lambda: served(connect_from(server)), what="a new connection from the address to be served")
        for raw in held:
            raw.close()
    finally:
        server.stop()


def test_the_server_stops_at_its_limit_with_a_quick_close_and_recovers():
    server = Server("--max-connections", "8", "--max-connections-per-address", "0")
    try:
        held = [connect_from(server, f"127.0.0.{10 + index}") for index in range(8)]
        assert all(served(raw) for raw in held)
        late = connect_from(server, "127.0.0.30")
        assert closed_by_server(late), "past the limit: closed at once, not left waiting"
        wait_until(lambda: any("at the connection limit" in line for line in server.log), what="the log line")
        for raw in held[:4]:
            raw.close()
        wait_until(lambda: healthy(server), what="the server to serve again once connections closed")
        assert metric(server, 'parley_connections_refused_total{limit="total"}') >= 1
        for raw in held[4:]:
            raw.close()
    finally:
        server.stop()


def test_bodies_trickling_in_below_the_floor_are_cut_and_a_normal_client_is_served():
    server = Server("--max-connections-per-address", "20")
    try:
        client = Client(server).register(f"ana{int(time.time() * 1000) % 10**9}")
        slow = []
        for _ in range(20):
            raw = connect_from(server)
            raw.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
            slow.append(raw)
        # The flood holds its address's every place: one more from it is closed at once …
        assert closed_by_server(connect_from(server))
        # … while the normal client is served.
        assert client.get("/v1/me")[0] == 200
        started = time.monotonic()
        cut = set()
        while len(cut) < len(slow) and time.monotonic() - started < 25:
            for index, raw in enumerate(slow):
                if index in cut:
                    continue
                try:
                    raw.sendall(b" ")   # a byte now and then: never silent for 30 s
                    raw.settimeout(0.05)
                    answer = raw.recv(4096)
                    if answer == b"" or answer.startswith(b"HTTP/1.1 408"):
                        cut.add(index)
                except socket.timeout:
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    cut.add(index)
            time.sleep(1)   # the trickle's pace: that is what is tested
        assert len(cut) == len(slow), f"{len(slow) - len(cut)} slow bodies were still held after {time.monotonic() - started:.0f} s"
        assert time.monotonic() - started < 20, "cut soon after the 10 s grace"
        assert client.get("/v1/me")[0] == 200
        for raw in slow:
            raw.close()
    finally:
        server.stop()


def peak_resident_mib(server):
    """The server's peak resident memory so far (VmHWM), in MiB."""
    with open(f"/proc/{server.process.pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def test_a_burst_of_sign_ups_is_bounded_by_password_hashes_times_the_argon2_memory():
    """Issue 29: every Argon2id hash takes --argon2-memory-mib; at most --password-hashes of
    them run at once, so a burst of sign-ups raises the server's peak memory by that many
    hashes' memory, not by one per sign-up. Eight at once, each hash 48 MiB: with one lane
    the peak grows by about 48 MiB, with two by about 96."""
    import concurrent.futures
    import uuid

    grown = {}
    for lanes in (1, 2):
        running = Server("--argon2-memory-mib", "48", "--argon2-passes", "1", "--password-hashes", str(lanes))
        try:
            Client(running).register("warm" + uuid.uuid4().hex[:8])  # the first hash's one-time costs
            before = peak_resident_mib(running)
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                clients = list(pool.map(lambda index: Client(running).register(f"burst{index}" + uuid.uuid4().hex[:8]), range(8)))
            assert all(client.token for client in clients), "every sign-up of the burst succeeded"
            grown[lanes] = peak_resident_mib(running) - before
        finally:
            assert running.stop() == 0
    # The first hash after start already took one lane's memory (freed since, but counted in
    # the peak), so the burst adds what the further lanes take.
    assert grown[1] < 24, f"one hash at a time: the peak grew by {grown[1]:.0f} MiB"
    assert 30 < grown[2] < 80, f"two at a time: the peak grew by {grown[2]:.0f} MiB, about one more hash's 48"
