"""Link previews (issue 33, item 1) against the real binary: a local site with a real
OpenGraph page, an oEmbed page and an image, and redirects and images that lead to loopback,
private and link-local addresses. The server may read the site (named with
--link-previews-allow-private) and nothing else private: a second local server stands for the
operator's internal network and must never see a request. What a member's device sees: the
message at once, its preview after as `message.previewed` (no seq), in history, and a
thumbnail served by the server itself."""
import io
import uuid

import pytest
from PIL import Image

import media
import parley
from parley import Client, Server, wait_until
from localsite import Site, html, redirect
from realtime import Device


@pytest.fixture(scope="module")
def internal():
    """The operator's private network: nothing may ever reach it."""
    site = Site({"/secret": html("<title>internal admin</title>"), "/secret.png": (200, {"Content-Type": "image/png"}, media.png())})
    yield site
    site.close()


@pytest.fixture(scope="module")
def site(internal):
    picture = media.png(1200, 630)
    article = """
        <meta charset="utf-8"><title>Fallback title</title>
        <script>var og = '<meta property="og:title" content="not this">';</script>
        <meta property="og:title" content="Parley &amp; friends: chat you own">
        <meta property="og:description" content="One Swift server and one SDK.">
        <meta property="og:site_name" content="Parley blog">
        <meta property="og:image" content="/cover.png">
    """
    pages = {
        "/cover.png": (200, {"Content-Type": "image/png"}, picture),
        "/picture.png": (200, {"Content-Type": "image/png"}, media.png(800, 800)),
        "/oembed": html('<link rel="alternate" type="application/json+oembed" href="/oembed.json">'),
        "/oembed.json": (200, {"Content-Type": "application/json"},
                         b'{"type":"video","version":"1.0","title":"A talk about chat","provider_name":"Tube","author_name":"Maria"}'),
        "/no-head": html("", "just text"),
        "/to-loopback": redirect(f"{internal.url}/secret"),
        "/to-loopback-v6": redirect(f"http://[::1]:{internal.port}/secret"),
        "/to-private": redirect("http://10.255.255.1/"),
        "/to-metadata": redirect("http://169.254.169.254/latest/meta-data/"),
        "/to-file": redirect("file:///etc/passwd"),
        "/hop": redirect("/to-loopback"),
        "/loop": redirect("/loop"),
        "/latin1": (200, {"Content-Type": "text/html; charset=iso-8859-1"}, b"<html><head><title>Caf\xe9 Ren\xe9</title></head></html>"),
        "/pdf": (200, {"Content-Type": "application/pdf"}, b"%PDF-1.4\n% not a page\n"),
        "/late-head": html("<!-- " + "padding " * 80_000 + " -->" + '<meta property="og:title" content="past the limit">'),
        "/huge-picture": html('<meta property="og:title" content="A huge picture"><meta property="og:image" content="/huge.png">'),
        "/huge.png": (200, {"Content-Type": "image/png"}, media.png(64, 64) + b"\0" * (6 << 20)),
        "/image-inside": html(f'<meta property="og:title" content="An image inside"><meta property="og:image" content="{internal.url}/secret.png">'),
    }
    for n in range(1, 12):
        pages[f"/article{n}"] = html(article)
    running = Site(pages)
    yield running
    running.close()


@pytest.fixture(scope="module")
def server(site):
    running = Server("--link-previews-allow-private", f"127.0.0.1:{site.port}")
    yield running
    assert running.stop() == 0


@pytest.fixture()
def pair(server):
    ana = Client(server).register(f"ana{uuid.uuid4().hex[:6]}")
    ben = Client(server).register(f"ben{uuid.uuid4().hex[:6]}")
    status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [ben.user["username"]]})
    assert status in (200, 201), room
    return ana, ben, room


def send(client, room, text, **extra):
    status, message = client.post(f"/v1/conversations/{room['id']}/messages", {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": text}, **extra})
    assert status == 201, message
    return message


def previewed(phone, message):
    """The `message.previewed` event of `message`, as the device receives it."""
    return phone.wait_event(lambda e: e["type"] == "message.previewed" and e["message"]["id"] == message["id"])["event"]


def refusals(server):
    return sum(1 for line in server.log if "no link preview" in line)


def test_a_links_preview_reaches_members_live_without_a_seq_is_in_history_and_its_thumbnail_is_served(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    message = send(ana, room, f"Read this: {site.url}/article1.")
    # The send answered before any fetch: no preview in its answer.
    assert "linkPreview" not in message
    created = phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])["event"]
    event = previewed(phone, message)
    assert "seq" not in event and event["position"] > created["position"]
    preview = event["message"]["linkPreview"]
    assert preview["url"] == f"{site.url}/article1"
    assert preview["title"] == "Parley & friends: chat you own"      # og:title over <title>, entities decoded, not the script's
    assert preview["description"] == "One Swift server and one SDK."
    assert preview["siteName"] == "Parley blog"
    image = preview["image"]
    assert image["url"].startswith("/v1/previews/lp_") and image["width"] == 512 and 265 <= image["height"] <= 272
    # History shows it too, to both members.
    for reader in (ana, ben):
        status, page = reader.get(f"/v1/conversations/{room['id']}/messages?limit=5")
        assert status == 200 and [m for m in page["messages"] if m["id"] == message["id"]][0]["linkPreview"] == preview
    # The thumbnail is the server's own JPEG, fetched without a token (an <img src>), never the site's file.
    status, body, headers = Client(server).request_bytes("GET", image["url"], authenticated=False)
    assert status == 200 and headers["content-type"] == "image/jpeg"
    thumbnail = Image.open(io.BytesIO(body))
    assert thumbnail.format == "JPEG" and thumbnail.size == (image["width"], image["height"])
    status, _, _ = Client(server).request_bytes("GET", "/v1/previews/lp_doesnotexist000000000", authenticated=False)
    assert status == 404
    # The node counts what it did.
    status, text, _ = Client(server).request_bytes("GET", "/metrics", authenticated=False)
    lines = dict(line.rsplit(" ", 1) for line in text.decode().splitlines() if line.startswith("parley_link_preview"))
    assert int(lines['parley_link_preview_links_total{outcome="fetched"}']) >= 1 and int(lines["parley_link_previews_total"]) >= 1
    # Unread counts did not move for the preview: ben has one unread message.
    status, listing = ben.get("/v1/conversations")
    assert [c for c in listing["conversations"] if c["id"] == room["id"]][0]["unreadCount"] == 1
    phone.close()


def test_the_same_link_is_read_once_for_every_message_of_the_app(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ana.token)
    phone.wait_ready()
    first = send(ana, room, f"{site.url}/article2")
    previewed(phone, first)
    second = send(ben, room, f"again {site.url}/article2 !")
    again = previewed(phone, second)
    assert again["message"]["linkPreview"]["title"] == "Parley & friends: chat you own"
    assert site.hits["/article2"] == 1
    phone.close()


def test_oembed_fills_in_what_the_page_does_not_say(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    message = send(ana, room, f"watch {site.url}/oembed")
    preview = previewed(phone, message)["message"]["linkPreview"]
    assert preview["title"] == "A talk about chat" and preview["siteName"] == "Tube" and preview["description"] == "by Maria"
    assert "image" not in preview
    phone.close()


def test_a_link_to_a_picture_previews_the_picture(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    message = send(ana, room, f"{site.url}/picture.png")
    preview = previewed(phone, message)["message"]["linkPreview"]
    assert preview["siteName"] == "127.0.0.1" and (preview["image"]["width"], preview["image"]["height"]) == (512, 512)
    phone.close()


@pytest.mark.parametrize("path", ["/to-loopback", "/to-loopback-v6", "/to-private", "/to-metadata", "/to-file", "/hop", "/loop", "/no-head",
                                  "/pdf", "/late-head"])
def test_redirects_to_private_addresses_are_never_followed_and_pages_that_say_nothing_give_no_preview(server, site, internal, pair, path):
    """Redirects to loopback, private and link-local addresses or to `file:`, a chain, a loop;
    a page with nothing in its head, one that is not HTML, one whose head is past the first
    512 KiB read."""
    ana, ben, room = pair
    before = refusals(server)
    message = send(ana, room, f"{site.url}{path}")
    wait_until(lambda: refusals(server) > before, what="the server to give up on the link")
    assert internal.total_hits() == 0
    status, fetched = ben.get(f"/v1/conversations/{room['id']}/messages/{message['id']}")
    assert status == 200 and "linkPreview" not in fetched
    # The log names the host and why, never the link's path.
    said = [line for line in server.log if "no link preview" in line][-1]
    assert "127.0.0.1" in said and "why=" in said and "http://" not in said and f"{site.port}{path}" not in said


def test_a_page_in_latin1_is_read_as_what_it_says(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    message = send(ana, room, f"{site.url}/latin1")
    assert previewed(phone, message)["message"]["linkPreview"]["title"] == "Café René"
    phone.close()


def test_a_picture_past_the_size_limit_is_cut_off_and_the_preview_has_none(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    message = send(ana, room, f"{site.url}/huge-picture")
    preview = previewed(phone, message)["message"]["linkPreview"]
    assert preview["title"] == "A huge picture" and "image" not in preview
    assert site.hits["/huge.png"] == 1
    phone.close()


def test_an_image_on_a_private_address_is_not_fetched_and_the_preview_has_none(server, site, internal, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    message = send(ana, room, f"{site.url}/image-inside")
    preview = previewed(phone, message)["message"]["linkPreview"]
    assert preview["title"] == "An image inside" and "image" not in preview
    assert internal.total_hits() == 0
    phone.close()


def test_a_sender_can_opt_out_and_an_edit_to_another_link_previews_that_one(server, site, pair):
    ana, ben, room = pair
    phone = Device(server, ben.token)
    phone.wait_ready()
    quiet = send(ana, room, f"no preview please {site.url}/article3", previewLinks=False)
    loud = send(ana, room, f"{site.url}/article4")
    previewed(phone, loud)
    # The opt-out's edit keeps it out; an edit of the previewed one to another link previews that one.
    status, _ = ana.patch(f"/v1/conversations/{room['id']}/messages/{quiet['id']}", {"content": {"type": "text", "text": f"{site.url}/article5"}})
    assert status == 200
    status, edited = ana.patch(f"/v1/conversations/{room['id']}/messages/{loud['id']}", {"content": {"type": "text", "text": f"now {site.url}/oembed"}})
    assert status == 200 and "linkPreview" not in edited
    again = previewed(phone, loud)
    assert again["message"]["linkPreview"]["title"] == "A talk about chat"
    status, fetched = ben.get(f"/v1/conversations/{room['id']}/messages/{quiet['id']}")
    assert "linkPreview" not in fetched
    assert "/article3" not in site.hits and "/article5" not in site.hits
    phone.close()


def test_the_apps_switch_turns_previews_off_and_on(server, site, pair):
    ana, ben, room = pair
    backend = Client(server, app_key="")
    backend.app_key = None
    secret = {"Authorization": f"Bearer {server.app_secret}"}
    status, settings = backend.request("GET", "/v1/server/link-previews", headers=secret)
    assert status == 200 and settings == {"enabled": True}
    status, settings = backend.request("PUT", "/v1/server/link-previews", {"enabled": False}, headers=secret)
    assert status == 200 and settings == {"enabled": False}
    phone = Device(server, ben.token)
    phone.wait_ready()
    try:
        off = send(ana, room, f"{site.url}/article6")
        status, settings = backend.request("PUT", "/v1/server/link-previews", {"enabled": True}, headers=secret)
        assert status == 200 and settings == {"enabled": True}
        on = send(ana, room, f"{site.url}/article7")
        previewed(phone, on)
        status, fetched = ben.get(f"/v1/conversations/{room['id']}/messages/{off['id']}")
        assert "linkPreview" not in fetched and "/article6" not in site.hits
    finally:
        backend.request("PUT", "/v1/server/link-previews", {"enabled": True}, headers=secret)
        phone.close()
    status, answer = backend.request("PUT", "/v1/server/link-previews", {"enabled": "yes"}, headers=secret)
    assert status == 400


def test_a_node_started_with_previews_off_leaves_links_as_text(site):
    quiet = Server("--link-previews", "off", "--link-previews-allow-private", f"127.0.0.1:{site.port}")
    try:
        ana = Client(quiet).register(f"ana{uuid.uuid4().hex[:6]}")
        ben = Client(quiet).register(f"ben{uuid.uuid4().hex[:6]}")
        status, room = ana.post("/v1/conversations", {"kind": "direct", "members": [ben.user["username"]]})
        phone = Device(quiet, ben.token)
        phone.wait_ready()
        message = send(ana, room, f"{site.url}/article8")
        phone.wait_event(lambda e: e["type"] == "message.created" and e["message"]["id"] == message["id"])["event"]
        phone.drain(quiet=1.5)
        assert "/article8" not in site.hits
        phone.close()
    finally:
        assert quiet.stop() == 0


def test_the_option_names_what_is_wrong():
    import subprocess
    result = subprocess.run([parley.BINARY, "--link-previews-allow-private", "intranet:80", "--port", "0"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "intranet:80" in result.stderr and "is not an address and port" in result.stderr


def test_the_terminal_client_shows_the_preview_and_sends_without_one(server, site, pair):
    import os
    import subprocess
    import tempfile
    ana, ben, room = pair
    cli = os.environ.get("PARLEY_CLI", os.path.join(parley.ROOT, ".build", "debug", "parley"))
    home = tempfile.mkdtemp(prefix="parley-cli-")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}, "PARLEY_HOME": home}

    def run(*args, password=None):
        return subprocess.run([cli, "--server", server.url, "--app-key", server.app_key, *args], input=(password or "") + "\n",
                              env=env, capture_output=True, text=True, timeout=60)

    assert run("login", ben.user["username"], password="correct horse battery").returncode == 0
    phone = Device(server, ana.token)
    phone.wait_ready()
    quiet = run("send", room["id"], "--no-preview", f"{site.url}/article9")
    assert quiet.returncode == 0, quiet.stderr
    loud = run("send", room["id"], f"{site.url}/article10")
    assert loud.returncode == 0, loud.stderr
    loud_id = loud.stdout.split("\t")[0]
    previewed(phone, {"id": loud_id})
    history = run("history", room["id"])
    lines = history.stdout.splitlines()
    assert lines[-1].endswith(f"{site.url}/article10  🔗 Parley & friends: chat you own — Parley blog"), lines[-1]
    assert "🔗" not in lines[-2] and "/article9" not in site.hits
    phone.close()
