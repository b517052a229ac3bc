#!/usr/bin/env bash
# System packages the test tiers need, from Debian's archive. Idempotent; nothing here starts a
# service (the tests start private ones of their own):
#   postgresql                   the server of the PostgreSQL store's tests (a private cluster)
#   containerd, runc,            the pods tier's node: containerd and runc run the pods, the CNI
#   containernetworking-plugins  plugins (bridge, host-local, loopback) give them addresses
#   iproute2, iptables           the node's own network namespace and kube-proxy's rules in it
#   mmdebstrap                   the base root filesystem of ankka's image (scripts/image.sh)
#   gcc, libc6-dev               the pod sandbox image's static pause program
#   chromium                     the console's browser tests (driven by Playwright; no browser
#                                is downloaded)
set -euo pipefail
need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v cc >/dev/null 2>&1 || need+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
echo "system packages present: postgresql $(ls /usr/lib/postgresql/), $(containerd --version | cut -d' ' -f2-3), $(runc --version | head -n1), $(chromium --version 2>/dev/null)"
