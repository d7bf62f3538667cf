"""Who may do what, tried for real (docs/access.md, issue 27).

The matrix is generated from docs/access.md — the rules table (which AccessRulesTests holds to
the code) and the operations table — not written out by hand: every REST operation that takes
an id is tried with every kind of caller (owner, admin, plain member, a member someone blocked,
removed member, banned member, outsider of the same app, user of another app, revoked token,
the app's backend, another app's backend) in every kind of conversation, and each must get
exactly the documented answer. A refusal's body is the error alone, with nothing of the
conversation in it, and refusals change nothing (the conversation's state, read through the
server API, is the same before and after them). Allowed callers each act on a fresh copy of
the conversation, so one's success never decides another's answer. An operation added to
docs/openapi.yaml without a row in docs/access.md fails the first test."""
import json
import os
import urllib.parse
import uuid

import pytest
import yaml

import media
import parley
from parley import Client, wait_until
from test_resumable import break_off, wait_for_partial

KINDS = ["direct", "group", "private", "public"]
STANDINGS = ["app", "owner", "admin", "member", "outsider", "banned"]
NOT_FOUND = {"conversation": "conversation_not_found"}


# MARK: - The tables of docs/access.md

def markdown_rows(name):
    text = open(os.path.join(parley.ROOT, "docs", "access.md"), encoding="utf-8").read()
    block = text.split(f"<!-- {name}:begin -->\n", 1)[1].split(f"\n<!-- {name}:end -->", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in block.splitlines()]
    return rows[2:]  # past the header and its rule


def load_rules():
    rules = {}
    for action, kinds, *cells in markdown_rows("access-table"):
        for kind in (KINDS if kinds == "all" else [k.strip() for k in kinds.split(",")]):
            rules[(action, kind)] = dict(zip(STANDINGS, cells))
    return rules


RULES = load_rules()
OPERATIONS = {tuple(row[0].split(" ", 1)): row[1] for row in markdown_rows("access-operations")}


def rule(action, kind, standing):
    """The documented answer: "✓", "404", "403 not_member", … ("404" for outsiders off public channels)."""
    if standing in ("outsider", "banned") and kind != "public":
        return "404"
    cell = RULES[(action, kind)][standing]
    assert cell != "—", f"{action} in a {kind} conversation asked of {standing}, which the table says cannot happen"
    return cell


def id_operations():
    spec = yaml.safe_load(open(os.path.join(parley.ROOT, "docs", "openapi.yaml"), encoding="utf-8"))
    return {(method.upper(), path) for path, item in spec["paths"].items() if "{" in path
            for method in item if method in ("get", "put", "post", "patch", "delete")}


def test_every_operation_that_takes_an_id_has_a_documented_row():
    documented = set(OPERATIONS)
    missing = id_operations() - documented
    assert not missing, f"docs/access.md has no row for {sorted(missing)}: add one to its operations table"
    assert not documented - id_operations(), f"docs/access.md lists operations docs/openapi.yaml does not: {sorted(documented - id_operations())}"
    actions = {action for action, _ in RULES}
    for operation, asks in OPERATIONS.items():
        for action in asks.replace(" / ", ", ").split(" (")[0].split(", "):
            assert action in actions | {"attachment", "user", "own", "anyone", "backend"}, (operation, action)


# MARK: - The world

class Caller:
    """Someone who sends requests: a user's device (token + app key), the app's backend
    (the secret), or a revoked token."""

    def __init__(self, name, server, app_key=None, token=None, secret=None, standing=None, user=None):
        self.name, self.server, self.app_key, self.token, self.secret = name, server, app_key, token, secret
        self.standing = standing  # the standing it has in a conversation it belongs to, by kind
        self.user = user
        self.connection = parley.connect(server)

    def request(self, method, path, body=None):
        headers = {}
        if self.app_key:
            headers["X-Parley-App-Key"] = self.app_key
        bearer = self.secret or self.token
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.connection.request(method, path, body=payload, headers=headers)
                response = self.connection.getresponse()
                data = response.read()
                break
            except (ConnectionError, parley.http.client.HTTPException):
                self.connection.close()
                self.connection = parley.connect(self.server)
                if attempt:
                    raise
        kind = response.getheader("Content-Type") or ""
        return response.status, (json.loads(data) if data and "json" in kind and "ndjson" not in kind else data)


class World:
    """Two apps on one server: app A with its users and backend, app B with one user and its
    backend. Conversations are made fresh per (operation, kind) by `conversation`."""

    def __init__(self, server):
        self.server = server
        self.backend = Caller("app", server, secret=server.app_secret)
        status, answer = self.backend.request("GET", "/v1/server/users")
        assert status == 200, answer
        created = server.apps("create", "other")
        assert created.returncode == 0, created.stderr
        other_key = next(line.split("key:")[1].split()[0] for line in created.stdout.splitlines() if "key:" in line)
        other_secret = next(line.split("secret:")[1].split()[0] for line in created.stdout.splitlines() if "secret:" in line)
        self.other_backend = Caller("other app's backend", server, secret=other_secret)
        tag = uuid.uuid4().hex[:6]
        self.users = {}
        for role in ["ana", "adam", "mia", "blake", "rory", "ben", "olga", "nadia", "tess"]:
            client = Client(server).register(f"{role}{tag}")
            self.users[role] = Caller(role, server, app_key=server.app_key, token=client.token, user=client.user)
        stranger = Client(server, app_key=other_key).register(f"zed{tag}")
        self.zed = Caller("user of another app", server, app_key=other_key, token=stranger.token, user=stranger.user)
        # A token that was signed out.
        revoked = Client(server).sign_in(f"mia{tag}")
        assert revoked.delete("/v1/sessions/current")[0] == 204
        self.revoked = Caller("revoked token", server, app_key=server.app_key, token=revoked.token)
        self.secret_as_user = Caller("the app secret on a user endpoint", server, app_key=server.app_key, token=server.app_secret)
        self.ana_as_backend = Caller("a user's token on the server API", server, secret=self.users["ana"].token)
        # Ana blocks Blake: in groups and channels a block decides no access (docs/access.md).
        assert self.call("ana", "PUT", f"/v1/me/blocks/{self.uid('blake')}")[0] == 204
        self.photos = {name: self.upload_photo(name) for name in ["ana", "adam"]}

    def uid(self, name):
        return self.users[name].user["id"]

    def username(self, name):
        return self.users[name].user["username"]

    def call(self, name, method, path, body=None):
        return self.users[name].request(method, path, body)

    def upload_photo(self, name):
        user = self.users[name]
        client = Client(self.server)
        client.token = user.token
        status, answer = client.upload(media.jpeg(64, 48), "photo", "image/jpeg")
        assert status == 201, answer
        return answer["id"]

    def conversation(self, kind):
        """A fresh conversation of `kind` with everyone in their place: Ana owns it, Adam is an
        admin, Mia and Blake are members, Rory was removed, Ben was banned; Ana posted a photo
        (m_owner) with Mia's reply in its thread, Mia posted m_member and reported m_owner."""
        marker = uuid.uuid4().hex
        title = None if kind == "direct" else f"Room {marker}"
        others = ["mia"] if kind == "direct" else ["adam", "mia", "blake", "rory", "ben"]
        body = {"kind": kind, "members": [self.username(n) for n in others]}
        if title:
            body["title"] = title
        status, made = self.call("ana", "POST", "/v1/conversations", body)
        assert status in (200, 201), made
        cid = made["id"]
        if kind == "public":  # a channel is joined, not given members
            for name in others:
                if self.call(name, "POST", f"/v1/conversations/{cid}/join", {})[0] != 200:
                    raise AssertionError(f"{name} could not join")
        f = {"id": cid, "kind": kind, "marker": marker, "title": title}
        if kind != "direct":
            assert self.call("ana", "PATCH", f"/v1/conversations/{cid}/members/{self.uid('adam')}", {"role": "admin"})[0] == 200
            assert self.call("ana", "DELETE", f"/v1/conversations/{cid}/members/{self.uid('rory')}")[0] == 204
            status, answer = self.call("ana", "POST", f"/v1/conversations/{cid}/bans", {"userId": self.uid("ben")})
            assert status == 201, answer
        photo = self.upload_photo("ana")
        f["photo"] = photo
        status, m_owner = self.call("ana", "POST", f"/v1/conversations/{cid}/messages",
                                    {"clientId": uuid.uuid4().hex, "content": {"type": "photo", "attachmentId": photo, "caption": f"caption {marker}"}})
        assert status == 201, m_owner
        f["m_owner"] = m_owner["id"]
        status, m_member = self.call("mia", "POST", f"/v1/conversations/{cid}/messages",
                                     {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": f"words {marker}"}})
        assert status == 201, m_member
        f["m_member"] = m_member["id"]
        for name, key in (("ana", "p_owner"), ("mia", "p_member")):
            status, poll = self.call(name, "POST", f"/v1/conversations/{cid}/messages",
                                     {"clientId": uuid.uuid4().hex, "content": {"type": "poll", "question": f"poll {marker}", "options": ["a", "b"]}})
            assert status == 201, poll
            f[key] = poll["id"]
        status, reply = self.call("mia", "POST", f"/v1/conversations/{cid}/messages",
                                  {"clientId": uuid.uuid4().hex, "threadId": f["m_owner"], "content": {"type": "text", "text": f"reply {marker}"}})
        assert status == 201, reply
        status, report = self.call("mia", "POST", f"/v1/conversations/{cid}/messages/{f['m_owner']}/reports", {"reason": "spam"})
        assert status == 201, report
        f["report"] = report["id"]
        return f

    def snapshot(self, f):
        """Everything a refusal could have changed, read by the app's backend and the owner."""
        cid = f["id"]
        paths = [f"/v1/server/conversations/{cid}", f"/v1/server/conversations/{cid}/members?limit=100",
                 f"/v1/server/conversations/{cid}/messages?limit=100"]
        if f["kind"] != "direct":
            paths += [f"/v1/server/conversations/{cid}/reports?state=open", f"/v1/server/conversations/{cid}/reports?state=resolved"]
        state = [self.backend.request("GET", path) for path in paths]
        state.append(self.call("ana", "GET", f"/v1/conversations/{cid}/events?after=0&limit=500"))
        state.append(self.call("ana", "GET", f"/v1/conversations/{cid}/threads/{f['m_owner']}/messages"))
        if f["kind"] != "direct":
            state.append(self.call("ana", "GET", f"/v1/conversations/{cid}/bans"))
        for name in ["ana", "mia"]:
            state.append(self.call(name, "GET", f"/v1/conversations/{cid}"))
        return json.dumps(state, sort_keys=True, default=str)


@pytest.fixture(scope="module")
def world():
    server = parley.Server("--server-api-requests-per-second", "100000", "--webhooks-allow-private",
                           "--webhook-retry-window", "1", "--webhook-first-retry", "100")
    yield World(server)
    assert server.stop() == 0


# MARK: - Callers and what each is in a conversation

# The user callers, with the standing each has in a conversation of each kind (None: not part
# of this kind's cast, e.g. an admin of a direct chat).
def user_callers(world, kind):
    cast = {
        "ana": "owner", "adam": None if kind == "direct" else "admin", "mia": "member",
        "blake": None if kind == "direct" else "member",   # blocked by Ana
        "rory": None if kind == "direct" else "outsider",  # removed
        "ben": None if kind == "direct" else ("banned" if kind == "public" else "outsider"),
        "olga": "outsider",
    }
    return [(world.users[name], standing) for name, standing in cast.items() if standing]


def outcome(cell, not_found):
    """(status, code) a cell of the rules table stands for; None for "allowed"."""
    if cell == "✓":
        return None
    if cell == "404":
        return (404, not_found)
    status, code = cell.split(" ", 1)
    return (int(status), code)


def shown(body):
    return repr(body)[:300]


def check_refusal(caller, operation, answer, expected, fixture):
    status, body = answer
    assert (status, body["error"]["code"] if isinstance(body, dict) and "error" in body else body) == expected, \
        f"{caller.name} on {operation}: expected {expected}, got {status} {shown(body)}"
    assert set(body) == {"error"} and set(body["error"]) <= {"code", "message", "retryAfterSeconds"}, (operation, body)
    text = json.dumps(body)
    for secret in (fixture.get("marker"), fixture.get("title")):
        assert not secret or secret not in text, f"{operation} told {caller.name} something of the conversation: {body}"


def check_allowed(caller, operation, answer):
    status, body = answer
    assert 200 <= status < 300, f"{caller.name} on {operation}: expected success, got {status} {shown(body)}"


# MARK: - The operations, as requests

EMOJI = urllib.parse.quote("👍")
C = "/v1/conversations/{conversationId}"
S = "/v1/server/conversations/{conversationId}"


def tomorrow():
    """An ISO 8601 time a day from now: when a scheduled message in these tests would go."""
    import datetime
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def bodies(world, f, caller):
    """The body each operation that takes one is tried with."""
    text = {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "hello"}}
    return {
        ("PUT", C + "/mute"): {}, ("PUT", C + "/notifications"): {"level": "mentions"}, ("POST", C + "/join"): {},
        ("PATCH", C + "/state"): {"markedUnread": True},
        ("PUT", C + "/draft"): {"text": "thinking…", "updatedAt": "2026-01-01T00:00:00Z"},
        ("POST", C + "/scheduled"): {"sendAt": tomorrow(), "message": {"clientId": uuid.uuid4().hex,
                                                                                  "content": {"type": "text", "text": "later"}}},
        ("POST", C + "/members"): {"usernames": [world.username("nadia")]}, ("POST", S + "/members"): {"usernames": [world.username("nadia")]},
        ("PATCH", C + "/members/{userId}"): {"role": "admin"}, ("PATCH", S + "/members/{username}"): {"role": "admin"},
        ("POST", C + "/messages"): text, ("POST", S + "/messages"): text,
        ("POST", C + "/messages/delete"): {"ids": [f["m_member"]]},
        ("PATCH", C + "/messages/{messageId}"): {"content": {"type": "text", "text": "edited"}},
        ("PATCH", S + "/messages/{messageId}"): {"content": {"type": "text", "text": "edited"}},
        ("POST", C + "/messages/{messageId}/reactions"): {"emoji": "👍"},
        ("PUT", C + "/messages/{messageId}/poll/vote"): {"options": [1]},
        ("POST", C + "/threads/{messageId}/read"): {"seq": 1},
        ("POST", C + "/bans"): {"userId": world.uid("mia")}, ("POST", S + "/bans"): {"userId": world.uid("mia")},
        ("PUT", C + "/members/{userId}/mute"): {},
        ("POST", C + "/messages/{messageId}/reports"): {"reason": "spam"},
        ("POST", C + "/reports/{reportId}/resolve"): {"resolution": "dismissed"},
        ("POST", S + "/reports/{reportId}/resolve"): {"resolution": "dismissed"},
        ("PUT", C + "/photo"): {"attachmentId": world.photos.get(caller.name, world.photos["ana"])},
        ("POST", C + "/receipts"): {"readSeq": 1},
    }


def request_for(world, method, path, f, caller):
    """Fills in an operation's ids and body for `caller` on fixture `f`: (path, body, own).

    Operations whose answer depends on whose the target is ("A / B" in docs/access.md) aim
    at Mia's message, or at Mia: `own` says whether the caller is Mia."""
    asks = OPERATIONS[(method, path)]
    reporting = method == "POST" and path.endswith("/reports")  # Mia reported Ana's already
    message = "m_member" if " / " in asks or reporting or path.startswith("/v1/server/") else "m_owner"
    if "/poll/" in path:  # a poll of Mia's (whose closing is "own / others'"), or of Ana's
        message = "p_member" if " / " in asks else "p_owner"
    own = (caller.user is not None and caller.user["id"] == world.uid("mia")) if " / " in asks else None
    values = {"conversationId": f["id"], "messageId": f[message], "emoji": EMOJI, "reportId": f["report"],
              "userId": world.uid("ben") if "/bans/" in path else world.uid("mia"), "username": world.username("mia")}
    filled = path
    for name, value in values.items():
        filled = filled.replace("{" + name + "}", value)
    body = bodies(world, f, caller).get((method, path), {} if method in ("POST", "PUT", "PATCH") else None)
    return filled, body, own


def actions_for(asks, own, body):
    """The rule actions an operation asks, given whether its target is the caller's own."""
    if " / " in asks:
        mine, others = asks.split(" / ")
        return [mine if own else others]
    if asks.startswith("changeTitle"):
        return [{"title": "changeTitle", "customData": "changeCustomData", "slowModeSeconds": "changeSlowMode",
                 "retentionDays": "changeRetention"}[field] for field in body]
    return [asks]


PATCH_BODIES = [{"title": "New title"}, {"customData": {"k": "v"}}, {"slowModeSeconds": 30}, {"retentionDays": 1}, {"retentionDays": 0}]


def expected_cell(actions, kind, standing):
    """The first refusal among the actions, or ✓ (a PATCH asks each field's action in turn)."""
    for action in actions:
        cell = rule(action, kind, standing)
        if cell != "✓":
            return cell
    return "✓"


def conversation_operations(prefix):
    return sorted(op for op, asks in OPERATIONS.items() if op[1].startswith(prefix) and "{conversationId}" in op[1])


def variants(method, path):
    """An operation's request bodies to try: every field of a PATCH of settings on its own."""
    if method == "PATCH" and path.endswith("{conversationId}"):
        return PATCH_BODIES
    return [None]


def expected_for(world, caller, standing, method, path, f, body):
    filled, default_body, own = request_for(world, method, path, f, caller)
    body = body if body is not None else default_body
    # Removing, banning or muting Mia also asks for rank: she is a plain member, whom every
    # moderator outranks, so the table's answer is the whole answer here.
    return filled, body, expected_cell(actions_for(OPERATIONS[(method, path)], own, body), f["kind"], standing)


# MARK: - User endpoints on conversations

@pytest.mark.parametrize("kind", KINDS)
def test_every_caller_gets_the_documented_answer_on_every_conversation_operation(world, kind):
    tried = 0
    for method, path in conversation_operations("/v1/conversations"):
        for body_variant in variants(method, path):
            shared = world.conversation(kind)
            before = world.snapshot(shared)
            allowed = []
            for caller, standing in user_callers(world, kind):
                filled, body, cell = expected_for(world, caller, standing, method, path, shared, body_variant)
                if cell == "✓":
                    allowed.append((caller, standing))
                    continue
                answer = caller.request(method, filled, body)
                check_refusal(caller, f"{method} {filled} {body}", answer, outcome(cell, "conversation_not_found"), shared)
                tried += 1
            # Callers who are nobody here: another app, a revoked token, the app's secret.
            filled, body, _ = expected_for(world, world.users["olga"], "outsider", method, path, shared, body_variant)
            check_refusal(world.zed, filled, world.zed.request(method, filled, body), (404, "conversation_not_found"), shared)
            for nobody in (world.revoked, world.secret_as_user):
                check_refusal(nobody, filled, nobody.request(method, filled, body), (401, "unauthenticated"), shared)
            tried += 3
            assert world.snapshot(shared) == before, f"a refused {method} {path} {body_variant} changed the conversation"
            # Each allowed caller on a fresh copy, so one's success decides nothing for another.
            for caller, standing in allowed:
                fresh = world.conversation(kind) if method != "GET" else shared
                filled, body, _ = expected_for(world, caller, standing, method, path, fresh, body_variant)
                check_allowed(caller, f"{method} {filled} {body}", caller.request(method, filled, body))
                tried += 1
    assert tried > 100


# MARK: - The server API on conversations

@pytest.mark.parametrize("kind", KINDS)
def test_the_apps_backend_gets_the_documented_answer_and_nobody_else_gets_in(world, kind):
    for method, path in conversation_operations("/v1/server/"):
        for body_variant in variants(method, path):
            f = world.conversation(kind)
            before = world.snapshot(f)
            filled, body, cell = expected_for(world, world.backend, "app", method, path, f, body_variant)
            # Another app's backend looks ids up in its own app: the username is looked up first.
            stranger = (404, "user_not_found" if "{username}" in path else "conversation_not_found")
            for other, expected in ((world.other_backend, stranger),
                                    (world.ana_as_backend, (401, "invalid_app_secret")),
                                    (world.revoked, (401, "invalid_app_secret"))):
                check_refusal(other, f"{method} {filled}", other.request(method, filled, body), expected, f)
            if cell != "✓":
                check_refusal(world.backend, f"{method} {filled} {body}", world.backend.request(method, filled, body),
                              outcome(cell, "conversation_not_found"), f)
            assert world.snapshot(f) == before, f"a refused {method} {path} changed the conversation"
            if cell == "✓":
                check_allowed(world.backend, f"{method} {filled} {body}", world.backend.request(method, filled, body))


# MARK: - Attachments

@pytest.mark.parametrize("kind", KINDS)
def test_attachments_are_for_those_who_may_read_where_they_are_shown(world, kind):
    f = world.conversation(kind)
    for method, path in sorted(op for op, asks in OPERATIONS.items() if asks == "attachment"):
        filled = path.replace("{attachmentId}", f["photo"])
        for caller, standing in user_callers(world, kind):
            may = caller.name == "ana" or rule("read", kind, standing) == "✓"
            answer = caller.request(method, filled)
            if may:
                check_allowed(caller, filled, answer)
            else:
                check_refusal(caller, filled, answer, (404, "attachment_not_found"), f)
        check_refusal(world.zed, filled, world.zed.request(method, filled), (404, "attachment_not_found"), f)
        for nobody in (world.revoked, world.secret_as_user):
            check_refusal(nobody, filled, nobody.request(method, filled), (401, "unauthenticated"), f)
    # A banned member's signed URLs are refused before they are made; an outsider's work without a token.
    status, link = world.call("olga", "GET", f"/v1/media/{f['photo']}/url")
    if kind == "public":
        assert status == 200
        anonymous = Caller("no token", world.server)
        assert anonymous.request("GET", link["url"])[0] == 200
    else:
        assert status == 404


# MARK: - Users, devices, uploads, avatars

def test_users_devices_uploads_and_avatars_follow_their_rows(world):
    everyone = [world.users[name] for name in ["ana", "adam", "mia", "blake", "rory", "ben", "olga"]]
    f = {"marker": None, "title": None}
    # user: any user of the app sees a profile and may block someone; another app's user may not.
    for caller in everyone:
        check_allowed(caller, "GET user", caller.request("GET", f"/v1/users/{world.uid('tess')}"))
        check_allowed(caller, "PUT block", caller.request("PUT", f"/v1/me/blocks/{world.uid('tess')}"))
        check_allowed(caller, "DELETE block", caller.request("DELETE", f"/v1/me/blocks/{world.uid('tess')}"))
    for method in ["GET", "PUT", "DELETE"]:
        path = f"/v1/users/{world.uid('tess')}" if method == "GET" else f"/v1/me/blocks/{world.uid('tess')}"
        check_refusal(world.zed, path, world.zed.request(method, path), (404, "user_not_found"), f)
        for nobody in (world.revoked, world.secret_as_user):
            check_refusal(nobody, path, nobody.request(method, path), (401, "unauthenticated"), f)
    status, answer = world.call("tess", "PUT", f"/v1/me/blocks/{world.uid('tess')}")
    assert status == 400, answer
    # own: a device and an unfinished upload are their owner's alone.
    status, device = world.call("tess", "POST", "/v1/devices", {"platform": "apns", "token": uuid.uuid4().hex * 2})
    assert status == 201, device
    tess = Client(world.server)
    tess.token = world.users["tess"].token
    data = media.jpeg(400, 300)
    break_off(tess, data, 1000, "photo", "image/jpeg", "half-photo")
    wait_for_partial(tess, "half-photo", 1000)
    status, notes = world.call("tess", "POST", "/v1/conversations", {"kind": "group", "title": "tess's notes", "members": []})
    assert status == 201, notes
    status, planned = world.call("tess", "POST", f"/v1/conversations/{notes['id']}/scheduled",
                                 {"sendAt": tomorrow(), "message": {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "later"}}})
    assert status == 201, planned
    later = f"/v1/scheduled/{planned['id']}"
    change = {"content": {"type": "text", "text": "changed"}}
    for caller in everyone + [world.zed]:
        check_refusal(caller, later, caller.request("PATCH", later, change), (404, "not_found"), f)
    for nobody in (world.revoked, world.secret_as_user):
        check_refusal(nobody, later, nobody.request("PATCH", later, change), (401, "unauthenticated"), f)
    check_allowed(world.users["tess"], later, world.users["tess"].request("PATCH", later, change))
    owned = [("DELETE", f"/v1/devices/{device['id']}", "device_not_found"),
             ("GET", "/v1/uploads/half-photo", "upload_not_found"), ("DELETE", "/v1/uploads/half-photo", "upload_not_found"),
             ("DELETE", later, "not_found")]
    for method, path, code in owned:
        for caller in everyone + [world.zed]:
            check_refusal(caller, path, caller.request(method, path), (404, code), f)
        for nobody in (world.revoked, world.secret_as_user):
            check_refusal(nobody, path, nobody.request(method, path), (401, "unauthenticated"), f)
    for method, path, _ in owned:
        check_allowed(world.users["tess"], path, world.users["tess"].request(method, path))
    # anyone: a profile photo in use is served without a token, to anyone.
    assert world.call("tess", "PUT", "/v1/me/photo", {"attachmentId": world.upload_photo("tess")})[0] == 200
    url = world.call("tess", "GET", "/v1/me")[1]["photoURL"]
    for caller in everyone + [world.zed, world.revoked, Caller("no token", world.server)]:
        assert caller.request("GET", url)[0] == 200, caller.name
    assert world.call("tess", "DELETE", "/v1/me/photo")[0] == 200
    assert Caller("no token", world.server).request("GET", url)[0] == 404, "no longer anyone's photo"


# MARK: - The server API on users and webhooks

def test_users_and_webhooks_are_their_apps_backends_alone(world):
    f = {"marker": None, "title": None}
    status, hook = world.backend.request("POST", "/v1/server/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["message.created"]})
    assert status == 201, hook
    cid = world.conversation("group")["id"]  # its messages make deliveries, which fail fast (port 9)

    def failed_delivery():
        status, answer = world.backend.request("GET", f"/v1/server/webhooks/{hook['id']}/deliveries?state=failed")
        return next((d["id"] for d in answer.get("deliveries", []) if d.get("failedAt")), None) if status == 200 else None
    wait_until(lambda: failed_delivery() is not None, timeout=30, what="a failed delivery to replay")
    assert cid
    status, sent = world.backend.request("POST", f"/v1/server/conversations/{cid}/messages",
                                         {"clientId": uuid.uuid4().hex, "content": {"type": "text", "text": "traced"}})
    assert status == 201, sent  # a message of this app, whose trace only its backend reads
    for method, path in sorted(op for op, asks in OPERATIONS.items() if asks == "backend"):
        target = f"svc{uuid.uuid4().hex[:8]}"
        assert world.backend.request("POST", "/v1/server/users", {"username": target})[0] == 201
        if "{name}" in path:
            # A blocklist's name is the app's own: another app's backend finds no list by it,
            # and a PUT there makes that app a list of its own (checked below).
            filled = path.replace("{name}", "spam")
            assert world.backend.request("PUT", filled, {"mode": "reject", "words": ["forbidden"]})[0] == 200
            body = {"mode": "reject", "words": ["forbidden"]} if method == "PUT" else None
            if method != "PUT":
                check_refusal(world.other_backend, filled, world.other_backend.request(method, filled, body), (404, "blocklist_not_found"), f)
            for nobody in (world.ana_as_backend, world.revoked):
                check_refusal(nobody, filled, nobody.request(method, filled, body), (401, "invalid_app_secret"), f)
            check_allowed(world.backend, filled, world.backend.request(method, filled, body))
            continue
        filled = (path.replace("{username}", target).replace("{webhookId}", hook["id"])
                  .replace("{deliveryId}", failed_delivery() or "whd_none").replace("{messageId}", sent["id"]))
        body = {"password": "correct horse battery"} if path.endswith("/password") else ({} if method in ("POST", "PUT", "PATCH") else None)
        not_found = ("webhook_not_found" if "{webhookId}" in path else "message_not_found" if "{messageId}" in path
                     else "user_not_found")
        check_refusal(world.other_backend, filled, world.other_backend.request(method, filled, body), (404, not_found), f)
        for nobody in (world.ana_as_backend, world.revoked):
            check_refusal(nobody, filled, nobody.request(method, filled, body), (401, "invalid_app_secret"), f)
        if path.endswith("{webhookId}") and method == "DELETE":
            continue  # deleting the endpoint comes last
        check_allowed(world.backend, filled, world.backend.request(method, filled, body))
    check_allowed(world.backend, "DELETE webhook", world.backend.request("DELETE", f"/v1/server/webhooks/{hook['id']}"))
    # Two apps' lists of one name are two lists.
    assert world.other_backend.request("PUT", "/v1/server/blocklists/spam", {"mode": "mask", "words": ["theirs"]})[0] == 200
    assert world.backend.request("GET", "/v1/server/blocklists/spam")[1]["words"] == ["forbidden"]
    assert world.other_backend.request("DELETE", "/v1/server/blocklists/spam")[0] == 204
    assert world.backend.request("DELETE", "/v1/server/blocklists/spam")[0] == 204
