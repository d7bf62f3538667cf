"""Local stand-ins for Apple's and Google's push services, which cannot exist here: the same
protocol (HTTP/2 over TLS with a test CA, HTTP/1.1 refused), and the checks the real ones make.

- APNs: `POST /3/device/<token>` with `authorization: bearer <JWT>`; the JWT must be ES256,
  signed by the team's .p8 key (`kid` = key id, `iss` = team id, `iat` within the hour), and
  the request must carry `apns-topic`, `apns-push-type: alert`, `apns-priority`,
  `apns-expiration`, `apns-collapse-id` (at most 64 bytes) and a JSON payload with `aps`.
- FCM: `POST /token` takes an RS256 JWT assertion signed with the service account's key
  (`iss` = client_email, `aud` = token_uri, the messaging scope) and answers an access token;
  `POST /v1/projects/<id>/messages:send` needs that token and a `message` with `token`.

A token's answer can be held back (`delays[token] = seconds`). Each token's answer can be set (`answers[token] = [410, 200, …]`, consumed in order; 200 once
the list is empty). Every accepted push is recorded."""
import asyncio
import json
import uuid
import os
import tempfile
import threading
import time

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypercorn.asyncio import serve
from hypercorn.config import Config

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


class FakePush:
    def __init__(self, authority, topic="com.example.chat", team="TEAM123456", key_id="KEY1234567", project="parley-test"):
        self.topic, self.team, self.key_id, self.project = topic, team, key_id, project
        self.dir = tempfile.mkdtemp(prefix="parley-push-")
        # The developer's APNs key (.p8, PKCS #8) and Google service account (RSA).
        self.apns_key = ec.generate_private_key(ec.SECP256R1())
        self.key_file = os.path.join(self.dir, f"AuthKey_{key_id}.p8")
        with open(self.key_file, "wb") as file:
            file.write(self.apns_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
        self.fcm_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.cert, self.key = authority.issue("push")
        self.ca = authority.cert
        self.answers = {}
        self.delays = {}          # token → seconds before answering
        self.pending = 0          # requests being held back now
        self.pushes = []          # (provider, token, headers, payload) accepted
        self.refusals = []        # (provider, status, reason) sent back
        self.tokens_issued = 0
        self.verified = {}        # provider token → its iat, once its signature checked out
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.port = None
        self._start()
        self.credentials_file = os.path.join(self.dir, "service-account.json")
        with open(self.credentials_file, "w") as file:
            json.dump({"type": "service_account", "project_id": project, "private_key_id": "k1",
                       "private_key": self.fcm_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                 serialization.NoEncryption()).decode(),
                       "client_email": "parley@parley-test.iam.gserviceaccount.com", "token_uri": f"{self.url}/token"}, file)

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def server_flags(self, apns=True, fcm=True):
        flags = ["--outbound-ca-file", self.ca]
        if apns:
            flags += ["--apns-key-file", self.key_file, "--apns-key-id", self.key_id, "--apns-team-id", self.team,
                      "--apns-topic", self.topic, "--apns-url", self.url]
        if fcm:
            flags += ["--fcm-credentials-file", self.credentials_file, "--fcm-url", f"{self.url}/v1/projects/{self.project}/messages:send"]
        return flags

    def wait_for(self, predicate, timeout=10):
        """Waits until `predicate(pushes)` holds; returns the pushes."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(self.pushes):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"push condition not met in {timeout}s; pushes: {[(p[0], p[1][:12]) for p in self.pushes]}")
                self.changed.wait(left)
            return list(self.pushes)

    def wait_pending(self, predicate, timeout=10):
        """Waits until `predicate(requests held back now)` holds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(self.pending):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.pending} requests held back after {timeout}s")
                self.changed.wait(left)

    def pushes_to(self, token):
        with self.lock:
            return [p for p in self.pushes if p[1] == token]

    # -------------------------------------------------------------- the ASGI app

    def _answer(self, token):
        with self.lock:
            queue = self.answers.get(token)
            return queue.pop(0) if queue else 200

    def _record(self, provider, token, headers, payload):
        with self.changed:
            self.pushes.append((provider, token, headers, payload))
            self.changed.notify_all()

    def _refuse(self, provider, status, reason):
        with self.changed:
            self.refusals.append((provider, status, reason))
            self.changed.notify_all()

    async def _app(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        delay = self.delays.get(scope["path"].removeprefix("/3/device/"), 0)
        if delay:
            with self.changed:
                self.pending += 1
                self.changed.notify_all()
            await asyncio.sleep(delay)  # a provider that answers slowly, or not at all
            with self.changed:
                self.pending -= 1
                self.changed.notify_all()
        status, answer = self._handle(scope, headers, body)
        extra = []
        if scope["path"].startswith("/3/device/"):  # APNs names every answer: the request's apns-id, or one of its own
            extra = [(b"apns-id", (headers.get("apns-id") or str(uuid.uuid4()).upper()).encode())]
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")] + extra})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode() if answer is not None else b""})

    def _handle(self, scope, headers, body):
        path, method = scope["path"], scope["method"]
        if scope["http_version"] != "2":
            return 505, {"reason": "HTTP/2 only"}
        if method == "POST" and path.startswith("/3/device/"):
            return self._apns(path.removeprefix("/3/device/"), headers, body)
        if method == "POST" and path == "/token":
            return self._oauth(headers, body)
        if method == "POST" and path == f"/v1/projects/{self.project}/messages:send":
            return self._fcm(headers, body)
        return 404, {"reason": "NotFound"}

    def _apns(self, token, headers, body):
        auth = headers.get("authorization", "")
        if not auth.startswith("bearer "):
            return self._no("apns", 403, "MissingProviderToken")
        provider_token = auth.removeprefix("bearer ")
        with self.lock:
            verified = self.verified.get(provider_token)
        if verified is None:  # APNs, too, checks a token once and then knows it
            try:
                header = jwt.get_unverified_header(provider_token)
                claims = jwt.decode(provider_token, self.apns_key.public_key(), algorithms=["ES256"], options={"require": ["iat", "iss"]})
            except jwt.PyJWTError:
                return self._no("apns", 403, "InvalidProviderToken")
            if header.get("kid") != self.key_id or claims["iss"] != self.team:
                return self._no("apns", 403, "InvalidProviderToken")
            verified = claims["iat"]
            with self.lock:
                self.verified[provider_token] = verified
        if abs(time.time() - verified) > 3600:
            return self._no("apns", 403, "ExpiredProviderToken")
        if headers.get("apns-topic") != self.topic:
            return self._no("apns", 400, "TopicDisallowed")
        if headers.get("apns-push-type") != "alert" or headers.get("apns-priority") not in ("5", "10"):
            return self._no("apns", 400, "InvalidPushType")
        if not headers.get("apns-expiration", "").isdigit() or len(headers.get("apns-collapse-id", "").encode()) > 64:
            return self._no("apns", 400, "BadExpirationDate")
        if len(token) != 64 or any(c not in "0123456789abcdef" for c in token):
            return self._no("apns", 400, "BadDeviceToken")
        try:
            payload = json.loads(body)
            assert isinstance(payload["aps"], dict) and len(body) <= 4096
        except (ValueError, KeyError, AssertionError):
            return self._no("apns", 400, "PayloadEmpty")
        status = self._answer(token)
        if status == 200:
            self._record("apns", token, headers, payload)
            return 200, None
        reason = {410: "Unregistered", 429: "TooManyRequests", 500: "InternalServerError", 503: "ServiceUnavailable",
                  403: "ExpiredProviderToken", 400: "BadDeviceToken"}.get(status, "Error")
        return self._no("apns", status, reason)

    def _no(self, provider, status, reason):
        self._refuse(provider, status, reason)
        return status, {"reason": reason}

    def _oauth(self, headers, body):
        from urllib.parse import parse_qs
        form = parse_qs(body.decode())
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return 400, {"error": "unsupported_grant_type"}
        try:
            claims = jwt.decode(form["assertion"][0], self.fcm_key.public_key(), algorithms=["RS256"], audience=f"{self.url}/token",
                                options={"require": ["iat", "exp", "iss", "aud"]})
        except (jwt.PyJWTError, KeyError):
            return 400, {"error": "invalid_grant"}
        if claims["iss"] != "parley@parley-test.iam.gserviceaccount.com" or claims.get("scope") != SCOPE:
            return 400, {"error": "invalid_scope"}
        with self.lock:
            self.tokens_issued += 1
            access = f"ya29.test-{self.tokens_issued}"
        return 200, {"access_token": access, "expires_in": 3599, "token_type": "Bearer"}

    def _fcm(self, headers, body):
        auth = headers.get("authorization", "")
        with self.lock:
            issued = {f"ya29.test-{n}" for n in range(1, self.tokens_issued + 1)}
        if not auth.startswith("Bearer ") or auth.removeprefix("Bearer ") not in issued:
            return self._fcm_error(401, "UNAUTHENTICATED", None)
        try:
            message = json.loads(body)["message"]
            token = message["token"]
            assert all(isinstance(v, str) for v in message.get("data", {}).values()), "data values are strings"
        except (ValueError, KeyError, AssertionError):
            return self._fcm_error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT")
        status = self._answer(token)
        if status == 200:
            self._record("fcm", token, headers, message)
            return 200, {"name": f"projects/{self.project}/messages/{len(self.pushes)}"}
        if status == 404:
            return self._fcm_error(404, "NOT_FOUND", "UNREGISTERED")
        return self._fcm_error(status, "UNAVAILABLE" if status >= 500 else "RESOURCE_EXHAUSTED", None)

    def _fcm_error(self, status, name, code):
        self._refuse("fcm", status, code or name)
        error = {"code": status, "status": name, "message": name}
        if code:
            error["details"] = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}]
        return status, {"error": error}

    # -------------------------------------------------------------- running

    def _start(self):
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.certfile, config.keyfile = self.cert, self.key
        config.alpn_protocols = ["h2"]
        # APNs keeps a connection open across many notifications; hypercorn's default closes it
        # after 1000 requests, cutting off the streams still in flight on it.
        config.keep_alive_max_requests = 1 << 40
        config.accesslog = None
        config.errorlog = None
        self._stop = None
        ready = threading.Event()

        def run():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._stop = asyncio.Event()
            self._loop = loop

            async def main():
                import socket
                sock = socket.socket()
                sock.bind(("127.0.0.1", 0))
                self.port = sock.getsockname()[1]
                sock.close()
                config.bind = [f"127.0.0.1:{self.port}"]
                ready.set()
                await serve(self._app, config, shutdown_trigger=self._stop.wait)

            loop.run_until_complete(main())

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        # Until it accepts TLS connections.
        import socket
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the fake push server did not start")

    def stop(self):
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)


if __name__ == "__main__":
    # Standalone, for scripts/bench-push.sh: serves until killed and writes the server flags
    # that point parley-server at it, one per line, to the file named by the first argument.
    import signal
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tlscerts import Authority
    fake = FakePush(Authority())
    with open(sys.argv[1] + ".tmp", "w") as out:
        out.write("\n".join(fake.server_flags(fcm=False)) + "\n")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    fake.stop()
    # What the benchmark checks besides speed: no notification reached a device twice.
    with fake.lock:
        seen = [(p[1], p[3].get("parley", {}).get("messageId")) for p in fake.pushes]
    print(f"fake: {len(seen)} pushes, {len(seen) - len(set(seen))} to a device that already had that message", file=sys.stderr, flush=True)
