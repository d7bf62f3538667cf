"""TLS in the binary (issue 16): --tls-cert-file and --tls-key-file serve HTTPS and WSS through
OpenSSL, to clients nobody here wrote (curl, Python's ssl with http.client and websockets);
SIGHUP loads a new certificate for new connections while open ones go on, and a broken one is
refused with the old kept; a plain-HTTP or garbage client is dropped without harm."""
import json
import os
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import uuid

import pytest
from websockets.sync.client import connect as ws_connect

from parley import Client, Server, wait_until
from tlscerts import Authority


@pytest.fixture(scope="module")
def authority():
    return Authority()


@pytest.fixture()
def tls_server(authority):
    cert, key = authority.issue()
    directory = os.path.dirname(cert)
    live_cert, live_key = os.path.join(directory, f"live-{uuid.uuid4().hex}.pem"), os.path.join(directory, f"live-{uuid.uuid4().hex}.key")
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    context = ssl.create_default_context(cafile=authority.cert)
    server = Server("--tls-cert-file", live_cert, "--tls-key-file", live_key, ssl_context=context)
    server.live = (live_cert, live_key)
    yield server
    if server.process.poll() is None:
        assert server.stop() == 0


def peer_certificate(server):
    context = ssl.create_default_context(cafile=server.ssl_context and None)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((server.host, server.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=server.host) as wrapped:
            return wrapped.getpeercert(binary_form=True)


def test_https_and_wss_work_for_real_clients_and_the_certificate_is_checked(tls_server, authority):
    assert tls_server.url.startswith("https://")
    curl = subprocess.run(["curl", "-sS", "--cacert", authority.cert, f"{tls_server.url}/healthz"], capture_output=True, text=True)
    assert curl.returncode == 0 and json.loads(curl.stdout)["status"] == "ok"
    # Without the CA, curl refuses the certificate: it is really TLS with this certificate.
    assert subprocess.run(["curl", "-sS", f"{tls_server.url}/healthz"], capture_output=True).returncode != 0

    alice = Client(tls_server).register(f"alice{uuid.uuid4().hex[:6]}")
    bob = Client(tls_server).register(f"bob{uuid.uuid4().hex[:6]}")
    status, room = alice.post("/v1/conversations", {"kind": "group", "title": "tls", "members": [bob.user["username"]]})
    assert status == 201
    with ws_connect(f"wss://{tls_server.host}:{tls_server.port}/v1/realtime", ssl=tls_server.ssl_context,
                    additional_headers={"X-Parley-App-Key": tls_server.app_key}, open_timeout=10) as socket_:
        socket_.send(json.dumps({"type": "auth", "token": bob.token}))
        assert json.loads(socket_.recv(timeout=10))["type"] == "ready"
        big = "é" * 10_000   # 20 kB: more than one TLS record (16 KiB)
        status, sent = alice.send(room["id"], big)
        assert status == 201
        while True:
            frame = json.loads(socket_.recv(timeout=10))
            if frame["type"] == "event" and frame["event"]["type"] == "message.created":
                assert frame["event"]["message"]["content"]["text"] == big
                break


def test_plain_http_and_garbage_on_the_tls_port_are_dropped_and_the_server_goes_on(tls_server):
    for payload in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(600), b"\x16\x03\x01\x00\x05hello"):
        with socket.create_connection((tls_server.host, tls_server.port), timeout=10) as raw:
            raw.sendall(payload)
            raw.settimeout(10)
            try:
                answer = raw.recv(4096)
            except ConnectionResetError:
                answer = b""
            assert b"HTTP/1.1 200" not in answer
    assert Client(tls_server).get("/v1/me")[0] == 401   # HTTPS still answers


def test_sighup_loads_a_new_certificate_for_new_connections_and_keeps_the_old_when_the_new_is_broken(tls_server, authority):
    first = peer_certificate(tls_server)
    bob = Client(tls_server).register(f"bob{uuid.uuid4().hex[:6]}")
    with ws_connect(f"wss://{tls_server.host}:{tls_server.port}/v1/realtime", ssl=tls_server.ssl_context,
                    additional_headers={"X-Parley-App-Key": tls_server.app_key}, open_timeout=10) as open_socket:
        open_socket.send(json.dumps({"type": "auth", "token": bob.token}))
        assert json.loads(open_socket.recv(timeout=10))["type"] == "ready"

        cert, key = authority.issue("renewed")
        shutil.copy(cert, tls_server.live[0])
        shutil.copy(key, tls_server.live[1])
        tls_server.process.send_signal(signal.SIGHUP)
        wait_until(lambda: peer_certificate(tls_server) != first, timeout=10, what="the new certificate to be served")
        renewed = peer_certificate(tls_server)

        # The socket opened before the reload still works.
        open_socket.send(json.dumps({"type": "ping", "id": "p1"}))
        assert json.loads(open_socket.recv(timeout=10))["type"] == "pong"

        # A broken file: the reload is refused and the current certificate stays.
        with open(tls_server.live[0], "w") as file:
            file.write("not a certificate\n")
        tls_server.process.send_signal(signal.SIGHUP)
        wait_until(lambda: any("kept the current certificate" in line for line in tls_server.log), what="the refusal on stderr")
        line = next(line for line in tls_server.log if "kept the current certificate" in line)
        assert tls_server.live[0] in line
        assert peer_certificate(tls_server) == renewed
        assert Client(tls_server).get("/v1/me")[0] == 401


def test_only_both_tls_files_together_are_accepted(authority):
    cert, key = authority.issue()
    from parley import BINARY
    alone = subprocess.run([BINARY, "--port", "0", "--tls-cert-file", cert], capture_output=True, text=True, timeout=30)
    assert alone.returncode == 64 and "--tls-key-file" in alone.stderr
    other_cert, _ = authority.issue()
    # A data directory of its own: the server opens its database before it reads the pair
    # (the default, ./data, is the caller's, and may hold anything).
    mismatched = subprocess.run([BINARY, "--port", "0", "--data-dir", tempfile.mkdtemp(prefix="parley-tls-data-"),
                                 "--tls-cert-file", other_cert, "--tls-key-file", key],
                                capture_output=True, text=True, timeout=30)
    assert mismatched.returncode != 0 and "does not belong" in mismatched.stderr


def can_bind_mount():
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not can_bind_mount(), reason="needs `unshare -m` (root) to trust the test CA in a private mount namespace")
def test_the_parley_cli_speaks_https_and_wss(tls_server, authority):
    # The CLI's HTTPS is Foundation's URLSession (libcurl, the system CA bundle) and its WSS
    # is ParleyNet's client (OpenSSL's default paths): both trust the system bundle, so the
    # test CA is added to a copy of it mounted over the real one in a namespace of its own.
    from parley import ROOT
    cli = os.path.join(ROOT, ".build", "debug", "parley")
    system = "/etc/ssl/certs/ca-certificates.crt"
    bundle = os.path.join(os.path.dirname(authority.cert), "bundle.crt")
    with open(bundle, "w") as out, open(system) as base, open(authority.cert) as ca:
        out.write(base.read() + "\n" + ca.read())

    def run(home, *args, password=None, popen=False):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        env.update(PARLEY_HOME=home, SSL_CERT_FILE=system)
        command = ["unshare", "-m", "sh", "-c", f'mount --bind "$0" {system} && exec "$@"', bundle, cli,
                   "--server", tls_server.url, "--app-key", tls_server.app_key, *args]
        if popen:
            return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return subprocess.run(command, input=(password + "\n") if password else "", env=env, capture_output=True, text=True, timeout=60)

    ana_home, bob_home = tempfile.mkdtemp(), tempfile.mkdtemp()
    ana_name, bob_name = f"ana{uuid.uuid4().hex[:6]}", f"bob{uuid.uuid4().hex[:6]}"
    registered = run(ana_home, "register", ana_name, password="correct horse battery")
    assert registered.returncode == 0, registered.stderr
    assert run(bob_home, "register", bob_name, password="correct horse battery").returncode == 0
    sent = run(ana_home, "send", "--to", bob_name, "over https")
    assert sent.returncode == 0, sent.stderr
    conversation = sent.stdout.strip().split("\t")[2]
    listener = run(bob_home, "listen", "--json", "--conversation", conversation, popen=True)
    try:
        deadline = time.monotonic() + 30
        seen = False
        while not seen and time.monotonic() < deadline:
            text = f"over wss {uuid.uuid4().hex[:6]}"
            assert run(ana_home, "send", conversation, text).returncode == 0
            ready, _, _ = select.select([listener.stdout], [], [], 2)
            while ready and not seen:
                line = listener.stdout.readline()
                if not line:
                    break
                event = json.loads(line)
                seen = event.get("type") == "message.created" and event["message"]["content"].get("text") == text
                ready, _, _ = select.select([listener.stdout], [], [], 0.5)
        assert seen, f"the listener (over wss) printed nothing; stderr: {listener.stderr.read() if listener.poll() is not None else ''}"
    finally:
        listener.kill()
        listener.wait()


def handshake(server, *options):
    """openssl s_client against the server: (handshake made, the cipher it settled on)."""
    result = subprocess.run(["openssl", "s_client", "-connect", f"{server.host}:{server.port}", "-servername", "localhost", *options],
                            input="", capture_output=True, text=True, timeout=30)
    # "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"; "(NONE)" when no suite was agreed.
    cipher = next((line.split("Cipher is", 1)[1].strip() for line in result.stdout.splitlines() if "Cipher is" in line), "")
    made = result.returncode == 0 and cipher not in ("", "0000", "(NONE)")
    return made, cipher


def test_tls_offers_forward_secret_aead_suites_only_in_the_servers_order_and_https_says_hsts(authority):
    # An RSA certificate: the one kind with which a server could offer static-RSA key exchange.
    cert, key = authority.issue("rsa-server", key_type="rsa")
    server = Server("--tls-cert-file", cert, "--tls-key-file", key, ssl_context=ssl.create_default_context(cafile=authority.cert))
    try:
        # Static RSA key exchange (no forward secrecy) and CBC suites (LUCKY13): refused.
        for refused in ("AES128-GCM-SHA256", "AES256-SHA256", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384", "DHE-RSA-AES128-GCM-SHA256"):
            made, cipher = handshake(server, "-tls1_2", "-cipher", refused)
            assert not made, f"TLS 1.2 with {refused} was accepted ({cipher})"
        # ECDHE with AEAD: accepted, and the server's order wins over the client's.
        made, cipher = handshake(server, "-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256")
        assert made and cipher == "ECDHE-RSA-AES128-GCM-SHA256", cipher
        made, cipher = handshake(server, "-tls1_3")
        assert made and cipher.startswith("TLS_"), cipher
        # Nothing older than 1.2.
        assert not handshake(server, "-tls1_1")[0]
        # HSTS on every HTTPS response.
        result = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", "--cacert", authority.cert, server.url + "/healthz"],
                                capture_output=True, text=True, timeout=30)
        assert "strict-transport-security: max-age=63072000" in result.stdout.lower(), result.stdout
    finally:
        server.stop()


def test_plain_http_has_no_hsts():
    server = Server()
    try:
        if server.url.startswith("https://"):
            pytest.skip("the TLS pass serves HTTPS everywhere")
        result = subprocess.run(["curl", "-sS", "-D", "-", "-o", "/dev/null", server.url + "/healthz"], capture_output=True, text=True, timeout=30)
        assert "strict-transport-security" not in result.stdout.lower()
    finally:
        server.stop()
