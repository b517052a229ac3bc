"""The pods tier's own network namespace, which the test process joins for the whole session.

Every address of the tier (the node's, the pods' 10.244.0.0/24, the Services' 10.96.0.0/24)
exists only inside this namespace: the control plane, containerd, the kubelet, kube-proxy and
CoreDNS all start from the test process after it joined, so they inherit it, and so does every
request a test makes. The host's own namespace sees none of it; leaving deletes the namespace
and with it every interface, route and iptables rule made inside.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["NODE_IP", "joined"]

NODE_IP = "172.31.254.2"  # on an interface inside the namespace: the node's InternalIP
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@contextmanager
def joined(name: str) -> Iterator[str]:
    """Create namespace ``name``, join it (this thread and every child from now), leave it and
    delete it on exit. Yields the node's address."""
    _ip("netns", "add", name)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        # A bridge with no ports stands in for a dummy (no dummy module on this kernel).
        _ip("-n", name, "link", "add", "node0", "type", "bridge")
        _ip("-n", name, "addr", "add", f"{NODE_IP}/32", "dev", "node0")
        _ip("-n", name, "link", "set", "node0", "up")
        # Pods reach Services through the node's stack; without a default route the kernel
        # has no way to send a packet to a ClusterIP before kube-proxy rewrites it.
        _ip("-n", name, "route", "add", "default", "dev", "node0")
        target = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield NODE_IP
        finally:
            _setns(home)
    finally:
        os.close(home)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
