"""A webhook receiver written with Python's standard library, as an app's backend would write
one: it checks every delivery's Parley-Signature (HMAC-SHA256 over "<t>.<raw body>", a
timestamp within five minutes), records what arrived in order, counts duplicates, and can be
told to answer 500 for its first N deliveries or to stall."""
import hashlib
import hmac
import http.server
import json
import threading
import time


def verify(secret, header, body, tolerance=300, now=None):
    """What a receiver does with Parley-Signature: True when it signs `body` with `secret`."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    timestamp = int(fields.get("t", "0"))
    if abs((now or time.time()) - timestamp) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, value) for key, value in
               (part.split("=", 1) for part in header.split(",") if "=" in part) if key == "v1")


class Receiver:
    """Listens on 127.0.0.1; `deliveries` holds each accepted delivery's parsed body in arrival order."""

    def __init__(self, secret=None, fail_first=0, status=200):
        self.secret = secret
        self.fail_first = fail_first
        self.status = status
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.deliveries = []      # accepted, in order
        self.attempts = []        # every request: (id, attempt header, answered status)
        self.bad_signatures = 0
        self.stall = None         # a threading.Event: requests wait on it while set is not called
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                answer = receiver.handle(self.headers, body)
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, headers, body):
        if self.stall is not None:
            self.stall.wait(30)
        with self.lock:
            delivery_id = headers.get("Parley-Webhook-Id")
            if self.secret is not None and not verify(self.secret, headers.get("Parley-Signature", ""), body):
                self.bad_signatures += 1
                self.attempts.append((delivery_id, headers.get("Parley-Webhook-Attempt"), 400))
                return 400
            if self.fail_first > 0:
                self.fail_first -= 1
                self.attempts.append((delivery_id, headers.get("Parley-Webhook-Attempt"), 500))
                return 500
            self.attempts.append((delivery_id, headers.get("Parley-Webhook-Attempt"), self.status))
            if 200 <= self.status < 300:
                parsed = json.loads(body)
                parsed["_headers"] = dict(headers)
                parsed["_raw"] = body.decode()
                self.deliveries.append(parsed)
                self.arrived.notify_all()
            return self.status

    def wait_for(self, condition, timeout=20, what="deliveries"):
        """Waits until `condition(deliveries)` holds."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not condition(self.deliveries):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; have {[d.get('type') for d in self.deliveries]}")
                self.arrived.wait(remaining)
            return list(self.deliveries)

    def of_type(self, kind):
        with self.lock:
            return [d for d in self.deliveries if d.get("type") == kind]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
