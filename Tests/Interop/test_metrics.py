"""/metrics as an operator's Prometheus reads it (issue 31, item 7): the exposition passes
`promtool check metrics`; the process's own figures, request and commit latency histograms,
outbox depths, worker beats, free disk and errors by code are there and move with traffic;
with --metrics-token only a scraper with the token reads them; and send → delivered per platform
(issue 35) counts each new message's live deliveries and nothing else."""
import shutil
import subprocess
import uuid

import pytest

from parley import Client, Server
from realtime import Device


def scrape(server, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return Client(server).request_bytes("GET", "/metrics", headers=headers, authenticated=False)


def sample(body, name):
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.split()[-1])
    return None


def test_the_exposition_is_valid_and_carries_what_an_operator_acts_on():
    server = Server()
    try:
        alice = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
        status, room = alice.post("/v1/conversations", {"kind": "group", "title": "m", "members": []})
        assert status == 201
        for n in range(3):
            assert alice.send(room["id"], f"m{n}")[0] == 201
        assert alice.get("/v1/conversations/c_nope")[0] == 404
        status, body, _ = scrape(server)
        assert status == 200
        text = body.decode()
        if shutil.which("promtool"):
            checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
            assert checked.returncode == 0, checked.stdout + checked.stderr
        else:
            pytest.fail("promtool is not installed: scripts/install-deps.sh --test installs it (Debian's prometheus package)")
        assert sample(text, "process_resident_memory_bytes") > 10_000_000
        assert sample(text, "process_open_fds") > 3 and sample(text, "process_max_fds") >= sample(text, "process_open_fds")
        assert sample(text, "process_cpu_seconds_total") > 0
        assert sample(text, "parley_data_dir_free_bytes") > 0
        assert sample(text, "parley_http_request_duration_seconds_count") >= 6
        assert sample(text, 'parley_http_request_duration_seconds_bucket{le="+Inf"}') == sample(text, "parley_http_request_duration_seconds_count")
        assert sample(text, "parley_store_commit_seconds_count") >= 4
        assert sample(text, 'parley_errors_total{code="conversation_not_found",via="rest"}') >= 1
        assert sample(text, 'parley_worker_state{worker="webhooks/0",state="stopped"}') == 0
        assert "# TYPE parley_outbox_waiting gauge" in text
        assert sample(text, "parley_trace_steps_dropped_total") == 0
    finally:
        server.stop()


def test_with_a_token_only_a_scraper_that_has_it_reads_the_figures():
    server = Server("--metrics-token", "scrape-" + uuid.uuid4().hex)
    token = server.extra[1]
    try:
        status, body, headers = scrape(server)
        assert status == 401 and b"--metrics-token" in body
        assert scrape(server, "wrong")[0] == 401
        status, body, _ = scrape(server, token)
        assert status == 200 and b"process_open_fds" in body
        assert Client(server).get("/healthz")[0] == 200, "the health check stays open"
    finally:
        server.stop()


def test_send_to_delivered_counts_each_device_a_new_message_reached_live_and_nothing_else():
    server = Server()
    try:
        suffix = uuid.uuid4().hex[:6]
        ana, bob = Client(server).register(f"ana{suffix}"), Client(server).register(f"bob{suffix}")
        status, room = ana.post("/v1/conversations", {"kind": "group", "title": "t", "members": [bob.user["username"]]})
        assert status == 201
        phone, laptop = Device(server, bob.token), Device(server, Client(server).sign_in(bob.user["username"]).token)
        for device in (phone, laptop):
            device.wait_ready()
        count = lambda: sample(scrape(server)[1].decode(), 'parley_send_to_delivered_seconds_count{platform="socket"}')
        assert count() == 0
        status, first = ana.send(room["id"], "one")
        assert status == 201
        for device in (phone, laptop):
            device.wait_event(lambda e: e["type"] == "message.created")
        assert count() == 2, "one message, two of Bob's devices connected (Ana has none)"
        # An edit and a reaction reach both devices too, but they are not new messages.
        assert ana.patch(f"/v1/conversations/{room['id']}/messages/{first['id']}", {"content": {"type": "text", "text": "uno"}})[0] == 200
        for device in (phone, laptop):
            device.wait_event(lambda e: e["type"] == "message.edited")
        assert count() == 2
        # A device that was away and catches up on resume is not a live delivery.
        position = laptop.events[-1]["position"]
        laptop.close()
        assert ana.send(room["id"], "two")[0] == 201
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["content"]["text"] == "two")
        resumed = Device(server, laptop.token, position=position)
        resumed.wait_event(lambda e: e["type"] == "message.created" and e["message"]["content"]["text"] == "two")
        text = scrape(server)[1].decode()
        assert sample(text, 'parley_send_to_delivered_seconds_count{platform="socket"}') == 3
        assert sample(text, 'parley_send_to_delivered_seconds_bucket{platform="socket",le="+Inf"}') == 3
        assert sample(text, 'parley_send_to_delivered_seconds_bucket{platform="socket",le="5.0"}') == 3, "each within seconds"
        assert 0 <= sample(text, 'parley_send_to_delivered_seconds_sum{platform="socket"}') < 15
        assert sample(text, 'parley_send_to_delivered_seconds_count{platform="apns"}') == 0
        assert sample(text, 'parley_send_to_delivered_seconds_count{platform="fcm"}') == 0
    finally:
        server.stop()
