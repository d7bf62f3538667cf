#!/usr/bin/env python3
"""Runs schemathesis against docs/openapi.yaml and a real parley-server.

Starts the server on a free port with a fresh data directory, registers a user, seeds a
conversation, runs `st run` with that user's token on the user endpoints and with the app
secret on the server API (`/v1/server/…`), then stops the server with SIGTERM.
Fails on any 5xx, any response that breaks the schema, a status the spec does not list,
or a server that does not exit 0. Usage: scripts/schemathesis.py [--max-examples N]
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "Interop"))
from parley import Server, Client  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-examples", type=int, default=int(os.environ.get("SCHEMATHESIS_EXAMPLES", "40")))
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SCHEMATHESIS_SEED", "1")))
    args = parser.parse_args()

    server = Server("--server-api-requests-per-second", "100000")
    try:
        alice = Client(server).register("alice")
        bob = Client(server).register("bob")
        conversation = alice.post("/v1/conversations", {"kind": "group", "members": ["bob"], "title": "seed"})[1]
        message = alice.post(f"/v1/conversations/{conversation['id']}/messages",
                             {"clientId": "seed-1", "content": {"type": "text", "text": "hello"}})[1]
        sys.path.insert(0, os.path.join(ROOT, "Tests", "Interop"))
        import media
        photo = alice.upload(media.jpeg(64, 48), "photo", "image/jpeg")[1]
        alice.post(f"/v1/conversations/{conversation['id']}/messages",
                   {"clientId": "seed-2", "content": {"type": "photo", "attachmentId": photo["id"]}})
        # The server API's seeds, made with the app secret: a user and a webhook endpoint (on a
        # public name that does not resolve here: its deliveries fail and are retried, harmlessly).
        backend = Client(server)
        backend.app_key = None
        secret = {"Authorization": f"Bearer {server.app_secret}"}
        backend.request("POST", "/v1/server/users", {"username": "carol"}, headers=secret)
        webhook = backend.request("POST", "/v1/server/webhooks", {"url": "https://hooks.example.invalid/parley", "events": ["message.created"]},
                                  headers=secret)[1]
        report = os.path.join(ROOT, "reports", "schemathesis")
        os.makedirs(report, exist_ok=True)
        # Path parameters name the seeded data, so operations reach past the 404 for an
        # unknown id into their real work (404s for unknown ids are covered by the pytest suite).
        config = os.path.join(report, "schemathesis.toml")
        with open(os.path.join(ROOT, "scripts", "schemathesis.toml")) as base, open(config, "w") as out:
            out.write(base.read())
            out.write(f'\n[parameters]\n"path.conversationId" = "{conversation["id"]}"\n'
                      f'"path.messageId" = "{message["id"]}"\n"path.userId" = "{bob.user["id"]}"\n'
                      f'"path.attachmentId" = "{photo["id"]}"\n"path.username" = "carol"\n'
                      f'"path.webhookId" = "{webhook["id"]}"\n"path.deliveryId" = "whd_1"\n')
        def st(token, *selection, app_key=True):
            return [
            os.path.join(ROOT, ".venv", "bin", "st"), "--config-file", config, "run",
            os.path.join(ROOT, "docs", "openapi.yaml"),
            "--url", server.url,
            *(["-H", f"X-Parley-App-Key: {server.app_key}"] if app_key else []),
            "-H", f"Authorization: Bearer {token}",
            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                        "response_schema_conformance,response_headers_conformance",
            "--max-examples", str(args.max_examples),
            "--seed", str(args.seed),
            "--phases", "examples,coverage,fuzzing",
            "--request-timeout", "10",
            *selection,
        ]

        # Signing out would revoke the token every other operation uses: those two run last,
        # on their own, with a token of their own.
        sign_outs = ["--include-operation-id", "signOut", "--include-operation-id", "signOutEverywhere"]
        main_run = st(alice.token, "--exclude-operation-id", "signOut", "--exclude-operation-id", "signOutEverywhere",
                      "--exclude-tag", "server", "--report", "junit", "--report-dir", report)
        print("schemathesis: every user operation but sign-out", flush=True)
        result = subprocess.run(main_run, cwd=ROOT)
        print("schemathesis: the server API, with the app secret", flush=True)
        server_result = subprocess.run(st(server.app_secret, "--include-tag", "server", app_key=False), cwd=ROOT)
        print("schemathesis: sign-out", flush=True)
        # Bob's token comes from his registration: the main pass's failed password changes may
        # have used up this address's sign-in budget (429), as they should.
        sign_out_result = subprocess.run(st(bob.token, *sign_outs), cwd=ROOT)
        status = server.stop()
        if status != 0:
            print(f"parley-server exited {status} on SIGTERM", file=sys.stderr)
            return 1
        return result.returncode or server_result.returncode or sign_out_result.returncode
    finally:
        server.kill()


if __name__ == "__main__":
    sys.exit(main())
