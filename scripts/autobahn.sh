#!/usr/bin/env bash
# Runs the Autobahn|Testsuite fuzzingclient (sections 1-10) against parley-server's echo
# endpoint and fails on any FAILED or UNIMPLEMENTED case. The suite is Python 2 code; it runs
# on the machine image's pyenv Python 2.7 (PLATFORM.md). Summary: reports/autobahn/summary.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
server=${PARLEY_SERVER_BINARY:-.build/debug/parley-server}
py27=""
for candidate in "$(pyenv root 2>/dev/null || true)/versions/2.7.18/bin/python" \
    "${PYENV_ROOT:-$HOME/.pyenv}/versions/2.7.18/bin/python" /root/.pyenv/versions/2.7.18/bin/python; do
    if [[ -x "$candidate" ]]; then py27=$candidate; break; fi
done
if [[ -z "$py27" ]]; then
    py27="(pyenv's 2.7.18)"
    echo "autobahn: SKIPPED — no Python 2.7 at $py27 (the suite cannot run on Python 3)"
    exit 0
fi
if [[ ! -x .tools/venv27/bin/wstest ]]; then
    echo "Setting up Autobahn|Testsuite in .tools/venv27 (once)…"
    rm -rf .tools/py27 .tools/venv27
    "$py27" -m pip install -q --disable-pip-version-check --target .tools/py27 "virtualenv<20.22" 2>&1 | grep -v DEPRECATION || true
    PYTHONPATH=.tools/py27 "$py27" -m virtualenv -q .tools/venv27
    .tools/venv27/bin/pip install -q --disable-pip-version-check setuptools==44.0.0 txaio==2.1.0 incremental==16.10.1 \
        pyOpenSSL==19.1.0 cryptography==3.3.2 Twisted==19.10.0 zope.interface==4.6.0 jinja2==2.11.3 \
        markupsafe==1.1.1 Werkzeug==1.0.1 klein==17.10.0 service_identity==18.1.0 unittest2==1.1.0 \
        six==1.16.0 "autobahn[accelerate,twisted]==0.10.9" 2>&1 | grep -vE "DEPRECATION|Python 2.7" || true
    .tools/venv27/bin/pip install -q --disable-pip-version-check --no-deps autobahntestsuite==25.10.1 2>&1 | grep -vE "DEPRECATION|Python 2.7" || true
fi

data=$(mktemp -d)
log=$(mktemp)
# Section 9 sends messages of up to 16 MiB, so this server allows that much.
"$server" --port 0 --threads 2 --data-dir "$data" --enable-echo \
    --max-message-bytes $((16 << 20)) >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$data" "$log"' EXIT
for _ in $(seq 1 100); do grep -q "listening on" "$log" && break; sleep 0.05; done
url=$(grep -o "http://[^ ]*" "$log" | head -1)
port=${url##*:}
[[ -n "$port" ]] || { echo "autobahn: the server did not start"; cat "$log"; exit 1; }

rm -rf reports/autobahn
mkdir -p reports/autobahn
cat > reports/autobahn/fuzzingclient.json <<JSON
{"outdir": "./reports/autobahn", "servers": [{"agent": "parley", "url": "ws://127.0.0.1:$port/echo/ws"}],
 "cases": ["1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"], "exclude-cases": [], "exclude-agent-cases": {}}
JSON
echo "Autobahn|Testsuite fuzzingclient, sections 1-10, against $url/echo/ws…"
.tools/venv27/bin/wstest -m fuzzingclient -s reports/autobahn/fuzzingclient.json > reports/autobahn/wstest.log 2>&1 || true

# wstest exits 0 even when cases fail: read the verdicts.
.venv/bin/python - <<'PY'
import collections, json, sys
with open("reports/autobahn/index.json") as f:
    results = json.load(f)["parley"]
counts = collections.Counter()
bad = []
for case, result in sorted(results.items(), key=lambda kv: [int(p) for p in kv[0].split(".")]):
    behavior, close = result["behavior"], result["behaviorClose"]
    counts[behavior] += 1
    if behavior in ("FAILED", "UNIMPLEMENTED") or close in ("FAILED", "UNIMPLEMENTED"):
        bad.append(f"{case}: behavior={behavior} close={close}")
sections = collections.defaultdict(collections.Counter)
for case, result in results.items():
    sections[case.split(".")[0]][result["behavior"]] += 1
lines = [f"Autobahn|Testsuite 25.10.1 fuzzingclient: {len(results)} cases"]
lines += [f"  {k}: {v}" for k, v in sorted(counts.items())]
lines += ["  by section: " + "; ".join(f"{s}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                                     for s, c in sorted(sections.items(), key=lambda kv: int(kv[0])))]
lines += [f"  FAIL {line}" for line in bad]
open("reports/autobahn/summary.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if bad else 0)
PY
