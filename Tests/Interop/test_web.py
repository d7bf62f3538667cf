"""The web client in a real browser: Debian's Chromium, headless, driven by Selenium, against
the real binary. Two people chat, see each other's messages, receipts, typing and edits
live; a third session of the first person sees the same history; a page that was asleep
while the server restarted catches up without a reload. Screenshots of the main screens go
to reports/screenshots/ (copied into docs/screenshots/ for the README)."""
import os
import json
import math
import re
import shutil
import socket
import time
import uuid

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

import media
from parley import ROOT, Client, Server

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = os.path.join(ROOT, "reports", "screenshots")


def name(prefix):
    return f"{prefix}{uuid.uuid4().hex[:6]}"


class Browser:
    """One person's browser window."""

    def __init__(self, server, width=1200, height=800):
        assert shutil.which(CHROMIUM) and shutil.which(DRIVER), "install chromium and chromium-driver (scripts/install-deps.sh)"
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                         "--lang=en-US", "--disable-gpu"]:
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        self.server = server
        self.driver.get(server.url + "/app/")

    def wait(self, condition, what, timeout=20):
        try:
            # The chat view re-renders its messages on every change: retry a look that raced one.
            return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                                 ignored_exceptions=(StaleElementReferenceException, NoAlertPresentException)).until(lambda _: condition())
        except Exception as error:
            raise AssertionError(f"timed out waiting for {what}; console: {self.console()}") from error

    def find(self, css, within=None):
        return (within or self.driver).find_elements(By.CSS_SELECTOR, css)

    def one(self, css, what=None):
        return self.wait(lambda: (self.find(css) or [None])[0], what or css)

    def click_found(self, find, what):
        """Clicks what `find` returns once it returns something. The page draws its lists again
        when events arrive, so an element found a moment ago may be gone: finding and clicking
        are one step, tried again on a fresh page."""
        def click():
            try:
                element = find()
                if element is None:
                    return False
                element.click()
                return True
            except StaleElementReferenceException:
                return False
        self.wait(click, what)

    def look(self, look, timeout=10):
        """`look()`'s value (whatever it is) once it runs through without meeting an element the
        page drew again meanwhile: for an assertion over a list that events redraw."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return look()
            except StaleElementReferenceException:
                if time.monotonic() > deadline:
                    raise

    def read(self, css, read, what):
        """The first truthy `read(element)` of the elements `css` matches, found and read in one
        look: the page draws its lists again as events arrive (a receipt, an edit), so an element
        found a moment ago may be gone before it is read."""
        return self.wait(lambda: next((value for element in self.find(css) for value in [read(element)] if value), None), what)

    def click(self, css):
        """Clicks the first element `css` matches, found again if the page drew it anew between
        the look and the click (search results and lists are redrawn as answers arrive)."""
        self.click_found(lambda: (self.find(css) or [None])[0], css)

    def click_text(self, text, css="button"):
        self.click_found(lambda: next((b for b in self.find(css) if b.text.strip() == text and b.is_displayed()), None), f"button {text}")

    def console(self):
        try:
            return [entry["message"] for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]
        except WebDriverException:
            return []

    def sign_up(self, username, display_name):
        self.click_text("Sign up")
        self.one("input[name=username]").send_keys(username)
        self.one("input[name=password]").send_keys("correct horse battery")
        self.one("input[name=displayName]").send_keys(display_name)
        self.click("form button[type=submit]")
        self.one(".connection.online", "online")

    def sign_in(self, username):
        self.one("input[name=username]").send_keys(username)
        self.one("input[name=password]").send_keys("correct horse battery")
        self.click("form button[type=submit]")
        self.one(".connection.online", "online")

    def start_chat(self, search, username):
        """New chat: search for someone and open the conversation with them."""
        self.click_text("New chat")
        self.one("input[name=search]").send_keys(search)
        self.click(f"button.person[data-id='{username}']")
        self.one(".composer-input")

    def open_conversation(self, label):
        self.click_found(lambda: next((b for b in self.find("button.conversation") if label in b.text), None), f"conversation {label}")
        self.one(".composer-input")

    def type(self, text, enter=True):
        box = self.one(".composer-input")
        box.send_keys(text)
        if enter:
            box.send_keys(Keys.ENTER)

    def texts(self):
        """The bubbles' texts (content only), oldest first."""
        return self.look(lambda: [b.find_element(By.CSS_SELECTOR, ":scope > :first-child").text for b in self.find(".messages .bubble")])

    def message(self, contains):
        return self.wait(lambda: next((m for m in self.find(".messages .message") if contains in m.text), None), f"message {contains!r}")

    def screenshot(self, filename):
        os.makedirs(SHOTS, exist_ok=True)
        self.driver.save_screenshot(os.path.join(SHOTS, filename))

    def quit(self):
        self.driver.quit()


@pytest.fixture()
def browsers():
    opened = []
    yield opened
    for browser in opened:
        browser.quit()


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    running.stop()


def test_two_people_chat_live_and_a_third_session_sees_the_same_history(server, browsers, tmp_path):
    alice_name, bob_name = name("alice"), name("bob")
    alice = Browser(server); browsers.append(alice)
    alice.screenshot("sign-in.png")
    bob = Browser(server); browsers.append(bob)
    alice.sign_up(alice_name, "Alice Lima")
    bob.sign_up(bob_name, "Bob Stone")

    # Alice finds Bob by searching and writes to him.
    alice.start_chat("Bob St", bob_name)
    alice.type("Hello **Bob**")
    alice.one(".message.mine .status.sent, .message.mine .status.delivered", "sent mark")

    # Bob's list shows the new conversation live, unread, with the last message.
    bob.wait(lambda: any("Alice Lima" in b.text and "Hello" in b.text and b.find_element(By.CSS_SELECTOR, ".unread").text == "1"
                         for b in bob.find("button.conversation")), "the conversation in Bob's list, one unread")
    bob.screenshot("conversations.png")
    bob.open_conversation("Alice Lima")
    bob.wait(lambda: bob.message("Hello").find_element(By.CSS_SELECTOR, "strong").text == "Bob", "Markdown rendered")
    # Alice sees it read.
    alice.one(".message.mine .status.read", "read mark")

    # Bob types: Alice sees it. Then his reply, with HTML and a javascript: link, stays text.
    bob.type("<script>", enter=False)
    alice.wait(lambda: "Bob Stone is typing" in alice.one(".typing").text, "typing line")
    bob.type("alert(1)</script> and [click](javascript:alert(2)) and https://example.org/x")
    alice.wait(lambda: "<script>alert(1)</script>" in alice.message("alert(1)").text, "the reply, as text")
    assert not alice.find(".messages script"), "no script element from a message"
    assert alice.look(lambda: all(not (link.get_attribute("href") or "").startswith("javascript") for link in alice.find(".messages a")))
    assert alice.find(".messages a[href='https://example.org/x']"), "plain links are links"
    alice.wait(lambda: alice.one(".typing").text == "", "typing line cleared by the message")

    # Alice edits her greeting: Bob sees the new text and "edited" live.
    def edit_button():
        mine = alice.message("Hello")
        ActionChains(alice.driver).move_to_element(mine).perform()
        return mine.find_element(By.XPATH, ".//button[text()='Edit']")
    alice.wait(lambda: edit_button().is_displayed(), "the Edit button on hover")
    edit_button().click()
    box = alice.one(".composer-input")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("Hello **Bob**, see you at 8", Keys.ENTER)
    bob.wait(lambda: "edited" in bob.message("see you at 8").text, "the edit, marked edited")

    # A photo: progress, then the thumbnail for Bob. A file: a download link.
    photo = tmp_path / "sunset.jpg"
    photo.write_bytes(media.jpeg(1200, 800))
    alice.one("input[name=photo]").send_keys(str(photo))
    width = bob.read(".messages img.photo", lambda i: bob.driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i),
                     "Bob's thumbnail")
    assert width == 512
    report = tmp_path / "notes.txt"
    report.write_text("bring snacks")
    alice.one("input[name=file]").send_keys(str(report))
    href = bob.read(".messages a.file", lambda a: "notes.txt" in a.text and a.get_attribute("href"), "file link")
    assert "/v1/media/" in href and "signature=" in href
    assert "token" not in href

    # Two more, then select both and delete them: tombstones for Bob.
    alice.type("one")
    alice.type("two")
    alice.wait(lambda: len(alice.find(".message.mine .status.read")) >= 5, "everything read")
    alice.click_text("☑ Select")
    for text in ("one", "two"):
        alice.wait(lambda: alice.message(text).find_element(By.CSS_SELECTOR, "input[type=checkbox]"), "a checkbox").click()
        alice.wait(lambda: alice.message(text).find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_selected(), "checked")
    alice.click_text("Delete selected")
    alice.driver.switch_to.alert.accept()
    bob.wait(lambda: len(bob.find(".message.deleted")) == 2, "two tombstones")
    alice.screenshot("chat.png")

    # A third session: Alice on another browser sees the same history.
    again = Browser(server); browsers.append(again)
    again.sign_in(alice_name)
    again.open_conversation("Bob Stone")
    again.message("see you at 8")
    again.wait(lambda: len(again.find(".messages .bubble")) == len(alice.find(".messages .bubble")), "the same number of messages")
    assert again.texts() == alice.texts()

    # On a phone's width: one pane at a time, with a way back.
    bob.driver.set_window_size(390, 844)
    bob.screenshot("phone-chat.png")
    bob.click("button.back")
    bob.one("button.conversation")
    assert not bob.one(".chat").is_displayed()
    bob.screenshot("phone-list.png")
    assert not alice.console() and not bob.console(), (alice.console(), bob.console())


def test_guests_and_channels(server, browsers):
    owner = Browser(server); browsers.append(owner)
    owner.sign_up(name("host"), "Host")
    title = "garden " + uuid.uuid4().hex[:4]
    owner.click_text("Channels")
    owner.one("input[name=channel]").send_keys(title, Keys.ENTER)
    owner.one(".composer-input")
    owner.type("Welcome to the garden")
    guest = Browser(server); browsers.append(guest)
    guest.click_text("Guest")
    guest.one("input[name=displayName]").send_keys("Visitor")
    guest.click("form button[type=submit]")
    guest.one(".connection.online", "online")
    guest.click_text("Channels")
    guest.one("input[name=search]").send_keys(title)
    # The results are drawn again on every keystroke's answer.
    guest.click_found(lambda: next((li.find_element(By.XPATH, ".//button[text()='Join']") for li in guest.find(".results li") if title in li.text), None),
                      "the channel in the list, joined")
    guest.message("Welcome to the garden")
    # Issue 15, part 2: in a channel the guest's receipt reaches only the guest's devices, yet
    # the host's bubble moves on (delivery.updated): the guest has read it, the only other member.
    owner.wait(lambda: owner.message("Welcome to the garden").find_elements(By.CSS_SELECTOR, ".status.read"), "the host's bubble marked read")
    guest.type("Hi, I'm new")
    owner.message("Hi, I'm new")
    guest.click_text("Sign out")
    guest.one("input[name=username]", "the sign-in form after signing out")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_page_asleep_while_the_server_restarts_catches_up_without_a_reload(browsers):
    port = free_port()
    server = Server("--port", str(port))
    try:
        alice_name, bob_name = name("alice"), name("bob")
        alice = Browser(server); browsers.append(alice)
        bob = Browser(server); browsers.append(bob)
        alice.sign_up(alice_name, "Alice")
        bob.sign_up(bob_name, "Bob")
        alice.start_chat(bob_name, bob_name)
        alice.type("before the lid closed")
        bob.open_conversation("Alice")
        bob.message("before the lid closed")
        alice.driver.execute_script("window.sameDocument = 'yes'")
        # The lid closes: Alice's page is frozen (no timers, no events), the server dies and
        # comes back; Bob reconnects and writes while Alice sleeps.
        alice.driver.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "frozen"})
        server.kill()
        server.start()
        bob.one(".connection.online", "Bob back online")
        for index in range(3):
            bob.type(f"while you were away {index}")
        bob.wait(lambda: len(bob.find(".message.mine .status")) == 3 and not bob.find(".message.mine .status.sending"), "Bob's messages sent")
        # The lid opens.
        alice.driver.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "active"})
        alice.message("while you were away 2")
        alice.wait(lambda: [t for t in alice.texts() if "away" in t] == [f"while you were away {i}" for i in range(3)],
                   "the three messages, once each, in order")
        assert alice.driver.execute_script("return window.sameDocument") == "yes", "caught up without a reload"
        alice.one(".connection.online", "Alice online again")
        # Where the page resumes from is a cursor, one position per shard of the server's log
        # (docs/protocol.md, "Resuming"), kept with the epoch.
        alice.wait(lambda: alice.driver.execute_script("return JSON.parse(localStorage.getItem('parley.session')).cursor") is not None,
                   "the cursor kept")
        kept = alice.driver.execute_script("return JSON.parse(localStorage.getItem('parley.session'))")
        assert isinstance(kept["cursor"], list) and len(kept["cursor"]) == 1 and kept["epoch"].startswith("e_")
        status, feed = Client(server).sign_in(alice_name).get(f"/v1/events?after={kept['cursor'][0]}")
        assert status == 200 and not [e for e in feed["events"] if e["type"] == "message.created"], "nothing newer than the kept cursor"
    finally:
        server.kill()


def test_groups_load_earlier_keeps_the_place_locations_and_jump_to_newest(server, browsers):
    from parley import Client
    owner_name, friend_name = name("olga"), name("finn")
    friend = Client(server).register(friend_name, display_name="Finn")
    olga = Browser(server); browsers.append(olga)
    olga.sign_up(owner_name, "Olga")
    # A group made in the dialog, named, with Finn picked from the search.
    olga.click_text("New group")
    olga.one("input[name=title]").send_keys("Book club")
    olga.one("input[name=search]").send_keys("Finn")
    olga.click(f"button.person[data-id='{friend_name}']")
    olga.wait(lambda: any("Finn" in chip.text for chip in olga.find(".chip")), "Finn chosen")
    # Chosen people are marked in the results; a second click takes one back.
    finn = f"button.person[data-id='{friend_name}']"
    olga.wait(lambda: olga.one(finn).get_attribute("aria-pressed") == "true" and olga.one(finn + " .chosen-mark").text == "✓", "Finn marked")
    olga.click(finn)
    olga.wait(lambda: olga.one(finn).get_attribute("aria-pressed") == "false" and not olga.find(".chip"), "Finn taken back")
    olga.click(finn)
    olga.wait(lambda: any("Finn" in chip.text for chip in olga.find(".chip")), "Finn chosen again")
    olga.click_text("Create group")
    olga.one(".composer-input")
    assert "Book club" in olga.one(".chat-title h2").text
    group_id = olga.driver.execute_script("return location.hash").split("/")[-1]
    # Sixty messages from Finn: the newest fifty show, names shown where the sender changes.
    for index in range(60):
        friend.send(group_id, f"page {index:02d}")
    olga.message("page 59")
    assert olga.look(lambda: olga.find(".messages .sender")[0].text) == "Finn"
    # After a reload the conversation opens on its newest fifty.
    olga.driver.refresh()
    olga.message("page 59")
    olga.wait(lambda: olga.texts()[0] == "page 10", "the newest fifty")
    # Load earlier: the older ten appear above, and what was on screen stays where it was.
    messages = olga.one(".messages")
    olga.driver.execute_script("arguments[0].scrollTop = 0", messages)
    top = "return arguments[0].querySelector('.bubble').getBoundingClientRect().top"
    before = olga.driver.execute_script(top, olga.message("page 10"))
    olga.click_text("Load earlier messages")
    olga.wait(lambda: olga.texts()[0] == "page 00", "the older ten")
    after = olga.driver.execute_script(top, olga.message("page 10"))
    assert abs(after - before) < 5, f"the list jumped by {after - before}px"
    # Scrolled up, a new message does not pull the view down; "Newest" does.
    friend.send(group_id, "latest news")
    jump = olga.wait(lambda: next((b for b in olga.find("button.jump") if b.is_displayed()), None), "the jump button")
    jump.click()
    olga.wait(lambda: olga.driver.execute_script(
        "const m = arguments[0]; return m.scrollHeight - m.scrollTop - m.clientHeight < 80", olga.one(".messages")), "at the newest")
    # A location, typed in when the browser will not tell where it is.
    olga.click("button[aria-label='Share a location']")
    prompt = olga.wait(lambda: olga.driver.switch_to.alert, "the location prompt", timeout=20)
    prompt.send_keys("52.52, 13.405")
    prompt.accept()
    place = olga.wait(lambda: olga.message("52.52000").find_element(By.CSS_SELECTOR, "a").get_attribute("href"), "the place's link")
    assert "openstreetmap.org" in place
    status, page = friend.get(f"/v1/conversations/{group_id}/messages?limit=1")
    assert page["messages"][-1]["content"] == {"type": "location", "latitude": 52.52, "longitude": 13.405}


def test_the_app_is_served_with_a_strict_policy_and_nothing_else(server):
    from parley import Client
    anyone = Client(server)
    status, body, headers = anyone.request_bytes("GET", "/app/", authenticated=False)
    assert status == 200 and b'<script type="module" src="/app/js/app.js">' in body
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy and "frame-ancestors 'none'" in policy
    assert headers["x-content-type-options"] == "nosniff"
    status, _, headers = anyone.request_bytes("GET", "/", authenticated=False)
    assert status == 302 and headers["location"] == "/app/"
    for path in ["/app/../Package.swift", "/app/%2e%2e/Package.swift", "/app/js/../../Package.swift", "/app/nothing.js"]:
        assert anyone.request_bytes("GET", path, authenticated=False)[0] == 404, path
    status, config, _ = anyone.request_bytes("GET", "/app/config.json", authenticated=False, json_answer=True)
    assert config["appKey"] == server.app_key
    # The page never puts markup from data into the document: no innerHTML, no eval.
    for script in ["app.js", "events.js", "dom.js", "markdown.js", "api.js", "live.js", "status.js", "state.js", "format.js", "dialogs.js", "signin.js"]:
        source = anyone.request_bytes("GET", f"/app/js/{script}", authenticated=False)[1].decode()
        assert "innerHTML" not in source and "eval(" not in source and "insertAdjacentHTML" not in source, script


def test_a_photo_shows_at_once_with_its_upload_progress_then_the_servers_thumbnail(server, browsers, tmp_path):
    sender_name, friend_name = name("pia"), name("rex")
    from parley import Client
    friend = Client(server).register(friend_name, display_name="Rex")
    pia = Browser(server); browsers.append(pia)
    pia.sign_up(sender_name, "Pia")
    pia.start_chat(friend_name, friend_name)
    # A slow uplink (256 KiB/s) so the upload takes a few seconds.
    pia.driver.execute_cdp_cmd("Network.enable", {})
    pia.driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 256 * 1024})
    photo = tmp_path / "big.jpg"
    photo.write_bytes(media.jpeg(1600, 1200, quality=100) + bytes(1 << 20))
    pia.one("input[name=photo]").send_keys(str(photo))
    # At once: the local picture, with a progress bar that moves.
    preview = pia.read(".messages img.photo[src^='blob:']", lambda i: pia.driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i),
                       "the local preview")
    assert preview == 1600
    widths = set()
    pia.wait(lambda: widths.add(pia.driver.execute_script(
        "const b = document.querySelector('.messages .upload-progress .bar'); return b ? b.style.width : 'gone'")) or
        len(widths - {"gone", "0%", ""}) >= 2, "the progress bar moving", timeout=30)
    # Then the stored message, and for the other member the server's thumbnail.
    pia.driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    pia.wait(lambda: not pia.find(".messages .upload-progress"), "the upload to finish", timeout=60)
    status, page = friend.get(f"/v1/conversations/{pia.driver.execute_script('return location.hash').split('/')[-1]}/messages")
    assert page["messages"][-1]["content"]["type"] == "photo" and page["messages"][-1]["content"]["width"] == 1600
    # The chat still follows the newest (issue 33): the photo held its shape from the start, so
    # a message after it lands in view, with no "Newest" button.
    friend.send(page["messages"][-1]["conversationId"], "nice picture")
    latest = pia.message("nice picture")
    inside = ("const r = arguments[0].getBoundingClientRect(), m = document.querySelector('.messages').getBoundingClientRect();"
              "return r.bottom <= m.bottom + 1 && r.top >= m.top - 1")
    pia.wait(lambda: pia.driver.execute_script(inside, pia.message("nice picture")), "the new message in view")
    assert not pia.look(lambda: any(b.is_displayed() for b in pia.find("button.jump")))
    assert latest is not None


def test_the_keyboard_alone_signs_up_starts_a_chat_sends_and_edits(server, browsers):
    from parley import Client
    friend_name = name("kim")
    Client(server).register(friend_name, display_name="Kim")
    me = Browser(server); browsers.append(me)
    active = lambda: me.driver.switch_to.active_element  # noqa: E731
    def press(*keys):
        ActionChains(me.driver).send_keys(*keys).perform()
    def tab_to(text, backwards=False, limit=40):
        for _ in range(limit):
            press(Keys.SHIFT, Keys.TAB, Keys.SHIFT) if backwards else press(Keys.TAB)
            label = active().text.strip()
            if label == text or label.endswith("\n" + text) or active().get_attribute("aria-label") == text:
                return
        raise AssertionError(f"Tab never reached {text!r}")
    me.one("input[name=username]")
    tab_to("Sign up", backwards=True)
    press(Keys.ENTER)
    me.wait(lambda: active().get_attribute("name") == "username", "the username field focused")
    press(name("key"), Keys.TAB, "correct horse battery", Keys.TAB, "Keyboard User", Keys.ENTER)
    me.one(".connection.online", "online")
    tab_to("New chat")
    press(Keys.ENTER)
    me.wait(lambda: active().get_attribute("name") == "search", "the search field focused")
    press("Kim")
    me.one(f"button.person[data-id='{friend_name}']")
    tab_to("Kim @" + friend_name)
    press(Keys.ENTER)
    me.wait(lambda: "composer-input" in (active().get_attribute("class") or ""), "the composer focused")
    press("typed, not clicked", Keys.ENTER)
    me.one(".message.mine .status.sent, .message.mine .status.delivered", "sent")
    tab_to("Edit", backwards=True)
    press(Keys.ENTER)
    me.wait(lambda: not me.one(".edit-banner").get_attribute("hidden"), "editing")
    press(Keys.CONTROL, "a", Keys.CONTROL, "typed and edited", Keys.ENTER)
    me.wait(lambda: "edited" in me.message("typed and edited").text, "the edit")
    tab_to("Channels", backwards=True)
    press(Keys.ENTER)
    me.one(".dialog")
    press(Keys.ESCAPE)
    me.wait(lambda: not me.find(".dialog"), "Escape closes the dialog")


def test_a_photo_upload_cut_off_midway_is_resumed_by_the_page(server, browsers, tmp_path):
    """The network drops in the middle of a photo's upload (a proxy cuts the connection): the
    page asks how far the server got, sends only the rest, and the photo is sent."""
    from parley import Client
    from proxy import CuttingProxy
    sender_name, friend_name = name("ida"), name("tom")
    friend = Client(server).register(friend_name, display_name="Tom")
    proxy = CuttingProxy(server, cut=700_000, every_whole_upload=True)
    try:
        ida = Browser(proxy); browsers.append(ida)
        ida.sign_up(sender_name, "Ida")
        ida.start_chat(friend_name, friend_name)
        photo = tmp_path / "harbour.jpg"
        photo.write_bytes(media.jpeg(1600, 1200, quality=100) + bytes(1 << 20))
        ida.one("input[name=photo]").send_keys(str(photo))
        conversation = ida.wait(lambda: ida.driver.execute_script("return location.hash").split("/")[-1], "the conversation")

        def photo_arrived():
            status, page = friend.get(f"/v1/conversations/{conversation}/messages")
            return status == 200 and page["messages"] and page["messages"][-1]["content"]["type"] == "photo" and page["messages"][-1]
        message = ida.wait(photo_arrived, "the photo to arrive for Tom", timeout=60)
        ida.wait(lambda: not ida.find(".messages .upload-progress"), "the progress bar to go")
        heads = proxy.upload_heads()
        # Chromium itself sends a POST that fails on a connection again, several times (each cut
        # here too, or answered upload_superseded when the copies overlap) before the page hears
        # of the failure; then the page asks how far the server got and sends the rest, the
        # only way through this proxy.
        size = len(photo.read_bytes())
        ranges = [re.findall(r"(?im)^content-range: .*$", head) for head in heads]
        assert len(heads) >= 2 and all(found == [] for found in ranges[:-1]), ranges
        assert proxy.sent.count(b"GET /v1/uploads/") >= 1, "the page asked how far the server got"
        resumed = re.search(rf"content-range: bytes (\d+)-{size - 1}/{size}\r\n", heads[-1].lower())
        assert resumed and 0 < int(resumed.group(1)) < size, "the last request sent only the rest"
        content = message["content"]
        assert content["width"] == 1600 and content["name"] == "harbour.jpg"
        assert not ida.find(".messages .failed"), "nothing shows as not sent"
    finally:
        proxy.close()


def test_the_pages_delivery_rule_is_the_servers(server, browsers):
    """js/status.js against the cases ParleyWire's DeliveryStatus.of is tested with."""
    cases = json.load(open(os.path.join(os.path.dirname(__file__), "..", "Fixtures", "delivery-status.json")))["cases"]
    page = Browser(server); browsers.append(page)
    got = page.driver.execute_async_script("""
        const [cases, done] = arguments;
        import("/app/js/status.js").then((m) => done(cases.map((c) =>
            m.deliveryStatus(c.seq, c.others.map((o) => ({ deliveredSeq: o.delivered, readSeq: o.read }))))));
        """, cases)
    assert got == [case["status"] for case in cases]


def test_the_page_handles_every_kind_of_event_the_server_declares(server, browsers):
    """js/events.js has one handler per kind of Tests/Fixtures/events (every kind ParleyWire
    declares has a golden frame there), and messages.expired takes the expired messages off the
    page: the golden event, run through the real handler in Chromium."""
    fixtures = os.path.join(os.path.dirname(__file__), "..", "Fixtures", "events")
    kinds = sorted(name[:-5] for name in os.listdir(fixtures) if name.endswith(".json"))
    expired = json.load(open(os.path.join(fixtures, "messages.expired.json")))
    page = Browser(server); browsers.append(page)
    handled, left = page.driver.execute_async_script("""
        const [expired, done] = arguments;
        import("/app/js/events.js").then((m) => {
          const calls = [];
          const list = Array.from({ length: 20 }, (_, i) => ({ id: `m_${i + 1}`, seq: i + 1 }));
          const state = { me: { id: "u_me" }, current: expired.conversationId, messages: new Map([[expired.conversationId, { list }]]),
                          conversations: new Map(), receipts: new Map(), deliveries: new Map() };
          const page = new Proxy({ state }, { get: (target, key) => key in target ? target[key] : () => calls.push(key) });
          const handlers = m.handlers(page);
          handlers["messages.expired"](expired, undefined);
          done([Object.keys(handlers).sort(), state.messages.get(expired.conversationId).list.map((message) => message.seq)]);
        });
        """, expired)
    assert handled == kinds, f"the page's handlers differ from the declared kinds: {set(handled) ^ set(kinds)}"
    assert left == list(range(expired["throughSeq"] + 1, 21)), "messages up to throughSeq leave the page"


def test_a_system_message_from_the_apps_backend_is_shown_apart(server, browsers):
    """The app's backend posts to a group through the server API; the page shows its notice
    centred, without a bubble or a sender, live."""
    from test_server_api import Backend
    reader = Browser(server); browsers.append(reader)
    username = name("reader")
    reader.sign_up(username, "Reader")
    backend = Backend(server)
    title = "Club " + uuid.uuid4().hex[:4]
    status, group = backend.call("POST", "/v1/server/conversations", {"kind": "group", "title": title, "members": [username]})
    assert status == 201, group
    reader.open_conversation(title)
    status, _ = backend.call("POST", f"/v1/server/conversations/{group['id']}/messages",
                             {"clientId": "welcome", "content": {"type": "system", "text": "Welcome to the club"}})
    assert status == 201
    inside = reader.read(".system-notice", lambda n: "Welcome to the club" in n.text and (n.find_elements(By.CSS_SELECTOR, ".bubble, .sender"),), "the notice")
    assert inside == ([],), "no bubble and no sender in a notice"
    assert not reader.console()


def test_mentions_autocomplete_reactions_and_pins_live_in_two_browsers(server, browsers):
    ana_name, ben_name = name("ana"), name("ben")
    ana = Browser(server); browsers.append(ana)
    ben = Browser(server); browsers.append(ben)
    ana.sign_up(ana_name, "Ana Reyes")
    ben.sign_up(ben_name, "Ben Ortiz")
    ana.start_chat("Ben Or", ben_name)
    ana.type("first, so the chat exists")
    ben.open_conversation("Ana Reyes")

    # The chat view is drawn again on every event, so each look or click below is one step
    # inside a wait, tried again on a fresh view (a stale element is retried, not a failure).
    def clicked(browser, find):
        def attempt():
            element = find()
            if element is None:
                return False
            element.click()
            return True
        return attempt

    def hovered_button(browser, contains, css=None, text=None):
        def find():
            message = browser.message(contains)
            ActionChains(browser.driver).move_to_element(message).perform()
            buttons = message.find_elements(By.CSS_SELECTOR, css or ".message-actions button")
            return next((b for b in buttons if b.is_displayed() and (text is None or b.text == text)), None)
        return find

    # Typing @ and the start of a name offers the members; Tab takes the first.
    ana.type("lunch, @" + ben_name[:4], enter=False)
    offered = ana.wait(lambda: next(((li.get_attribute("data-id"), li.text) for li in ana.find(".mention-suggestions li[aria-selected=true]")), None),
                       "a suggestion")
    assert offered[0] == ben_name and "Ben Ortiz" in offered[1]
    ana.one(".composer-input").send_keys(Keys.TAB)
    ana.wait(lambda: ana.one(".composer-input").get_attribute("value") == f"lunch, @{ben_name} ", "the mention inserted")
    ana.type("at 1?")
    mention = ben.wait(lambda: next((m.text for m in ben.find(".messages .mention-me")), None), "Ben's mention, highlighted")
    assert mention == f"@{ben_name}"

    # Ben reacts from the picker: both windows show the chip, pressed only where it is one's own.
    ben.wait(clicked(ben, hovered_button(ben, "lunch, @", css="button.react-button")), "the react button on hover")
    ben.wait(clicked(ben, lambda: next(iter(ben.find(".reaction-picker button[data-emoji='🎉']")), None)), "the picker")
    ben.wait(lambda: [c.text.split() for c in ben.find(".reaction[aria-pressed=true]")] == [["🎉", "1"]], "Ben's own reaction")
    pressed = ana.wait(lambda: next((c.get_attribute("aria-pressed") for c in ana.find(".reaction[data-emoji='🎉']") if c.text.split() == ["🎉", "1"]), None),
                       "Ana sees it live")
    assert pressed == "false"
    ana.wait(clicked(ana, lambda: next(iter(ana.find(".reaction[data-emoji='🎉']")), None)), "Ana's click on the chip")
    ben.wait(lambda: [c.text.split() for c in ben.find(".reaction")] == [["🎉", "2"]], "two, live for Ben")
    ana.wait(lambda: ana.find(".reaction[aria-pressed=true]"), "pressed for Ana")

    # Ben pins it: Ana sees the mark live, and the pins list has it.
    ben.wait(clicked(ben, hovered_button(ben, "lunch, @", text="Pin")), "the Pin button")
    ana.wait(lambda: "📌 Pinned" in ana.message("lunch, @").text, "the pin, live")
    ana.click_text("📌 Pins")
    pinned = ana.wait(lambda: next((li.text for li in ana.find(".pins li[data-id]") if "lunch" in li.text), None), "the pins list")
    assert "pinned by Ben Ortiz" in pinned
    ana.screenshot("reactions-and-pins.png")
    ana.driver.find_element(By.CSS_SELECTOR, ".dialog button[aria-label=Close]").click()

    # Taking a reaction back is live too; no message was added by any of it.
    ana.wait(clicked(ana, lambda: next(iter(ana.find(".reaction[aria-pressed=true]")), None)), "Ana takes hers back")
    ben.wait(lambda: [c.text.split() for c in ben.find(".reaction")] == [["🎉", "1"]], "back to one")
    assert len(ben.find(".messages .message")) == 2
    assert not ana.console() and not ben.console(), (ana.console(), ben.console())


def test_a_thread_in_two_browsers(server, browsers):
    ana_name, ben_name = name("ana"), name("ben")
    ana = Browser(server); browsers.append(ana)
    ben = Browser(server); browsers.append(ben)
    ana.sign_up(ana_name, "Ana Silva")
    ben.sign_up(ben_name, "Ben Costa")
    ana.start_chat("Ben Co", ben_name)
    ana.type("trip to the coast?")
    ben.open_conversation("Ana Silva")

    def open_thread():
        message = ben.message("trip to the coast?")
        ActionChains(ben.driver).move_to_element(message).perform()
        button = message.find_element(By.XPATH, ".//button[text()='Reply in thread']")
        if not button.is_displayed():
            return False
        button.click()
        return True
    ben.wait(open_thread, "Reply in thread")  # one step: the view is drawn again on every event
    box = ben.one(".thread-input")
    box.send_keys("yes, saturday", Keys.ENTER)
    ben.wait(lambda: any("yes, saturday" in li.text for li in ben.find(".thread-replies li")), "the reply in Ben's thread panel")
    def open_link():
        link = next((b for b in ana.find("button.thread-link") if b.text.startswith("1 reply")), None)
        if link is None:
            return False
        link.click()
        return True
    ana.wait(lambda: any(b.text.startswith("1 reply") for b in ana.find("button.thread-link")), "Ana sees 1 reply live")
    assert "yes, saturday" not in " ".join(ana.wait(lambda: ana.texts(), "the texts")), "a thread-only reply stays out of the conversation"
    ana.wait(open_link, "the reply link")
    ana.wait(lambda: any("yes, saturday" in li.text for li in ana.find(".thread-replies li")), "Ana's thread panel")
    # Typing in the thread shows in the other's open thread, not under the conversation.
    ana.one(".thread-input").send_keys("booked")
    ben.wait(lambda: "typing" in ben.one(".thread-typing").text, "Ana typing, in Ben's thread panel")
    assert "typing" not in ben.one(".chat .typing:not(.thread-typing)").text
    ana.click("input[name=alsoInConversation]")
    ana.one(".thread-input").send_keys(" the train", Keys.ENTER)
    ben.wait(lambda: "typing" not in ben.one(".thread-typing").text, "the typing ended by the reply")
    ben.wait(lambda: any("booked the train" in li.text for li in ben.find(".thread-replies li")), "live in Ben's open thread")
    ana.screenshot("thread.png")
    # The thread is a side panel: the conversation stays in view beside it.
    assert ben.one(".thread-panel").is_displayed() and ben.one(".chat .messages").is_displayed()
    panel, chat = ben.one(".thread-panel").rect, ben.one(".chat").rect
    assert panel["x"] >= chat["x"] + chat["width"] - 1, "beside the chat, not over it"
    ben.driver.find_element(By.CSS_SELECTOR, ".thread-panel button[aria-label=Close]").click()
    ben.wait(lambda: not ben.find(".thread-panel"), "the panel closed")
    ben.wait(lambda: "replied in a thread" in ben.message("booked the train").text, "the reply also sent to the conversation")
    ben.wait(lambda: any(b.text.startswith("2 replies") for b in ben.find("button.thread-link")), "two replies on the root")
    assert not ana.console() and not ben.console(), (ana.console(), ben.console())


def click_action(browser, contains, label):
    """Clicks a message's action button (shown on hover). The list is drawn again on every
    event: finding and clicking is one step, tried again."""
    def attempt():
        message = browser.message(contains)
        ActionChains(browser.driver).move_to_element(message).perform()
        found = [b for b in message.find_elements(By.CSS_SELECTOR, ".message-actions button") if b.text == label and b.is_displayed()]
        if not found:
            return False
        found[0].click()
        return True
    browser.wait(attempt, f"{label} on {contains!r}")


def test_reporting_and_moderating_in_two_browsers(server, browsers):
    owner_name, bob_name = name("own"), name("bob")
    owner = Browser(server); browsers.append(owner)
    bob = Browser(server); browsers.append(bob)
    owner.sign_up(owner_name, "Olga Owner")
    bob.sign_up(bob_name, "Bob Brash")
    # The channel, by the API as the same people.
    owner_api = Client(server).sign_in(owner_name)
    bob_api = Client(server).sign_in(bob_name)
    status, channel = owner_api.post("/v1/conversations", {"kind": "public", "title": f"square-{uuid.uuid4().hex[:4]}"})
    assert status == 201
    assert bob_api.post(f"/v1/conversations/{channel['id']}/join")[0] == 200
    owner_api.send(channel["id"], "house rules: be kind")
    bob_api.send(channel["id"], "buy followers here")
    owner.open_conversation(channel["title"])
    bob.open_conversation(channel["title"])

    # Bob reports the owner's message; he has no moderation controls. (The list is drawn again
    # on every event: finding and clicking a message's button is one step, tried again.)
    def labels(browser, contains):
        message = browser.message(contains)
        ActionChains(browser.driver).move_to_element(message).perform()
        return [b.text for b in message.find_elements(By.CSS_SELECTOR, ".message-actions button") if b.is_displayed()]

    seen = bob.wait(lambda: (lambda found: found if "Report" in found else None)(labels(bob, "house rules")), "Report")
    assert "Ban" not in seen and "Mute" not in seen and "Delete" not in seen
    assert not bob.look(lambda: [b for b in bob.find(".chat-header button") if b.text == "Moderate"])
    click_action(bob, "house rules", "Report")
    bob.click(".report-form input[value=abuse]")
    bob.one(".report-form textarea[name=note]").send_keys("not kind at all")
    bob.click(".report-form button[type=submit]")
    bob.wait(lambda: any("Reported" in t.text for t in bob.find(".toast")), "the confirmation")

    # The owner's list flags the conversation live (report.created reaches moderators only),
    # then the queue has it: the owner deletes the message and sets slow mode.
    owner.wait(lambda: any("⚑ 1" in m.text for m in owner.find(".conversation .report-mark")), "the report flag in the owner's list")
    assert not bob.find(".report-mark"), "the reporter's list shows no flag"
    owner.click_text("Moderate")
    item = owner.wait(lambda: next((li for li in owner.find(".reports li[data-id]") if "house rules" in li.text), None), "the report")
    assert "abuse" in item.text and "Bob Brash" in item.text and "not kind at all" in item.text
    owner.screenshot("moderation.png")
    next(b for b in item.find_elements(By.CSS_SELECTOR, "button") if b.text == "Delete message").click()
    owner.wait(lambda: any("No open reports" in li.text for li in owner.find(".reports li")), "the queue emptied")
    bob.wait(lambda: len(bob.find(".message.deleted")) == 1, "the deleted message, live for Bob")
    Select(owner.one("select[name=slowMode]")).select_by_value("10")
    owner.wait(lambda: any("Slow mode" in t.text for t in owner.find(".toast")), "slow mode on")
    owner.driver.find_element(By.CSS_SELECTOR, ".dialog button[aria-label=Close]").click()
    status, updated = owner_api.get(f"/v1/conversations/{channel['id']}")
    assert updated["slowModeSeconds"] == 10

    # The owner bans Bob from his message: Bob's window leaves the channel at once.
    click_action(owner, "buy followers", "Ban")
    owner.wait(lambda: owner.driver.switch_to.alert, "the prompt").accept()
    bob.wait(lambda: not bob.find(".composer-input") or not bob.one(".chat").is_displayed()
             or channel["title"] not in " ".join(b.text for b in bob.find("button.conversation")), "Bob is out")
    status, error = bob_api.get(f"/v1/conversations/{channel['id']}/messages")
    assert status == 403 and error["error"]["code"] == "user_banned"
    assert not owner.console() and not bob.console(), (owner.console(), bob.console())


def test_faces_show_photos_where_people_set_them(server, browsers):
    ana_name, ben_name = name("ana"), name("ben")
    ana = Browser(server); browsers.append(ana)
    ana.sign_up(ana_name, "Ana Face")
    ben_api = Client(server).register(ben_name, display_name="Ben Face")
    status, upload = ben_api.upload(media.jpeg(600, 600, color=(40, 160, 90)), "photo", "image/jpeg")
    assert status == 201
    assert ben_api.request("PUT", "/v1/me/photo", {"attachmentId": upload["id"]})[0] == 200
    status, room = ben_api.post("/v1/conversations", {"kind": "group", "title": "Faces", "members": [ana_name]})
    assert status == 201
    ben_api.send(room["id"], "see my face?")
    ana.open_conversation("Faces")
    face = ana.read(".messages img.face", lambda i: ana.driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i) and i.get_attribute("src"),
                    "Ben's photo beside his message")
    assert face.endswith(f"/v1/avatars/{upload['id']}")
    ana.screenshot("faces.png")
    assert not ana.console(), ana.console()


def test_notifications_are_chosen_on_the_page_and_follow_the_other_devices(server, browsers):
    """The 🔔 in a conversation's header chooses what pushes the user's phone and mutes it; a
    change made on another device (a phone, here the API) shows in the list and on the bell
    live, without a reload."""
    ana_name = name("ana")
    ana = Browser(server); browsers.append(ana)
    ana.sign_up(ana_name, "Ana")
    ana_phone = Client(server).sign_in(ana_name)
    ben = Client(server).register(name("ben"))
    title = "Book club " + uuid.uuid4().hex[:4]
    status, group = ben.post("/v1/conversations", {"kind": "group", "title": title, "members": [ana_name]})
    assert status == 201
    ana.open_conversation(title)

    def choose(select_name, value):
        def attempt():
            try:
                Select(ana.one(f".dialog select[name={select_name}]")).select_by_value(value)
                return True
            except StaleElementReferenceException:
                return False
        ana.wait(attempt, f"{select_name} = {value}")

    ana.wait(lambda: ana.one(".notifications-button").text == "🔔", "the bell, not muted")
    ana.click(".notifications-button")
    choose("notificationLevel", "mentions")
    ana.wait(lambda: ana_phone.get(f"/v1/conversations/{group['id']}")[1].get("notifications") == "mentions", "mentions only, stored")
    choose("mute", "8")
    ana.wait(lambda: ana_phone.get(f"/v1/conversations/{group['id']}")[1].get("mutedUntil"), "a mute, stored")
    ana.wait(lambda: "until" in ana.one(".dialog .mute-until").text, "the mute's end shown")
    ana.screenshot("notifications.png")
    ana.click(".dialog [aria-label=Close]")
    ana.wait(lambda: ana.one(".notifications-button").text == "🔕", "the bell, muted")
    ana.wait(lambda: ana.find(f".conversation[data-id='{group['id']}'] .muted-mark"), "🔕 in the list")

    # Unmuted on the phone: the page follows at once.
    assert ana_phone.delete(f"/v1/conversations/{group['id']}/mute")[0] == 204
    ana.wait(lambda: not ana.find(f".conversation[data-id='{group['id']}'] .muted-mark"), "the list's 🔕 gone")
    ana.wait(lambda: ana.one(".notifications-button").text == "🔔", "the bell, unmuted")
    assert not ana.console()


def test_a_person_deletes_their_account_from_the_page_and_the_other_sees_tombstones(server, browsers):
    """App Store guideline 5.1.1(v): the account menu deletes the account after the password and
    a second click; with "erase", the other person's page turns her messages into tombstones
    live, and her username is free for a new sign-up."""
    ida_name, max_name = name("ida"), name("max")
    ida = Browser(server); browsers.append(ida)
    max_ = Browser(server); browsers.append(max_)
    ida.sign_up(ida_name, "Ida Berg")
    max_.sign_up(max_name, "Max Roth")
    ida.start_chat("Max Ro", max_name)
    ida.type("something I will take back")
    max_.open_conversation("Ida Berg")
    max_.message("something I will take back")

    ida.click_text("Delete account…")
    ida.one("input[name=password]").send_keys("wrong horse battery")
    ida.click("input[name=erase]")
    ida.click_text("Delete my account")
    ida.click_text("Yes, delete it for good")
    ida.wait(lambda: "wrong username or password" in ida.one(".dialog .form-error").text, "the refusal")
    max_.message("something I will take back")  # nothing changed

    password = ida.one(".dialog input[name=password]")
    password.clear()
    password.send_keys("correct horse battery")
    ida.click_text("Yes, delete it for good")
    ida.wait(lambda: "Your account and your messages were deleted" in ida.one(".auth-form .form-error, .form-error").text, "back at sign-in")
    max_.wait(lambda: any("This message was deleted" in m.text for m in max_.find(".messages .message")), "the tombstone, live")
    assert not max_.look(lambda: any("something I will take back" in m.text for m in max_.find(".messages .message")))

    # The username is free again: a new person signs up with it.
    again = Browser(server); browsers.append(again)
    again.sign_up(ida_name, "Someone New")
    # The browser logs the refused attempt (401) as an error; nothing else may be logged.
    assert [m for m in ida.console() if "/v1/me - Failed to load resource" not in m] == [] and not max_.console()


def test_blocking_someone_turns_their_messages_into_placeholders_live_and_unblocking_brings_them_back(server, browsers):
    """App Store guideline 1.2: a way to block abusive users. The blocked person's messages in a
    group become "Message from a blocked user" at once and as they arrive; the other member's
    page keeps showing them; unblocking from "Blocked people…" shows them again."""
    ida_name, max_name, cy_name = name("ida"), name("max"), name("cy")
    ida = Browser(server); browsers.append(ida)
    max_ = Browser(server); browsers.append(max_)
    ida.sign_up(ida_name, "Ida Berg")
    max_.sign_up(max_name, "Max Roth")
    cy_api = Client(server).register(cy_name, display_name="Cy Troll")
    status, group = cy_api.post("/v1/conversations", {"kind": "group", "title": f"Book club {uuid.uuid4().hex[:4]}",
                                                      "members": [ida_name, max_name]})
    assert status == 201
    cy_api.send(group["id"], "you all have terrible taste")
    ida.open_conversation(group["title"])
    max_.open_conversation(group["title"])

    click_action(ida, "terrible taste", "Block")
    ida.wait(lambda: ida.driver.switch_to.alert, "the confirmation").accept()
    ida.wait(lambda: any("Message from a blocked user" in m.text for m in ida.find(".messages .message")), "the placeholder")
    assert not ida.look(lambda: any("terrible taste" in m.text for m in ida.find(".messages .message")))
    cy_api.send(group["id"], "and another thing")
    max_.message("and another thing")
    ida.wait(lambda: len([m for m in ida.find(".messages .message.blocked-placeholder")]) == 2, "the second placeholder, live")
    assert not ida.look(lambda: any("another thing" in m.text for m in ida.find(".messages .message")))
    ida.screenshot("blocked-placeholder.png")

    ida.click_text("Blocked people…")
    item = ida.wait(lambda: next((li for li in ida.find(".blocked-list li[data-id]") if "Cy Troll" in li.text), None), "Cy in the list")
    item.find_element(By.CSS_SELECTOR, "button[name=unblock]").click()
    ida.wait(lambda: any("not blocked anyone" in li.text for li in ida.find(".blocked-list li")), "the list emptied")
    ida.driver.find_element(By.CSS_SELECTOR, ".dialog button[aria-label=Close]").click()
    ida.message("terrible taste")
    ida.message("and another thing")
    assert not ida.find(".messages .message.blocked-placeholder")
    assert not ida.console() and not max_.console(), (ida.console(), max_.console())


def test_a_voice_message_shows_as_a_player_with_its_waveform_and_length(server, browsers):
    ida_name, max_name = name("ida"), name("max")
    ida = Browser(server); browsers.append(ida)
    ida.sign_up(ida_name, "Ida Berg")
    max_api = Client(server).register(max_name, display_name="Max Roth")
    status, room = max_api.post("/v1/conversations", {"kind": "direct", "members": [ida_name]})
    assert status in (200, 201)
    status, audio = max_api.upload(media.mp3(), "audio", "audio/mpeg", name="memo.mp3")
    assert status == 201
    waveform = [10, 60, 200, 255, 120, 40, 90, 30] * 4
    status, _ = max_api.send(room["id"], content={"type": "audio", "attachmentId": audio["id"], "durationSeconds": 67.2,
                                                  "voice": True, "waveform": waveform})
    assert status == 201
    ida.open_conversation("Max Roth")

    def player():
        # Found again on every look: the chat view re-renders its messages on every change
        # (a receipt arriving), which leaves an element found before it stale.
        return ida.wait(lambda: next(iter(ida.find(".messages .voice")), None), "the voice message")
    ida.wait(lambda: len(player().find_elements(By.CSS_SELECTOR, ".waveform .bar")) == len(waveform), "the waveform's bars")
    ida.wait(lambda: player().find_element(By.CSS_SELECTOR, ".voice-length").text == "1:07", "the length, 1:07")
    ida.wait(lambda: (player().find_element(By.CSS_SELECTOR, "audio").get_attribute("src") or "").startswith("http"), "the player's signed source")
    ida.wait(lambda: any("Voice message" in c.text for c in ida.find(".conversation")), "the list's preview")
    ida.screenshot("voice-message.png")
    assert not ida.console(), ida.console()


def test_searching_messages_with_filters_and_opening_a_result(server, browsers):
    ida_name, max_name, cy_name = name("ida"), name("max"), name("cy")
    ida = Browser(server); browsers.append(ida)
    ida.sign_up(ida_name, "Ida Berg")
    max_api = Client(server).register(max_name, display_name="Max Roth")
    cy_api = Client(server).register(cy_name, display_name="Cy Park")
    word = "tandem" + uuid.uuid4().hex[:5]
    status, room = max_api.post("/v1/conversations", {"kind": "group", "title": "Cycling club", "members": [ida_name, cy_name]})
    assert status == 201
    max_api.send(room["id"], f"{word} ride on sunday")
    cy_api.send(room["id"], f"my {word} has a flat")
    ida.wait(lambda: any("Cycling club" in c.text for c in ida.find(".conversation")), "the group in the list")
    ida.click_text("Search")
    ida.one("input[name=q]").send_keys(word)
    ida.wait(lambda: len(ida.find(".search-results li[data-id]")) == 2, "both messages found")
    ida.one("input[name=from]").send_keys(cy_name)
    ida.wait(lambda: [li.text for li in ida.find(".search-results li[data-id]")] and
             all("Cy Park" in li.text for li in ida.find(".search-results li[data-id]")) and len(ida.find(".search-results li[data-id]")) == 1,
             "only Cy's")
    ida.screenshot("search.png")
    ida.click(".search-results li[data-id] button.found")
    ida.wait(lambda: "Cycling club" in ida.one(".chat-header").text, "the conversation opened")
    ida.message(f"my {word} has a flat")
    assert not ida.console(), ida.console()


def test_at_phone_width_the_header_keeps_the_name_and_actions_take_no_room_until_a_tap(server, browsers):
    """Issue 33's new-user findings at 390×844: the name is not squeezed, "last seen" stays on
    one line, a message's actions take no room until it is tapped, and read marks are not a
    shade of delivered's."""
    ida_name, max_name = name("ida"), name("max")
    ida = Browser(server, width=390, height=844); browsers.append(ida)
    ida.sign_up(ida_name, "Ida Berg")
    max_api = Client(server).register(max_name, display_name="Maximilian Rothenberg")
    status, room = max_api.post("/v1/conversations", {"kind": "direct", "members": [ida_name]})
    assert status in (200, 201)
    for text in ("first", "second", "third"):
        max_api.send(room["id"], f"{text} message")
    ida.open_conversation("Maximilian Rothenberg")
    title = ida.one(".chat-header h2")
    assert ida.driver.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth + 1", title), "the name is not cut"
    subtitle = ida.one(".chat-header .chat-subtitle")
    assert subtitle.size["height"] <= 20, f"one line, not {subtitle.size['height']} px"
    message = ida.message("second message")
    ActionChains(ida.driver).move_to_element(title).perform()   # the pointer left where the list was: not over a message
    actions = message.find_element(By.CSS_SELECTOR, ".message-actions")
    assert not any(b.is_displayed() for b in actions.find_elements(By.CSS_SELECTOR, "button")), "hidden before a tap"
    height = message.size["height"]
    message.find_element(By.CSS_SELECTOR, ".bubble").click()       # a tap
    assert "tapped" in message.get_attribute("class"), "a tap marks the message, which shows its actions without hover"
    ida.wait(lambda: any(b.is_displayed() for b in actions.find_elements(By.CSS_SELECTOR, "button")), "the actions after the tap")
    assert message.size["height"] == height, "showing them moves nothing"
    # Three messages take about three bubbles of height, not three bubbles and three button rows.
    rows = [ida.message(f"{t} message") for t in ("first", "third")]
    assert rows[1].location["y"] - rows[0].location["y"] < 140
    # Read marks: a colour of their own.
    ida.type("my reply")
    max_api.post(f"/v1/conversations/{room['id']}/receipts", {"readSeq": 10_000})
    colour = ida.read(".message.mine .status.read", lambda mark: mark.value_of_css_property("color"), "the read mark")
    delivered_colour = "rgb(255, 255, 255)"
    assert colour not in (delivered_colour, "rgba(255, 255, 255, 1)")
    ida.screenshot("phone-width.png")
    assert not ida.console(), ida.console()


def test_pinning_archiving_and_marking_unread_on_the_page_and_from_the_phone(server, browsers):
    """The chat's ⋯ menu pins a conversation to the top of the list, archives it (out of the list
    into "Archived", back when a message arrives) and marks it unread (a dot; opening it clears
    the mark); the same changes made on the user's phone (here the API) show live."""
    ana_name = name("ana")
    ana = Browser(server); browsers.append(ana)
    ana.sign_up(ana_name, "Ana")
    ana_phone = Client(server).sign_in(ana_name)
    ben = Client(server).register(name("ben"))
    groups = {}
    for title in ("Garden", "Books", "Trips"):
        title = f"{title} {uuid.uuid4().hex[:4]}"
        status, group = ben.post("/v1/conversations", {"kind": "group", "title": title, "members": [ana_name]})
        assert status == 201
        assert ben.send(group["id"], f"hello from {title}")[0] == 201
        groups[title.split()[0]] = group

    def order():
        return ana.look(lambda: [b.get_attribute("data-id") for b in ana.find("button.conversation")])

    ana.wait(lambda: order()[:1] == [groups["Trips"]["id"]], "the newest first")
    ana.open_conversation("Garden")
    ana.click(".place-menu summary")
    ana.click_text("Pin to the top")
    ana.wait(lambda: order()[:1] == [groups["Garden"]["id"]], "Garden pinned to the top")
    ana.wait(lambda: ana.find(f".conversation[data-id='{groups['Garden']['id']}'] .pin-mark"), "the pin mark")
    assert ana_phone.get("/v1/me/pinned-conversations")[1]["conversationIds"] == [groups["Garden"]["id"]]

    # Archived from the menu: out of the list, into "Archived (1)".
    ana.open_conversation("Books")
    ana.click(".place-menu summary")
    ana.click_text("Archive")
    ana.wait(lambda: groups["Books"]["id"] not in order(), "Books gone from the list")
    ana.click_text("🗄 Archived (1)")
    ana.wait(lambda: order() == [groups["Books"]["id"]], "Books in the archive")
    ana.screenshot("archived.png")
    ana.click_text("‹ Back to your conversations")
    # Ben writes there: it is back.
    assert ben.send(groups["Books"]["id"], "new chapter")[0] == 201
    ana.wait(lambda: groups["Books"]["id"] in order(), "Books back with the new message")
    ana.wait(lambda: not [b for b in ana.find(".archive-toggle button") if "Archived" in b.text], "nothing archived")

    # Marked unread on the phone: a dot on the page; opening it there clears the mark everywhere.
    trips = groups["Trips"]["id"]
    ana.open_conversation("Trips")     # read: no count left, so the mark shows as a dot
    ana.wait(lambda: ana_phone.get(f"/v1/conversations/{trips}")[1]["unreadCount"] == 0, "Trips read")
    ana.open_conversation("Books")
    assert ana_phone.patch(f"/v1/conversations/{trips}/state", {"markedUnread": True})[0] == 200
    ana.wait(lambda: ana.find(f".conversation[data-id='{trips}'] .unread.marked"), "the unread dot")
    ana.screenshot("pinned-and-marked.png")
    ana.open_conversation("Trips")
    ana.wait(lambda: "markedUnread" not in ana_phone.get(f"/v1/conversations/{trips}")[1], "the mark cleared by opening it")
    # Pinned on the phone: the page reorders live.
    assert ana_phone.request("PUT", "/v1/me/pinned-conversations", {"conversationIds": [trips, groups["Garden"]["id"]]})[0] == 200
    ana.wait(lambda: order()[:2] == [trips, groups["Garden"]["id"]], "the phone's order")
    assert not ana.console()


def test_a_draft_typed_on_the_page_reaches_the_phone_and_one_from_the_phone_is_sent_from_the_page(server, browsers):
    """What is typed and not sent is kept as a draft on every device: the page saves it when
    typing pauses (the phone, here the API, reads it); a draft written on the phone shows as
    "Draft: …" in the list and fills the composer when the conversation opens; sending it clears
    it everywhere."""
    ana_name = name("ana")
    ana = Browser(server); browsers.append(ana)
    ana.sign_up(ana_name, "Ana")
    ana_phone = Client(server).sign_in(ana_name)
    ben = Client(server).register(name("ben"))
    rooms = {}
    for title in ("Lunch", "Work"):
        title = f"{title} {uuid.uuid4().hex[:4]}"
        status, group = ben.post("/v1/conversations", {"kind": "group", "title": title, "members": [ana_name]})
        assert status == 201
        rooms[title.split()[0]] = group
    ana.open_conversation("Lunch")
    ana.type("pizza or sushi", enter=False)
    lunch = rooms["Lunch"]["id"]
    ana.wait(lambda: (ana_phone.get(f"/v1/conversations/{lunch}/draft")[1].get("draft") or {}).get("text") == "pizza or sushi",
             "the draft saved once typing paused")
    # From the phone, a draft in the other conversation: the list says so at once.
    work = rooms["Work"]["id"]
    status, _ = ana_phone.request("PUT", f"/v1/conversations/{work}/draft",
                                  {"text": "the report is late", "clientId": "phone-draft-1", "updatedAt": "2026-06-01T09:00:00Z"})
    assert status == 200
    ana.wait(lambda: "Draft: the report is late" in ana.one(f".conversation[data-id='{work}']").text, "Draft: … in the list")
    ana.screenshot("draft.png")
    ana.open_conversation("Work")
    ana.wait(lambda: ana.one(".composer-input").get_attribute("value") == "the report is late", "the phone's draft in the composer")
    ana.wait(lambda: "Draft: pizza or sushi" in ana.one(f".conversation[data-id='{lunch}']").text, "the page's own draft in the list")
    ana.one(".composer-input").send_keys(Keys.ENTER)
    ana.message("the report is late")
    ana.wait(lambda: ana_phone.get(f"/v1/conversations/{work}/draft")[1] == {}, "the draft gone on the server")
    sent = ana_phone.get(f"/v1/conversations/{work}/messages")[1]["messages"][-1]
    assert sent["clientId"] == "phone-draft-1", "sent with the draft's client id"
    assert "Draft:" not in ana.one(f".conversation[data-id='{work}']").text
    assert not ana.console()


def landscape_jpeg(width=1200, height=800, sky=(92, 150, 220), ground=(58, 110, 62)):
    """A drawn mountain view (sky, sun, two ridges, a lake): a photo for pictures of the client."""
    import io
    from PIL import Image, ImageDraw, ImageFilter
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        t = y / height
        draw.line([(0, y), (width, y)], fill=tuple(int(c * (1 - t * 0.5) + 255 * t * 0.5) for c in sky))
    draw.ellipse([width * 0.72, height * 0.12, width * 0.82, height * 0.27], fill=(255, 236, 170))
    far = [(0, height * 0.62)] + [(x, height * (0.45 + 0.12 * math.sin(x / width * 7.1) + 0.05 * math.sin(x / width * 23)))
                                   for x in range(0, width + 1, 8)] + [(width, height * 0.62)]
    draw.polygon(far, fill=(110, 128, 160))
    near = [(0, height)] + [(x, height * (0.6 + 0.08 * math.sin(x / width * 4.3 + 1) + 0.03 * math.sin(x / width * 31)))
                            for x in range(0, width + 1, 8)] + [(width, height)]
    draw.polygon(near, fill=ground)
    draw.rectangle([0, height * 0.82, width, height], fill=(70, 120, 170))
    image = image.filter(ImageFilter.GaussianBlur(1.2))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=88)
    return out.getvalue()


def portrait_jpeg(color):
    """A plain avatar: a head and shoulders in a lighter shade on `color`."""
    import io
    from PIL import Image, ImageDraw
    image = Image.new("RGB", (256, 256), color)
    draw = ImageDraw.Draw(image)
    light = tuple(min(255, c + 70) for c in color)
    draw.ellipse([88, 48, 168, 128], fill=light)
    draw.ellipse([48, 140, 208, 300], fill=light)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def test_the_readme_picture_a_group_planning_a_hike(server, browsers):
    """The client as it is, with what people really write: the README's picture
    (docs/screenshots/hero.png is a copy of this run's reports/screenshots/hero.png)."""
    # Titles need no tag: each test signs up a new Ana, whose list holds only her own conversations.
    ana_name = name("ana")
    ana = Browser(server, width=1280, height=960); browsers.append(ana)
    ana.sign_up(ana_name, "Ana Lima")
    ana_phone = Client(server).sign_in(ana_name)
    ben = Client(server).register(name("ben"), display_name="Ben Okafor")
    chloe = Client(server).register(name("chloe"), display_name="Chloé Martin")
    for person, color in ((ben, (200, 120, 60)), (chloe, (150, 90, 180))):
        status, photo = person.upload(portrait_jpeg(color), "photo", "image/jpeg")
        assert status == 201 and person.request("PUT", "/v1/me/photo", {"attachmentId": photo["id"]})[0] == 200
    members = [ana_name, chloe.user["username"]]
    status, family = ben.post("/v1/conversations", {"kind": "group", "title": f"Family 🏡", "members": [ana_name]})
    assert ben.send(family["id"], "Dinner on Sunday at ours?")[0] == 201
    status, books = chloe.post("/v1/conversations", {"kind": "group", "title": f"Book club 📚", "members": [ana_name]})
    assert chloe.send(books["id"], "Next month: The Remains of the Day")[0] == 201
    assert ana_phone.request("PUT", f"/v1/conversations/{books['id']}/draft",
                             {"text": "Chapter 7 was the best part", "updatedAt": "2026-06-01T09:00:00Z"})[0] == 200
    status, direct = ben.post("/v1/conversations", {"kind": "direct", "members": [ana_name]})
    assert ben.send(direct["id"], "Thanks for the photos!")[0] == 201
    assert ana_phone.patch(f"/v1/conversations/{family['id']}/state", {"pinned": True})[0] == 200
    status, hike = ben.post("/v1/conversations", {"kind": "group", "title": f"Weekend hike ⛰️", "members": members})
    status, ask = ben.send(hike["id"], "Who's in for Saturday? The forecast says sun all day ☀️")
    assert chloe.send(hike["id"], "Me! Which trail?")[0] == 201
    status, upload = ben.upload(landscape_jpeg(), "photo", "image/jpeg")
    assert status == 201
    status, photo = ben.send(hike["id"], content={"type": "photo", "attachmentId": upload["id"],
                                                  "caption": "The ridge trail. This was the view last time"})
    assert status == 201
    for person, emoji in ((chloe, "😍"), (ana_phone, "🔥")):
        assert person.post(f"/v1/conversations/{hike['id']}/messages/{photo['id']}/reactions", {"emoji": emoji})[0] in (200, 201)
    assert chloe.send(hike["id"], "Rain jackets, just in case?", threadId=ask["id"])[0] == 201
    ana.open_conversation("Weekend hike")
    ana.wait(lambda: any(i.get_attribute("complete") and ana.driver.execute_script("return arguments[0].naturalWidth", i)
                         for i in ana.find(".messages img.photo")), "the photo")
    ana.type("Count me in! Trailhead at 8?")
    ana.wait(lambda: any((m.get("content") or {}).get("text", "").startswith("Count me in")
                         for m in ana_phone.get(f"/v1/conversations/{hike['id']}/messages")[1]["messages"]), "Ana's message stored")
    status, answer = chloe.send(hike["id"], "8 works. I'll bring coffee ☕ @" + ana_name)
    assert status == 201
    status, said = ben.send(hike["id"], "Perfect, see you both there 🥾")
    assert status == 201
    for person in (ben, chloe):
        assert person.post(f"/v1/conversations/{hike['id']}/receipts", {"readSeq": said["seq"]})[0] == 200
    # Ben's receipt changes nothing (his reply already put his watermarks there): the page
    # counts his reply as his having read Ana's message.
    ana.wait(lambda: ana.message("Count me in").find_elements(By.CSS_SELECTOR, ".status.read"), "Ana's message read by both")
    ana.message("see you both there")
    ana.wait(lambda: "Draft:" in ana.one(f".conversation[data-id='{books['id']}']").text, "the draft in the list")
    ana.driver.execute_script("document.activeElement && document.activeElement.blur()")
    ana.screenshot("hero.png")
    assert not ana.console()


def test_a_message_scheduled_on_the_page_is_sent_by_the_server_at_its_time_and_one_is_cancelled(server, browsers):
    """⏰ next to Send schedules what is written; "⏰ n scheduled" above the composer lists them
    with Cancel; at its time the server sends it (the page need not be open) and the bar goes."""
    ana_name = name("ana")
    ana = Browser(server); browsers.append(ana)
    ana.sign_up(ana_name, "Ana")
    ben = Client(server).register(name("ben"))
    status, group = ben.post("/v1/conversations", {"kind": "group", "title": "Standup", "members": [ana_name]})
    assert status == 201
    ana.open_conversation("Standup")

    def schedule(text, seconds):
        ana.type(text, enter=False)
        ana.click("button[name=send-later]")
        when = ana.one(".dialog input[name=sendAt]")
        # datetime-local holds local time; seconds make a test wait for seconds, not a minute.
        ana.driver.execute_script("""
            const at = new Date(Date.now() + arguments[1] * 1000);
            arguments[0].value = new Date(at.getTime() - at.getTimezoneOffset() * 60000).toISOString().slice(0, 19);""", when, seconds)
        ana.click(".dialog button[name=schedule]")
        ana.wait(lambda: not ana.find(".dialog"), "the dialog closed")

    schedule("stand-up notes: all green", 4)
    ana.wait(lambda: "⏰ 1 scheduled" in ana.one(".scheduled-bar").text, "the bar")
    assert ana.one(".composer-input").get_attribute("value") == "", "the composer is free again"
    schedule("never mind this one", 600)
    ana.wait(lambda: "⏰ 2 scheduled" in ana.one(".scheduled-bar").text, "two scheduled")
    ana.click("button[name=open-scheduled]")
    ana.wait(lambda: len(ana.find(".scheduled-list .scheduled-item")) == 2, "both listed")
    ana.screenshot("scheduled.png")
    item = next(i for i in ana.find(".scheduled-list .scheduled-item") if "never mind" in i.text)
    item.find_element(By.XPATH, ".//button[text()='Cancel']").click()
    ana.wait(lambda: len(ana.find(".scheduled-list .scheduled-item")) == 1, "one left")
    ana.click(".dialog [aria-label=Close]")
    # At its time the server sends it: Ben has it, the page shows it and the bar goes.
    ana.message("stand-up notes: all green")
    ana.wait(lambda: ana.one(".scheduled-bar").get_attribute("hidden") is not None, "the bar gone", timeout=20)
    messages = ben.get(f"/v1/conversations/{group['id']}/messages")[1]["messages"]
    assert [m["content"]["text"] for m in messages] == ["stand-up notes: all green"]
    assert not ana.console()


def test_a_poll_is_voted_on_the_page_and_counts_and_closing_arrive_live(server, browsers):
    ida_name, max_name = name("ida"), name("max")
    ida = Browser(server); browsers.append(ida)
    ida.sign_up(ida_name, "Ida Berg")
    max_api = Client(server).register(max_name, display_name="Max Roth")
    status, room = max_api.post("/v1/conversations", {"kind": "direct", "members": [ida_name]})
    assert status in (200, 201)
    status, poll = max_api.send(room["id"], content={"type": "poll", "question": "Where to?", "options": ["Lake", "Hills", "Town"]})
    assert status == 201
    ida.open_conversation("Max Roth")
    ida.wait(lambda: [o.text.split("\n")[0] for o in ida.find(".messages .poll .poll-option .poll-text")] == ["Lake", "Hills", "Town"], "the poll's options")

    def counts():
        return ida.look(lambda: [o.find_element(By.CSS_SELECTOR, ".count").text for o in ida.find(".messages .poll .poll-option")])

    def click_option(index):
        def attempt():
            options = ida.find(".messages .poll .poll-option")
            if len(options) <= index:
                return False
            options[index].click()
            return True
        return attempt

    # Ida votes for Hills: pressed, counted by the server.
    ida.wait(click_option(1), "Ida's click on Hills")
    ida.wait(lambda: counts() == ["0", "1", "0"], "her vote counted")
    ida.wait(lambda: [o.get_attribute("aria-pressed") for o in ida.find(".messages .poll .poll-option")] == ["false", "true", "false"], "her choice pressed")
    status, page = max_api.get(f"/v1/conversations/{room['id']}/messages")
    seen = next(m for m in page["messages"] if m["id"] == poll["id"])
    assert status == 200 and seen["poll"]["voterCount"] == 1 and len(seen["poll"]["options"][1]["voterIds"]) == 1 and "myVotes" not in seen
    # Max votes from his phone: the page's counts follow live, Ida's choice stays pressed.
    status, _ = max_api.request("PUT", f"/v1/conversations/{room['id']}/messages/{poll['id']}/poll/vote", {"options": [0]})
    assert status == 200
    ida.wait(lambda: counts() == ["1", "1", "0"], "Max's vote, live")
    ida.wait(lambda: ida.find(".messages .poll .poll-option[aria-pressed=true]"), "hers still pressed")
    ida.screenshot("poll.png")
    # Max closes it: the options stop taking clicks and the poll says so.
    status, _ = max_api.post(f"/v1/conversations/{room['id']}/messages/{poll['id']}/poll/close", {})
    assert status == 200
    ida.wait(lambda: "closed" in (ida.one(".messages .poll .poll-notes").text or ""), "closed, live")
    ida.wait(lambda: all(not o.is_enabled() for o in ida.find(".messages .poll .poll-option")), "no more votes")
    ida.wait(lambda: any("📊 Where to?" in c.text for c in ida.find(".conversation")), "the list's preview")

    # Ida asks one back from the page: the dialog, a third option, several answers allowed.
    ida.click("button[name=new-poll]")
    ida.one(".dialog input[name=question]").send_keys("Bring what?")
    ida.click(".dialog button[name=add-option]")
    for field, text in zip(ida.find(".dialog input[name=option]"), ["Tea", "Cake", "Rug"]):
        field.send_keys(text)
    ida.click(".dialog input[name=multiple]")
    ida.click(".dialog button[name=send-poll]")
    ida.wait(lambda: not ida.find(".dialog"), "the dialog closed")
    status, page = max_api.get(f"/v1/conversations/{room['id']}/messages")
    asked = next((m for m in page["messages"] if m["content"].get("question") == "Bring what?"), None)
    assert asked and asked["content"]["options"] == ["Tea", "Cake", "Rug"] and asked["content"]["multipleChoice"] is True
    status, _ = max_api.request("PUT", f"/v1/conversations/{room['id']}/messages/{asked['id']}/poll/vote", {"options": [0, 1]})
    assert status == 200
    ida.wait(lambda: any([o.find_element(By.CSS_SELECTOR, ".count").text for o in p.find_elements(By.CSS_SELECTOR, ".poll-option")] == ["1", "1", "0"]
                         for p in ida.find(".messages .poll")), "Max's two answers, live")
    assert not ida.console(), ida.console()


def test_a_link_preview_arrives_live_as_a_card_with_the_servers_thumbnail(browsers):
    """A message with a link shows at once; its preview (a card with the page's title, site
    and the server's own thumbnail, its size reserved) arrives live, and the card opens the link."""
    from localsite import Site, html
    site = Site({"/hike": html('<meta property="og:title" content="Ridge trail, 14 km">'
                               '<meta property="og:description" content="A day walk above the lake.">'
                               '<meta property="og:site_name" content="Trails">'
                               '<meta property="og:image" content="/ridge.jpg">'),
                 "/ridge.jpg": (200, {"Content-Type": "image/jpeg"}, landscape_jpeg())})
    running = Server("--link-previews-allow-private", f"127.0.0.1:{site.port}")
    try:
        ida_name, max_name = name("ida"), name("max")
        ida = Browser(running); browsers.append(ida)
        ida.sign_up(ida_name, "Ida Berg")
        max_api = Client(running).register(max_name, display_name="Max Roth")
        status, room = max_api.post("/v1/conversations", {"kind": "direct", "members": [ida_name]})
        assert status in (200, 201)
        ida.open_conversation("Max Roth")
        status, _ = max_api.send(room["id"], f"Saturday? {site.url}/hike")
        assert status == 201
        def card_parts(card):
            image = next(iter(card.find_elements(By.CSS_SELECTOR, "img.link-preview-image")), None)
            if image is None:
                return None
            return (card.find_element(By.CSS_SELECTOR, ".link-preview-title").text, card.find_element(By.CSS_SELECTOR, ".link-preview-site").text,
                    card.get_attribute("href"), card.get_attribute("rel"), image.get_attribute("src"),
                    image.get_dom_attribute("width"), image.get_dom_attribute("height"))
        title, site_name, href, rel, src, width, height = ida.read(".messages .link-preview", card_parts, "the preview card, live")
        assert title == "Ridge trail, 14 km" and site_name == "Trails"
        assert href == f"{site.url}/hike" and "noopener" in rel
        assert src.startswith(running.url + "/v1/previews/lp_")
        assert (width, height) == ("512", "341")
        loaded = ida.read(".messages .link-preview img.link-preview-image",
                          lambda i: ida.driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i), "the thumbnail loaded")
        assert loaded == 512
        assert site.hits.get("/ridge.jpg") == 1, "the browser never fetched the site's own picture"
        ida.screenshot("link-preview.png")
        assert not ida.console(), ida.console()
    finally:
        running.stop()
        site.close()
