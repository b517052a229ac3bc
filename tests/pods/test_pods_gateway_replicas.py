"""Two gateway pods divide a model's limits (issue 27, item 6; docs/gateway.md, "Limits across
gateway replicas"), on the real node, after tests/pods/test_pods.py (which installed the chart).

``helm upgrade --set gateway.replicas=2`` gives the operator the number; an InstallationModel
with ``maxInFlightPerCaller: 2`` is then rendered as 1 per gateway pod. The model is a server
of this test's own, on the node's address in the test's network namespace, that holds every
chat request until the test lets go, so requests stay in flight as long as the test needs. A
caller with an Agent's identity (a certificate from the platform CA) sends to each gateway pod
by its IP: each pod lets one request through and refuses the second with 429 ``caller_busy``,
so both together allow the 2 the spec says, not 4. The chart goes back to one gateway after.

The tier's certificates live 90 s (tests/pods/conftest.py), renewed at 60 s, and kubelet may
take longer than the 30 s left to refresh a pod's Secret mount: a pod can serve an expired
certificate for a while. This test's steps must not straddle such a window, so for its length
the operator issues certificates that live 15 minutes, and a pod counts as serving only once
the certificate it presents has at least :data:`NEEDED_S` left.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509

from tests.cluster.agent_tls import platform_client
from tests.pods.conftest import CERT_LIFETIME_SECONDS, PLATFORM_NS, ROOT, Cluster, image
from tests.pods.manifests import NS
from tests.support.eventually import eventually
from tests.support.http_reply import send_json

MODEL = "held"
AGENT = "limited"
CALLER = f"ankka://service/{NS}/{AGENT}"
GATEWAYS = "app.kubernetes.io/name=ankka-gateway"
HOLD_LIMIT_S = 120  # the held server answers by itself after this, whatever the test does
LONG_LIFETIME_S = 900  # the certificates' lifetime while this test runs
NEEDED_S = 2 * HOLD_LIMIT_S  # what a pod's certificate must have left for the test's steps


class HeldUpstream:
    """A Chat Completions server that answers each request only once released."""

    def __init__(self, host: str) -> None:
        self.release = threading.Event()
        self.received = 0
        lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    upstream.received += 1
                upstream.release.wait(HOLD_LIMIT_S)
                send_json(
                    self,
                    {
                        "id": "held-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": MODEL,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "let go"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HeldUpstream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def set_gateways(cluster: Cluster, replicas: int, *, lifetime_s: int) -> None:
    upgraded = cluster.helm(
        "upgrade", "ankka", str(ROOT / "charts" / "ankka"), "-n", PLATFORM_NS,
        "--reuse-values", "--set", f"gateway.replicas={replicas}",
        "--set", f"operator.certificateLifetimeSeconds={lifetime_s}",
    )  # fmt: skip
    assert upgraded.returncode == 0, upgraded.stderr

    def settled() -> bool:
        gateways = cluster.ready_pods(PLATFORM_NS, GATEWAYS)
        assert len(gateways) == replicas == len(cluster.pods(PLATFORM_NS, GATEWAYS)), gateways
        operators = cluster.pods(PLATFORM_NS, "app.kubernetes.io/name=ankka-operator")
        assert len(operators) == 1, [p["metadata"]["name"] for p in operators]  # the old one gone
        operator = operators[0]
        env = {e["name"]: e.get("value") for e in operator["spec"]["containers"][0]["env"]}
        assert env["ANKKA_GATEWAY_REPLICAS"] == str(replicas), env
        assert env["ANKKA_OPERATOR_CERT_LIFETIME_SECONDS"] == str(lifetime_s), env
        assert cluster.ready_pods(PLATFORM_NS, "app.kubernetes.io/name=ankka-operator")
        return True

    eventually(
        settled, what=f"{replicas} gateway pod(s), the operator told so", timeout=240, interval=1
    )


@pytest.fixture(scope="module")
def upstream(cluster: Cluster) -> Iterator[HeldUpstream]:
    with HeldUpstream(cluster.postgres.host) as held:
        yield held


@pytest.fixture(scope="module")
def two_gateways(cluster: Cluster, upstream: HeldUpstream) -> Iterator[list[dict[str, Any]]]:
    set_gateways(cluster, 2, lifetime_s=LONG_LIFETIME_S)
    cluster.kubectl.run("create", "namespace", NS, check=False)  # there unless run alone
    cluster.apply({
        "apiVersion": "ankka.dev/v1alpha1", "kind": "InstallationModel",
        "metadata": {"name": MODEL, "namespace": NS},
        "spec": {"model": MODEL, "endpoint": {"kind": "openai", "url": upstream.url},
                 "capabilities": ["completion"], "maxInFlightPerCaller": 2},
    })  # fmt: skip
    # An Agent naming the model makes its identity one of the model's callers (no pod needed).
    cluster.apply({
        "apiVersion": "ankka.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": AGENT, "namespace": NS},
        "spec": {"image": image("weather"), "module": "duo_agent", "replicas": 0,
                 "models": [{"name": "default", "installation": MODEL}]},
    })  # fmt: skip
    yield cluster.ready_pods(PLATFORM_NS, GATEWAYS)
    upstream.release.set()
    cluster.kubectl.run("delete", "agent", AGENT, "-n", NS, "--wait=false")
    cluster.kubectl.run("delete", "installationmodel", MODEL, "-n", NS, "--wait=false")
    set_gateways(cluster, 1, lifetime_s=CERT_LIFETIME_SECONDS)


def rendered(cluster: Cluster) -> bool:
    configmap = cluster.kubectl.get("configmap", "ankka-models", PLATFORM_NS) or {}
    rows = yaml.safe_load((configmap.get("data") or {}).get("models.yaml") or "[]")
    held = [r for r in rows if r["name"] == MODEL]
    assert len(held) == 1, rows
    # The Agent, applied after the model, is among its callers once the operator renders again.
    assert held[0]["max_in_flight_per_caller"] == 1 and held[0]["callers"] == [CALLER], held
    return True


class Caller:
    """The Agent's identity calling gateway pods by their IPs."""

    def __init__(self, cluster: Cluster) -> None:
        workdir = cluster.cp.workdir / "gw-tls"
        self.client = platform_client(cluster.kubectl, workdir, uri=CALLER)
        self._tls = ssl.create_default_context()
        self._tls.check_hostname = False  # the pods are reached by IP
        self._tls.verify_mode = ssl.CERT_NONE  # only the certificate's end is read here
        self._tls.load_cert_chain(workdir / "tests.crt", workdir / "tests.key")

    @staticmethod
    def url(pod: dict[str, Any], path: str) -> str:
        return f"https://{pod['status']['podIP']}:8443{path}"

    def certificate_left(self, pod: dict[str, Any]) -> dt.timedelta:
        """How long the certificate the pod presents now is still valid."""
        with (
            socket.create_connection((pod["status"]["podIP"], 8443), timeout=30) as raw,
            self._tls.wrap_socket(raw) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der, f"{pod['metadata']['name']} presented no certificate"
        ends = x509.load_der_x509_certificate(der).not_valid_after_utc
        return ends - dt.datetime.now(dt.UTC)

    def serves(self, pod: dict[str, Any]) -> bool:
        """The pod has read the models file with the held model and probed it, and presents a
        certificate that outlasts the test's steps (see the module's docstring)."""
        name = pod["metadata"]["name"]
        try:
            left = self.certificate_left(pod)
            answer = self.client.get(self.url(pod, "/v1/models"), timeout=30)
        except (OSError, httpx.TransportError) as exc:
            # An expired certificate until the mount catches up: not yet serving; keep asking.
            raise AssertionError(f"{name}: {exc}") from exc
        assert left.total_seconds() >= NEEDED_S, f"{name}: its certificate has {left} left"
        listed = answer.json()["data"]
        assert [m for m in listed if m["id"] == MODEL and "capabilities" in m], listed
        return True

    def chat(self, pod: dict[str, Any], *, timeout: float = HOLD_LIMIT_S + 30) -> httpx.Response:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hold"}]}
        return self.client.post(self.url(pod, "/v1/chat/completions"), json=body, timeout=timeout)


def test_two_gateway_pods_each_enforce_their_share_of_a_caller_s_limit(
    cluster: Cluster, upstream: HeldUpstream, two_gateways: list[dict[str, Any]]
) -> None:
    eventually(partial(rendered, cluster), what="the held model's share, for the Agent", interval=1)
    caller = Caller(cluster)
    with caller.client, ThreadPoolExecutor(max_workers=2) as pool:
        for pod in two_gateways:
            # kubelet refreshes a ConfigMap's mount in its own time; each pod then re-reads it.
            eventually(
                partial(caller.serves, pod),
                what="a gateway pod serving it",
                timeout=180,
                interval=1,
            )
        held: list[Future[httpx.Response]] = []
        for pod in two_gateways:
            held.append(pool.submit(caller.chat, pod))
            eventually(
                partial(received, upstream, len(held)), what=f"request {len(held)} held upstream"
            )
            # The same caller again on the same pod: its share is taken, so refused at once (a
            # request let through would be held by the model and time out here instead).
            refused = caller.chat(pod, timeout=30)
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["code"] == "caller_busy", refused.text
        # Both pods let one through, 2 in all: the spec's limit, not twice it.
        assert upstream.received == 2, "a refused request reached the model"
        upstream.release.set()
        for future in held:
            answer = future.result(timeout=HOLD_LIMIT_S)
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == "let go"


def received(upstream: HeldUpstream, count: int) -> bool:
    assert upstream.received == count, upstream.received
    return True
