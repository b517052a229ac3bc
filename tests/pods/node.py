"""A node that runs pods, for the pods tier: containerd + runc + the CNI bridge (Debian's
packages), kubelet, kube-scheduler, kube-proxy and CoreDNS (built by
``scripts/controlplane.sh``), all under one state directory, started as children of the test
process (inside its network namespace, ``tests.pods.netns``) and stopped by their PIDs.

Teardown leaves nothing behind: workloads are deleted first so the kubelet stops its pods
through the CRI, then every container left is killed through containerd, the processes stop,
every mount under the state directory is unmounted, the pods' cgroups (under a cgroup root of
this node's own) are removed, and the three sysctls the kubelet sets are restored.

Settings this machine needs (facts in ``docs/testing.md``): cgroup v1 with the cgroupfs driver
(``failCgroupV1: false``), ``restrict_oom_score_adj`` (root lacks CAP_SYS_RESOURCE), and
kube-proxy's ``masqueradeAll`` (no ``br_netfilter`` for pod-to-Service-to-pod on one bridge).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.controlplane import ControlPlane, bin_dir
from tests.support.eventually import eventually

__all__ = [
    "CLUSTER_DNS",
    "NODE_BINARIES",
    "NODE_NAME",
    "POD_CIDR",
    "SERVICE_CIDR",
    "Node",
    "missing_pieces",
    "started",
]

NODE_NAME = "ankka-node"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/24"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DNS = "cluster.local"
NODE_BINARIES = ("kube-scheduler", "kubelet", "kube-proxy", "coredns")
SYSTEM_PROGRAMS = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/usr/lib/cni/host-local": "containernetworking-plugins",
    "iptables": "iptables",
    "ip": "iproute2",
}
# The kubelet sets these for the whole machine; they are restored at teardown.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")


def missing_pieces() -> list[str]:
    """What the node cannot start without, each with what provides it."""
    missing = [
        f"{b} (scripts/controlplane.sh build)"
        for b in NODE_BINARIES
        if not os.access(bin_dir() / b, os.X_OK)
    ]
    for program, package in SYSTEM_PROGRAMS.items():
        found = os.access(program, os.X_OK) if program.startswith("/") else shutil.which(program)
        if not found:
            missing.append(f"{program} (Debian package {package}: scripts/system-deps.sh)")
    return missing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Child:
    """One process of the node, owned by PID."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.proc.returncode}; the end of {self.log}:\n"
                + self.log.read_text(errors="replace")[-3000:]
            )

    def stop(self, timeout: float = 20) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass(frozen=True)
class Node:
    state: Path
    ip: str
    containerd_socket: Path
    pod_logs: Path

    def ctr(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def import_image(self, archive: Path) -> None:
        done = self.ctr("images", "import", str(archive))
        if done.returncode != 0:
            raise RuntimeError(f"ctr images import {archive}: {done.stderr.strip()}")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _containerd_config(s: Path, pause_image: str) -> Path:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return _write(
        s / "containerd.toml",
        f"""version = 2
root = "{s}/containerd/root"
state = "{s}/containerd/state"
[grpc]
  address = "{s}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{s}/containerd/opt"
[{cri}]
  sandbox_image = "{pause_image}"
  # Root here lacks CAP_SYS_RESOURCE: without this, sandboxes fail asking for oomScoreAdj -998.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{s}/runc"
[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{s}/cni/net.d"
""",
    )


def _cni_config(s: Path) -> None:
    bridge = {
        "type": "bridge",
        "bridge": "ankka0",
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": POD_CIDR}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(s / "cni" / "ipam"),
        },
    }
    conf = {"cniVersion": "1.0.0", "name": "ankka", "plugins": [bridge]}
    _write(s / "cni" / "net.d" / "10-ankka.conflist", json.dumps(conf, indent=2))


def _kubelet_config(s: Path, cp: ControlPlane, ip: str, socket_path: Path) -> Path:
    pki = cp.workdir / "pki"
    return _write(
        s / "kubelet.yaml",
        f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{s.name}
containerRuntimeEndpoint: unix://{socket_path}
address: {ip}
port: {_free_port()}
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {pki / "ca.crt"}}}
authorization: {{mode: Webhook}}
podLogsDir: {s / "pod-logs"}
clusterDNS: [{ip}]
clusterDomain: {CLUSTER_DNS}
resolvConf: {_write(s / "resolv.conf", "")}
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}}
registerNode: true
# Pods see a changed Secret or ConfigMap at their next sync (default every minute, longer than
# the 30 s a tier certificate has left when renewed); every 10 s here.
syncFrequency: 10s
""",
    )


def _kube_proxy_config(s: Path, cp: ControlPlane) -> Path:
    return _write(
        s / "kube-proxy.yaml",
        f"""apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {cp.kubeconfig}}}
hostnameOverride: {NODE_NAME}
mode: iptables
clusterCIDR: {POD_CIDR}
healthzBindAddress: 127.0.0.1:{_free_port()}
metricsBindAddress: 127.0.0.1:{_free_port()}
iptables: {{masqueradeAll: true}}
# Zeros leave the machine-wide conntrack sysctls alone.
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
""",
    )


def _corefile(s: Path, cp: ControlPlane, ip: str) -> Path:
    return _write(
        s / "Corefile",
        f""".:53 {{
    errors
    ready 127.0.0.1:{_free_port()}
    kubernetes {CLUSTER_DNS} in-addr.arpa ip6.arpa {{
        kubeconfig {cp.kubeconfig} test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
""",
    )


def read_sysctls() -> dict[str, str]:
    return {k: Path("/proc/sys", k).read_text().strip() for k in KUBELET_SYSCTLS}


def _restore_sysctls(saved: dict[str, str]) -> None:
    for key, value in saved.items():
        path = Path("/proc/sys", key)
        if path.read_text().strip() != value:
            path.write_text(value)


def leftovers(state: Path, sysctls: dict[str, str]) -> list[str]:
    """What a teardown failed to undo: mounts, cgroups, shims, changed sysctls, files."""
    left = [f"mount {m}" for m in mounts_under(state)]
    left += [f"cgroup {c}" for c in cgroups_of(state.name)]
    left += [f"containerd shim pid {p}" for p in _shim_pids(state / "containerd.sock")]
    left += [f"sysctl {k}" for k, v in read_sysctls().items() if sysctls.get(k) != v]
    if state.exists():
        left.append(f"state directory {state}")
    return left


def mounts_under(root: Path) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(f"{root}/"):
            points.append(point)
    return points


def _unmount_all(root: Path) -> None:
    for point in sorted(mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)


def cgroups_of(root_name: str) -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").glob(f"*/{root_name}") if p.is_dir()]


def _make_cgroup_root(root_name: str) -> None:
    """The kubelet's cgroupRoot, in every v1 hierarchy (it refuses one with a missing path)."""
    for controller in Path("/sys/fs/cgroup").iterdir():
        if controller.name == "unified" or controller.is_symlink():
            continue
        mine = controller / root_name
        mine.mkdir(exist_ok=True)
        if controller.name == "cpuset":  # an empty cpuset admits no task
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (mine / knob).write_text((controller / knob).read_text())


def _remove_cgroups(root_name: str) -> None:
    for top in cgroups_of(root_name):
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            _kill_and_rmdir(d)
        _kill_and_rmdir(top)


def _kill_and_rmdir(d: Path) -> None:
    procs = d / "cgroup.procs"
    for _ in range(50):
        pids = [int(p) for p in procs.read_text().split()] if procs.exists() else []
        for pid in pids:  # a container process this node started
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            d.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def _shim_pids(socket_path: Path) -> list[int]:
    """containerd's shims for this node: they name its socket on their command line."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        shim = bool(cmdline) and cmdline[0].endswith(b"containerd-shim-runc-v2")
        if shim and str(socket_path).encode() in cmdline:
            pids.append(int(proc.name))
    return pids


def _wait_for(
    what: str, check: Callable[[], bool], child_list: list[Child], timeout: float
) -> None:
    def alive_and_ready() -> bool:
        for c in child_list:
            c.check()  # a child that died fails the wait at once, naming it
        return check()

    eventually(alive_and_ready, what=f"{what} to be ready", timeout=timeout, interval=0.25)


@contextmanager
def started(cp: ControlPlane, state: Path, ip: str, images: list[Path]) -> Iterator[Node]:
    """containerd (with ``images`` imported), kubelet, kube-scheduler, kube-proxy, CoreDNS."""
    missing = missing_pieces()
    if missing:
        raise RuntimeError("the pods tier's node needs: " + "; ".join(missing))
    b = bin_dir()
    state.mkdir(parents=True)
    socket_path = state / "containerd.sock"
    node = Node(state=state, ip=ip, containerd_socket=socket_path, pod_logs=state / "pod-logs")
    saved = read_sysctls()
    had_run_containerd = Path("/run/containerd").exists()
    children: list[Child] = []

    def spawn(name: str, args: list[str]) -> Child:
        log = state / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        child = Child(name, proc, log)
        children.append(child)
        return child

    with ExitStack() as stack:
        stack.callback(_final_cleanup, state, saved, had_run_containerd)
        stack.callback(_stop_all, node, children)
        pause = _pause_name(images)
        _cni_config(state)
        spawn("containerd", ["containerd", "--config", str(_containerd_config(state, pause))])
        _wait_for("containerd", socket_path.exists, children, 60)
        _wait_for("containerd's CRI", lambda: node.ctr("version").returncode == 0, children, 60)
        for archive in images:
            node.import_image(archive)
        spawn(
            "kube-scheduler",
            [
                str(b / "kube-scheduler"),
                "--kubeconfig",
                str(cp.kubeconfig),
                "--authentication-kubeconfig",
                str(cp.kubeconfig),
                "--authorization-kubeconfig",
                str(cp.kubeconfig),
                "--leader-elect=false",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(_free_port()),
                "--v",
                "1",
            ],
        )
        _make_cgroup_root(state.name)
        spawn(
            "kubelet",
            [
                str(b / "kubelet"),
                "--config",
                str(_kubelet_config(state, cp, ip, socket_path)),
                "--kubeconfig",
                str(cp.kubeconfig),
                "--root-dir",
                str(state / "kubelet"),
                "--hostname-override",
                NODE_NAME,
                "--node-ip",
                ip,
                "--v",
                "1",
            ],
        )
        spawn("kube-proxy", [str(b / "kube-proxy"), "--config", str(_kube_proxy_config(state, cp))])
        spawn("coredns", [str(b / "coredns"), "-conf", str(_corefile(state, cp, ip))])

        def ready() -> bool:
            out = cp.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
            if out.returncode != 0:
                return False
            conditions = json.loads(out.stdout)["status"].get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        _wait_for(f"node {NODE_NAME} Ready", ready, children, 120)
        yield node


def _pause_name(images: list[Path]) -> str:
    for archive in images:
        index = _index_of(archive)
        for m in index.get("manifests") or []:
            name = (m.get("annotations") or {}).get("io.containerd.image.name", "")
            if "/pause:" in name:
                return str(name)
    raise RuntimeError("no pause image among " + ", ".join(str(i) for i in images))


def _index_of(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        data: dict[str, Any] = json.load(member)
        return data


def _stop_all(node: Node, children: list[Child]) -> None:
    by_name = {c.name: c for c in children}
    for name in ("kubelet", "kube-proxy", "kube-scheduler", "coredns"):
        if name in by_name:
            by_name[name].stop()
    if "containerd" in by_name and by_name["containerd"].proc.poll() is None:
        tasks = node.ctr("tasks", "list", "--quiet", timeout=60).stdout.split()
        for task in tasks:
            node.ctr("tasks", "kill", "--signal", "SIGKILL", task, timeout=30)
        for task in tasks:
            node.ctr("tasks", "delete", "--force", task, timeout=30)
        for container in node.ctr("containers", "list", "--quiet", timeout=60).stdout.split():
            node.ctr("containers", "delete", container, timeout=30)
        by_name["containerd"].stop()
    for pid in _shim_pids(node.containerd_socket):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _final_cleanup(state: Path, saved: dict[str, str], had_run_containerd: bool) -> None:
    _unmount_all(state)
    _remove_cgroups(state.name)
    _restore_sysctls(saved)
    if not had_run_containerd:
        shutil.rmtree("/run/containerd", ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
