"""Several nodes (issue 16): three parley-server processes on one PostgreSQL database with
Redis between them, started by this module on 127.0.0.1 (its own throwaway PostgreSQL and
Redis from scripts/services.sh, so it can kill them). Users on different nodes talk live;
signing out on one node closes the session's sockets on another; and under load with clients
that retry what was not acknowledged (as the SDK does):

- kill -9 one node: its clients move to another node and resume;
- kill Redis and start it again;
- stop PostgreSQL for a few seconds;

after each, every acknowledged message is stored exactly once, every conversation's seq runs
1, 2, 3, … without a gap, positions are unique, and every listening device received each
event once, in position order. Run in the PostgreSQL pass of `make test`.
"""
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
from websockets.exceptions import ConnectionClosed

from parley import ON_POSTGRES, ROOT, Client, Server, wait_until
from realtime import Device

pytestmark = pytest.mark.skipif(not ON_POSTGRES, reason="runs once, in the PostgreSQL pass (it starts its own PostgreSQL and Redis)")

SERVICES = os.path.join(ROOT, "scripts", "services.sh")


class Services:
    """A throwaway PostgreSQL and Redis of this module's own."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="parley-nodes-")
        subprocess.run([SERVICES, "start", self.dir], check=True, capture_output=True, text=True)
        env = {}
        with open(os.path.join(self.dir, "env")) as file:
            for line in file:
                name, value = line.removeprefix("export ").strip().split("=", 1)
                env[name] = value.strip('"')
        self.env = env
        self.postgres = env["PARLEY_TEST_POSTGRES_URL"]
        self.redis = env["PARLEY_TEST_REDIS_URL"]
        self.redis_port = int(self.redis.rsplit(":", 1)[1])
        name = "parley_nodes"
        subprocess.run(["psql", self.postgres, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        self.database = self.postgres.rsplit("/", 1)[0] + "/" + name

    def pg_ctl(self, *args):
        command = [os.path.join(self.env["PARLEY_PG_BIN"], "pg_ctl"), "-D", self.env["PARLEY_PG_DATA"], *args]
        if os.getuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, text=True)

    def stop_postgres(self):
        self.pg_ctl("-m", "fast", "stop")

    def start_postgres(self):
        port = self.postgres.rsplit(":", 1)[1].split("/")[0]
        self.pg_ctl("-l", os.path.join(self.dir, "pg", "server.log"), "-w", "start",
                    "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {self.dir}/pg -c fsync=off -c max_connections=400")

    def kill_redis(self):
        with open(os.path.join(self.dir, "redis.pid")) as file:
            os.kill(int(file.read().strip()), signal.SIGKILL)
        wait_until(lambda: subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True).returncode != 0,
                   what="Redis to be gone")

    def start_redis(self):
        subprocess.run(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", self.dir, "--daemonize", "yes", "--pidfile", os.path.join(self.dir, "redis.pid"),
                        "--logfile", os.path.join(self.dir, "redis.log")], check=True)
        wait_until(lambda: subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True).returncode == 0,
                   what="Redis to answer")

    def stop(self):
        subprocess.run([SERVICES, "stop", self.dir], capture_output=True)


@pytest.fixture(scope="module")
def services():
    running = Services()
    yield running
    running.stop()


class Cluster:
    """Three nodes on the services' database, sharing one data directory (media)."""

    def __init__(self, services, count=3, extra=()):
        self.services = services
        subprocess.run(["psql", services.postgres, "-qc", "DROP DATABASE IF EXISTS parley_nodes WITH (FORCE)"], check=True, capture_output=True)
        subprocess.run(["psql", services.postgres, "-qc", "CREATE DATABASE parley_nodes"], check=True, capture_output=True)
        self.data = tempfile.mkdtemp(prefix="parley-nodes-data-")
        self.flags = ["--database-url", services.database, "--redis-url", services.redis, "--presence-grace", "1", *extra]
        # One after another: the first creates the default app, the others find it.
        self.nodes = [Server(*self.flags, data=self.data) for _ in range(count)]
        for node in self.nodes[1:]:
            node.app_key = self.nodes[0].app_key

    def stop(self):
        for node in self.nodes:
            if node.process.poll() is None:
                node.stop()


@pytest.fixture()
def cluster(services):
    running = Cluster(services)
    yield running
    running.stop()


def test_redis_without_postgresql_is_refused_with_what_to_give():
    from parley import BINARY
    result = subprocess.run([BINARY, "--port", "0", "--data-dir", tempfile.mkdtemp(), "--redis-url", "redis://127.0.0.1:9"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "--database-url" in result.stderr


def test_log_shards_on_sqlite_are_refused_with_why():
    from parley import BINARY
    result = subprocess.run([BINARY, "--port", "0", "--data-dir", tempfile.mkdtemp(), "--log-shards", "4"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "--log-shards is for PostgreSQL" in result.stderr and "one writer is one shard" in result.stderr


def test_a_second_node_without_redis_is_refused_and_the_message_says_what_to_do(cluster):
    lone = subprocess.run([cluster.nodes[0].process.args[0], "--port", "0", "--data-dir", cluster.data, "--database-url",
                           cluster.services.database], capture_output=True, text=True, timeout=30)
    assert lone.returncode != 0 and "--redis-url" in lone.stderr


def test_users_on_different_nodes_talk_live_and_a_sign_out_on_one_node_closes_sockets_on_another(cluster):
    one, two, three = cluster.nodes
    alice = Client(one).register(f"alice{uuid.uuid4().hex[:6]}")
    bob = Client(two).register(f"bob{uuid.uuid4().hex[:6]}")
    carol = Client(three).register(f"carol{uuid.uuid4().hex[:6]}")
    status, room = alice.post("/v1/conversations", {"kind": "group", "title": "three nodes",
                                                    "members": [bob.user["username"], carol.user["username"]]})
    assert status == 201
    alices, bobs, carols = Device(one, alice.token), Device(two, bob.token), Device(three, carol.token)
    for device in (alices, bobs, carols):
        device.wait_ready()

    status, sent = alice.send(room["id"], "hello from node one")
    assert status == 201
    for device in (bobs, carols):
        event = device.wait_event(lambda e: e["type"] == "message.created")["event"]
        assert event["message"]["id"] == sent["id"]

    ack = bobs.send_text(room["id"], "hello from node two")
    assert ack["type"] == "ack"
    for device in (alices, carols):
        assert device.wait_event(lambda e: e["type"] == "message.created" and e["message"]["content"]["text"] == "hello from node two")

    # Typing is not stored: it crosses nodes through Redis alone.
    carols.command("typing.start", conversationId=room["id"])
    assert alices.until(lambda f: f["type"] == "typing")["userId"] == carol.user["id"]

    # Bob signs in again on node three and connects that session to node one; signing that
    # session out on node three closes its socket on node one, and node two refuses its token.
    tablet = Client(three).sign_in(bob.user["username"], device="tablet")
    tablets = Device(one, tablet.token)
    tablets.wait_ready()
    assert tablet.delete("/v1/sessions/current")[0] == 204
    assert tablets.close_code() == 4001
    stale = Client(two)
    stale.token = tablet.token
    assert stale.get("/v1/me")[0] == 401
    # Bob's other session is untouched.
    assert bob.get("/v1/me")[0] == 200
    for device in (alices, bobs, carols):
        device.close()


def test_a_trace_read_on_any_node_shows_the_node_that_stored_it_and_the_one_that_routed_it(cluster):
    """docs/trace.md: each node writes its own steps to the shared database."""
    one, two, three = cluster.nodes
    ana = Client(one).register(f"ana{uuid.uuid4().hex[:6]}")
    bob = Client(two).register(f"bob{uuid.uuid4().hex[:6]}")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "traced", "members": [bob.user["username"]]})
    assert status == 201
    phone = Device(two, bob.token)
    try:
        phone.wait_ready()
        status, sent = ana.send(room["id"], "across nodes")
        assert status == 201
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == sent["id"])
        backend = Client(three, app_key="")
        backend.app_key = None

        def traced():
            status, body = backend.request("GET", f"/v1/server/messages/{sent['id']}/trace",
                                           headers={"Authorization": f"Bearer {one.app_secret}"})
            assert status == 200, body
            bobs = next(r for r in body["recipients"] if r["userId"] == bob.user["id"])
            return body if body.get("committedOn") and bobs["outcome"] == "socket" else None
        wait_until(lambda: traced() is not None, what="both nodes' steps in the trace")
        body = traced()
        routed = next(s for r in body["recipients"] for s in r["steps"] if s["step"] == "routed")
        assert body["committedOn"].endswith(f"/{one.process.pid}"), body["committedOn"]
        assert routed["node"].endswith(f"/{two.process.pid}"), routed["node"]
    finally:
        phone.close()


def test_test_modes_redis_fault_on_a_node_loses_and_duplicates_nothing(services):
    """docs/test-mode.md: Redis made unavailable to one node for two seconds; messages sent
    through it meanwhile reach a device on the other node once each, through the database."""
    cluster = Cluster(services, count=2, extra=("--test-mode",))
    try:
        one, two = cluster.nodes
        ana = Client(one).register(f"ana{uuid.uuid4().hex[:6]}")
        bob = Client(two).register(f"bob{uuid.uuid4().hex[:6]}")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "outage", "members": [bob.user["username"]]})
        assert status == 201
        phone = Device(two, bob.token)
        phone.wait_ready()
        backend = Client(one, app_key="")
        backend.app_key = None
        secret = {"Authorization": f"Bearer {one.app_secret}"}
        assert backend.request("POST", "/v1/test/faults/redis", {"unavailableSeconds": 2}, headers=secret)[0] == 204
        sent = []
        for n in range(5):
            status, message = ana.send(room["id"], f"during the outage {n}")
            assert status == 201, message
            sent.append(message["id"])
        for message_id in sent:
            phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message_id, timeout=20)
        phone.drain(quiet=1)
        got = [e["message"]["id"] for e in phone.events if e["type"] == "message.created"]
        assert sorted(got) == sorted(sent), "each once"
        metrics = backend.request_bytes("GET", "/metrics", authenticated=False)[1].decode()
        failures = next(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("parley_bus_publish_failures_total"))
        assert failures >= 1, "the node could not publish through Redis meanwhile: the fault was real"
        phone.close()
        plain = Server()
        try:
            refused = Client(plain, app_key="")
            refused.app_key = None
            assert refused.request("POST", "/v1/test/faults/redis", {"unavailableSeconds": 2},
                                   headers={"Authorization": f"Bearer {plain.app_secret}"})[0] == 404, "no test mode: no such route"
        finally:
            plain.stop()
    finally:
        cluster.stop()


def test_a_block_made_on_one_node_hides_the_person_on_devices_connected_to_the_others(cluster):
    one, two, three = cluster.nodes
    ana = Client(one).register(f"ana{uuid.uuid4().hex[:6]}")
    bob = Client(three).register(f"bob{uuid.uuid4().hex[:6]}")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "nodes", "members": [bob.user["username"]]})
    assert status == 201
    phone, bobs = Device(two, ana.token), Device(three, bob.token)
    for device in (phone, bobs):
        device.wait_ready()
    # Blocked through node one: ana's device on node two hears the new list, and from then on
    # bob's messages (sent through node three) reach it as stubs, his typing not at all.
    assert ana.request("PUT", f"/v1/me/blocks/{bob.user['id']}")[0] == 204
    assert phone.until(lambda f: f["type"] == "blocks")["userIds"] == [bob.user["id"]]
    assert bobs.command("typing.start", conversationId=room["id"])["type"] == "ack"
    sent = bobs.send_text(room["id"], "can you see this?")["result"]["message"]
    stub = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == sent["id"])["event"]["message"]
    assert stub["hidden"] == "blocked" and "content" not in stub
    assert not [f for f in phone.frames if f["type"] == "typing"], "bob's typing reached ana"
    # Unblocked through node three: whole again on node two.
    assert Client(three).sign_in(ana.user["username"]).request("DELETE", f"/v1/me/blocks/{bob.user['id']}")[0] == 204
    assert phone.until(lambda f: f["type"] == "blocks")["userIds"] == []
    again = bobs.send_text(room["id"], "and now?")["result"]["message"]
    shown = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == again["id"])["event"]["message"]
    assert shown["content"]["text"] == "and now?"
    for device in (phone, bobs):
        device.close()


def test_a_pin_made_on_one_node_reaches_the_users_device_on_another_and_pages_the_same_everywhere(cluster):
    one, two, three = cluster.nodes
    ana = Client(one).register(f"ana{uuid.uuid4().hex[:6]}")
    rooms = []
    for title in ("a", "b", "c"):
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": title, "members": []})
        assert status == 201
        rooms.append(room)
    laptop = Device(two, Client(two).sign_in(ana.user["username"]).token)
    laptop.wait_ready()
    assert ana.patch(f"/v1/conversations/{rooms[0]['id']}/state", {"pinned": True})[0] == 200
    event = laptop.wait_event(lambda e: e["type"] == "state.updated")["event"]
    assert event["conversationId"] == rooms[0]["id"] and event["pinnedRank"] == 0
    through_three = Client(three).sign_in(ana.user["username"])
    status, page = through_three.get("/v1/conversations?limit=1")
    assert status == 200 and [c["title"] for c in page["conversations"]] == ["a"]
    status, rest = through_three.get(f"/v1/conversations?limit=5&before={page['nextCursor']}")
    assert [c["title"] for c in rest["conversations"]] == ["c", "b"]
    laptop.close()


def test_scheduled_messages_are_sent_once_though_every_node_looks_for_due_ones(cluster):
    import datetime
    one, two, three = cluster.nodes
    ana = Client(one).register(f"ana{uuid.uuid4().hex[:6]}")
    status, room = ana.post("/v1/conversations", {"kind": "group", "title": "later", "members": []})
    assert status == 201
    due = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    for n in range(20):
        status, _ = ana.post(f"/v1/conversations/{room['id']}/scheduled",
                             {"sendAt": due, "message": {"clientId": f"s{n}", "content": {"type": "text", "text": f"at once {n}"}}})
        assert status == 201
    reader = Client(three).sign_in(ana.user["username"])
    wait_until(lambda: len(reader.get(f"/v1/conversations/{room['id']}/messages?limit=100")[1]["messages"]) >= 20, timeout=20,
               what="twenty scheduled messages")
    messages = reader.get(f"/v1/conversations/{room['id']}/messages?limit=100")[1]["messages"]
    assert sorted(m["clientId"] for m in messages) == sorted(f"s{n}" for n in range(20)), "each once"
    wait_until(lambda: reader.get("/v1/scheduled")[1] == {"scheduled": []}, timeout=10, what="each recorded as sent")


def test_a_user_is_online_for_every_node_while_any_node_has_them(cluster):
    one, two, three = cluster.nodes
    alice = Client(one).register(f"alice{uuid.uuid4().hex[:6]}")
    bob = Client(two).register(f"bob{uuid.uuid4().hex[:6]}")
    assert alice.post("/v1/conversations", {"kind": "group", "title": "presence", "members": [bob.user["username"]]})[0] == 201
    bobs = Device(two, bob.token)
    bobs.wait_ready()

    def alice_is(status):
        return lambda f: f["type"] == "presence" and f["userId"] == alice.user["id"] and f["status"] == status

    def queried():
        answer = bobs.command("presence.query", userIds=[alice.user["id"]])
        return answer["result"]["users"][0]["status"]

    on_one = Device(one, alice.token)
    on_one.wait_ready()
    bobs.until(alice_is("online"))               # announced across nodes
    assert queried() == "online"                  # node two asks the directory about node one's user
    on_three = Device(three, Client(three).sign_in(alice.user["username"], device="second").token)
    on_three.wait_ready()
    on_one.close()
    # Node one's grace passes, but node three still has her: still online, and no "offline" news.
    # Proved by a later event that must come after that grace ended: Carol connects to node one
    # after Alice left it and disconnects; her "offline", announced when her own grace ends,
    # comes after Alice's would have.
    carol = Client(one).register(f"carol{uuid.uuid4().hex[:6]}")
    assert carol.post("/v1/conversations", {"kind": "group", "title": "witness", "members": [bob.user["username"]]})[0] == 201
    carols = Device(one, carol.token)
    carols.wait_ready()
    bobs.until(lambda f: f["type"] == "presence" and f["userId"] == carol.user["id"] and f["status"] == "online", timeout=10)
    carols.close()
    bobs.until(lambda f: f["type"] == "presence" and f["userId"] == carol.user["id"] and f["status"] == "offline", timeout=10)
    assert not [f for f in bobs.frames if alice_is("offline")(f)], "no offline news while node three has her"
    assert queried() == "online"
    on_three.close()
    offline = bobs.until(alice_is("offline"), timeout=10)
    assert offline["lastSeenAt"]
    assert not [f for f in bobs.frames if alice_is("offline")(f) and f is not offline], "offline announced once"
    assert queried() == "offline"
    bobs.close()


def test_password_guesses_spread_over_nodes_share_one_budget(cluster):
    name = f"target{uuid.uuid4().hex[:6]}"
    Client(cluster.nodes[0]).register(name)
    # The account's budget is 10 failures per window (Chat.Configuration.failedSignInsPerAccount),
    # counted in Redis: ten guesses round-robin over three nodes use it up for all of them.
    for attempt in range(10):
        status, answer = Client(cluster.nodes[attempt % 3]).post("/v1/sessions", {"username": name, "password": f"wrong guess {attempt}"})
        assert status == 401, answer
    for node in cluster.nodes:
        status, answer = Client(node).post("/v1/sessions", {"username": name, "password": "correct horse battery"})
        assert status == 429 and answer["error"]["code"] == "rate_limited", "the eleventh try is refused on every node"


def test_every_metric_the_grafana_dashboard_graphs_is_served(cluster):
    with open(os.path.join(ROOT, "deploy", "grafana-dashboard.json")) as file:
        dashboard = json.load(file)
    wanted = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            # A histogram is graphed through its _bucket series and served under its own name.
            wanted.update(re.sub(r"_bucket$", "", name) for name in re.findall(r"(?:parley|process)_[a-z_]+", target["expr"]))
    status, body, _ = Client(cluster.nodes[0]).request_bytes("GET", "/metrics", authenticated=False)
    assert status == 200
    served = {line.split()[2] for line in body.decode().splitlines() if line.startswith("# TYPE ")}
    assert wanted and wanted <= served, f"graphed but not served: {sorted(wanted - served)}"


def pusher_backend(cluster, node):
    """Pusher's server library pointed at one node (the app's pusher id is the same on all)."""
    from test_pusher import backend
    from parley import BINARY
    listing = subprocess.run([BINARY, "apps", "list", "--data-dir", cluster.data, *cluster.flags[:2]], capture_output=True, text=True, timeout=30)
    node.pusher_id = next(l for l in listing.stdout.splitlines() if l.startswith("default\t")).split("pusher app id ")[1].split()[0]
    return backend(node)


def test_a_pusher_user_on_one_node_is_reached_and_terminated_through_another(cluster):
    from test_pusher import Raw
    one, two = cluster.nodes[0], cluster.nodes[1]
    api = pusher_backend(cluster, one)           # the app's backend talks to node one
    user = f"user-{uuid.uuid4().hex[:6]}"
    raw = Raw(two).open()                        # the user's socket is on node two
    signed = api.authenticate_user(raw.socket_id, {"id": user})
    raw.send("pusher:signin", {"user_data": signed["user_data"], "auth": signed["auth"]})
    assert raw.until(lambda f: f["event"] == "pusher:signin_success")
    api.send_to_user(user, "notice", {"hello": user})
    assert json.loads(raw.until(lambda f: f["event"] == "notice")["data"]) == {"hello": user}
    assert api.terminate_user_connections(user) == {}
    with pytest.raises(ConnectionClosed) as closed:
        raw.until(lambda f: False)
    assert closed.value.rcvd.code == 4009


def join_presence(api, node, channel, user, name):
    from test_pusher import Raw
    socket = Raw(node).open()
    auth = api.authenticate(channel=channel, socket_id=socket.socket_id, custom_data={"user_id": user, "user_info": {"name": name}})
    frame = socket.subscribe(channel, auth=auth["auth"], channel_data=auth["channel_data"])
    assert frame["event"] == "pusher_internal:subscription_succeeded", frame
    return socket, json.loads(frame["data"])["presence"]


def test_pusher_presence_members_and_occupancy_count_every_node(cluster):
    one, two, three = cluster.nodes
    api = pusher_backend(cluster, one)
    channel = f"presence-room-{uuid.uuid4().hex[:8]}"
    ana, members = join_presence(api, one, channel, "ana", "Ana")
    assert members["ids"] == ["ana"]
    bob, members = join_presence(api, two, channel, "bob", "Bob")      # another node sees Ana
    assert members["count"] == 2 and members["hash"] == {"ana": {"name": "Ana"}, "bob": {"name": "Bob"}}
    added = ana.until(lambda f: f["event"] == "pusher_internal:member_added")
    assert json.loads(added["data"]) == {"user_id": "bob", "user_info": {"name": "Bob"}}
    # Bob's tablet on a third node: he is one member, announced once.
    tablet, members = join_presence(api, three, channel, "bob", "Bob")
    assert members["count"] == 2
    for node in (one, three):                    # the HTTP API counts every node, whichever answers
        from test_pusher import backend
        node.pusher_id, node.app_secret = one.pusher_id, one.app_secret
        other = backend(node)
        assert other.channel_info(channel, ["user_count", "subscription_count"]) == {
            "occupied": True, "user_count": 2, "subscription_count": 3}
        assert sorted(u["id"] for u in other.users_info(channel)["users"]) == ["ana", "bob"]
        assert other.channels_info(prefix_filter="presence-", attributes=["user_count"])["channels"][channel] == {"user_count": 2}
    bob.close()                                  # one of Bob's sockets: still present elsewhere
    api.trigger(channel, "barrier", {})
    assert ana.until(lambda f: f["event"] in ("barrier", "pusher_internal:member_removed"))["event"] == "barrier"
    tablet.close()                               # his last, on another node: gone
    removed = ana.until(lambda f: f["event"] == "pusher_internal:member_removed")
    assert json.loads(removed["data"]) == {"user_id": "bob"}
    wait_until(lambda: api.channel_info(channel, ["subscription_count"]) == {"occupied": True, "subscription_count": 1},
               what="Bob's sockets to leave the count")
    ana.close()


def test_a_dead_nodes_presence_members_are_announced_gone(cluster):
    one, two, _ = cluster.nodes
    api = pusher_backend(cluster, one)
    channel = f"presence-room-{uuid.uuid4().hex[:8]}"
    ana, _ = join_presence(api, one, channel, "ana", "Ana")
    _, members = join_presence(api, two, channel, "bob", "Bob")
    assert members["count"] == 2
    ana.until(lambda f: f["event"] == "pusher_internal:member_added")
    two.kill()                                   # Bob's node dies without a word
    # Its heartbeat expires (15 s) and the next node to beat (every 5 s) buries it.
    removed = ana.until(lambda f: f["event"] == "pusher_internal:member_removed", timeout=30)
    assert json.loads(removed["data"]) == {"user_id": "bob"}
    assert sorted(u["id"] for u in api.users_info(channel)["users"]) == ["ana"]
    ana.close()


def test_presence_members_come_back_after_redis_restarts_empty(cluster):
    one, two, _ = cluster.nodes
    api = pusher_backend(cluster, one)
    channel = f"presence-room-{uuid.uuid4().hex[:8]}"
    ana, _ = join_presence(api, one, channel, "ana", "Ana")
    bob, _ = join_presence(api, two, channel, "bob", "Bob")
    cluster.services.kill_redis()
    cluster.services.start_redis()               # empty: no member, no node
    # Each node's next heartbeat finds itself missing and writes its channels again.
    wait_until(lambda: sorted(u["id"] for u in api.users_info(channel)["users"]) == ["ana", "bob"], timeout=20,
               what="the members to be written again")
    assert api.channel_info(channel, ["subscription_count"])["subscription_count"] == 2
    ana.close(), bob.close()


def wait_for_kept_bytes(cluster, count):
    """Until an unfinished upload in the shared media directory holds `count` bytes."""
    partial = os.path.join(cluster.data, "media", "partial")
    wait_until(lambda: count in [os.path.getsize(os.path.join(partial, n)) for n in os.listdir(partial) if n.endswith(".part")],
               what=f"the first {count} bytes to be written")


def test_an_upload_broken_off_on_one_node_is_finished_on_another(cluster):
    """Nodes share the media directory, and the claim on an unfinished upload is in the
    database: the rest of a broken upload goes to whichever node the client reaches next."""
    import media
    from test_resumable import break_off, resume
    one, two, _ = cluster.nodes
    alice = Client(one).register("u" + uuid.uuid4().hex[:10])
    data = media.pdf(900_000)
    break_off(alice, data, 400_000, "file", "application/pdf", "doc-1")
    wait_for_kept_bytes(cluster, 400_000)
    on_two = Client(two)
    on_two.token = alice.token
    code, status = on_two.get("/v1/uploads/doc-1")
    assert (code, status["state"], status["receivedBytes"], status["totalBytes"]) == (200, "partial", 400_000, len(data))
    code, info = resume(on_two, data, 400_000, "file", "application/pdf", "doc-1")
    assert code == 201, info
    assert alice.download(info["id"])[1] == data     # read back through the first node
    code, status = on_two.get("/v1/uploads/doc-1")
    assert (code, status["state"]) == (200, "complete")


def test_a_continuation_on_another_node_takes_the_upload_over_from_a_silent_connection(cluster):
    """A phone switched networks and its load balancer picked another node: the old request,
    still receiving on the first node, is told through the bus to let go, at once, not after
    the 30 s body timeout."""
    import media
    from test_resumable import resume
    one, two, _ = cluster.nodes
    alice = Client(one).register("u" + uuid.uuid4().hex[:10])
    data = media.mp4(1_000_000)
    old = socket.create_connection((one.host, one.port), timeout=10)
    old.sendall((f"POST /v1/media?kind=video&clientId=commute HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {alice.app_key}\r\n"
                 f"Authorization: Bearer {alice.token}\r\nContent-Type: video/mp4\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:300_000])
    wait_for_kept_bytes(cluster, 300_000)
    on_two = Client(two)
    on_two.token = alice.token
    started = time.monotonic()
    code, status = on_two.get("/v1/uploads/commute")
    assert (code, status["state"], status["receivedBytes"]) == (200, "partial", 300_000)
    assert time.monotonic() - started < 5, "taken over at once, not after the body timeout"
    answer = b""
    while chunk := old.recv(65536):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 409") and b"upload_superseded" in answer
    old.close()
    code, info = resume(on_two, data, 300_000, "video", "video/mp4", "commute")
    assert code == 201 and alice.download(info["id"])[1] == data


def test_every_node_sends_pushes_and_each_goes_out_once(services):
    """Push workers run on every node and claim rows (FOR UPDATE SKIP LOCKED, a lease): with
    three nodes, messages sent through all of them reach a sleeping phone once each."""
    from fakepush import FakePush
    from tlscerts import Authority
    fake = FakePush(Authority())
    cluster = Cluster(services, extra=fake.server_flags(fcm=False))
    try:
        ana = Client(cluster.nodes[0]).register("ana" + uuid.uuid4().hex[:6])
        bob = Client(cluster.nodes[1]).register("bob" + uuid.uuid4().hex[:6])
        token = uuid.uuid4().hex + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "apns", "token": token})[0] == 201
        status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
        assert status == 201
        senders = []
        for node in cluster.nodes:
            sender = Client(node)
            sender.token = ana.token
            senders.append(sender)
        sent = []
        for index in range(30):
            status, message = senders[index % 3].send(room["id"], f"message {index}")
            assert status == 201
            sent.append(message["id"])
        fake.wait_for(lambda pushes: len({p[3]["parley"]["messageId"] for p in pushes if p[1] == token}) == 30, timeout=30)
        # Anything still due has had its turn once a later push to another phone arrives.
        carol = Client(cluster.nodes[2]).register("carol" + uuid.uuid4().hex[:6])
        other = uuid.uuid4().hex + uuid.uuid4().hex
        assert carol.post("/v1/devices", {"platform": "apns", "token": other})[0] == 201
        status, dm = ana.post("/v1/conversations", {"kind": "direct", "members": [carol.user["username"]]})
        senders[0].send(dm["id"], "barrier")
        fake.wait_for(lambda pushes: any(p[1] == other for p in pushes), timeout=30)
        ids = [p[3]["parley"]["messageId"] for p in fake.pushes_to(token)]
        assert sorted(ids) == sorted(sent), "every message pushed, none twice"
    finally:
        cluster.stop()
        fake.stop()


class Load:
    """Senders that keep sending with client ids, each to its node, retrying what was not
    acknowledged (on another node when theirs is gone, after a pause when the answer was 503),
    and devices on every node that reconnect to another node with their position when theirs
    goes away."""

    def __init__(self, cluster, senders=6, rooms=2):
        self.cluster = cluster
        nodes = cluster.nodes
        self.owner = Client(nodes[0]).register(f"owner{uuid.uuid4().hex[:6]}")
        self.names = [f"s{uuid.uuid4().hex[:6]}{i}" for i in range(senders)]
        for name in self.names:
            Client(nodes[0]).register(name)
        self.rooms = [self.owner.post("/v1/conversations", {"kind": "group", "title": f"load {i}", "members": self.names})[1]["id"]
                      for i in range(rooms)]
        self.acked = {}            # clientId -> (room, message id, seq)
        self.unavailable = 0       # 503 answers seen
        self.lock = threading.Lock()
        self.stop_event = threading.Event()      # the senders stop
        self.listening_done = threading.Event()  # the listeners stop (after verify has checked them)
        self.threads = [threading.Thread(target=self.sender, args=(i,), daemon=True) for i in range(senders)]
        self.listeners = []
        for index, node in enumerate(nodes):
            listener = Client(node).sign_in(self.names[index % senders], device=f"listener{index}")
            device = Device(node, listener.token)
            device.wait_ready()
            self.listeners.append({"token": listener.token, "device": device, "devices": [device], "node": index, "reconnects": 0})
        self.listener_threads = [threading.Thread(target=self.listen, args=(entry,), daemon=True) for entry in self.listeners]

    def alive_nodes(self):
        return [node for node in self.cluster.nodes if node.process.poll() is None]

    def sender(self, index):
        node_index = index % len(self.cluster.nodes)
        client = None
        sequence = 0
        pending = None
        while not self.stop_event.is_set():
            if pending is None:
                room = self.rooms[sequence % len(self.rooms)]
                pending = (room, f"{self.names[index]}-{sequence}")
                sequence += 1
            try:
                if client is None:
                    node = self.cluster.nodes[node_index]
                    if node.process.poll() is not None:
                        node_index = (node_index + 1) % len(self.cluster.nodes)
                        continue
                    client = Client(node).sign_in(self.names[index])
                status, answer = client.send(pending[0], f"message {pending[1]}", client_id=pending[1])
            except (OSError, AssertionError, json.JSONDecodeError, Exception):  # noqa: BLE001 - any failure: retry elsewhere
                client = None
                node_index = (node_index + 1) % len(self.cluster.nodes)
                time.sleep(0.05)
                continue
            if status in (200, 201):
                with self.lock:
                    self.acked[pending[1]] = (pending[0], answer["id"], answer["seq"])
                pending = None
            elif status == 503:
                with self.lock:
                    self.unavailable += 1
                time.sleep(0.1)
            else:
                raise AssertionError(f"unexpected answer {status}: {answer}")

    def listen(self, entry):
        while not self.listening_done.is_set():
            device = entry["device"]
            try:
                device.next(timeout=0.5)   # the device keeps every event it receives (replayed ones too)
            except TimeoutError:
                continue
            except (ConnectionClosed, OSError):
                # Its node went away: resume on another one from the last position seen.
                alive = self.alive_nodes()
                if not alive:
                    return
                node = alive[entry["reconnects"] % len(alive)]
                entry["reconnects"] += 1
                try:
                    resumed = Device(node, entry["token"], position=device.position, cursor=device.cursor)
                    resumed.wait_ready()
                    entry["device"] = resumed
                    entry["devices"].append(resumed)
                except Exception:  # noqa: BLE001 - the node may be going too; try the next
                    time.sleep(0.1)

    def start(self):
        for thread in self.threads + self.listener_threads:
            thread.start()

    def wait_for_acks(self, count, timeout=60):
        wait_until(lambda: len(self.acked) >= count, timeout=timeout, what=f"{count} acknowledged sends")

    def finish(self):
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=30)

    @staticmethod
    def events(entry):
        """Everything a listener received, over all its connections, in order."""
        return [event for device in entry["devices"] for event in device.events]

    def verify(self, reader_node):
        """Stored exactly once, gap-free seqs, unique positions; every device got every event
        once, in order."""
        reader = Client(reader_node).sign_in(self.owner.user["username"])
        stored = {}
        positions = set()
        for room in self.rooms:
            events, after = [], 0
            while True:
                status, page = reader.get(f"/v1/conversations/{room}/events?after={after}&limit=200")
                assert status == 200, page
                events += page["events"]
                if not page["hasMore"]:
                    break
                after = page["events"][-1]["seq"]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "seq gap-free per conversation"
            for event in events:
                assert event["position"] not in positions, "positions unique"
                positions.add(event["position"])
                if event["type"] == "message.created":
                    client_id = event["message"]["clientId"]
                    assert client_id not in stored, f"{client_id} stored twice"
                    stored[client_id] = (room, event["message"]["id"], event["seq"])
        for client_id, acked in self.acked.items():
            assert stored.get(client_id) == acked, f"acknowledged {client_id} {acked} is stored as {stored.get(client_id)}"
        # A log of several shards orders each shard apart (docs/protocol.md, "Resuming").
        shards = self.listeners[0]["devices"][0].ready.get("shards", 1)
        newest = {shard: max(p for p in positions if p % shards == shard) for shard in {p % shards for p in positions}}
        # Every device catches up to the newest event of each shard (from Redis, a repair or a resume) …
        for entry in self.listeners:
            wait_until(lambda entry=entry: all(any(e["position"] >= last and e["position"] % shards == shard for e in self.events(entry))
                                               for shard, last in newest.items()), timeout=30,
                       what=f"listener {entry['node']} to reach {newest}")
        for entry in self.listeners:
            seen = [e["position"] for e in self.events(entry)]
            assert len(seen) == len(set(seen)), f"listener {entry['node']}: each event once"
            for shard in range(shards):
                in_shard = [p for p in seen if p % shards == shard]
                assert in_shard == sorted(in_shard), f"listener {entry['node']}: shard {shard}'s events in position order"
            got = {e["message"]["clientId"] for e in self.events(entry) if e["type"] == "message.created"}
            missing = {client_id for client_id, (room, _, _) in stored.items()} - got
            assert not missing, f"listener {entry['node']} missed {len(missing)} messages, e.g. {sorted(missing)[:3]}"
        self.listening_done.set()
        for thread in self.listener_threads:
            thread.join(timeout=10)
        for entry in self.listeners:
            entry["device"].close()
        return stored


def test_kill_9_one_node_mid_load_loses_and_duplicates_nothing(cluster):
    load = Load(cluster)
    load.start()
    load.wait_for_acks(150)
    cluster.nodes[1].kill()
    before = len(load.acked)
    load.wait_for_acks(before + 300)
    load.finish()
    stored = load.verify(cluster.nodes[0])
    assert len(stored) >= 450
    assert load.listeners[1]["reconnects"] >= 1, "the killed node's device resumed elsewhere"


def test_on_a_log_of_four_shards_kill_9_of_a_node_and_of_redis_lose_and_duplicate_nothing(services):
    """Decision 0026, part 4: a database made with --log-shards 4 commits each shard on its own
    writer; every guarantee of the load above holds per shard — through kill -9 of a node and
    of Redis — and devices resume from their cursors."""
    sharded = Cluster(services, extra=("--log-shards", "4"))
    try:
        load = Load(sharded, rooms=8)  # spread over the shards (all in one: 4 × 4^-8)
        load.start()
        load.wait_for_acks(150)
        sharded.nodes[1].kill()
        killed = len(load.acked)
        load.wait_for_acks(killed + 150)
        sharded.services.kill_redis()
        during = len(load.acked)
        load.wait_for_acks(during + 100)
        sharded.services.start_redis()
        after = len(load.acked)
        load.wait_for_acks(after + 100)
        load.finish()
        stored = load.verify(sharded.nodes[0])
        assert len(stored) >= 500
        assert load.listeners[0]["devices"][0].ready["shards"] == 4
        assert load.listeners[1]["reconnects"] >= 1, "the killed node's device resumed elsewhere from its cursor"
        shards_used = {position % 4 for position in (e["position"] for entry in load.listeners for e in Load.events(entry))}
        assert len(shards_used) > 1, "the rooms' events are spread over the shards"
        # The other nodes' writes came through Redis, each message taken for this log's (not
        # only found by the database poll).
        body = Client(sharded.nodes[0]).request_bytes("GET", "/metrics", authenticated=False)[1].decode()
        bus = {line.split()[0]: float(line.split()[-1]) for line in body.splitlines() if line.startswith("parley_bus_")}
        assert bus["parley_bus_received_total"] > 0 and bus["parley_bus_undecodable_total"] == 0 and bus["parley_bus_foreign_total"] == 0, bus
    finally:
        sharded.stop()


def test_a_logs_shards_are_fixed_when_its_database_is_made(services):
    """--log-shards decides a new database's shards; a database that already has a log keeps
    its own, and the node says so in its log instead of changing positions under devices."""
    one = Cluster(services, count=1)
    try:
        node = one.nodes[0]
        alice = Client(node).register("shardalice")
        alice.post("/v1/conversations", {"kind": "group", "title": "before"})
        node.stop()
        again = Server(*one.flags, "--log-shards", "4", "--log-format", "json", data=one.data)
        one.nodes = [again]
        again.app_key = node.app_key
        device = Device(again, Client(again).sign_in("shardalice").token)
        assert device.wait_ready()["shards"] == 1 and len(device.ready["cursor"]) == 1
        device.close()
        again.stop()
        logged = [json.loads(line) for line in again.log if line.startswith("{")]
        warned = [entry for entry in logged if "shards are fixed" in entry.get("message", "")]
        assert warned and warned[0]["level"] == "warn" and warned[0]["shards"] == 1 and warned[0]["asked"] == 4, logged[-5:]
    finally:
        one.stop()


def test_redis_killed_mid_load_and_started_again_loses_nothing(cluster):
    load = Load(cluster)
    load.start()
    load.wait_for_acks(150)
    cluster.services.kill_redis()
    during = len(load.acked)
    load.wait_for_acks(during + 150)      # nodes keep committing without Redis
    cluster.services.start_redis()
    after = len(load.acked)
    load.wait_for_acks(after + 150)
    load.finish()
    load.verify(cluster.nodes[2])
    # What the nodes could not get through Redis they read from the database.
    repairs = 0
    for node in cluster.nodes:
        status, body, _ = Client(node).request_bytes("GET", "/metrics", authenticated=False)
        assert status == 200
        for line in body.decode().splitlines():
            if line.startswith("parley_bus_repairs_total "):
                repairs += int(line.split()[1])
            if line.startswith("parley_bus_subscribed "):
                assert line.split()[1] == "1", "every node subscribed again"
    assert repairs > 0


def authenticate_once(node, token):
    """One realtime sign-in: ("ready", None) or ("closed", close code, the error codes the
    server sent before closing)."""
    try:
        device = Device(node, token)
    except (OSError, ConnectionClosed, TimeoutError) as failure:
        return ("refused", str(failure), ())
    try:
        device.until(lambda f: f["type"] == "ready", timeout=10)
        return ("ready", None, ())
    except ConnectionClosed as closed:
        errors = tuple(f["error"]["code"] for f in device.frames if f["type"] == "error")
        return ("closed", closed.rcvd.code if closed.rcvd else None, errors)
    finally:
        device.close()


def test_postgres_stopped_for_seconds_refuses_sends_retryably_and_recovers(cluster):
    load = Load(cluster)
    load.start()
    load.wait_for_acks(150)
    # Devices that were never signed out, signing in on every node through the outage (issue 30,
    # item 4): a blip of the database must never look like "your session is over".
    tokens = [Client(node).sign_in(load.names[index], device=f"blip{index}").token for index, node in enumerate(cluster.nodes)]
    cluster.services.stop_postgres()
    stopped = time.monotonic()
    during = []
    while time.monotonic() - stopped < 3:   # the outage lasts a few seconds: sign in through it
        for node, token in zip(cluster.nodes, tokens):
            during.append(authenticate_once(node, token))
    cluster.services.start_postgres()
    after = len(load.acked)
    load.wait_for_acks(after + 150, timeout=60)   # the nodes recovered by themselves
    load.finish()
    assert load.unavailable > 0, "sends during the outage were answered 503 (retryable)"
    signed_out = [answer for answer in during if answer[1] == 4001 or "unauthenticated" in answer[2]]
    assert not signed_out, f"a database blip signed a device out: {signed_out}"
    assert not [answer for answer in during if "internal_error" in answer[2]], "a sign-in during the outage was answered internal_error"
    assert ("closed", 1013, ("store_unavailable",)) in during, \
        f"sign-ins during the outage were told to try again (1013, store_unavailable): {sorted(set(during))[:8]}"
    # Every device that tried comes back signed in, without a new password.
    for node, token in zip(cluster.nodes, tokens):
        wait_until(lambda node=node, token=token: authenticate_once(node, token)[0] == "ready", timeout=30,
                   what="a device that signed in during the outage to be ready after it")
    # No connected device was ever answered internal_error.
    internal = [frame for entry in load.listeners for device in entry["devices"] for frame in device.frames
                if frame["type"] == "error" and frame["error"]["code"] == "internal_error"]
    assert not internal, f"devices were answered internal_error during the outage: {internal[:3]}"
    load.verify(cluster.nodes[0])


def test_webhooks_from_every_node_arrive_once_in_order_through_a_kill_9(services):
    """Every node delivers webhooks (lanes claimed under an advisory lock): messages sent
    through three nodes, one of them killed mid-stream, each reach the receiver at least once,
    in seq order per conversation; Pusher channel changes are told once across nodes."""
    from test_server_api import Backend
    from webhookreceiver import Receiver
    receiver = Receiver()
    pusher_receiver = Receiver()
    cluster = Cluster(services, extra=["--webhooks-allow-private", "--webhook-first-retry", "100",
                                       "--server-api-requests-per-second", "10000"])
    try:
        first = cluster.nodes[0]
        first_secret = first.app_secret
        backends = []
        for node in cluster.nodes:
            backend = Backend(node, secret=first_secret)
            backends.append(backend)
        status, hook = backends[0].call("POST", "/v1/server/webhooks", {"url": receiver.url, "events": ["message.created"]})
        assert status == 201
        receiver.secret = hook["secret"]
        status, _ = backends[0].call("POST", "/v1/server/webhooks", {
            "url": pusher_receiver.url, "format": "pusher", "events": ["channel_occupied", "channel_vacated", "member_added", "member_removed"]})
        assert status == 201
        for name in ("wn-ann", "wn-ben"):
            backends[0].call("POST", "/v1/server/users", {"username": name})
        status, room = backends[0].call("POST", "/v1/server/conversations", {"kind": "group", "title": "N", "members": ["wn-ann", "wn-ben"]})
        acknowledged = []
        stop = threading.Event()

        def sender(backend):
            n = 0
            while not stop.is_set():
                try:
                    status, message = backend.call("POST", f"/v1/server/conversations/{room['id']}/messages",
                                                   {"from": "wn-ann", "clientId": uuid.uuid4().hex, "content": {"type": "text", "text": f"n{n}"}})
                except OSError:
                    return
                if status != 201:
                    return
                acknowledged.append((message["seq"], message["id"]))
                n += 1
        threads = [threading.Thread(target=sender, args=(b,)) for b in backends]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(receiver.deliveries) >= 60, what="deliveries under way")
        cluster.nodes[1].kill()
        wait_until(lambda: len(acknowledged) >= 200, what="more sends after the kill")
        stop.set()
        for thread in threads:
            thread.join()
        expected = {message_id for _, message_id in acknowledged}
        deliveries = receiver.wait_for(lambda ds: {d["data"]["message"]["id"] for d in ds} >= expected, timeout=60,
                                       what=f"{len(expected)} acknowledged messages delivered")
        seqs = [d["data"]["message"]["seq"] for d in deliveries]
        unique = list(dict.fromkeys(seqs))
        assert unique == sorted(unique), "one conversation's messages arrive in seq order"
        assert receiver.bad_signatures == 0
        # Pusher: sockets on two nodes in one presence channel; occupied, added, removed and
        # vacated arrive once each however many nodes hold the channel.
        from test_pusher import backend as pusher_library
        one, three = cluster.nodes[0], cluster.nodes[2]
        api = pusher_backend(cluster, one)
        channel = f"presence-n-{uuid.uuid4().hex[:6]}"
        a, _ = join_presence(api, one, channel, "zed", "Zed")
        b, _ = join_presence(api, three, channel, "zed", "Zed")
        a.close()
        b.close()
        events = lambda: [e["name"] for d in pusher_receiver.deliveries for e in d["events"] if e["channel"] == channel]
        wait_until(lambda: "channel_vacated" in events(), what="channel_vacated")
        assert events() == ["channel_occupied", "member_added", "member_removed", "channel_vacated"], events()
        for delivery in pusher_receiver.deliveries:
            headers = delivery["_headers"]
            assert pusher_library(one).validate_webhook(headers["X-Pusher-Key"], headers["X-Pusher-Signature"], delivery["_raw"])
    finally:
        stop.set()
        cluster.stop()
        receiver.close()
        pusher_receiver.close()
