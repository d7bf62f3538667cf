"""Upgrades in place: a database written by an earlier landed build (Tests/Fixtures/upgrade/,
made by upgrade_fixture.py with that build) is opened by this one — SQLite, or PostgreSQL in
the PostgreSQL pass — and every answer the earlier build gave is given again, byte for byte
as JSON, before anything new is written; then the server takes new writes on top."""
import json
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest

import parley
from parley import Client
from upgrade_fixture import FIXTURES

ENGINE = "postgres" if parley.ON_POSTGRES else "sqlite"
BUILDS = sorted(name for name in os.listdir(FIXTURES) if name.startswith(ENGINE + "-"))


def opened(fixture):
    """A server of this build on a copy of the fixture's database and media."""
    data = tempfile.mkdtemp(prefix="parley-upgrade-")
    shutil.copytree(os.path.join(fixture, "media"), os.path.join(data, "media"))
    if os.path.exists(os.path.join(fixture, "secrets.key")):
        shutil.copy(os.path.join(fixture, "secrets.key"), os.path.join(data, "secrets.key"))
        os.chmod(os.path.join(data, "secrets.key"), 0o600)
    extra = []
    if parley.ON_POSTGRES:
        name = "parley_upgrade_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", parley.POSTGRES_URL, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        url = parley.POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url, "-f", os.path.join(fixture, "postgres.sql")],
                       check=True, capture_output=True)
        extra = ["--database-url", url]
    else:
        shutil.copy(os.path.join(fixture, "parley.sqlite"), os.path.join(data, "parley.sqlite"))
    return parley.Server(*extra, data=data)


def keeps(new, old):
    """`new` says everything `old` said, value for value; it may add fields (a newer build's,
    such as the conversation list's `liveCursor`), never drop or change one."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(key in new and keeps(new[key], value) for key, value in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(keeps(n, o) for n, o in zip(new, old))
    return new == old


@pytest.mark.parametrize("build", BUILDS)
def test_a_database_of_an_earlier_build_opens_with_everything_in_it(build):
    fixture = os.path.join(FIXTURES, build)
    with open(os.path.join(fixture, "state.json"), encoding="utf-8") as source:
        state = json.load(source)
    server = opened(fixture)
    try:
        assert server.app_key == state["appKey"], "the app keeps its key"
        clients = {}
        for name, password in state["passwords"].items():
            clients[name] = Client(server, app_key=state["appKey"]).sign_in(name, password)
        for who, path, status, answer in state["answers"]:
            now = clients[who].get(path)
            assert now[0] == status and keeps(now[1], answer), f"{who} GET {path} answered differently after the upgrade: {now} vs {answer}"
        # The earlier build's log has one shard (migration 0031), and says so to devices.
        assert clients["ana"].get("/v1/conversations")[1]["liveCursor"] == [clients["ana"].get("/v1/conversations")[1]["liveCursor"][0]]
        # The same secret opens the server API, and the app's webhook-free state is intact.
        backend = Client(server, app_key="")
        backend.app_key = None
        assert backend.get("/v1/server/users", headers={"Authorization": f"Bearer {state['appSecret']}"})[0] == 200
        if not parley.ON_POSTGRES:
            # The secret the earlier build stored as given is sealed now (issue 31, item 4).
            import sqlite3
            (stored,) = sqlite3.connect(os.path.join(server.data, "parley.sqlite")).execute("SELECT secret FROM app").fetchone()
            assert stored.startswith("sealed:v1:") and state["appSecret"] not in stored
        # Conversations written before migration 0023 are found by their custom data.
        group = state["ids"]["group"]
        status, found = clients["ana"].get("/v1/conversations?customData.k=1")
        assert status == 200 and [c["id"] for c in found["conversations"]] == [group]
        assert clients["ana"].get("/v1/conversations?customData.k=2")[1]["conversations"] == []
        # Conversations from before migration 0024 are pinned, archived and marked unread.
        status, pinned = clients["ana"].patch(f"/v1/conversations/{group}/state", {"pinned": True, "markedUnread": True})
        assert status == 200 and pinned["pinnedRank"] == 0 and pinned["markedUnread"] is True
        assert clients["ana"].get("/v1/conversations?limit=1")[1]["conversations"][0]["id"] == group
        assert clients["ana"].patch(f"/v1/conversations/{group}/state", {"pinned": False, "markedUnread": False})[0] == 200
        # And get drafts (migration 0025).
        status, draft = clients["ana"].request("PUT", f"/v1/conversations/{group}/draft", {"text": "hm", "updatedAt": "2026-01-01T00:00:00Z"})
        assert status == 200 and clients["ana"].get(f"/v1/conversations/{group}/draft")[1]["draft"]["text"] == "hm"
        assert clients["ana"].request("PUT", f"/v1/conversations/{group}/draft", {"text": "", "updatedAt": "2026-01-01T00:00:01Z"})[0] == 200
        # And schedule messages (migration 0026), listed and cancelled.
        import datetime
        later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        status, planned = clients["ana"].post(f"/v1/conversations/{group}/scheduled",
                                              {"sendAt": later, "message": {"clientId": "upgrade-later", "content": {"type": "text", "text": "later"}}})
        assert status == 201, planned
        assert [s["id"] for s in clients["ana"].get("/v1/scheduled")[1]["scheduled"]] == [planned["id"]]
        assert clients["ana"].delete(f"/v1/scheduled/{planned['id']}")[0] == 204
        # And ask polls (migration 0028): the earlier build's messages have no results, a new poll has.
        status, poll = clients["ana"].post(f"/v1/conversations/{group}/messages", {
            "clientId": "upgrade-poll", "content": {"type": "poll", "question": "Upgrade?", "options": ["yes", "no"]}})
        assert status == 201 and poll["poll"]["voterCount"] == 0, poll
        status, voted = clients["bob"].request("PUT", f"/v1/conversations/{group}/messages/{poll['id']}/poll/vote", {"options": [0]})
        assert status == 200 and voted["poll"]["options"][0]["votes"] == 1 and voted["myVotes"] == [0]
        assert all("poll" not in m for m in clients["bob"].get(f"/v1/conversations/{group}/messages?limit=100")[1]["messages"] if m["id"] != poll["id"])
        # New writes land after the old ones, in the same log.
        events = clients["bob"].get("/v1/events?after=0&limit=200")[1]["events"]
        status, sent = clients["ana"].send(group, "after the upgrade")
        assert status == 201 and sent["seq"] > max(e.get("seq") or 0 for e in events if e["conversationId"] == group)
        newer = clients["bob"].get(f"/v1/events?after={events[-1]['position']}")[1]["events"]
        assert [e["type"] for e in newer] == ["message.created"] and newer[0]["message"]["id"] == sent["id"]
        # A receipt from now on reaches its member and the author it passed, not a third
        # member (migration 0027); the earlier build's receipts replayed to everyone above.
        dan = Client(server, app_key=state["appKey"]).register("dan")
        assert clients["ana"].post(f"/v1/conversations/{group}/members", {"usernames": ["dan"]})[0] in (200, 201)
        status, hello = clients["ana"].send(group, "hello dan")
        assert status == 201, hello
        assert clients["bob"].post(f"/v1/conversations/{group}/receipts", {"readSeq": hello["seq"]})[0] == 200
        def receipts(who):
            return [e for e in who.get("/v1/events?after=0&limit=200")[1]["events"]
                    if e["type"] == "receipt.updated" and e["conversationId"] == group and e.get("readSeq") == hello["seq"]]
        assert len(receipts(clients["ana"])) == 1 and receipts(clients["ana"]) == receipts(clients["bob"]) and receipts(dan) == []
    finally:
        assert server.stop() == 0
