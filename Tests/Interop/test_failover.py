"""PostgreSQL failover without loss (issue 30, item 3), the runbook of docs/operations.md
("Failover: a primary and a synchronous standby") step by step on 127.0.0.1:

1. a primary and a standby streaming from it, the standby synchronous, so a commit is
   acknowledged only once the standby has it;
2. three nodes given both hosts in libpq's multi-host form
   (`postgresql://…@h1:p1,h2:p2/parley?target_session_attrs=read-write`), under retrying load;
3. the primary killed (-9, with every backend: the machine is gone), the standby promoted;
4. every acknowledged message stored exactly once, gap-free seqs, every device caught up, no
   device signed out while the database was away;
5. the old primary brought back as the new primary's synchronous standby (pg_rewind), holding
   what was written after the failover.

Run in the PostgreSQL pass of `make test`.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from parley import ON_POSTGRES, Client, Server, wait_until
from test_nodes import Load, authenticate_once

pytestmark = pytest.mark.skipif(not ON_POSTGRES, reason="runs once, in the PostgreSQL pass (it starts its own PostgreSQL pair)")

PG_BIN = max((os.path.join("/usr/lib/postgresql", version, "bin") for version in os.listdir("/usr/lib/postgresql")),
             key=lambda path: int(path.split("/")[-2])) if os.path.isdir("/usr/lib/postgresql") else ""


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def as_postgres(*command, check=True):
    """Runs a PostgreSQL tool as the unprivileged `postgres` user when the tests run as root."""
    if os.getuid() == 0:
        command = ("runuser", "-u", "postgres", "--", *command)
    result = subprocess.run(command, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({result.returncode}): {result.stdout[-1000:]} {result.stderr[-2000:]}")
    return result


class Pair:
    """Two PostgreSQL servers on 127.0.0.1, `a` the primary and `b` its synchronous standby,
    made as the runbook says; and a Redis for the nodes."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="parley-failover-")
        os.chmod(self.dir, 0o755)
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self.ports = {"a": free_port(), "b": free_port()}
        self.data = {name: os.path.join(self.dir, name) for name in self.ports}
        # The primary: replication on, hints for pg_rewind, and commits wait for the standby.
        as_postgres(os.path.join(PG_BIN, "initdb"), "-D", self.data["a"], "-A", "trust", "-U", "postgres", "--no-sync",
                    "-E", "UTF8", "--locale=C.UTF-8")
        with open(os.path.join(self.data["a"], "postgresql.conf"), "a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 5\nwal_log_hints = on\nwal_keep_size = 1GB\nhot_standby = on\n"
                       "max_connections = 200\nfsync = off\n")
        with open(os.path.join(self.data["a"], "postgresql.auto.conf"), "a") as conf:
            conf.write("cluster_name = 'parley_a'\nsynchronous_standby_names = 'parley_b'\n")
        self.start("a")
        # The standby: a base backup of the primary that follows it (-R), named so the primary
        # waits for it, and with nothing to wait for itself once promoted.
        as_postgres(os.path.join(PG_BIN, "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.ports["a"]), "-U", "postgres",
                    "-D", self.data["b"], "-R", "-X", "stream", "-c", "fast")
        with open(os.path.join(self.data["b"], "postgresql.auto.conf"), "a") as conf:
            conf.write("cluster_name = 'parley_b'\nsynchronous_standby_names = ''\n")
        self.start("b")
        wait_until(lambda: self.sql("a", "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'parley_b'") == "sync",
                   what="the standby to stream synchronously")
        self.sql("a", "CREATE DATABASE parley")
        self.redis_port = free_port()
        subprocess.run(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", self.dir, "--daemonize", "yes", "--pidfile", os.path.join(self.dir, "redis.pid"),
                        "--logfile", os.path.join(self.dir, "redis.log")], check=True)
        wait_until(lambda: subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True).returncode == 0,
                   what="Redis to answer")

    @property
    def database_url(self):
        """What every node is given: both hosts, and only a primary will do."""
        return (f"postgresql://postgres@127.0.0.1:{self.ports['a']},127.0.0.1:{self.ports['b']}/parley"
                "?target_session_attrs=read-write")

    def start(self, name):
        as_postgres(os.path.join(PG_BIN, "pg_ctl"), "-D", self.data[name], "-l", os.path.join(self.dir, f"{name}.log"), "-w", "start",
                    "-o", f"-c listen_addresses=127.0.0.1 -p {self.ports[name]} -k {self.dir}")

    def sql(self, name, statement, database="postgres"):
        result = subprocess.run(["psql", f"postgresql://postgres@127.0.0.1:{self.ports[name]}/{database}", "-XAtqc", statement],
                                capture_output=True, text=True, timeout=30)
        return result.stdout.strip() if result.returncode == 0 else None

    def kill(self, name):
        """kill -9 of the server and every backend: the machine is gone."""
        with open(os.path.join(self.data[name], "postmaster.pid")) as file:
            postmaster = int(file.readline())
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True, text=True).stdout.split()
        for pid in [postmaster, *map(int, children)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: all(not os.path.exists(f"/proc/{pid}") for pid in [postmaster, *map(int, children)]),
                   what="the primary's processes to be gone")

    def stop(self):
        for name in self.data:
            as_postgres(os.path.join(PG_BIN, "pg_ctl"), "-D", self.data[name], "-m", "immediate", "stop", check=False)
        try:
            with open(os.path.join(self.dir, "redis.pid")) as file:
                os.kill(int(file.read().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Nodes:
    """Three nodes on the pair (what `Load` drives)."""

    def __init__(self, pair):
        self.data = tempfile.mkdtemp(prefix="parley-failover-data-")
        flags = ["--database-url", pair.database_url, "--redis-url", f"redis://127.0.0.1:{pair.redis_port}", "--presence-grace", "1"]
        self.nodes = [Server(*flags, data=self.data) for _ in range(3)]
        for node in self.nodes[1:]:
            node.app_key = self.nodes[0].app_key

    def stop(self):
        for node in self.nodes:
            if node.process.poll() is None:
                node.stop()


def test_the_primary_dies_the_standby_is_promoted_and_nothing_acknowledged_is_lost_or_signed_out():
    pair = Pair()
    cluster = None
    try:
        cluster = Nodes(pair)
        load = Load(cluster)
        load.start()
        load.wait_for_acks(150)
        tokens = [Client(node).sign_in(load.names[index], device=f"failover{index}").token for index, node in enumerate(cluster.nodes)]

        pair.kill("a")
        acked_at_failure = len(load.acked)
        # Devices that were never signed out sign in while there is no primary at all.
        during = []
        gone = time.monotonic()
        while time.monotonic() - gone < 1.5:
            for node, token in zip(cluster.nodes, tokens):
                during.append(authenticate_once(node, token))
        promoting = time.monotonic()
        as_postgres(os.path.join(PG_BIN, "pg_ctl"), "-D", pair.data["b"], "-w", "promote")
        promoted = time.monotonic() - promoting
        wait_until(lambda: len(load.acked) > acked_at_failure + 5, timeout=60, what="writes to resume on the promoted standby")
        resumed = time.monotonic() - promoting
        load.wait_for_acks(len(load.acked) + 150, timeout=60)
        load.finish()

        signed_out = [answer for answer in during if answer[1] == 4001 or "unauthenticated" in answer[2]]
        assert not signed_out, f"the failover signed a device out: {signed_out}"
        assert not [answer for answer in during if "internal_error" in answer[2]], "a sign-in during the failover was answered internal_error"
        for node, token in zip(cluster.nodes, tokens):
            wait_until(lambda node=node, token=token: authenticate_once(node, token)[0] == "ready", timeout=30,
                       what="a device that signed in during the failover to be ready after it")
        internal = [frame for entry in load.listeners for device in entry["devices"] for frame in device.frames
                    if frame["type"] == "error" and frame["error"]["code"] == "internal_error"]
        assert not internal, f"devices were answered internal_error during the failover: {internal[:3]}"
        stored = load.verify(cluster.nodes[0])
        assert len(stored) >= 300
        print(f"promotion took {promoted:.2f} s; writes resumed {resumed:.2f} s after it began; "
              f"{load.unavailable} sends answered 503 meanwhile")

        # The old primary comes back as the new primary's synchronous standby (the runbook's
        # last step), with everything written since the failover.
        # A checkpoint first: until the promoted server writes one, its control file still
        # names the old timeline and pg_rewind finds nothing to rewind.
        pair.sql("b", "CHECKPOINT")
        as_postgres(os.path.join(PG_BIN, "pg_rewind"), "-D", pair.data["a"], "-R",
                    f"--source-server=host=127.0.0.1 port={pair.ports['b']} user=postgres dbname=postgres")
        with open(os.path.join(pair.data["a"], "postgresql.auto.conf"), "a") as conf:
            conf.write("cluster_name = 'parley_a'\nsynchronous_standby_names = ''\n")
        pair.start("a")
        pair.sql("b", "ALTER SYSTEM SET synchronous_standby_names = 'parley_a'")
        pair.sql("b", "SELECT pg_reload_conf()")
        wait_until(lambda: pair.sql("b", "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'parley_a'") == "sync",
                   timeout=60, what="the old primary to stream from the new one, synchronously")
        status, sent = Client(cluster.nodes[1]).sign_in(load.names[0]).send(load.rooms[0], "after the rejoin", client_id="rejoined")
        assert status == 201, sent
        assert pair.sql("a", "SELECT count(*) FROM message WHERE client_id = 'rejoined'", database="parley") == "1", \
            "a message acknowledged after the rejoin is on the old primary too (synchronous again)"
        assert pair.sql("a", "SELECT pg_is_in_recovery()") == "t"
    finally:
        try:
            if cluster:
                cluster.stop()
        finally:
            pair.stop()   # even when a node would not stop: no PostgreSQL is left behind
