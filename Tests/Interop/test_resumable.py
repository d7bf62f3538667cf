"""Resumable uploads against the real binary: an upload with a clientId and a Content-Length
that breaks off is kept; GET /v1/uploads/{clientId} says how much arrived; the rest is sent
with Content-Range and the result is the same file a whole upload gives. Clients: raw
sockets (to break a body off on purpose), http.client, curl."""
import glob
import os
import socket
import subprocess
import time
import uuid

import pytest

import media
from parley import Client, Server, wait_until


def user(server):
    return Client(server).register("u" + uuid.uuid4().hex[:10])


def partial_files(server):
    return sorted(os.listdir(os.path.join(server.data, "media", "partial")))


def break_off(client, data, sent, kind, mime, client_id, name=None):
    """Begins an upload of `data` and closes the connection after `sent` bytes of its body."""
    query = f"kind={kind}&clientId={client_id}" + (f"&name={name}" if name else "")
    raw = socket.create_connection((client.server.host, client.server.port), timeout=10)
    raw.sendall((f"POST /v1/media?{query} HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {client.app_key}\r\n"
                 f"Authorization: Bearer {client.token}\r\nContent-Type: {mime}\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:sent])
    raw.close()


def status_of(client, client_id):
    return client.get(f"/v1/uploads/{client_id}")


def part_sizes(server):
    return [os.path.getsize(path) for path in glob.glob(os.path.join(server.data, "media", "partial", "*.part"))]


def wait_for_partial(client, client_id, received):
    """Waits until the server has written the `received` bytes sent, then asks for the status.
    The wait watches the file, not the status call: asking takes the upload over (interrupts
    a connection still receiving it), so polling it could stop the bytes still in flight."""
    wait_until(lambda: received in part_sizes(client.server), what=f"{received} bytes of {client_id} to be written")
    status, answer = status_of(client, client_id)
    assert status == 200 and answer["state"] == "partial" and answer["receivedBytes"] == received, answer
    return answer


def resume(client, data, first, kind, mime, client_id):
    headers = {"Content-Range": f"bytes {first}-{len(data) - 1}/{len(data)}"}
    return client.upload(data[first:], kind, mime, client_id=client_id, headers=headers)


@pytest.fixture(scope="module")
def server():
    running = Server("--media-gc-interval", "1")
    yield running
    assert running.stop() == 0


def test_a_broken_photo_upload_is_completed_by_sending_only_the_rest(server):
    alice, bob = user(server), user(server)
    photo = media.jpeg(1200, 900, orientation=6)
    half = len(photo) // 2
    break_off(alice, photo, half, "photo", "image/jpeg", "trip-1", name="beach.jpg")
    status = wait_for_partial(alice, "trip-1", half)
    assert (status["totalBytes"], status.get("attachment")) == (len(photo), None)
    assert status["expiresAt"], "an unfinished upload says when it is removed"

    code, info = resume(alice, photo, half, "photo", "image/jpeg", "trip-1")
    assert code == 201, info
    assert (info["width"], info["height"], info["name"]) == (900, 1200, "beach.jpg")
    stored = alice.download(info["id"])[1]
    orientation, has_gps, _ = media.exif_of(stored)
    assert orientation == 6 and not has_gps, "the resumed photo went through the same processing"
    # The same photo uploaded whole by someone else is the same stored file.
    code, whole = bob.upload(photo, "photo", "image/jpeg")
    assert code == 201 and whole["sizeBytes"] == info["sizeBytes"] and bob.download(whole["id"])[1] == stored

    code, status = status_of(alice, "trip-1")
    assert code == 200 and status["state"] == "complete" and status["attachment"]["id"] == info["id"]
    assert partial_files(server) == [], "nothing is kept once the upload is stored"
    # Sending the continuation again (its answer was lost) finds the stored upload.
    code, again = resume(alice, photo, half, "photo", "image/jpeg", "trip-1")
    assert code == 200 and again["id"] == info["id"]


def test_a_file_can_break_off_several_times(server):
    alice = user(server)
    data = media.pdf(900_000)
    cuts = [100_000, 350_000, 700_000]
    break_off(alice, data, cuts[0], "file", "application/pdf", "report", name="report.pdf")
    wait_for_partial(alice, "report", cuts[0])
    for first, last in zip(cuts, cuts[1:]):
        raw = socket.create_connection((server.host, server.port), timeout=10)
        raw.sendall((f"POST /v1/media?kind=file&clientId=report HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {alice.app_key}\r\n"
                     f"Authorization: Bearer {alice.token}\r\nContent-Type: application/pdf\r\n"
                     f"Content-Range: bytes {first}-{len(data) - 1}/{len(data)}\r\nContent-Length: {len(data) - first}\r\n\r\n").encode()
                    + data[first:last])
        raw.close()
        wait_for_partial(alice, "report", last)
    # The last part with curl, as a shell script would send it.
    path = os.path.join(server.data, "rest.bin")
    with open(path, "wb") as out:
        out.write(data[cuts[-1]:])
    answer = subprocess.run(
        ["curl", "-sS", "-X", "POST", "--data-binary", f"@{path}", "-H", "Content-Type: application/pdf",
         "-H", f"Content-Range: bytes {cuts[-1]}-{len(data) - 1}/{len(data)}",
         "-H", f"X-Parley-App-Key: {alice.app_key}", "-H", f"Authorization: Bearer {alice.token}",
         "-w", "\n%{http_code}", f"http://{server.host}:{server.port}/v1/media?kind=file&clientId=report"],
        capture_output=True, text=True, timeout=30, check=True)
    assert answer.stdout.rsplit("\n", 1)[1] == "201", answer.stdout
    code, status = status_of(alice, "report")
    info = status["attachment"]
    assert info["name"] == "report.pdf" and info["sizeBytes"] == len(data)
    assert alice.download(info["id"])[1] == data


def test_a_continuation_must_match_what_the_server_holds(server):
    alice, bob = user(server), user(server)
    data = media.mp4(400_000)
    break_off(alice, data, 150_000, "video", "video/mp4", "clip")
    wait_for_partial(alice, "clip", 150_000)

    def refused(first, total, kind="video", mime="video/mp4", client=alice, client_id="clip"):
        body = data[first:total] if total <= len(data) else data[first:] + b"\0" * (total - len(data))
        headers = {"Content-Range": f"bytes {first}-{total - 1}/{total}"}
        code, answer = client.upload(body, kind, mime, client_id=client_id, headers=headers)
        return code, answer["error"]["code"], answer["error"]["message"]

    code, error, message = refused(100_000, len(data))
    assert (code, error) == (409, "upload_offset_mismatch") and "150000" in message, "the answer says where to start"
    assert refused(150_000, len(data) + 10)[:2] == (409, "upload_mismatch")
    assert refused(150_000, len(data), kind="file", mime="video/mp4")[:2] == (409, "upload_mismatch")
    assert refused(150_000, len(data), client=bob)[:2] == (404, "upload_not_found"), "another account has no such upload"
    assert refused(0, len(data), client_id="never-began")[:2] == (404, "upload_not_found")
    # Malformed ranges, and a range without a clientId.
    for header in ["bytes 150000-399998/400000", "bytes=150000-399999/400000", "bytes 150000-399999/*", "bytes -1-399999/400000"]:
        code, answer = alice.upload(data[150_000:], "video", "video/mp4", client_id="clip", headers={"Content-Range": header})
        assert (code, answer["error"]["code"]) == (400, "invalid_request"), header
    code, answer = alice.upload(data[150_000:], "video", "video/mp4", headers={"Content-Range": "bytes 150000-399999/400000"})
    assert (code, answer["error"]["code"]) == (400, "invalid_request")
    # None of that changed what is kept.
    assert status_of(alice, "clip")[1]["receivedBytes"] == 150_000
    assert status_of(bob, "clip")[0] == 404
    code, info = resume(alice, data, 150_000, "video", "video/mp4", "clip")
    assert code == 201 and alice.download(info["id"])[1] == data


def test_an_unfinished_upload_can_be_abandoned_or_restarted(server):
    alice = user(server)
    data = media.pdf(300_000)
    break_off(alice, data, 100_000, "file", "application/pdf", "draft")
    wait_for_partial(alice, "draft", 100_000)
    assert len(partial_files(server)) >= 2
    assert alice.request("DELETE", "/v1/uploads/draft")[0] == 204
    assert status_of(alice, "draft")[0] == 404
    assert alice.request("DELETE", "/v1/uploads/draft")[0] == 404
    assert resume(alice, data, 100_000, "file", "application/pdf", "draft")[0] == 404
    # A whole upload with the same id starts over (and replaces what was kept).
    break_off(alice, data, 50_000, "file", "application/pdf", "again")
    wait_for_partial(alice, "again", 50_000)
    code, info = alice.upload(data, "file", "application/pdf", client_id="again")
    assert code == 201 and alice.download(info["id"])[1] == data


def test_a_wrong_type_is_refused_at_the_end_and_nothing_is_kept(server):
    alice = user(server)
    data = b"not a picture at all " * 10_000
    break_off(alice, data, 100_000, "photo", "image/jpeg", "fake")
    wait_for_partial(alice, "fake", 100_000)
    code, answer = resume(alice, data, 100_000, "photo", "image/jpeg", "fake")
    assert (code, answer["error"]["code"]) == (415, "type_mismatch")
    assert status_of(alice, "fake")[0] == 404, "a refused upload is not kept for another try"


def test_unfinished_uploads_count_against_the_quota_and_expire():
    server = Server("--media-quota-bytes", "500000", "--media-gc-interval", "1", "--media-orphan-lifetime", "2")
    try:
        alice = user(server)
        data = media.pdf(300_000)
        break_off(alice, data, 10_000, "file", "application/pdf", "big")
        wait_for_partial(alice, "big", 10_000)
        code, answer = alice.upload(media.pdf(250_000), "file", "application/pdf", client_id="second")
        assert (code, answer["error"]["code"]) == (403, "quota_exceeded"), "300 kB promised + 250 kB > 500 kB"
        # No byte arrives for longer than the lifetime: the unfinished upload goes.
        wait_until(lambda: status_of(alice, "big")[0] == 404, what="the unfinished upload to expire")
        assert partial_files(server) == []
        assert alice.upload(media.pdf(250_000), "file", "application/pdf", client_id="second")[0] == 201
    finally:
        server.stop()


def test_kept_bytes_survive_a_kill_9_and_the_upload_completes_after_restart():
    server = Server()
    try:
        alice = user(server)
        data = media.mp4(2_000_000)
        break_off(alice, data, 1_200_000, "video", "video/mp4", "long-clip")
        wait_for_partial(alice, "long-clip", 1_200_000)
        server.kill()
        server.start()
        alice.sign_in(alice.user["username"])
        status = status_of(alice, "long-clip")[1]
        assert (status["state"], status["receivedBytes"], status["totalBytes"]) == ("partial", 1_200_000, len(data))
        code, info = resume(alice, data, 1_200_000, "video", "video/mp4", "long-clip")
        assert code == 201 and alice.download(info["id"])[1] == data
        assert partial_files(server) == []
    finally:
        server.kill()


def test_a_client_back_on_a_new_connection_takes_the_upload_over_from_the_silent_old_one(server):
    """A phone switched networks: its old connection is not closed, just silent (the server
    would notice only after the 30 s body timeout). Asking for the status takes the upload
    over at once: the old request is interrupted with its bytes kept, and the rest goes."""
    alice = user(server)
    data = media.mp4(1_000_000)
    half = 400_000
    old = socket.create_connection((server.host, server.port), timeout=10)
    old.sendall((f"POST /v1/media?kind=video&clientId=commute HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {alice.app_key}\r\n"
                 f"Authorization: Bearer {alice.token}\r\nContent-Type: video/mp4\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:half])

    wait_until(lambda: half in part_sizes(server), what="the server to have written what was sent")
    # The old connection stays open and silent. The status call answers at once, with the count.
    asking = Client(server)
    asking.token, asking.connection.timeout = alice.token, 10
    code, status = asking.get("/v1/uploads/commute")
    assert (code, status["state"], status["receivedBytes"]) == (200, "partial", half)
    # The old request was ended with a typed answer, and its connection closed.
    answer = b""
    while chunk := old.recv(65536):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 409") and b"upload_superseded" in answer
    old.close()
    code, info = resume(alice, data, half, "video", "video/mp4", "commute")
    assert code == 201 and alice.download(info["id"])[1] == data


def test_a_continuation_takes_over_too(server):
    alice = user(server)
    data = media.pdf(800_000)
    old = socket.create_connection((server.host, server.port), timeout=10)
    old.sendall((f"POST /v1/media?kind=file&clientId=train HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {alice.app_key}\r\n"
                 f"Authorization: Bearer {alice.token}\r\nContent-Type: application/pdf\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n").encode() + data[:300_000])
    wait_until(lambda: 300_000 in part_sizes(server), what="the first 300000 bytes to be written")
    # The client guesses it got everything up to 300000 through and sends the rest at once.
    code, info = resume(alice, data, 300_000, "file", "application/pdf", "train")
    assert code == 201 and alice.download(info["id"])[1] == data
    old.close()


def test_at_most_sixteen_unfinished_uploads_per_account():
    server = Server()
    try:
        alice, bob = user(server), user(server)
        data = media.pdf(20_000)
        for index in range(16):
            # One after another (at most four uploads are received at once): the bytes on disk,
            # then the status call, which also waits for the request to let go of the upload.
            break_off(alice, data, 5_000, "file", "application/pdf", f"piece-{index}")
            wait_until(lambda: part_sizes(server).count(5_000) == index + 1, what=f"unfinished upload {index} to be written")
            assert status_of(alice, f"piece-{index}")[1]["state"] == "partial"
        code, answer = alice.upload(data, "file", "application/pdf", client_id="piece-16")
        assert (code, answer["error"]["code"]) == (429, "too_many_unfinished_uploads"), answer
        assert "DELETE /v1/uploads/" in answer["error"]["message"], "the answer says how to make room"
        # Continuing one of the sixteen is no new one; another account has its own sixteen.
        assert resume(alice, data, 5_000, "file", "application/pdf", "piece-0")[0] == 201
        assert bob.upload(data, "file", "application/pdf", client_id="piece-16")[0] == 201
        # Finishing one made room.
        assert alice.upload(data, "file", "application/pdf", client_id="piece-16")[0] == 201
    finally:
        server.stop()
