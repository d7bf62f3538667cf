#!/usr/bin/env bash
# Installs the Debian packages Parley needs, only if any is missing. Quiet when nothing to do.
#   scripts/install-deps.sh           what building and running the server need
#   scripts/install-deps.sh --test    also what `make test` uses (Python venv, tmux, Chromium, promtool,
#                                     PostgreSQL and Redis servers started by scripts/services.sh)
#   scripts/install-deps.sh --bench   also the benchmark references (wrk, nginx, redis, vipsthumbnail)
set -euo pipefail

packages=(pkg-config libssl-dev libsqlite3-dev libsodium-dev libvips42 libpq-dev libcurl4-openssl-dev sqlite3 curl)
case "${1:-}" in
    "") ;;
    --test) packages+=(python3-venv tmux chromium chromium-driver fonts-noto-color-emoji postgresql redis-server prometheus) ;;
    --bench) packages+=(python3-venv wrk nginx-light postgresql redis-server libvips-tools) ;;
    *) echo "usage: scripts/install-deps.sh [--test | --bench]" >&2; exit 2 ;;
esac

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "Installing missing packages: ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
