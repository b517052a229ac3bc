"""A real control plane on loopback for the cluster tests: etcd, kube-apiserver and
kube-controller-manager (for the garbage collector), started from the binaries that
``scripts/controlplane.sh`` builds once per machine.

The kube-apiserver flags follow controller-runtime's envtest: generated serving and client
certificates, service-account signing keys, RBAC authorisation, an admin client certificate in
``system:masters``. A missing binary fails loudly, naming the command that builds it: this tier
never skips.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tests.support.eventually import eventually

__all__ = ["BINARIES", "ControlPlane", "PodNetwork", "bin_dir", "start"]

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "helm", "kubectl")
BUILD_COMMAND = "scripts/controlplane.sh build"


def bin_dir() -> Path:
    cache = os.environ.get("ANKKA_CACHE") or str(Path.home() / ".cache" / "ankka")
    return Path(cache) / "controlplane" / "bin"


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if not os.access(bin_dir() / b, os.X_OK)]


@dataclass(frozen=True)
class ControlPlane:
    """What a test needs to reach the API server."""

    kubeconfig: Path
    server: str
    bin: Path
    workdir: Path
    # The control plane's processes by binary (etcd, kube-apiserver, kube-controller-manager):
    # the benches read their CPU time from /proc.
    pids: tuple[tuple[str, int], ...] = ()

    def env(self) -> dict[str, str]:
        """An environment for kubectl, helm and the operator: this cluster, these binaries."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["HELM_CACHE_HOME"] = str(self.workdir / "helm" / "cache")
        env["HELM_CONFIG_HOME"] = str(self.workdir / "helm" / "config")
        env["HELM_DATA_HOME"] = str(self.workdir / "helm" / "data")
        return env

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "kubectl"), *args],
            env=self.env(),
            text=True,
            input=stdin,
            capture_output=True,
            check=check,
            timeout=120,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificates(d: Path, extra_ips: tuple[str, ...] = ()) -> None:
    """CA, API server serving certificate, admin client certificate, service-account keys."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    later = now + dt.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ankka-test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(later)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(d / "ca.crt", ca.public_bytes(serialization.Encoding.PEM))

    def leaf(name: str, subject: x509.Name, sans: list[x509.GeneralName]) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(later)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        _write(d / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))
        _write(d / f"{name}.key", _key_pem(key))

    leaf(
        "apiserver",
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        [
            x509.DNSName("localhost"),
            x509.IPAddress(IPv4Address("127.0.0.1")),
            x509.DNSName("kubernetes.default.svc"),
            *(x509.IPAddress(IPv4Address(ip)) for ip in extra_ips),
        ],
    )
    leaf(
        "admin",
        x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
            ]
        ),
        [],
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(d / "sa.key", _key_pem(sa_key))
    _write(
        d / "sa.pub",
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )


def _kubeconfig(d: Path, server: str) -> Path:
    text = f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {server}
    certificate-authority: {d / "ca.crt"}
users:
- name: admin
  user:
    client-certificate: {d / "admin.crt"}
    client-key: {d / "admin.key"}
contexts:
- name: test
  context: {{cluster: test, user: admin}}
current-context: test
"""
    return _write(d / "kubeconfig", text.encode())


@contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _wait_ready(
    url: str, d: Path, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120.0
) -> None:
    ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
    ctx.load_cert_chain(str(d / "admin.crt"), str(d / "admin.key"))

    def tail() -> str:
        return f"{log.stem}'s log:\n" + log.read_text()[-4000:]

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{log.stem} exited with {proc.returncode}; {tail()}")
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as response:
                return bool(response.status == 200)
        except OSError as exc:
            raise AssertionError(str(exc)) from exc

    eventually(ready, what=f"{url} to answer 200", timeout=timeout, interval=0.25, detail=tail)


@dataclass(frozen=True)
class PodNetwork:
    """For a control plane that serves a node (``tests/pods``): where the API server listens
    for pods, inside the network namespace the test process has joined."""

    advertise: str  # the node's address, also the ``kubernetes`` Service's endpoint
    service_cidr: str
    service_ip: str  # the ``kubernetes`` Service's ClusterIP (in the serving certificate)


# Without a node: pods never run, so no Service needs endpoints and no token is mounted.
_NO_PODS_FLAGS = [
    "--disable-admission-plugins",
    "ServiceAccount",
    "--endpoint-reconciler-type",
    "none",
]
_NO_PODS_CONTROLLERS = "garbagecollector,namespace"
# With one: what a Deployment's pods need (the node lifecycle lifts the not-ready taint).
_POD_CONTROLLERS = (
    "garbagecollector,namespace,deployment,replicaset,nodelifecycle,serviceaccount,"
    "serviceaccount-token,root-ca-cert-publisher,endpoint,endpointslice"
)


@contextmanager
def start(workdir: Path, pods: PodNetwork | None = None) -> Iterator[ControlPlane]:
    """Start etcd, kube-apiserver and kube-controller-manager; stop them on exit."""
    missing = missing_binaries()
    if missing:
        raise RuntimeError(
            f"the cluster tests need {', '.join(missing)} in {bin_dir()}; build them once with "
            f"`{BUILD_COMMAND}` (Go and the Go module proxy; about 15-30 minutes on 2 cores)"
        )
    b = bin_dir()
    d = workdir / "pki"
    d.mkdir(parents=True)
    _certificates(d, (pods.advertise, pods.service_ip) if pods else ())
    etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    server = f"https://127.0.0.1:{api_port}"
    kubeconfig = _kubeconfig(d, server)
    with ExitStack() as stack:
        etcd_log = workdir / "etcd.log"
        etcd = stack.enter_context(
            _process(
                [
                    str(b / "etcd"),
                    "--data-dir",
                    str(workdir / "etcd"),
                    "--name",
                    "default",
                    "--listen-client-urls",
                    etcd_url,
                    "--advertise-client-urls",
                    etcd_url,
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{peer_port}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{peer_port}",
                    "--initial-cluster",
                    f"default=http://127.0.0.1:{peer_port}",
                    "--unsafe-no-fsync",
                    "--log-level",
                    "warn",
                ],
                etcd_log,
            )
        )
        api_log = workdir / "kube-apiserver.log"
        api = stack.enter_context(
            _process(
                [
                    str(b / "kube-apiserver"),
                    "--etcd-servers",
                    etcd_url,
                    "--bind-address",
                    "0.0.0.0" if pods else "127.0.0.1",
                    "--advertise-address",
                    pods.advertise if pods else "127.0.0.1",
                    "--secure-port",
                    str(api_port),
                    "--cert-dir",
                    str(d),
                    "--tls-cert-file",
                    str(d / "apiserver.crt"),
                    "--tls-private-key-file",
                    str(d / "apiserver.key"),
                    "--client-ca-file",
                    str(d / "ca.crt"),
                    "--authorization-mode",
                    "RBAC",
                    "--service-account-key-file",
                    str(d / "sa.pub"),
                    "--service-account-signing-key-file",
                    str(d / "sa.key"),
                    "--service-account-issuer",
                    server,
                    "--service-cluster-ip-range",
                    pods.service_cidr if pods else "10.0.0.0/16",
                    *(
                        [
                            "--kubelet-client-certificate",
                            str(d / "admin.crt"),
                            "--kubelet-client-key",
                            str(d / "admin.key"),
                            # The node's name resolves nowhere; its address is in its status.
                            "--kubelet-preferred-address-types",
                            "InternalIP",
                        ]
                        if pods
                        else _NO_PODS_FLAGS
                    ),
                    # On by default; named so that a test of namespaces labelled
                    # pod-security.kubernetes.io/enforce is a test of the API server's check.
                    "--enable-admission-plugins",
                    "PodSecurity",
                    "--allow-privileged=true",
                    "--v",
                    "1",
                ],
                api_log,
            )
        )
        deadline_note = etcd  # etcd must stay up for the API server's readiness
        _wait_ready(f"{server}/readyz", d, api, api_log)
        assert deadline_note.poll() is None, "etcd exited; see " + str(etcd_log)
        kcm_log = workdir / "kube-controller-manager.log"
        kcm = stack.enter_context(
            _process(
                [
                    str(b / "kube-controller-manager"),
                    "--kubeconfig",
                    str(kubeconfig),
                    "--authentication-kubeconfig",
                    str(kubeconfig),
                    "--authorization-kubeconfig",
                    str(kubeconfig),
                    "--controllers",
                    _POD_CONTROLLERS if pods else _NO_PODS_CONTROLLERS,
                    "--leader-elect=false",
                    "--bind-address",
                    "127.0.0.1",
                    "--secure-port",
                    "0",
                    "--service-account-private-key-file",
                    str(d / "sa.key"),
                    "--root-ca-file",
                    str(d / "ca.crt"),
                    "--v",
                    "1",
                ],
                kcm_log,
            )
        )
        pids = (
            ("etcd", etcd.pid),
            ("kube-apiserver", api.pid),
            ("kube-controller-manager", kcm.pid),
        )
        yield ControlPlane(kubeconfig=kubeconfig, server=server, bin=b, workdir=workdir, pids=pids)


def have_helm_and_kubectl() -> bool:
    return all(shutil.which(n, path=str(bin_dir())) for n in ("helm", "kubectl"))
