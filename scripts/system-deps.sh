#!/usr/bin/env bash
# System packages the test tiers need, from Debian's archive: PostgreSQL's server (the tests
# start a private cluster of their own; no system service is used) and Chromium (the console's
# tests drive it headless through Playwright; no browser is downloaded). Idempotent.
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
echo "system packages present: postgresql $(ls /usr/lib/postgresql/), $(chromium --version 2>/dev/null)"
