#!/usr/bin/env bash
# Build Jaeger (all-in-one: OTLP receiver, in-memory storage, query API and UI) ONCE per
# machine, into a cache outside the repo: the trace backend the tracing tests read traces back
# from (tests/support/jaeger.py).
#
# Why this exists: no prebuilt binary can be downloaded here, only package registries are
# reachable, so Jaeger is built from its published Go module through the module proxy, the way
# scripts/controlplane.sh builds the control plane: a small wrapper module requires the
# command as a tool (`go get -tool`) and `go build` makes the binary. Jaeger's v2 line (built
# on the OpenTelemetry Collector) is published as the Go module github.com/jaegertracing/jaeger
# at v1.x versions; its command is cmd/jaeger, which runs all-in-one when given no config.
#
# Usage: scripts/jaeger.sh [build|path|check]
#   build (default)  build the binary if it is missing, into $ANKKA_CACHE/jaeger/bin
#   path             print the binary's path
#   check            exit non-zero, naming what is missing, when the binary is absent
set -euo pipefail

JAEGER_VERSION="${ANKKA_JAEGER_VERSION:-v1.76.0}"

CACHE="${ANKKA_CACHE:-$HOME/.cache/ankka}/jaeger"
BIN="$CACHE/bin"
SRC="$CACHE/src/jaeger-$JAEGER_VERSION"

# Two cores: two compile jobs at once, as the control plane's build does.
export GOMAXPROCS="${GOMAXPROCS:-2}"
export GOFLAGS="${GOFLAGS:--p=2} -trimpath -buildvcs=false"
export CGO_ENABLED=0

log() { printf '[jaeger %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

have() { [[ -x "$BIN/jaeger" ]]; }

wrapper() {
  [[ -f "$SRC/.ready" ]] && return
  mkdir -p "$SRC"
  printf 'module ankka.dev/jaeger\n\ngo 1.26.0\n' > "$SRC/go.mod"
  (cd "$SRC" && go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION") >&2
  touch "$SRC/.ready"
}

build_jaeger() {
  wrapper
  (cd "$SRC" && go build -ldflags "-s -w" -o "$BIN/.jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$BIN/.jaeger.tmp" "$BIN/jaeger"
}

check() {
  if ! have; then
    echo "missing the Jaeger binary $BIN/jaeger; run scripts/jaeger.sh build (make deps does)" >&2
    return 1
  fi
}

build() {
  mkdir -p "$BIN"
  if ! have; then
    local start end
    start=$(date +%s)
    build_jaeger
    end=$(date +%s)
    log "jaeger $JAEGER_VERSION built in $((end - start))s"
    echo "jaeger $JAEGER_VERSION $((end - start))s" >> "$CACHE/build-times.txt"
  fi
  check
  log "jaeger ready: $BIN/jaeger"
}

case "${1:-build}" in
  build) build ;;
  path) echo "$BIN/jaeger" ;;
  check) check ;;
  *) echo "usage: $0 [build|path|check]" >&2; exit 2 ;;
esac
