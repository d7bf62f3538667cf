"""The log an operator reads (issue 28), from the real binary at --log-level debug
--log-format json: every line is one JSON object with time, level, label and message; each
request has a line with its id (the client's X-Request-Id echoed, or one made), status and
caller; sockets open and close; and across a whole session of sign-ups, sign-ins, messages,
the realtime socket, the server API, a webhook endpoint and pushes through APNs and FCM, no
line holds a password, a session token, the app secret, a webhook secret, a device token, a
push key or a message's text."""
import base64
import json
import uuid

import pytest

import media
import parley
from parley import Client, Server, wait_until
from realtime import Device
from test_server_api import Backend


def test_a_whole_session_leaves_a_log_of_json_lines_without_a_secret(fake):
    server = Server("--log-level", "debug", "--log-format", "json", "--webhooks-allow-private", *fake.server_flags())
    secrets = {"app secret": server.app_secret}
    try:
        password = "pass-" + uuid.uuid4().hex
        ana = Client(server).register("ana" + uuid.uuid4().hex[:6], password=password)
        bob = Client(server).register("bob" + uuid.uuid4().hex[:6], password=password)
        again = Client(server).sign_in(ana.user["username"], password=password)
        secrets |= {"password": password, "ana's token": ana.token, "bob's token": bob.token, "a second token": again.token}
        device_token = uuid.uuid4().hex + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "apns", "token": device_token})[0] == 201
        fcm_token = "fcm-" + uuid.uuid4().hex
        assert bob.post("/v1/devices", {"platform": "fcm", "token": fcm_token})[0] == 201
        secrets |= {"an APNs device token": device_token, "an FCM token": fcm_token}
        backend = Backend(server)
        status, hook = backend.call("POST", "/v1/server/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["message.created"]})
        assert status == 201
        secrets["webhook secret"] = hook["secret"]
        status, conversation = ana.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
        assert status in (200, 201)
        body = "the body of a private message " + uuid.uuid4().hex
        secrets["message text"] = body
        status, _ = ana.request("POST", f"/v1/conversations/{conversation['id']}/messages",
                                {"clientId": "c1", "content": {"type": "text", "text": body}}, headers={"X-Request-Id": "trace-me-1"})
        assert status == 201 and ana.last_headers["X-Request-Id"] == "trace-me-1"
        file_name = "holiday-" + uuid.uuid4().hex + ".pdf"
        status, upload = ana.upload(media.pdf(), "file", "application/pdf", name=file_name)
        assert status == 201, upload
        secrets["a file's name"] = file_name
        assert ana.send(conversation["id"], content={"type": "file", "attachmentId": upload["id"]})[0] == 201
        status, link = bob.get(f"/v1/media/{upload['id']}/url")
        assert status == 200
        secrets["a signed link's signature"] = link["url"].rsplit("signature=", 1)[1]
        assert Client(server).request_bytes("GET", link["url"], authenticated=False)[0] == 200
        fake.wait_for(lambda pushes: any(p[1] == device_token for p in pushes))
        with open(fake.key_file, "rb") as key:
            pem = key.read().decode()
        secrets["the APNs key"] = "".join(pem.strip().splitlines()[1:-1])[:40]
        device = Device(server, ana.token)
        device.wait_ready()
        device.socket.send(json.dumps({"type": "message.send", "id": "s1", "conversationId": conversation["id"],
                                       "message": {"clientId": "c2", "content": {"type": "text", "text": body + " again"}}}))
        device.until(lambda frame: frame.get("type") == "ack")
        device.socket.close()
        backend.call("GET", "/v1/server/users")
        wait_until(lambda: any('"socket closed"' in line for line in server.log), what="the socket's close line")
    finally:
        assert server.stop() == 0
    lines = [json.loads(line) for line in server.log if line.strip()]
    assert lines and all({"time", "level", "label", "message"} <= set(line) for line in lines), "every line is a JSON object"
    text = "\n".join(server.log)
    for name, secret in secrets.items():
        assert secret not in text, f"the log holds {name}"
        assert base64.b64encode(secret.encode()).decode()[:20] not in text, f"the log holds {name}, base64"
    requests = [line for line in lines if line["message"] == "request"]
    traced = next(line for line in requests if line.get("request.id") == "trace-me-1")
    assert traced["status"] == 201 and traced["user.id"] == ana.user["id"] and traced["route"].startswith("/v1/conversations/")
    assert all(line.get("request.id") for line in requests), "every request line has its id"
    assert any(line["message"] == "socket authenticated" and line.get("user.id") == ana.user["id"] for line in lines)
    assert any(line["message"] == "listening" for line in lines) and any(line["message"] == "stopped" for line in lines)
    assert any(line.get("app") == "default" and line.get("path") == "/v1/server/users" for line in requests), "the server API names its app"
