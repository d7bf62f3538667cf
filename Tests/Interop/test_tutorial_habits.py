"""The tutorials' other habits (issue 15, part 4), against the real parley-server binary:

- Alamofire's default POST encoding is a form body (`application/x-www-form-urlencoded`,
  booleans as 1/0): sign-up, sign-in and guest sign-in arrive that way and must work with the
  same validation and errors as JSON.
- Two tutorials sign in with an e-mail field: an e-mail address is a username, unique and
  searched case-insensitively like any other.
"""
import urllib.parse
import uuid

import pytest

from parley import Client, Server


@pytest.fixture(scope="module")
def server():
    running = Server()
    yield running
    assert running.stop() == 0


def form(client, path, fields, raw=None):
    """POSTs `fields` exactly as Alamofire's URLEncoding.default does (or `raw` bytes as such a body)."""
    body = raw if raw is not None else urllib.parse.urlencode(fields).encode()
    return client.request("POST", path, raw=body,
                          headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})


def test_sign_up_sign_in_and_guest_with_form_bodies(server):
    name = f"form{uuid.uuid4().hex[:8]}"
    status, answer = form(Client(server), "/v1/users",
                          {"username": name, "password": "correct horse battery", "displayName": "Form Ana"})
    assert status == 201, answer
    assert answer["user"]["username"] == name and answer["user"]["displayName"] == "Form Ana"
    status, answer = form(Client(server), "/v1/sessions", {"username": name, "password": "correct horse battery"})
    assert status == 201 and answer["session"]["token"]
    # A space sent as '+' and an accent as %C3%A9 arrive as typed.
    status, answer = form(Client(server), "/v1/sessions/guest", {}, raw=b"displayName=Ren%C3%A9+Guest&device=phone")
    assert status == 201 and answer["user"]["displayName"] == "René Guest" and answer["user"]["isGuest"] is True


def test_form_bodies_get_the_same_errors_as_json_and_change_nothing(server):
    name = f"bad{uuid.uuid4().hex[:8]}"
    cases = [
        ({"username": "x", "password": "correct horse battery"}, "invalid_request"),      # validation, as for JSON
        ({"password": "correct horse battery"}, "invalid_json"),                           # a missing field is named
    ]
    for fields, code in cases:
        status, answer = form(Client(server), "/v1/users", fields)
        assert status == 400 and answer["error"]["code"] == code, (fields, answer)
    for raw, words in [(b"username=a%zz&password=x", "two hex digits"),
                       (b"username=" + name.encode() + b"&username=b&password=correct+horse+battery", "twice"),
                       (b"username=%FF%FE&password=correct+horse+battery", "UTF-8")]:
        status, answer = form(Client(server), "/v1/users", {}, raw=raw)
        assert status == 400 and words in answer["error"]["message"], (raw, answer)
    # Nothing of the refused bodies was stored: the name is still free.
    status, _ = Client(server).post("/v1/users", {"username": name, "password": "correct horse battery"})
    assert status == 201
    # Wrong credentials in a form: the same 401 as JSON.
    status, answer = form(Client(server), "/v1/sessions", {"username": name, "password": "wrong password!"})
    assert status == 401 and answer["error"]["code"] == "wrong_credentials"


def test_a_form_cannot_carry_nested_fields_and_says_to_send_json(server):
    ana = Client(server).register(f"nest{uuid.uuid4().hex[:8]}")
    # A list (usernames to resolve) cannot come from a form: the error says to send JSON.
    status, answer = ana.request("POST", "/v1/users/resolve", raw=b"usernames=ana",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "application/json" in answer["error"]["message"], answer
    status, answer = ana.request("PATCH", "/v1/me", raw=b"displayName=Flat+Is+Fine",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and answer["displayName"] == "Flat Is Fine"


def test_other_body_types_are_still_refused(server):
    status, answer = Client(server).request("POST", "/v1/users", raw=b"username: ana",
                                            headers={"Content-Type": "text/plain"})
    assert status == 415 and answer["error"]["code"] == "unsupported_media_type"


def test_an_email_address_is_a_username(server):
    tag = uuid.uuid4().hex[:8]
    email = f"Ana.Smith+chat{tag}@Example.co.uk"
    ana = Client(server).register(email, display_name="Ana")
    assert ana.user["username"] == email
    # Unique case-insensitively, like every username.
    status, answer = Client(server).post("/v1/users", {"username": email.lower(), "password": "another password"})
    assert status == 409 and answer["error"]["code"] == "username_taken"
    # Sign in with it in any case (the tutorials' e-mail field), as a form.
    status, answer = form(Client(server), "/v1/sessions", {"username": email.upper(), "password": "correct horse battery"})
    assert status == 201 and answer["user"]["id"] == ana.user["id"]
    # Found by prefix search and by name, like any username.
    bob = Client(server).register(f"bob{tag}")
    status, page = bob.get("/v1/users?query=" + urllib.parse.quote(f"ana.smith+chat{tag}@ex"))
    assert status == 200 and [u["id"] for u in page["users"]] == [ana.user["id"]]
    status, resolved = bob.post("/v1/users/resolve", {"usernames": [email.lower(), "nobody@example.com"]})
    assert status == 200 and [u["id"] for u in resolved["users"]] == [ana.user["id"]]
    assert resolved["invalidUsernames"] == ["nobody@example.com"]
    # A chat addressed to the e-mail reaches her.
    status, sent = bob.post("/v1/messages", {"to": [email], "clientId": "1", "content": {"type": "text", "text": "hi"}})
    assert status == 201, sent


@pytest.mark.parametrize("address", ["ana@localhost", "@example.com", "ana@", "an..a@example.com", ".ana@example.com",
                                     "ana@-example.com", "ana@exa_mple.com", "ana b@example.com", "ana@@example.com",
                                     "a" * 65 + "@example.com", "ana@" + "a" * 250 + ".com"])
def test_malformed_email_usernames_are_refused(server, address):
    status, answer = Client(server).post("/v1/users", {"username": address, "password": "correct horse battery"})
    assert status == 400 and answer["error"]["code"] == "invalid_request", answer
    assert "e-mail" in answer["error"]["message"]
