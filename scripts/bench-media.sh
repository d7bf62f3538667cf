#!/usr/bin/env bash
# The media benchmarks of issue 6, each with its reference in the same run, printed as a
# Markdown table for docs/benchmarks.md:
#   1. upload throughput (MB/s): curl streaming a file to POST /v1/media (to disk, SHA-256,
#      fsync, recorded) vs the same curl PUT to nginx, which writes the body to its client
#      body buffer file and renames it into place (the DAV module), alternating, 4 rounds; and
#      the same upload with a clientId, the resumable path every SDK and web upload takes
#      (its declaration written beside the bytes in media/partial, synced only if it breaks off)
#   2. thumbnail of a 12-megapixel JPEG: the server's photo path in process (parley-bench
#      thumbnail: header with pixel limits, then the thumbnail) vs the vipsthumbnail command
#      line at the same size, plus a whole photo upload through the server for context
# UPLOAD_MIB (default 128) per upload; THUMBNAILS (default 20) per side.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${UPLOAD_MIB:-128}
thumbnails=${THUMBNAILS:-20}
cores=$(nproc)
work=$(mktemp -d /tmp/parley-bench-media.XXXXXX)
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
    [[ -f "$work/nginx.pid" ]] && kill -QUIT "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

scripts/venv.sh
echo "Building release binaries…" >&2
swift build -c release --product parley-server >/dev/null
swift build -c release --product parley-bench >/dev/null
server=.build/release/parley-server
bench=.build/release/parley-bench

log="$work/parley.log"
"$server" --port 0 --threads "$cores" --data-dir "$work/data" --signups-per-hour 1000000 \
    --max-file-bytes $(( (size_mib + 1) << 20 )) --media-quota-bytes $(( 1 << 40 )) >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do grep -q "^Health:" "$log" && break; sleep 0.05; done
port=$(grep -o "http://[^ ]*" "$log" | head -1 | sed 's/.*://')
key=$(grep "app key:" "$log" | awk '{print $3}')
token=$(curl -s -H "X-Parley-App-Key: $key" -H 'Content-Type: application/json' \
    -d '{"username":"bench","password":"benchmark password"}' "http://127.0.0.1:$port/v1/users" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["session"]["token"])')

nginx_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/tmp" "$work/nginx-root/upload"
cat > "$work/nginx.conf" <<NGINX
user root;
worker_processes $cores;
daemon on;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp/body; proxy_temp_path $work/tmp/proxy; fastcgi_temp_path $work/tmp/fcgi;
  uwsgi_temp_path $work/tmp/uwsgi; scgi_temp_path $work/tmp/scgi;
  server {
    listen 127.0.0.1:$nginx_port;
    root $work/nginx-root;
    client_max_body_size 4g;
    location /upload/ { dav_methods PUT; create_full_put_path on; }
  }
}
NGINX
nginx -c "$work/nginx.conf"
sleep 0.3

seconds_for() {  # curl arguments… -> seconds
    # Everything written before (nginx does not fsync its uploads) goes to disk first, or the
    # next fsync would pay for it: ext4's ordered journal writes all dirty data it holds.
    sync
    curl -s -o "$work/answer" -w "%{time_total}" "$@"
}
echo "Uploads: ${size_mib} MiB, parley and parley resumable (taking turns going first) and nginx, 4 rounds…" >&2
upload_mbs() {  # query after kind=file -> MB/s of one Parley upload of upload.bin
    local t
    t=$(seconds_for -T "$work/upload.bin" -X POST -H "X-Parley-App-Key: $key" -H "Authorization: Bearer $token" \
        -H "Content-Type: application/octet-stream" "http://127.0.0.1:$port/v1/media?kind=file&$1")
    grep -q '"sizeBytes"' "$work/answer" || { cat "$work/answer" >&2; exit 1; }
    python3 -c "print($size_mib * 1.048576 / $t)"
}
parley_mbs=(); nginx_mbs=(); resumable_mbs=()
for round in 1 2 3 4; do
    head -c $(( size_mib << 20 )) /dev/urandom > "$work/upload.bin"
    sync
    if (( round % 2 )); then
        plain=$(upload_mbs "name=round$round.bin"); resumable=$(upload_mbs "name=r$round.bin&clientId=round-$round")
    else
        resumable=$(upload_mbs "name=r$round.bin&clientId=round-$round"); plain=$(upload_mbs "name=round$round.bin")
    fi
    parley_mbs+=("$plain"); resumable_mbs+=("$resumable")
    t=$(seconds_for -T "$work/upload.bin" "http://127.0.0.1:$nginx_port/upload/round$round.bin")
    stored=$(stat -c %s "$work/nginx-root/upload/round$round.bin" 2>/dev/null || echo 0)
    [[ "$stored" == $(( size_mib << 20 )) ]] || { echo "nginx did not store the upload:"; cat "$work/answer" "$work/nginx-error.log"; exit 1; } >&2
    nginx_mbs+=($(python3 -c "print($size_mib * 1.048576 / $t)"))
    rm -f "$work/nginx-root/upload/round$round.bin"
done
kill -QUIT "$(cat "$work/nginx.pid")"; rm -f "$work/nginx.pid"

echo "Thumbnails: a 12-megapixel JPEG, ${thumbnails} times each…" >&2
.venv/bin/python - "$work/photo.jpg" <<'PY'
import sys
from PIL import Image, ImageDraw, ImageFilter
import random
random.seed(12)
image = Image.effect_noise((4000, 3000), 60).convert("RGB")
draw = ImageDraw.Draw(image)
for _ in range(400):
    x, y = random.randrange(4000), random.randrange(3000)
    draw.ellipse((x, y, x + random.randrange(20, 400), y + random.randrange(20, 400)),
                 fill=(random.randrange(256), random.randrange(256), random.randrange(256)))
image.filter(ImageFilter.GaussianBlur(1)).save(sys.argv[1], "JPEG", quality=90)
PY
parley_thumb=$("$bench" thumbnail --image "$work/photo.jpg" --count "$thumbnails" --size 512 --json)
vips_times=$(python3 - "$work/photo.jpg" "$work/out.jpg" "$thumbnails" <<'PY'
import subprocess, sys, time
photo, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for _ in range(count):
    started = time.perf_counter()
    subprocess.run(["vipsthumbnail", photo, "-s", "512", "-o", out + "[Q=80,strip]"], check=True)
    times.append((time.perf_counter() - started) * 1000)
times.sort()
print(f"{times[len(times) // 2]:.1f} {times[int(len(times) * 0.99)]:.1f}")
PY
)
photo_upload=$(seconds_for --data-binary @"$work/photo.jpg" -H "X-Parley-App-Key: $key" -H "Authorization: Bearer $token" \
    -H "Content-Type: image/jpeg" "http://127.0.0.1:$port/v1/media?kind=photo")
grep -q '"thumbnail"' "$work/answer" || { cat "$work/answer" >&2; exit 1; }
photo_bytes=$(stat -c %s "$work/photo.jpg")

python3 - "${parley_mbs[*]}" "${nginx_mbs[*]}" "$parley_thumb" "$vips_times" "$photo_upload" "$photo_bytes" "$size_mib" "$cores" \
    "${resumable_mbs[*]}" <<'PY'
import datetime, json, statistics, subprocess, sys
parley = [float(x) for x in sys.argv[1].split()]
resumable = [float(x) for x in sys.argv[9].split()]
nginx = [float(x) for x in sys.argv[2].split()]
thumb = json.loads(sys.argv[3])
vips_p50, vips_p99 = map(float, sys.argv[4].split())
upload_s, photo_bytes, size_mib, cores = float(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"Measured {datetime.date.today()} on {cores} cores ({cpu}), {subprocess.getoutput('uname -r')}, release build, "
      f"libvips {subprocess.getoutput('vips --version').split()[0].split('-')[-1]}.\n")
print("| benchmark | Parley | reference | ratio |")
print("|---|---|---|---|")
mp, mn = statistics.median(parley), statistics.median(nginx)
print(f"| Upload, curl streaming {size_mib} MiB (MB/s, median of 4) | {mp:,.0f} (to disk, SHA-256, fsync, recorded) "
      f"| nginx PUT to its client body file: {mn:,.0f} | {mp/mn:.2f}x |")
mr = statistics.median(resumable)
print(f"| The same upload with a clientId (resumable: declaration written beside the bytes in media/partial; MB/s) | {mr:,.0f} "
      f"| nginx, as above: {mn:,.0f} | {mr/mn:.2f}x |")
tp = float(thumb["p50_ms"])
print(f"| Thumbnail of a {thumb['megapixels']} MP JPEG to {thumb['thumbnail']} (p50 ms; lower is better) | {tp:.0f} "
      f"(p99 {float(thumb['p99_ms']):.0f}) | vipsthumbnail -s 512: {vips_p50:.0f} (p99 {vips_p99:.0f}) | {vips_p50/tp:.2f}x as fast |")
print(f"| Whole photo upload of that JPEG ({photo_bytes / 1e6:.1f} MB): receive, strip, measure, thumbnail, fsync, record (ms) "
      f"| {upload_s * 1000:.0f} | – | – |")
print(f"\nRaw: parley MB/s {[round(x) for x in parley]}, resumable {[round(x) for x in resumable]}, nginx MB/s {[round(x) for x in nginx]}.")
PY
