"""Fixtures of the pods tier: a network namespace the test process joins, the control plane and
a node inside it, ankka's images imported into the node's containerd, and the chart installed
with them, so the operator and the gateway run as pods.

A missing piece (a binary, a Debian package, an image archive) fails the session naming it and
what provides it: this tier never skips.

Runtimes in pods serve mTLS only. The tests reach them through :meth:`Cluster.call` (an Agent's
Service) and :meth:`Cluster.call_pod` (one pod by its IP), as a platform identity of their own:
a client certificate ``ankka://platform/tests`` issued from the platform CA's Secret
(``tests/cluster/agent_tls.py``), the runtime's certificate checked against that CA and its
Agent's Service name (``<agent>.<namespace>.svc``, sent as SNI).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.agent_tls import platform_client
from tests.cluster.conftest import Kubectl
from tests.cluster.controlplane import ControlPlane, PodNetwork, start
from tests.pods import netns, node
from tests.support.eventually import eventually
from tests.support.postgres import postgres_cluster

ROOT = Path(__file__).resolve().parents[2]
PLATFORM_NS = "ankka-system"
IMAGE_NAMES = ("ankka", "weather", "llama-server", "pause")
# Short enough that the tier sees a renewal with its pods running (renewed at two thirds).
CERT_LIFETIME_SECONDS = 90

__all__ = ["PLATFORM_NS", "Cluster", "Kubectl", "image"]


def _version() -> str:
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise RuntimeError("pyproject.toml names no version")


VERSION = _version()


def image(name: str) -> str:
    return f"localhost/ankka/{name}:{VERSION}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.pods)


def image_archives() -> list[Path]:
    # `scripts/image.sh build` names this checkout's set of archives in build/images (a set per
    # content under the shared cache, so another checkout's build never swaps them underneath).
    pointer = Path(__file__).resolve().parents[2] / "build" / "images"
    if not pointer.is_file():
        raise RuntimeError(
            f"the pods tier needs ankka's images built from this checkout ({pointer} is missing); "
            "build them with `scripts/image.sh build` (`make cluster-pods` does)"
        )
    where = Path(pointer.read_text().strip())
    archives = [where / f"{n}.oci.tar" for n in IMAGE_NAMES]
    missing = [str(a) for a in archives if not a.exists()]
    if missing:
        raise RuntimeError(
            f"the pods tier needs ankka's images {', '.join(missing)}; build them with "
            "`scripts/image.sh build` (`make cluster-pods` does)"
        )
    # The pause image first: containerd is configured with its name.
    return [archives[-1], *archives[:-1]]


POSTGRES_PASSWORD = "pods-tier-pg"  # the tier's own throwaway cluster


@dataclass(frozen=True)
class Postgres:
    """The tier's PostgreSQL (Debian's server), listening on the node's address inside the
    network namespace, so pods reach it; loopback is trusted, pods log in with a password."""

    host: str
    port: int
    user: str
    password: str
    local: str  # the DSN from the test process (loopback, trusted)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"


class Cluster:
    """The control plane, the node, PostgreSQL, and kubectl against them."""

    def __init__(self, cp: ControlPlane, n: node.Node, postgres: Postgres) -> None:
        self.cp = cp
        self.node = n
        self.postgres = postgres
        self.kubectl = Kubectl(cp)
        self._caller: httpx.Client | None = None

    def caller(self) -> httpx.Client:
        """The tests' mTLS client to runtimes (``ankka://platform/tests``), made at its first
        use, once the chart's operator has made the platform CA; closed with the cluster."""
        if self._caller is None:
            self._caller = platform_client(
                self.kubectl, self.cp.workdir / "tests-tls", check_hostname=True
            )
        return self._caller

    def call(
        self, namespace: str, name: str, method: str, path: str, *, timeout: float = 60, **kw: Any
    ) -> httpx.Response:
        """A request to Agent ``name``'s runtime through its Service (kube-proxy), over mTLS:
        the runtime's certificate must name ``<name>.<namespace>.svc``."""
        svc = self.kubectl.get("service", name, namespace)
        assert svc is not None, f"no Service {namespace}/{name}"
        return self.caller().request(
            method,
            f"https://{svc['spec']['clusterIP']}:443{path}",
            extensions={"sni_hostname": f"{name}.{namespace}.svc"},
            timeout=timeout,
            **kw,
        )

    def call_pod(
        self,
        pod: dict[str, Any],
        method: str,
        path: str,
        *,
        client: httpx.Client | None = None,
        timeout: float = 60,
        **kw: Any,
    ) -> httpx.Response:
        """A request to one runtime pod by its IP, its Agent's Service name as SNI (the
        runtime's certificate names it); ``client`` for another platform's CA."""
        meta = pod["metadata"]
        resource = meta["labels"]["app.kubernetes.io/instance"]
        return (client or self.caller()).request(
            method,
            f"https://{pod['status']['podIP']}:8080{path}",
            extensions={"sni_hostname": f"{resource}.{meta['namespace']}.svc"},
            timeout=timeout,
            **kw,
        )

    def close(self) -> None:
        if self._caller is not None:
            self._caller.close()
            self._caller = None

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.cp.bin / "helm"), *args],
            env=self.cp.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def apply(self, doc: dict[str, Any]) -> None:
        self.kubectl.run("apply", "-f", "-", stdin=json.dumps(doc))

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.kubectl.items("pods", namespace, selector)

    def ready_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(namespace, selector) if _ready(p)]

    def wait_ready(self, what: str, namespace: str, selector: str, *, timeout: float = 240) -> Any:
        return eventually(
            lambda: self.ready_pods(namespace, selector) or self._unready(namespace, selector),
            what=what,
            timeout=timeout,
            interval=1,
            detail=lambda: self.why(namespace, selector),
        )

    def why(self, namespace: str, selector: str) -> str:
        """What kubectl says about the pods (describe, then each one's log tail)."""
        described = self.kubectl.run(
            "describe", "pods", "-n", namespace, "-l", selector, check=False
        )
        words = [described.stdout[-3000:], described.stderr]
        for pod in self.pods(namespace, selector):
            logs = self.kubectl.run(
                "logs", pod["metadata"]["name"], "-n", namespace, "--tail", "40", check=False
            )
            words += [f"--- logs of {pod['metadata']['name']}", logs.stdout, logs.stderr]
        return "\n".join(words)

    def _unready(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Fail at once, with the reason, when a pod is stuck in a state it will not leave."""
        for pod in self.pods(namespace, selector):
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                waiting = (status.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") in (
                    "CrashLoopBackOff",
                    "ErrImageNeverPull",
                    "ErrImagePull",
                ):
                    name = pod["metadata"]["name"]
                    logs = self.kubectl.run(
                        "logs", name, "-n", namespace, "--previous", "--tail", "30", check=False
                    )
                    pytest.fail(
                        f"pod {namespace}/{name} is {waiting['reason']}: "
                        f"{waiting.get('message', '')}\n{logs.stdout}{logs.stderr}"
                    )
        return []


def _ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        with running(tmp_path_factory.mktemp("pods")) as c:
            try:
                yield c
            finally:
                c.close()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@contextmanager
def running(workdir: Path) -> Iterator[Cluster]:
    """The namespace, the control plane and the node; RuntimeError names a missing piece or
    anything the teardown left behind."""
    missing = node.missing_pieces()
    if missing:
        raise RuntimeError("the pods tier's node needs: " + "; ".join(missing))
    archives = image_archives()
    # Short: containerd's socket path must fit in a unix socket address.
    state = Path(f"/tmp/ankka-node-{os.getpid()}")
    network = PodNetwork(
        advertise=netns.NODE_IP,
        service_cidr=node.SERVICE_CIDR,
        service_ip=node.KUBERNETES_SERVICE_IP,
    )
    namespace = f"ankka-pods-{os.getpid()}"
    sysctls = node.read_sysctls()
    with (
        netns.joined(namespace) as ip,
        postgres_cluster(
            listen=ip,
            password=POSTGRES_PASSWORD,
            networks=(node.POD_CIDR, f"{ip}/32"),
        ) as local,
        start(workdir, network) as cp,
        node.started(cp, state, ip, archives) as n,
    ):
        port = int(local.rsplit(":", 1)[1].split("/")[0])
        yield Cluster(cp, n, Postgres(ip, port, "ankka", POSTGRES_PASSWORD, local))
    left = node.leftovers(state, sysctls)
    if Path(f"/run/netns/{namespace}").exists():
        left.append(f"network namespace {namespace}")
    if left:
        raise RuntimeError(f"the node's teardown left behind: {left}")


@pytest.fixture(scope="package")  # torn down when the tier ends, not the session
def helm_release(cluster: Cluster) -> str:
    out = install_chart(cluster)
    assert out.returncode == 0, f"helm install failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


SHARED_STORE = "ankka-postgres"


def shared_store_secret(cluster: Cluster) -> dict[str, Any]:
    """The chart's shared PostgreSQL, as a platform team writes it: the parts, by the keys
    most PostgreSQL operators use (host, port, dbname, user, password)."""
    pg = cluster.postgres
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SHARED_STORE, "namespace": PLATFORM_NS},
        "stringData": {
            "host": pg.host,
            "port": str(pg.port),
            "dbname": "postgres",
            "user": pg.user,
            "password": pg.password,
        },
    }


def install_chart(cluster: Cluster) -> subprocess.CompletedProcess[str]:
    """The chart with the local image, short certificate lifetimes, a fast probe tick, and the
    tier's PostgreSQL as every Agent's store by default (store.postgres)."""
    cluster.kubectl.run("create", "namespace", PLATFORM_NS, check=False)
    cluster.apply(shared_store_secret(cluster))
    return cluster.helm(
        "install",
        "ankka",
        str(ROOT / "charts" / "ankka"),
        "--namespace",
        PLATFORM_NS,
        "--create-namespace",
        "--set",
        f"store.postgres.secretName={SHARED_STORE}",
        "--set",
        "image.repository=localhost/ankka/ankka",
        "--set",
        f"image.tag={VERSION}",
        "--set",
        "image.pullPolicy=Never",
        "--set",
        f"operator.certificateLifetimeSeconds={CERT_LIFETIME_SECONDS}",
        "--set",
        "operator.certificateCheckSeconds=2",
        "--set",
        "operator.probeTickSeconds=1",
    )
