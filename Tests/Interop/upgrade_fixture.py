"""Databases written by an earlier build, for test_upgrade.py (upgrades in place, no data lost).

    PARLEY_SERVER_BINARY=<an earlier build's parley-server> .venv/bin/python Tests/Interop/upgrade_fixture.py <name>

starts that build on a fresh data directory (and, with PARLEY_TEST_POSTGRES_URL, a fresh
PostgreSQL database), makes a conversation with one of everything — users, a group and a
channel, text, photo, edits, deletes, reactions, pins, a thread, receipts, a mute, a ban, a
report, a webhook endpoint — and stores what it wrote in Tests/Fixtures/upgrade/<name>/: the
SQLite file (or a pg_dump), the app's key and secret, and every answer the earlier build gave
to the reads test_upgrade.py repeats against the new build."""
import json
import os
import shutil
import subprocess
import sys
import uuid

import media
import parley
from parley import Client

FIXTURES = os.path.join(parley.ROOT, "Tests", "Fixtures", "upgrade")

# The reads whose answers must not change across the upgrade: (who, path).
def reads(ids):
    c, ch, m = ids["group"], ids["channel"], ids["first"]
    return [
        ("ana", "/v1/me"), ("ana", "/v1/conversations"), ("bob", "/v1/conversations"),
        ("ana", f"/v1/conversations/{c}"), ("ana", f"/v1/conversations/{c}/messages?limit=100"),
        ("bob", f"/v1/conversations/{c}/messages?limit=100"), ("ana", f"/v1/conversations/{c}/members"),
        ("ana", f"/v1/conversations/{c}/events?after=0&limit=200"), ("bob", "/v1/events?after=0&limit=200"),
        ("ana", "/v1/events?after=0&limit=200"), ("ana", f"/v1/conversations/{c}/pins"),
        ("ana", f"/v1/conversations/{c}/messages/{m}/reactions"), ("ana", f"/v1/conversations/{c}/threads"),
        ("ana", f"/v1/conversations/{c}/bans"), ("ana", f"/v1/conversations/{c}/reports?state=open"),
        ("bob", f"/v1/conversations/{ch}/messages"), ("ana", "/v1/search?q=upgrade"), ("bob", "/v1/mentions"),
        ("ana", f"/v1/media/{ids['photo']}/info"),
    ]


def main(name):
    target = os.path.join(FIXTURES, name)
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    server = parley.Server()
    ana = Client(server).register("ana", display_name="Ana")
    bob = Client(server).register("bob", display_name="Bob")
    carol = Client(server).register("carol")
    status, group = ana.post("/v1/conversations", {"kind": "group", "title": "Upgrade group", "members": ["bob", "carol"]})
    assert status == 201, group
    c = group["id"]
    status, channel = ana.post("/v1/conversations", {"kind": "public", "title": "Upgrade channel"})
    ch = channel["id"]
    assert bob.post(f"/v1/conversations/{ch}/join")[0] == 200
    status, first = ana.send(c, "upgrade hello @bob")
    assert status == 201, first
    m = first["id"]
    status, photo = ana.upload(media.jpeg(120, 80), "photo", "image/jpeg")
    assert status == 201, photo
    assert ana.send(c, content={"type": "photo", "attachmentId": photo["id"], "caption": "a photo"})[0] == 201
    status, second = bob.send(c, "upgrade reply")
    assert ana.patch(f"/v1/conversations/{c}/messages/{m}", {"content": {"type": "text", "text": "upgrade hello again @bob"}})[0] == 200
    assert bob.post(f"/v1/conversations/{c}/messages/{m}/reactions", {"emoji": "👍"})[0] in (200, 201)
    assert ana.request("PUT", f"/v1/conversations/{c}/messages/{m}/pin")[0] == 200
    assert bob.send(c, "upgrade in a thread", threadId=m)[0] == 201
    assert bob.delete(f"/v1/conversations/{c}/messages/{second['id']}")[0] in (200, 204)
    assert bob.post(f"/v1/conversations/{c}/receipts", {"deliveredSeq": 3, "readSeq": 2})[0] == 200
    assert bob.request("PUT", f"/v1/conversations/{c}/mute", {})[0] == 200
    assert carol.post(f"/v1/conversations/{c}/messages/{m}/reports", {"reason": "spam"})[0] == 201
    assert ana.post(f"/v1/conversations/{c}/bans", {"userId": carol.user["id"], "reason": "upgrade"})[0] == 201
    assert ana.send(ch, "upgrade to the channel")[0] == 201
    assert ana.patch(f"/v1/conversations/{c}", {"title": "Upgrade group renamed", "customData": {"k": 1}})[0] == 200
    ids = {"group": c, "channel": ch, "first": m, "photo": photo["id"]}
    clients = {"ana": ana, "bob": bob}
    answers = [[who, path, *clients[who].get(path)] for who, path in reads(ids)]
    state = {"appKey": server.app_key, "appSecret": server.app_secret, "ids": ids, "answers": answers,
             "passwords": {"ana": "correct horse battery", "bob": "correct horse battery"},
             "tokens": {"ana": ana.token, "bob": bob.token}}
    with open(os.path.join(target, "state.json"), "w") as out:
        json.dump(state, out, indent=1, sort_keys=True, ensure_ascii=False)
    assert server.stop() == 0
    if parley.ON_POSTGRES:
        url = parley.database_for(server.data)
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", url], capture_output=True, text=True, check=True).stdout
        with open(os.path.join(target, "postgres.sql"), "w") as out:
            out.write(dump)
    else:
        # What the write-ahead log still holds goes into the file first: the fixture is the one file.
        subprocess.run(["sqlite3", os.path.join(server.data, "parley.sqlite"), "PRAGMA wal_checkpoint(TRUNCATE);"],
                       check=True, capture_output=True)
        shutil.copy(os.path.join(server.data, "parley.sqlite"), os.path.join(target, "parley.sqlite"))
    shutil.copytree(os.path.join(server.data, "media"), os.path.join(target, "media"))
    # Builds since issue 31 seal stored secrets with a key kept beside the data: it is part of
    # the data directory an operator upgrades in place.
    if os.path.exists(os.path.join(server.data, "secrets.key")):
        shutil.copy(os.path.join(server.data, "secrets.key"), os.path.join(target, "secrets.key"))
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fixture")
