"""Media end to end against the real binary: uploads streamed to disk, verified by their bytes,
photos stripped of location and thumbnailed, downloads only for members (bearer or signed
URL) with Range and ETag, and unused files removed. Clients: http.client and curl."""
import glob
import http.client
import os
import socket
import subprocess
import time
import uuid

import pytest

import media
from parley import Client, Server, wait_until


def user(server, name=None):
    return Client(server).register(name or "u" + uuid.uuid4().hex[:10])


def blob_files(server):
    return sorted(glob.glob(os.path.join(server.data, "media", "blobs", "*", "*", "*")))


def staging_files(server):
    return os.listdir(os.path.join(server.data, "media", "staging"))


@pytest.fixture(scope="module")
def server():
    running = Server("--media-gc-interval", "1", "--max-photo-bytes", str(2 << 20), "--max-file-bytes", str(300 << 20),
                     "--media-quota-bytes", str(1 << 40))
    yield running
    assert running.stop() == 0


def direct(alice, bob):
    status, room = alice.post("/v1/conversations", {"kind": "direct", "members": [bob.user["username"]]})
    assert status in (200, 201), room
    return room


# ---------------------------------------------------------------- photos


def test_libvips_is_loaded_by_the_first_photo_not_at_start():
    """Issue 29: a server that never sees a photo never maps libvips and the libraries it
    pulls in; the first photo loads it and is processed as any other."""
    running = Server()
    try:
        def mapped():
            with open(f"/proc/{running.process.pid}/maps") as maps:
                return "libvips.so" in maps.read()
        alice = user(running)
        status, _ = alice.upload(b"just some bytes", "file", "application/octet-stream", name="notes.bin")
        assert status == 201
        assert not mapped(), "libvips is mapped before any photo arrived"
        status, info = alice.upload(media.jpeg(640, 480), "photo", "image/jpeg", name="first.jpg")
        assert status == 201, info
        assert (info["width"], info["height"]) == (640, 480) and info["thumbnail"]["width"] == 512
        assert mapped(), "the first photo loaded libvips"
    finally:
        assert running.stop() == 0


def test_parley_libvips_names_the_library_to_load(monkeypatch):
    """PARLEY_LIBVIPS naming a real libvips file: photos are read with it."""
    found = sorted(glob.glob("/usr/lib/*/libvips.so.42*") + glob.glob("/usr/lib/libvips.so.42*"))
    assert found, "libvips42 is installed (scripts/install-deps.sh)"
    monkeypatch.setenv("PARLEY_LIBVIPS", found[0])
    running = Server()
    try:
        status, info = user(running).upload(media.jpeg(64, 48), "photo", "image/jpeg", name="a.jpg")
        assert status == 201 and (info["width"], info["height"]) == (64, 48), info
        with open(f"/proc/{running.process.pid}/maps") as maps:
            assert os.path.realpath(found[0]) in maps.read(), "the named file is the one mapped"
    finally:
        assert running.stop() == 0


def test_a_server_without_libvips_serves_everything_else_and_answers_a_photo_with_what_to_install(monkeypatch):
    """libvips is loaded by the first photo; when it cannot be (here PARLEY_LIBVIPS names a file
    that is not there), the server keeps serving, other uploads work, and a photo is a 500
    whose message names the library for the operator, with nothing stored."""
    monkeypatch.setenv("PARLEY_LIBVIPS", "/nonexistent/libvips.so.42")
    running = Server()
    try:
        alice = user(running)
        status, info = alice.upload(media.jpeg(64, 48), "photo", "image/jpeg", name="a.jpg")
        assert status == 500, info
        assert "install libvips" in info["error"]["message"], info
        assert "/nonexistent" not in info["error"]["message"], "the server's paths stay in its log"
        status, info = alice.upload(b"notes", "file", "text/plain", name="notes.txt")
        assert status == 201, info
        assert blob_files(running) and len(blob_files(running)) == 1, "only the file was stored"
        wait_until(lambda: "PARLEY_LIBVIPS" in "".join(running.log), what="the log says why photos cannot be read")
    finally:
        assert running.stop() == 0


def test_a_photo_loses_its_location_keeps_its_orientation_and_gets_an_upright_thumbnail(server):
    alice = user(server)
    original = media.jpeg(1200, 800, orientation=6)
    assert media.exif_of(original)[1], "the test photo must carry GPS"
    status, info = alice.upload(original, "photo", "image/jpeg", name="../../etc/beach.jpg")
    assert status == 201, info
    assert info["kind"] == "photo" and info["mimeType"] == "image/jpeg"
    assert (info["width"], info["height"]) == (800, 1200), "orientation 6 turns 1200×800 upright"
    assert info["name"] == "beach.jpg", "directories are dropped from names"
    assert info["thumbnail"]["height"] == 512 and info["thumbnail"]["width"] == 341
    status, stored, headers = alice.download(info["id"])
    assert status == 200 and len(stored) == info["sizeBytes"] < len(original)
    orientation, has_gps, size = media.exif_of(stored)
    assert (orientation, has_gps, size) == (6, False, (1200, 800))
    assert b"Parley Test Camera" not in stored
    status, thumbnail, headers = alice.download(info["id"], "thumbnail")
    assert status == 200 and headers["content-type"] == "image/jpeg"
    orientation, has_gps, size = media.exif_of(thumbnail)
    assert size == (341, 512) and not has_gps and orientation in (None, 1)


def test_png_text_is_removed_and_transparency_flattened_in_the_thumbnail(server):
    alice = user(server)
    status, info = alice.upload(media.png(alpha=True, text="52.52N 13.40E"), "photo", "image/png")
    assert status == 201, info
    status, stored, _ = alice.download(info["id"])
    assert b"52.52N" not in stored and stored.startswith(b"\x89PNG")
    status, thumbnail, _ = alice.download(info["id"], "thumbnail")
    assert thumbnail.startswith(b"\xff\xd8")


def test_the_same_bytes_are_stored_once(server):
    alice, bob = user(server), user(server)
    photo = media.jpeg(320, 240, color=(1, 2, 3))
    before = set(blob_files(server))
    ids = {alice.upload(photo, "photo", "image/jpeg")[1]["id"], bob.upload(photo, "photo", "image/jpeg")[1]["id"]}
    assert len(ids) == 2
    assert len(set(blob_files(server)) - before) == 2, "one original and one thumbnail, whoever uploads them"


def test_a_retried_upload_returns_the_first(server):
    alice = user(server)
    data = media.pdf()
    status, first = alice.upload(data, "file", "application/pdf", name="a.pdf", client_id="upload-1")
    assert status == 201
    status, again = alice.upload(data, "file", "application/pdf", name="a.pdf", client_id="upload-1")
    assert status == 200 and again == first


# ---------------------------------------------------------------- who may download


def test_only_members_download_and_outsiders_learn_nothing(server):
    alice, bob, carol = user(server), user(server), user(server)
    room = direct(alice, bob)
    status, info = alice.upload(media.jpeg(), "photo", "image/jpeg")
    # Before it is sent only the uploader sees it.
    assert bob.download(info["id"])[0] == 404
    status, message = alice.send(room["id"], content={"type": "photo", "attachmentId": info["id"], "sizeBytes": 1})
    assert status == 201 and message["content"]["sizeBytes"] == info["sizeBytes"]
    assert bob.download(info["id"])[0] == 200
    assert bob.download(info["id"], "thumbnail")[0] == 200
    status, body, _ = carol.download(info["id"])
    assert status == 404 and b"attachment_not_found" in body
    assert carol.download("a_doesnotexist")[0] == 404
    # Carol cannot use the id either: nothing is sent.
    carol_room = direct(carol, alice)
    status, answer = carol.send(carol_room["id"], content={"type": "photo", "attachmentId": info["id"]})
    assert status == 404 and answer["error"]["code"] == "attachment_not_found"
    assert carol.get(f"/v1/conversations/{carol_room['id']}")[1]["lastSeq"] == carol_room["lastSeq"]
    # Without a token, or with another app's key: nothing.
    assert Client(server).request_bytes("GET", f"/v1/media/{info['id']}", authenticated=False)[0] == 401
    assert carol.get(f"/v1/media/{info['id']}/info")[0] == 404
    assert bob.get(f"/v1/media/{info['id']}/info")[1]["id"] == info["id"]


def test_signed_urls_work_without_headers_and_only_as_signed(server):
    alice, bob = user(server), user(server)
    room = direct(alice, bob)
    status, info = alice.upload(media.jpeg(), "photo", "image/jpeg")
    alice.send(room["id"], content={"type": "photo", "attachmentId": info["id"]})
    status, link = bob.get(f"/v1/media/{info['id']}/url?variant=thumbnail")
    assert status == 200 and link["url"].startswith(f"/v1/media/{info['id']}/thumbnail?")
    assert "token" not in link["url"]
    # An <img src> sends no app key and no token.
    curl = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{content_type}", server.url + link["url"]],
                          capture_output=True, text=True, timeout=30)
    assert curl.stdout == "200 image/jpeg"
    for tampered in [link["url"].replace("/thumbnail?", "?"),                     # another variant
                     link["url"][:-2] + ("AA" if not link["url"].endswith("AA") else "BB"),
                     link["url"].replace("expires=", "expires=9")]:
        status, body, _ = Client(server).request_bytes("GET", tampered, authenticated=False)
        assert status == 403 and b"invalid_signature" in body, tampered
    assert bob.get("/v1/media/a_nothing/url")[0] == 404
    assert bob.get(f"/v1/media/{info['id']}/url?variant=huge")[0] == 400


def test_a_public_channels_media_is_visible_to_anyone_in_the_app(server):
    alice, dan = user(server), user(server)
    status, channel = alice.post("/v1/conversations", {"kind": "public", "title": "photos " + uuid.uuid4().hex[:6]})
    status, info = alice.upload(media.jpeg(), "photo", "image/jpeg")
    alice.send(channel["id"], content={"type": "photo", "attachmentId": info["id"]})
    assert dan.download(info["id"])[0] == 200


# ---------------------------------------------------------------- HTTP caching and ranges (curl)


def test_ranges_etags_and_caching_headers(server):
    alice = user(server)
    data = media.pdf(100_000)
    status, info = alice.upload(data, "file", "application/pdf", name="Büro report.pdf")
    status, body, headers = alice.download(info["id"])
    assert body == data
    etag = headers["etag"]
    assert headers["accept-ranges"] == "bytes" and "immutable" in headers["cache-control"]
    assert headers["content-disposition"] == "attachment; filename=\"B__ro report.pdf\"; filename*=UTF-8''B%C3%BCro%20report.pdf"
    assert headers["x-content-type-options"] == "nosniff" and "sandbox" in headers["content-security-policy"]
    auth = ["-H", f"X-Parley-App-Key: {server.app_key}", "-H", f"Authorization: Bearer {alice.token}"]
    url = f"{server.url}/v1/media/{info['id']}"
    part = subprocess.run(["curl", "-s", "-r", "100-199", *auth, url], capture_output=True, timeout=30)
    assert part.stdout == data[100:200]
    tail = subprocess.run(["curl", "-s", "-r", "-10", *auth, url], capture_output=True, timeout=30)
    assert tail.stdout == data[-10:]
    status, body, headers = alice.download(info["id"], headers={"Range": f"bytes={len(data)}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{len(data)}"
    status, body, headers = alice.download(info["id"], headers={"If-None-Match": etag})
    assert status == 304 and body == b"" and headers["etag"] == etag
    status, body, _ = alice.download(info["id"], headers={"Range": "bytes=0-9", "If-Range": '"other"'})
    assert status == 200 and body == data, "a stale If-Range gets the whole file"
    status, body, _ = alice.download(info["id"], headers={"Range": "bytes=0-9,20-29"})
    assert status == 200 and body == data, "several ranges are answered with the whole file"
    status, body, headers = Client(server).request_bytes("HEAD", f"/v1/media/{info['id']}", headers={
        "X-Parley-App-Key": server.app_key, "Authorization": f"Bearer {alice.token}"}, authenticated=False)
    assert status == 200 and body == b"" and headers["content-length"] == str(len(data))


def test_files_that_a_browser_would_run_are_served_as_bytes(server):
    alice = user(server)
    status, info = alice.upload(b"<html><script>alert(1)</script></html>", "file", "text/html", name="page.html")
    assert status == 201 and info["mimeType"] == "text/html"
    status, body, headers = alice.download(info["id"])
    assert headers["content-type"] == "application/octet-stream"
    assert headers["content-disposition"].startswith("attachment;")


# ---------------------------------------------------------------- video, audio, files in messages


def test_video_with_a_client_thumbnail_audio_and_files_in_messages(server):
    alice, bob = user(server), user(server)
    room = direct(alice, bob)
    status, video = alice.upload(media.mp4(), "video", "video/mp4", name="clip.mp4")
    status, thumb = alice.upload(media.jpeg(640, 360), "photo", "image/jpeg")
    status, audio = alice.upload(media.mp3(), "audio", "audio/mpeg")
    status, sent = alice.send(room["id"], content={"type": "video", "attachmentId": video["id"], "thumbnailId": thumb["id"],
                                                   "durationSeconds": 12.5, "width": 1920, "height": 1080})
    assert status == 201, sent
    assert sent["content"]["mimeType"] == "video/mp4" and sent["content"]["name"] == "clip.mp4"
    assert bob.download(video["id"])[1] == media.mp4()
    assert bob.download(thumb["id"])[0] == 200, "the thumbnail is downloadable by members too"
    assert alice.send(room["id"], content={"type": "audio", "attachmentId": audio["id"], "durationSeconds": 3})[0] == 201
    # Kinds must match: a photo message cannot carry audio, a thumbnail must be a photo.
    status, answer = alice.send(room["id"], content={"type": "photo", "attachmentId": audio["id"]})
    assert status == 400 and "audio upload" in answer["error"]["message"]
    status, answer = alice.send(room["id"], content={"type": "video", "attachmentId": video["id"], "thumbnailId": audio["id"]})
    assert status == 400
    status, answer = alice.send(room["id"], content={"type": "video", "attachmentId": video["id"], "durationSeconds": -1})
    assert status == 400


def test_a_voice_message_carries_its_length_and_waveform_and_bad_ones_change_nothing(server):
    alice, bob = user(server), user(server)
    room = direct(alice, bob)
    status, audio = alice.upload(media.mp3(), "audio", "audio/mpeg", name="memo.mp3")
    assert status == 201
    waveform = [0, 12, 80, 255, 140, 33] * 21 + [7, 9]        # 128 values
    voice = {"type": "audio", "attachmentId": audio["id"], "durationSeconds": 7.4, "voice": True, "waveform": waveform}
    # Refused, each with what is wrong, and nothing written.
    for bad, field in [({**voice, "waveform": waveform + [1]}, "waveform"), ({**voice, "waveform": [0, 256]}, "0–255"),
                       ({**voice, "waveform": [-1]}, "0–255"), ({**voice, "durationSeconds": None}, "durationSeconds"),
                       ({"type": "audio", "attachmentId": audio["id"], "durationSeconds": 2, "waveform": [1, 2]}, "voice"),
                       ({"type": "file", "attachmentId": audio["id"], "voice": True}, "audio only")]:
        bad = {key: value for key, value in bad.items() if value is not None}
        status, answer = alice.send(room["id"], content=bad)
        assert status == 400 and field in answer["error"]["message"], (bad, answer)
    status, page = bob.get(f"/v1/conversations/{room['id']}/messages")
    assert page["messages"] == []
    status, sent = alice.send(room["id"], content=voice)
    assert status == 201, sent
    assert sent["content"]["voice"] is True and sent["content"]["waveform"] == waveform and sent["content"]["durationSeconds"] == 7.4
    status, page = bob.get(f"/v1/conversations/{room['id']}/messages")
    assert page["messages"][-1]["content"] == sent["content"]
    assert bob.download(audio["id"])[1] == media.mp3()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("data,kind,mime,status,code", [
    (media.png(), "photo", "image/jpeg", 415, "type_mismatch"),
    (b"just some text, not a picture", "photo", "image/jpeg", 415, "type_mismatch"),
    (media.jpeg()[:400], "photo", "image/jpeg", 415, "invalid_image"),
    (b"\xff\xd8\xff\xe0" + b"A" * 500, "photo", "image/jpeg", 415, "invalid_image"),
    (media.png_bomb(), "photo", "image/png", 422, "image_too_large"),
    (media.png_lying_chunk(), "photo", "image/png", 415, "invalid_image"),
    (media.jpeg(), "photo", "image/heic", 415, "unsupported_media_type"),
    (media.jpeg(), "photo", "text/plain", 415, "unsupported_media_type"),
    (media.mp3(), "video", "video/mp4", 415, "type_mismatch"),
    (media.mp3(), "video", "audio/mpeg", 415, "unsupported_media_type"),
    (media.mp3(), "audio", "audio/mp4", 415, "type_mismatch"),
    (media.jpeg(), "file", "application/pdf", 415, "type_mismatch"),
    (media.jpeg(), "sticker", "image/jpeg", 400, "invalid_request"),
    (b"", "file", "application/octet-stream", 400, "invalid_request"),
    (media.jpeg(), "photo", None, 415, "unsupported_media_type"),
], ids=["png-as-jpeg", "text-as-jpeg", "truncated-jpeg", "garbage-jpeg", "pixel-bomb", "chunk-claims-1gib", "heic", "photo-as-text",
        "mp3-as-video", "audio-type-as-video", "mp3-as-m4a", "jpeg-as-pdf", "unknown-kind", "empty", "no-type"])
def test_bad_uploads_are_refused_with_a_typed_error_and_nothing_is_stored(server, data, kind, mime, status, code):
    alice = user(server)
    before = blob_files(server)
    answer_status, answer = alice.upload(data, kind, mime)
    assert (answer_status, answer["error"]["code"]) == (status, code), answer
    assert blob_files(server) == before
    assert staging_files(server) == []


@pytest.mark.parametrize("name,why", [("a\x00b", "NUL"), ("../..", "only dots"), ("x" * 300, "too long"),
                                      ("evil\u202efdp.exe", "text-direction override")])
def test_bad_names_are_refused(server, name, why):
    alice = user(server)
    status, answer = alice.upload(media.pdf(), "file", "application/pdf", name=name)
    assert status == 400 and answer["error"]["code"] == "invalid_request", why


def test_an_oversize_photo_is_refused_before_and_while_it_streams(server):
    alice = user(server)
    big = media.jpeg(200, 200) + bytes(3 << 20)
    status, answer = alice.upload(big, "photo", "image/jpeg")
    assert status == 413 and answer["error"]["code"] == "file_too_large"
    # Chunked, so the size is only known as it arrives: refused mid-stream, connection closed.
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
    connection.putrequest("POST", "/v1/media?kind=photo")
    for name, value in [("X-Parley-App-Key", server.app_key), ("Authorization", f"Bearer {alice.token}"),
                        ("Content-Type", "image/jpeg"), ("Transfer-Encoding", "chunked")]:
        connection.putheader(name, value)
    connection.endheaders()
    response = None
    try:
        for offset in range(0, len(big), 65536):
            piece = big[offset:offset + 65536]
            connection.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        connection.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = connection.getresponse()
    assert response.status == 413 and response.getheader("Connection") == "close"
    assert staging_files(server) == []


def test_a_truncated_upload_stores_nothing(server):
    alice = user(server)
    before = blob_files(server)
    data = media.pdf(50_000)
    with socket.create_connection((server.host, server.port), timeout=10) as raw:
        head = (f"POST /v1/media?kind=file&name=cut.pdf HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {server.app_key}\r\n"
                f"Authorization: Bearer {alice.token}\r\nContent-Type: application/pdf\r\nContent-Length: {len(data)}\r\n\r\n")
        raw.sendall(head.encode() + data[:20_000])
    # The server notices the close; wait until the staging file it wrote is gone.
    wait_until(lambda: staging_files(server) == [], what="the staging file to be removed")
    assert blob_files(server) == before
    assert alice.upload(media.pdf(), "file", "application/pdf", name="ok.pdf")[0] == 201, "the account can still upload"


def test_quota_and_concurrent_upload_limits(fresh_quota_server):
    server = fresh_quota_server
    alice = user(server)
    assert alice.upload(media.pdf(40_000), "file", "application/pdf", name="1.pdf")[0] == 201
    status, answer = alice.upload(media.pdf(40_000) + b"x", "file", "application/pdf", name="2.pdf")
    assert status == 403 and answer["error"]["code"] == "quota_exceeded"
    # The refused bytes were stored first (they had to be hashed), then are collected.
    wait_until(lambda: len(blob_files(server)) == 1, what="the refused upload's file to be removed")


@pytest.fixture()
def fresh_quota_server():
    running = Server("--media-quota-bytes", "50000", "--media-gc-interval", "1")
    yield running
    running.stop()


# ---------------------------------------------------------------- lifetime


def test_deleting_or_replacing_frees_files_and_unsent_uploads_expire(tmp_path):
    server = Server("--media-gc-interval", "1", "--media-orphan-lifetime", "0")
    try:
        alice, bob = user(server), user(server)
        room = direct(alice, bob)
        status, first = alice.upload(media.jpeg(300, 200, color=(9, 9, 9)), "photo", "image/jpeg")
        status, second = alice.upload(media.jpeg(300, 200, color=(7, 7, 7)), "photo", "image/jpeg")
        status, sent = alice.send(room["id"], content={"type": "photo", "attachmentId": first["id"]})
        status, _ = alice.send(room["id"], content={"type": "photo", "attachmentId": second["id"]})
        assert len(blob_files(server)) == 4
        # An upload never sent (orphan lifetime 0) goes at the next pass.
        status, orphan = alice.upload(media.pdf(), "file", "application/pdf", name="o.pdf")
        wait_until(lambda: len(blob_files(server)) == 4, what="the unsent upload to be collected")
        assert alice.download(orphan["id"])[0] == 404
        # Edit the first message to a new photo: the old one's files go, the new one's stay.
        status, third = alice.upload(media.jpeg(300, 200, color=(5, 5, 5)), "photo", "image/jpeg")
        status, edited = alice.patch(f"/v1/conversations/{room['id']}/messages/{sent['id']}",
                                     {"content": {"type": "photo", "attachmentId": third["id"]}})
        assert status == 200, edited
        wait_until(lambda: bob.download(first["id"])[0] == 404 and len(blob_files(server)) == 4, what="the replaced photo to go")
        assert bob.download(third["id"])[0] == 200
        # Delete: its files go too; the other message's stay.
        assert alice.request("DELETE", f"/v1/conversations/{room['id']}/messages/{sent['id']}")[0] == 200
        wait_until(lambda: len(blob_files(server)) == 2, what="the deleted message's files to go")
        assert bob.download(second["id"])[0] == 200
    finally:
        server.stop()


# ---------------------------------------------------------------- streaming


def test_a_large_upload_streams_to_disk_without_growing_the_server(server):
    alice = user(server)
    path = os.path.join(server.data, "big.bin")
    with open(path, "wb") as out:
        block = os.urandom(1 << 20)
        for index in range(200):
            out.write(block[index:] + block[:index])
    def peak_kib():
        with open(f"/proc/{server.process.pid}/status") as status:
            return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
    before = peak_kib()
    curl = subprocess.run(["curl", "-s", "-T", path, "-X", "POST", "-H", f"X-Parley-App-Key: {server.app_key}",
                           "-H", f"Authorization: Bearer {alice.token}", "-H", "Content-Type: application/octet-stream",
                           f"{server.url}/v1/media?kind=file&name=big.bin"], capture_output=True, text=True, timeout=300)
    assert '"sizeBytes":209715200' in curl.stdout, curl.stdout
    grown_mib = (peak_kib() - before) / 1024
    assert grown_mib < 40, f"the server's peak memory grew by {grown_mib:.0f} MiB for a 200 MiB upload"
    os.unlink(path)


def test_metrics_count_uploads_downloads_and_removals():
    server = Server("--media-gc-interval", "1")
    try:
        alice, bob = user(server), user(server)
        room = direct(alice, bob)
        status, info = alice.upload(media.pdf(1000), "file", "application/pdf", name="a.pdf")
        assert alice.upload(media.pdf(1001), "file", "application/pdf", name="b.pdf")[0] == 201
        assert alice.upload(b"not a jpeg", "photo", "image/jpeg")[0] == 415
        status, sent = alice.send(room["id"], content={"type": "file", "attachmentId": info["id"]})
        assert bob.download(info["id"])[0] == 200
        assert alice.request("DELETE", f"/v1/conversations/{room['id']}/messages/{sent['id']}")[0] == 200
        def metrics():
            status, body, _ = Client(server).request_bytes("GET", "/metrics", authenticated=False)
            return {line.split(" ")[0]: float(line.split(" ")[1]) for line in body.decode().splitlines() if line.startswith("parley_media")}
        wait_until(lambda: metrics().get("parley_media_files_removed_total", 0) == 1, what="the deleted message's file to be removed")
        values = metrics()
        assert values['parley_media_uploads_total{result="stored"}'] == 2
        assert values['parley_media_uploads_total{result="refused"}'] == 1
        assert values["parley_media_upload_bytes_total"] == len(media.pdf(1000)) + len(media.pdf(1001)) + len(b"not a jpeg")
        assert values["parley_media_downloads_total"] == 1
    finally:
        server.stop()


def test_only_photos_have_a_server_thumbnail(server):
    alice = user(server)
    status, info = alice.upload(media.pdf(), "file", "application/pdf", name="x.pdf")
    status, body, _ = alice.download(info["id"], "thumbnail")
    assert status == 404 and b"thumbnail_not_found" in body
    status, answer = alice.get(f"/v1/media/{info['id']}/url?variant=thumbnail")
    assert status == 404 and answer["error"]["code"] == "thumbnail_not_found"


def test_a_matching_if_range_gets_the_part_and_errors_carry_their_reason(server):
    alice = user(server)
    data = media.pdf(5000)
    status, info = alice.upload(data, "file", "application/pdf", name="r.pdf")
    etag = alice.download(info["id"])[2]["etag"]
    status, body, headers = alice.download(info["id"], headers={"Range": "bytes=0-9", "If-Range": etag})
    assert status == 206 and body == data[:10] and headers["content-range"] == f"bytes 0-9/{len(data)}"
    connection = http.client.HTTPConnection(server.host, server.port, timeout=10)
    connection.request("POST", "/v1/media?kind=photo", body=b"plain text", headers={
        "X-Parley-App-Key": server.app_key, "Authorization": f"Bearer {alice.token}", "Content-Type": "image/jpeg"})
    response = connection.getresponse()
    assert (response.status, response.reason) == (415, "Unsupported Media Type")
    connection.close()


def test_at_most_four_uploads_at_once_per_account(server):
    alice, bob = user(server), user(server)
    head = (f"POST /v1/media?kind=file&name=slow.pdf HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: {server.app_key}\r\n"
            f"Authorization: Bearer {alice.token}\r\nContent-Type: application/pdf\r\nContent-Length: 100000\r\n\r\n%PDF-1.7\n")
    slow = []
    try:
        for _ in range(4):
            raw = socket.create_connection((server.host, server.port), timeout=10)
            raw.sendall(head.encode())
            slow.append(raw)
        # Each of the four is being written: their staging files exist.
        wait_until(lambda: len(staging_files(server)) == 4, what="four uploads in progress")
        status, answer = alice.upload(media.pdf(), "file", "application/pdf", name="fifth.pdf")
        assert status == 429 and answer["error"]["code"] == "too_many_uploads"
        assert alice.last_headers.get("Retry-After") == "1"
        assert bob.upload(media.pdf(), "file", "application/pdf", name="bobs.pdf")[0] == 201, "the limit is per account"
    finally:
        for raw in slow:
            raw.close()
    wait_until(lambda: staging_files(server) == [], what="the abandoned uploads to be removed")
    assert alice.upload(media.pdf(), "file", "application/pdf", name="again.pdf")[0] == 201, "slots come back"


def test_signed_links_stop_working_when_they_expire(tmp_path):
    server = Server("--media-url-lifetime", "1")
    try:
        alice = user(server)
        status, info = alice.upload(media.jpeg(), "photo", "image/jpeg")
        link = alice.get(f"/v1/media/{info['id']}/url")[1]["url"]
        assert Client(server).request_bytes("GET", link, authenticated=False)[0] == 200
        # One second later (plus the expiry's rounding), the same link is refused.
        wait_until(lambda: Client(server).request_bytes("GET", link, authenticated=False)[0] == 403, timeout=5,
                   what="the link to expire")
    finally:
        server.stop()


def test_keep_photo_metadata_keeps_the_file_as_uploaded(tmp_path):
    server = Server("--keep-photo-metadata")
    try:
        alice = user(server)
        photo = media.jpeg(320, 240, orientation=6)
        status, info = alice.upload(photo, "photo", "image/jpeg")
        assert status == 201 and info["sizeBytes"] == len(photo)
        stored = alice.download(info["id"])[1]
        assert stored == photo and media.exif_of(stored)[1], "the GPS position is still there, as the operator chose"
        assert (info["width"], info["height"]) == (240, 320)
        status, answer = alice.upload(media.png_lying_chunk(), "photo", "image/png")
        assert (status, answer["error"]["code"]) == (415, "invalid_image"), "the structure is checked all the same"
    finally:
        server.stop()
