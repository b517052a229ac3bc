"""How ``ankka approve`` reaches a Task's runtime, and as whom.

- A runtime at an ``http://`` ``spec.runtime.address`` (a development loop on loopback): plain
  HTTP, as before; that runtime trusts every caller as ``local`` and records the header.
- Any other runtime serves mTLS or reviewed service-account tokens. The command then speaks as
  the Agent's delegate, ``<agent>-approver``, with a token the API server issues for the
  Agent's audience (``ankka://service/<ns>/<agent>``, so no other runtime accepts it), and the
  person's name in ``X-Ankka-Approver``; the runtime's policy lists the delegate among its
  approvers (the operator renders it), and records ``<person> (through <delegate>)``. The
  runtime is checked by the platform CA (the Agent's ``status.certificateAuthority``) and the
  URI SAN naming the Agent, before the token is sent.
- Where: ``spec.runtime.address`` when it is ``https://``; else a ready runtime pod, through
  the API server's port-forward (``pods/portforward``: a person's machine has no route to
  the Service), or the Service itself with ``--via service`` (when the command runs in the
  cluster).

One request, over :mod:`http.client` on a socket of ours (the port-forward's is not a TCP
connection any HTTP client library would open itself).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import ssl
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from ankka._kernel.errors import AnkkaError, Refused
from ankka._kernel.tls import peer_uri_sans
from ankka.operator import access, certs
from ankka.operator.agents import RUNTIME_PORT
from ankka.operator.identity import WrongRuntimeIdentity
from ankka.operator.kube import Kube, KubeError
from ankka.operator.objects import Obj

__all__ = ["Route", "Unreachable", "route_to", "send"]

_TIMEOUT = 60.0


class Unreachable(KubeError):
    """The runtime could not be reached, or would not be trusted (what to do is said); the
    cluster's side must act, as for the API server's own failures."""

    kind = "runtime_unreachable"
    status = 502

    def __init__(self, message: str) -> None:
        AnkkaError.__init__(self, message)
        self.http_status = 0
        self.detail = message


@dataclass(frozen=True, slots=True)
class Route:
    """Where and how one decision goes."""

    where: str  # for messages: the address, or the pod
    host: str = ""
    port: int = 0
    pod: str = ""  # port-forward to this pod of the namespace
    namespace: str = ""
    tls: ssl.SSLContext | None = None
    server_name: str = ""
    expected_uri: str = ""
    token: str = ""


def _context(ca_pem: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # the identity is the URI SAN, checked after the handshake
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=ca_pem)
    return context


async def _ready_pod(kube: Kube, namespace: str, agent: str) -> str:
    selector = f"app.kubernetes.io/name=agent,app.kubernetes.io/instance={agent}"
    for pod in await kube.list("v1", "Pod", namespace, labels=selector):
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        if ready and not pod["metadata"].get("deletionTimestamp"):
            return str(pod["metadata"]["name"])
    raise Unreachable(
        f"Agent {namespace}/{agent} has no ready runtime pod to reach "
        f"(kubectl get pods -n {namespace} -l {selector})"
    )


async def route_to(
    kube: Kube, namespace: str, agent: str, body: Obj, *, address: str | None, via: str
) -> Route:
    """The route to the Agent's runtime (``body`` is the Agent as the API server has it)."""
    if address and address.startswith("http://"):
        parts = urlsplit(address)
        return Route(where=address, host=parts.hostname or "", port=parts.port or 80)
    ca = ((body.get("status") or {}).get("certificateAuthority")) or ""
    if not ca:
        raise Unreachable(
            f"Agent {namespace}/{agent} has no status.certificateAuthority yet; wait for the "
            "operator to render it (kubectl get agent -o yaml)"
        )
    uri = certs.agent_uri(namespace, agent)
    delegate = access.approver_name(agent)
    try:
        token = await kube.create_token(namespace, delegate, audience=uri)
    except KubeError as exc:
        if exc.http_status != 403:
            raise
        raise Refused(
            f"you may not decide through {namespace}/{delegate}: no 'create' on "
            f"'serviceaccounts/token' named {delegate} in {namespace} (docs/operator.md, "
            "Approvals)",
            by="the cluster's RBAC",
        ) from exc
    common = Route(
        where="",
        tls=_context(str(ca)),
        server_name=f"{agent}.{namespace}.svc",
        expected_uri=uri,
        token=token,
    )
    if address:
        parts = urlsplit(address)
        return replace(common, where=address, host=parts.hostname or "", port=parts.port or 443)
    if via == "service":
        host = f"{agent}.{namespace}.svc"
        return replace(common, where=f"https://{host}:443", host=host, port=443)
    pod = await _ready_pod(kube, namespace, agent)
    return replace(
        common, where=f"pod {namespace}/{pod}", pod=pod, namespace=namespace, port=RUNTIME_PORT
    )


def _open(kube: Kube, route: Route) -> tuple[socket.socket, Any]:
    if route.pod:
        sock, forward = kube.port_forward(route.namespace, route.pod, route.port)
        return sock, forward
    return socket.create_connection((route.host, route.port), timeout=_TIMEOUT), None


def _exchange(
    kube: Kube, route: Route, path: str, body: Obj, headers: dict[str, str]
) -> tuple[int, Any]:
    raw, forward = _open(kube, route)
    try:
        sock: socket.socket = raw
        if route.tls is not None:
            tls = route.tls.wrap_socket(raw, server_hostname=route.server_name)
            presented = peer_uri_sans(tls.getpeercert())
            if route.expected_uri not in presented:  # before the token leaves
                raise WrongRuntimeIdentity(route.expected_uri, presented)
            sock = tls
            headers = {**headers, "Authorization": f"Bearer {route.token}"}
        connection = http.client.HTTPConnection(route.server_name or route.host, timeout=_TIMEOUT)
        connection.sock = sock
        payload = json.dumps(body).encode()
        connection.request(
            "POST", path, body=payload, headers={**headers, "Content-Type": "application/json"}
        )
        answer = connection.getresponse()
        data = answer.read()
        try:
            return answer.status, json.loads(data) if data else {}
        except ValueError:
            return answer.status, {"error": {"message": data[:200].decode(errors="replace")}}
    finally:
        raw.close()
        if forward is not None:
            forward.close()


async def send(
    kube: Kube, route: Route, path: str, body: Obj, headers: dict[str, str]
) -> tuple[int, Any]:
    """POST ``body`` to ``path`` of the runtime on ``route``: (status, the JSON answer)."""
    try:
        return await asyncio.get_running_loop().run_in_executor(
            None, _exchange, kube, route, path, body, headers
        )
    except WrongRuntimeIdentity as exc:
        raise Unreachable(f"refused the runtime at {route.where}: {exc}") from exc
    except KubeError as exc:
        if route.pod and "Handshake status 403" in exc.detail:
            raise Refused(
                f"you may not port-forward to pods in {route.namespace}: no 'get' on "
                f"'pods/portforward' there (or pass --via service from inside the cluster)",
                by="the cluster's RBAC",
            ) from exc
        raise
    except ssl.SSLCertVerificationError as exc:
        raise Unreachable(
            f"refused the runtime at {route.where}: its certificate is not one the platform CA "
            f"issued ({exc.verify_message or exc})"
        ) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(
            f"cannot reach the runtime at {route.where}: {type(exc).__name__}: {exc}"
        ) from exc
