#!/usr/bin/env bash
# Creates .venv with the Python test tools (never the system Python). Quiet when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=scripts/requirements-test.txt
stamp=.venv/.requirements.sha
want=$(sha1sum "$requirements" | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then exit 0; fi
echo "Setting up .venv (Python test tools)"
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"
