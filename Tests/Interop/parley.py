"""A tiny Parley REST client and server launcher for the interop tests and scripts.

Uses only the standard library (http.client), so what it sends is exactly what a third-party
client would send.
"""
import hashlib
import http.client
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("PARLEY_SERVER_BINARY", os.path.join(ROOT, ".build", "debug", "parley-server"))

# Cheap password hashing for tests: Argon2id with 1 pass over 1 MiB (production: 2 and 64).
TEST_FLAGS = ["--argon2-passes", "1", "--argon2-memory-mib", "1", "--signups-per-hour", "1000000"]


# With PARLEY_TEST_TLS=1 (scripts/test.sh's TLS pass), every server serves HTTPS and WSS with a
# certificate from a throwaway CA, and every client here trusts that CA and checks the name.
ON_TLS = os.environ.get("PARLEY_TEST_TLS") == "1"
_authority = None


def tls_flags_and_context():
    """The --tls-* flags of a fresh certificate, and an ssl context that trusts it."""
    global _authority
    import ssl
    from tlscerts import Authority
    if _authority is None:
        _authority = Authority()
    cert, key = _authority.issue()
    return ["--tls-cert-file", cert, "--tls-key-file", key], ssl.create_default_context(cafile=_authority.cert)


# With PARLEY_TEST_POSTGRES_URL set (scripts/test.sh's PostgreSQL pass), every server runs on
# PostgreSQL: one database per data directory, so a server restarted on the same directory
# finds the same data, as it would with SQLite.
POSTGRES_URL = os.environ.get("PARLEY_TEST_POSTGRES_URL")
ON_POSTGRES = bool(POSTGRES_URL)


def database_for(data):
    """The --database-url of the PostgreSQL database that belongs to data directory `data`."""
    name = "parley_" + hashlib.sha1(os.path.abspath(data).encode()).hexdigest()[:20]
    exists = subprocess.run(["psql", POSTGRES_URL, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],
                            capture_output=True, text=True, check=True).stdout.strip()
    if exists != "1":
        subprocess.run(["psql", POSTGRES_URL, "-qc", f"CREATE DATABASE {name}"], capture_output=True, text=True, check=True)
    return POSTGRES_URL.rsplit("/", 1)[0] + "/" + name


def wait_until(condition, timeout=20, what="condition"):
    """Polls an observable condition (a file appearing or going) until it holds or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Server:
    """The real parley-server binary on a free port with its own data directory."""

    # An ssl.SSLContext that trusts the server's certificate, for servers started with TLS.
    ssl_context = None

    def __init__(self, *extra, data=None, ssl_context=None, preexec_fn=None):
        self.ssl_context = ssl_context
        self.preexec_fn = preexec_fn   # run in the child before exec (e.g. a lower descriptor limit)
        self.data = data or tempfile.mkdtemp(prefix="parley-api-")
        self.extra = list(extra)
        if ON_TLS and "--tls-cert-file" not in self.extra:
            flags, self.ssl_context = tls_flags_and_context()
            self.extra += flags
        self.app_key = None
        self.app_secret = None
        self.start()

    def start(self):
        database = self.database_flags()
        self.process = subprocess.Popen(
            [BINARY, "--port", "0", "--threads", "2", "--data-dir", self.data, *TEST_FLAGS, *database, *self.extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=self.preexec_fn)
        line = self.process.stdout.readline()
        if "listening on http://" not in line and "listening on https://" not in line:
            self.process.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.process.stderr.read()!r}")
        self.url = line.split("listening on ")[1].split()[0]
        self.host, port = self.url.split("://", 1)[1].rsplit(":", 1)
        self.port = int(port)
        # The banner: the first start prints the app's key and secret, later ones its key.
        self.banner = []
        while True:
            line = self.process.stdout.readline()
            self.banner.append(line.rstrip("\n"))
            if not line or line.startswith("Health:"):
                break
            if "app key:" in line:
                self.app_key = line.split("app key:")[1].split()[0]
            elif "app secret:" in line:
                said = line.split("app secret:")[1].strip()
                if said.startswith("written to "):
                    # Not a terminal: the first start writes the secret to a file instead of its output.
                    with open(said[len("written to "):].split()[0]) as file:
                        self.app_secret = file.read().strip()
                else:
                    self.app_secret = said.split()[0]
            elif line.startswith("App 'default' key:"):
                self.app_key = line.split("key:")[1].split()[0]
        # What the server writes to stderr (server API log lines, warnings), read as it comes
        # so a full pipe never blocks the server.
        self.log = []
        threading.Thread(target=self._drain, args=(self.process, self.log), daemon=True).start()

    @staticmethod
    def _drain(process, log):
        for line in process.stderr:
            log.append(line.rstrip("\n"))
            if len(log) > 20000:
                del log[:10000]

    def stop(self, timeout=15):
        """SIGTERM, then wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def kill(self):
        """kill -9: no chance to flush or clean up."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self):
        self.stop()
        self.start()

    def database_flags(self):
        """`--database-url` of this server's PostgreSQL database in the PostgreSQL pass, else nothing."""
        return ["--database-url", database_for(self.data)] if ON_POSTGRES and "--database-url" not in self.extra else []

    def apps(self, *args):
        """Runs `parley-server apps …` on this server's data directory (and database)."""
        return subprocess.run([BINARY, "apps", *args, "--data-dir", self.data, *self.database_flags()],
                              capture_output=True, text=True, timeout=30)


def connect(server, timeout=30):
    """An HTTP connection to `server`: HTTPS with its ssl_context when it serves TLS."""
    if server.url.startswith("https://"):
        return http.client.HTTPSConnection(server.host, server.port, timeout=timeout, context=server.ssl_context)
    return http.client.HTTPConnection(server.host, server.port, timeout=timeout)


class Client:
    """One device: an HTTP keep-alive connection with an app key and, once signed in, a token."""

    def __init__(self, server, app_key=None):
        self.server = server
        self.app_key = app_key or server.app_key
        self.token = None
        self.user = None
        self.connection = connect(server)

    def request(self, method, path, body=None, headers=None, raw=None):
        all_headers = {"X-Parley-App-Key": self.app_key} if self.app_key else {}
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        if body is not None or raw is not None:
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        try:
            self.connection.request(method, path, body=payload, headers=all_headers)
            response = self.connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.connection.close()
            self.connection = connect(self.server)
            self.connection.request(method, path, body=payload, headers=all_headers)
            response = self.connection.getresponse()
        data = response.read()
        parsed = json.loads(data) if data else None
        self.last_headers = dict(response.getheaders())
        return response.status, parsed

    def get(self, path, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path, body=None, **kwargs):
        return self.request("POST", path, body if body is not None else {}, **kwargs)

    def patch(self, path, body, **kwargs):
        return self.request("PATCH", path, body, **kwargs)

    def delete(self, path, **kwargs):
        return self.request("DELETE", path, **kwargs)

    def register(self, username, password="correct horse battery", display_name=None, device="test"):
        body = {"username": username, "password": password, "device": device}
        if display_name:
            body["displayName"] = display_name
        status, answer = self.post("/v1/users", body)
        assert status == 201, (status, answer)
        self.token = answer["session"]["token"]
        self.user = answer["user"]
        return self

    def sign_in(self, username, password="correct horse battery", device="test"):
        status, answer = self.post("/v1/sessions", {"username": username, "password": password, "device": device})
        assert status == 201, (status, answer)
        self.token = answer["session"]["token"]
        self.user = answer["user"]
        return self

    def send(self, conversation_id, text=None, content=None, client_id=None, **extra):
        body = {"clientId": client_id or str(uuid.uuid4()), "content": content or {"type": "text", "text": text}, **extra}
        return self.post(f"/v1/conversations/{conversation_id}/messages", body)

    def upload(self, data, kind, mime, name=None, client_id=None, headers=None):
        """POST /v1/media with the file's bytes as the body; returns (status, JSON answer)."""
        query = {"kind": kind}
        if name is not None:
            query["name"] = name
        if client_id is not None:
            query["clientId"] = client_id
        all_headers = {"Content-Type": mime} if mime is not None else {}
        all_headers.update(headers or {})
        if mime is None:
            return self.request_bytes("POST", "/v1/media?" + urllib.parse.urlencode(query), data, all_headers, json_answer=True)[:2]
        return self.request("POST", "/v1/media?" + urllib.parse.urlencode(query), raw=data, headers=all_headers)

    def request_bytes(self, method, path, body=None, headers=None, json_answer=False, authenticated=True):
        """A request whose answer body is returned as bytes: (status, bytes or JSON, headers)."""
        all_headers = {"X-Parley-App-Key": self.app_key} if self.app_key and authenticated else {}
        if self.token and authenticated:
            all_headers["Authorization"] = f"Bearer {self.token}"
        all_headers.update(headers or {})
        connection = connect(self.server, timeout=60)
        try:
            connection.request(method, path, body=body, headers=all_headers)
            response = connection.getresponse()
            data = response.read()
            answer = json.loads(data) if json_answer and data else data
            return response.status, answer, {name.lower(): value for name, value in response.getheaders()}
        finally:
            connection.close()

    def download(self, attachment_id, variant="original", headers=None):
        """GET /v1/media/{id}[/thumbnail] with the bearer token: (status, bytes, headers)."""
        suffix = "/thumbnail" if variant == "thumbnail" else ""
        return self.request_bytes("GET", f"/v1/media/{attachment_id}{suffix}", headers=headers)
