"""The operator's one seam to the Kubernetes API: apply, get, list, create, patch status, delete.

Why a seam: handlers stay thin and every request goes through one place that counts requests
(the scale benchmark reports requests per reconcile) and translates the client's exceptions
into :class:`KubeError`, which says what was asked and what the API server answered.

Children are written with server-side apply (one field manager, forced), so a reconcile run
twice, or by a restarted operator, converges on the same objects and never duplicates them;
a release's replicas alone are a merge patch (:meth:`Kube.patch`), which the next forced
apply takes back.
The synchronous ``kubernetes`` client does the transport (kubeconfig, TLS, tokens); its calls
run in worker threads, at most ``_PARALLEL`` at once, handed out by priority: the models'
probes' reads and status writes first (a model turning Served is what releases its Agents),
then what releases or renders something, then Agents' status patches, then Events (notices
nobody waits on), so a burst of releases is not queued behind its own bookkeeping and the
next model's Served is not queued behind the last one's releases.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import json
import os
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from ankka._kernel.errors import ConfigurationError, DependencyFailed
from ankka.operator.objects import Obj

__all__ = ["BACKGROUND", "FIRST", "LATER", "SOONEST", "Kube", "KubeError", "plural_of"]

_PARALLEL = 32  # requests in flight at once (threads and pooled connections)
SOONEST, FIRST, LATER, BACKGROUND = -1, 0, 1, 2  # request priorities: lower goes first

_PLURALS = {
    "ConfigMap": "configmaps",
    "Deployment": "deployments",
    "Secret": "secrets",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Agent": "agents",
    "InstallationModel": "installationmodels",
    "Task": "tasks",
    "Team": "teams",
    "Event": "events",
    "Pod": "pods",
    "NetworkPolicy": "networkpolicies",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
}


def plural_of(kind: str) -> str:
    try:
        return _PLURALS[kind]
    except KeyError:
        raise ValueError(f"the operator does not manage kind {kind!r}") from None


class KubeError(DependencyFailed):
    """The API server refused or failed a request; whoever runs the cluster (or grants the
    operator's RBAC) must act. ``http_status`` is the API server's status (0: no answer)."""

    kind = "kube_error"
    status = 502

    def __init__(self, what: str, http_status: int, detail: str) -> None:
        super().__init__(f"{what}: HTTP {http_status}: {detail}")
        self.http_status = http_status
        self.detail = detail


def _path(api_version: str, plural: str, namespace: str | None, name: str | None = None) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace is not None:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    return base + (f"/{name}" if name else "")


class _Gate:
    """At most ``slots`` holders at once; waiters are let in by (priority, arrival)."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, priority: int) -> AsyncIterator[None]:
        if self._free > 0 and not self._waiting:
            self._free -= 1
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (priority, next(self._order), granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # let in, but cancelled before it could go: pass it on
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            granted = heapq.heappop(self._waiting)[2]
            if not granted.done():  # a cancelled waiter is skipped
                granted.set_result(None)
                return
        self._free += 1


class Kube:
    """Async calls over a ``kubernetes`` ``ApiClient``; ``requests`` counts what was sent."""

    def __init__(self, api: k8s_client.ApiClient, *, field_manager: str) -> None:
        self._api = api
        self._field_manager = field_manager
        # Its own threads: asyncio's default pool has cores+4 threads, which serialised the
        # release of many held Agents at once (bench/operator_scale.py).
        self._threads = ThreadPoolExecutor(max_workers=_PARALLEL, thread_name_prefix="kube")
        self._gate = _Gate(_PARALLEL)
        self.requests = 0

    @classmethod
    def from_environment(cls, *, field_manager: str) -> Kube:
        """In a pod: its service account; elsewhere: ``$KUBECONFIG`` or ``~/.kube/config``."""
        configuration = k8s_client.Configuration()
        configuration.connection_pool_maxsize = _PARALLEL
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except k8s_config.ConfigException:
            try:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            except (k8s_config.ConfigException, OSError, ValueError) as exc:
                where = os.environ.get("KUBECONFIG") or "~/.kube/config"
                raise ConfigurationError(
                    f"no Kubernetes credentials: not in a pod, and the kubeconfig {where} "
                    f"does not load ({exc}); set KUBECONFIG to a kubeconfig file, or run "
                    "`kubectl config view` to check yours"
                ) from None
        api = k8s_client.ApiClient(configuration)
        api.user_agent = field_manager  # names the operator in audit logs and managedFields
        return cls(api, field_manager=field_manager)

    def close(self) -> None:
        self._threads.shutdown(wait=True)
        self._api.close()  # type: ignore[no-untyped-call]

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        self.requests += 1
        what = f"{method} {path}"
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _, url, headers, _, _ = self._api.param_serialize(
            method=method,
            resource_path=path,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        if query:
            url += "?" + urlencode(query)
        try:
            # The client serialises a dict body as JSON for +json and +yaml types alike.
            response = self._api.call_api(method, url, header_params=headers, body=body)
            raw = response.read()  # type: ignore[no-untyped-call]
        except k8s_client.ApiException as exc:
            raise KubeError(what, exc.status or 0, str(exc.reason)) from exc
        except Exception as exc:  # urllib3 transport errors
            raise KubeError(what, 0, f"{type(exc).__name__}: {exc}") from exc
        data = json.loads(raw) if raw else None
        if response.status >= 400:
            message = data.get("message", "") if isinstance(data, dict) else str(raw[:200])
            raise KubeError(what, response.status, message)
        return data

    async def _run(self, method: str, path: str, *, priority: int = FIRST, **kwargs: Any) -> Any:
        call = functools.partial(self._call, method, path, **kwargs)
        async with self._gate.slot(priority):
            return await asyncio.get_running_loop().run_in_executor(self._threads, call)

    async def apply(self, obj: Obj) -> Obj:
        """Server-side apply ``obj`` (creating or updating it) and return what is stored."""
        meta = obj["metadata"]
        path = _path(obj["apiVersion"], plural_of(obj["kind"]), meta.get("namespace"), meta["name"])
        query = {"fieldManager": self._field_manager, "force": "true"}
        result: Obj = await self._run(
            "PATCH", path, query=query, body=obj, content_type="application/apply-patch+yaml"
        )
        return result

    async def create(self, obj: Obj, *, priority: int | None = None) -> Obj | None:
        """Create ``obj``; None when it already exists (someone else created it first).
        Events go last unless ``priority`` says otherwise."""
        meta = obj["metadata"]
        path = _path(obj["apiVersion"], plural_of(obj["kind"]), meta.get("namespace"))
        try:
            result: Obj = await self._run(
                "POST",
                path,
                query={"fieldManager": self._field_manager},
                body=obj,
                priority=(
                    priority
                    if priority is not None
                    else BACKGROUND
                    if obj["kind"] == "Event"
                    else FIRST
                ),
            )
        except KubeError as exc:
            if exc.http_status == 409:
                return None
            raise
        return result

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        try:
            result: Obj = await self._run(
                "GET", _path(api_version, plural_of(kind), namespace, name)
            )
        except KubeError as exc:
            if exc.http_status == 404:
                return None
            raise
        return result

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        labels: str = "",
        priority: int = FIRST,
    ) -> list[Obj]:
        query = {"labelSelector": labels} if labels else None
        path = _path(api_version, plural_of(kind), namespace)
        result = await self._run("GET", path, query=query, priority=priority)
        items: list[Obj] = result.get("items") or []
        return items

    async def create_token(
        self, namespace: str, account: str, *, audience: str, seconds: int = 600
    ) -> str:
        """A token of ServiceAccount ``account`` for ``audience`` (the TokenRequest API: the
        caller needs ``create`` on ``serviceaccounts/token`` of that account)."""
        path = _path("v1", "serviceaccounts", namespace, account) + "/token"
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [audience], "expirationSeconds": seconds},
        }
        result: Obj = await self._run("POST", path, body=body)
        token = (result.get("status") or {}).get("token")
        if not isinstance(token, str) or not token:
            raise KubeError(f"POST {path}", 0, "the API server answered no token")
        return token

    def port_forward(self, namespace: str, pod: str, port: int) -> tuple[Any, Any]:
        """A socket to ``port`` of ``pod`` through the API server (``pods/portforward``,
        a WebSocket the client's own ``kubernetes.stream`` runs in a thread), and the
        forwarding, which the caller closes. Blocking: call it from a worker thread."""
        from kubernetes.stream import portforward

        core = k8s_client.CoreV1Api(self._api)
        try:
            forward = portforward(
                core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
            )
        except k8s_client.ApiException as exc:
            what = f"port-forward to {namespace}/{pod}:{port}"
            raise KubeError(what, exc.status or 0, str(exc.reason)) from exc
        return forward.socket(port), forward

    async def review(self, group_version: str, plural: str, body: Obj) -> Obj:
        """Create a review (a SelfSubjectAccessReview or SelfSubjectReview): the API
        server's answer about the caller, stored nowhere."""
        result: Obj = await self._run("POST", _path(group_version, plural, None), body=body)
        return result

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        priority: int = FIRST,
    ) -> None:
        """Merge ``status`` into the status subresource (absent fields are left alone)."""
        path = _path(api_version, plural_of(kind), namespace, name) + "/status"
        await self._run(
            "PATCH",
            path,
            body={"status": status},
            content_type="application/merge-patch+json",
            priority=priority,
        )

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        priority: int = FIRST,
    ) -> bool:
        """Merge-patch ``body`` into one object (or its ``subresource``, e.g. ``scale``) as
        this field manager; False when there is no such object. Cheaper for the API server
        than a server-side apply of the whole object (bench/kube_write_rate.py --kinds): the
        release's replicas go this way, the next apply (forced) takes the fields back."""
        path = _path(api_version, plural_of(kind), namespace, name)
        try:
            await self._run(
                "PATCH",
                path + (f"/{subresource}" if subresource else ""),
                query={"fieldManager": self._field_manager},
                body=body,
                content_type="application/merge-patch+json",
                priority=priority,
            )
        except KubeError as exc:
            if exc.http_status == 404:
                return False
            raise
        return True

    async def json_patch(
        self, api_version: str, kind: str, namespace: str, name: str, ops: Sequence[Obj]
    ) -> bool:
        """Apply a JSON patch (RFC 6902, e.g. a ``test`` then a ``replace``) to one object;
        False when there is no such object, or a ``test`` failed (it changed meanwhile)."""
        path = _path(api_version, plural_of(kind), namespace, name)
        try:
            await self._run(
                "PATCH",
                path,
                query={"fieldManager": self._field_manager},
                body=[dict(op) for op in ops],
                content_type="application/json-patch+json",
            )
        except KubeError as exc:
            if exc.http_status in (404, 422):
                return False
            raise
        return True

    async def scale_to_zero(self, namespace: str, name: str) -> bool:
        """Set a Deployment's replicas to 0 (merge patch); False when there is none."""
        return await self.patch("apps/v1", "Deployment", namespace, name, {"spec": {"replicas": 0}})

    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        """Delete one object (children in the background); False when it was already gone."""
        path = _path(api_version, plural_of(kind), namespace, name)
        try:
            await self._run("DELETE", path, body={"propagationPolicy": "Background"})
        except KubeError as exc:
            if exc.http_status == 404:
                return False
            raise
        return True
