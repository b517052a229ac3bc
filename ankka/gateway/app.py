"""The gateway's ASGI app and the object that owns everything it needs while it runs.

:class:`Gateway` is an async context manager: entering it opens the pooled upstream client and
starts the maintenance loop (probing, re-probing, models-file reload); leaving it stops both.
The instance is itself the ASGI app, routed by hand because the chat path is on every model
call and a router would be the largest cost on it.

The chat path, in order: read the body (413 past the limit), read what the decision needs
(400 for malformed JSON or no ``model``), find the model (404), refuse what it cannot serve
(400 ``model_lacks_capability``, nothing sent), wait for a slot (429 past the queue), forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

import httptools
import httpx2

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.upstream import Pool
from ankka.api.capabilities import to_ollama_show
from ankka.gateway import answers, check
from ankka.gateway.callers import UNIDENTIFIED, Reservation, allowed
from ankka.gateway.forward import Exchange
from ankka.gateway.limits import QueueFull
from ankka.gateway.metrics import CONTENT_TYPE, PROVIDER_NAMES, UNKNOWN_MODEL, GatewayMetrics
from ankka.gateway.models_file import Models, ModelsFile
from ankka.gateway.openapi import DOCUMENT
from ankka.gateway.registry import Registry, Upstream
from ankka.gateway.wire import (
    WATCH_DISCONNECT,
    Receive,
    Scope,
    Send,
    TooLarge,
    caller_of,
    read_body,
    send_bytes,
    send_error,
    send_json,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ankka.gateway.spans import GatewaySpans

__all__ = ["DEFAULT_MAX_BODY", "ROUTES", "Gateway"]

DEFAULT_MAX_BODY = 16 * 1024 * 1024  # room for a few inline images; past it, 413
_OPERATIONS = frozenset({"/healthz", "/readyz", "/metrics"})
_METHODS = {  # every path the gateway serves and its one method (for 405's Allow)
    "/v1/chat/completions": "POST",
    "/v1/models": "GET",
    "/api/show": "POST",
    "/openapi.json": "GET",
    **{path: "GET" for path in _OPERATIONS},
}
ROUTES = frozenset(_METHODS)  # what a server span may be named after (the paths are fixed)


def _show_error(message: str) -> dict[str, Any]:
    """An ``/api/show`` refusal, in Ollama's shape (:class:`~ankka.gateway.answers.ShowError`)."""
    return answers.ShowError(error=message).model_dump()


class _Checked(NamedTuple):
    """A checked chat request: the model's upstream, the body to send, what was read, who."""

    upstream: Upstream
    body: bytes
    request: check.Inspected
    caller: str


_UNIDENTIFIED = (
    "the client certificate names no ankka:// identity (a URI SAN such as "
    "ankka://service/<namespace>/<agent>); use a certificate the platform issued"
)


def _not_allowed(caller: str, model: str) -> str:
    return (
        f"caller {caller!r} may not use model {model!r}: the models file lists who may (its "
        "'callers', rendered from each Agent's spec.models); declare the model in the calling "
        "Agent"
    )


class Gateway:
    """The checked model gateway: ``async with Gateway(...) as app`` and serve ``app``."""

    def __init__(
        self,
        models: Models,
        *,
        models_file: ModelsFile | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        clock: Clock | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.max_body = max_body
        # The gateway's own spans, only when tracing is on (None costs one test per request).
        self._spans: GatewaySpans | None = None
        if tracer is not None:
            from ankka.gateway.spans import GatewaySpans

            self._spans = GatewaySpans(tracer)
        self._clock: Clock = clock or SystemClock()
        self.metrics = GatewayMetrics()
        self._models_file = models_file
        self._initial = models
        self._client: httpx2.AsyncClient | None = None  # probes only: rare, not on the hot path
        self._pool = Pool(parser=httptools.HttpResponseParser)
        self._registry: Registry | None = None
        self._maintainer: asyncio.Task[None] | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            raise RuntimeError("the gateway is not running: use it as `async with Gateway(...)`")
        return self._registry

    async def __aenter__(self) -> Gateway:
        self._client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(10.0),
            limits=httpx2.Limits(max_connections=64, max_keepalive_connections=0),
        )
        self._registry = Registry(self._initial, self._client, clock=self._clock)
        self._maintainer = asyncio.get_running_loop().create_task(
            self._registry.maintain(self._models_file), name="ankka-gateway-maintain"
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._maintainer is not None:
            self._maintainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintainer
        await self._pool.aclose()
        if self._client is not None:
            await self._client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websockets: nothing to do
        path: str = scope["path"]
        method: str = scope["method"]
        if path == "/v1/chat/completions" and method == "POST":
            await self._chat(scope, receive, send)
        elif path == "/v1/models" and method == "GET":
            await self._models(scope, send)
        elif path == "/api/show" and method == "POST":
            await self._show(scope, receive, send)
        elif path in _OPERATIONS and method == "GET":
            status, content_type, body = self.operations(path)
            await send_bytes(send, status, body, content_type=content_type)
        elif path == "/openapi.json" and method == "GET":
            await send_json(send, 200, DOCUMENT)
        elif path in _METHODS:
            allowed_method = _METHODS[path]
            await send_error(
                send,
                405,
                f"{method} is not served at {path}; use {allowed_method}",
                code="method_not_allowed",
                headers=[(b"allow", allowed_method.encode())],
            )
        else:
            await send_error(
                send,
                404,
                f"no such endpoint: {method} {path}; the gateway serves POST "
                "/v1/chat/completions, GET /v1/models and POST /api/show",
                code="unknown_endpoint",
            )

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        spans = self._spans
        if spans is None:
            checked = await self._check(scope, receive, send)
        else:
            with spans.check() as span:
                checked = await self._check(scope, receive, send)
                if checked is None:
                    span.set_attribute("ankka.gateway.forwarded", False)
                else:  # in one call: the SDK's cost is per call (docs/benchmarks.md)
                    span.set_attributes(
                        {
                            "ankka.gateway.forwarded": True,
                            "ankka.gateway.model": checked.upstream.name,
                            "ankka.caller": checked.caller,
                        }
                    )
        if checked is not None:
            await self._send_upstream(checked, scope, receive, send)

    async def _refuse(
        self,
        send: Send,
        status: int,
        message: str,
        *,
        model: str,
        caller: str,
        reason: str,
        code: str,
        param: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Count a refusal (``reason``) and answer it in OpenAI's error shape (``code``)."""
        self.metrics.refused(model, caller, reason)
        spans = self._spans
        if spans is None:
            await send_error(send, status, message, code=code, param=param, headers=headers or ())
            return
        with spans.refusal(
            model=model, caller=caller, reason=reason, code=code, status=status, message=message
        ):
            await send_error(send, status, message, code=code, param=param, headers=headers or ())

    async def _check(self, scope: Scope, receive: Receive, send: Send) -> _Checked | None:
        """Read and check a chat request: what to send where, or ``None`` once answered."""
        caller = caller_of(scope)
        if caller == UNIDENTIFIED:
            await self._refuse(
                send,
                403,
                _UNIDENTIFIED,
                model=UNKNOWN_MODEL,
                caller=caller,
                reason="caller_unidentified",
                code="caller_unidentified",
            )
            return None
        try:
            raw = await read_body(scope, receive, self.max_body)
        except TooLarge as exc:
            await self._refuse(
                send,
                413,
                f"the request body is larger than the gateway's limit of {exc.limit} bytes; "
                "send smaller images or fewer messages",
                model=UNKNOWN_MODEL,
                caller=caller,
                reason="body_too_large",
                code="request_too_large",
            )
            return None
        except ConnectionResetError:  # the caller left mid-body: normal, counted, not traced
            self.metrics.caller_left(UNKNOWN_MODEL, caller)
            return None
        try:
            request = check.inspect(raw)
        except check.BadRequest as exc:
            await self._refuse(
                send,
                400,
                exc.message,
                model=UNKNOWN_MODEL,
                caller=caller,
                reason=exc.code,
                code=exc.code,
                param=exc.param,
            )
            return None
        upstream = self.registry.get(request.model)
        if upstream is None:
            served = ", ".join(sorted(self.registry.upstreams)) or "none"
            await self._refuse(
                send,
                404,
                f"the gateway serves no model {request.model!r}; it serves: {served}",
                model=UNKNOWN_MODEL,
                caller=caller,
                reason="unknown_model",
                code="model_not_found",
                param="model",
            )
            return None
        self.metrics.of(upstream.name, caller).requests.inc()
        if not allowed(upstream.spec.callers, caller):
            await self._refuse(
                send,
                403,
                _not_allowed(caller, upstream.name),
                model=upstream.name,
                caller=caller,
                reason="caller_not_allowed",
                code="caller_not_allowed",
                param="model",
            )
            return None
        if await self._refused(upstream, request, caller, send):
            return None
        try:
            sent = check.forward_body(raw, request, upstream_model=upstream.spec.upstream_model)
        except check.BadRequest as exc:
            await self._refuse(
                send,
                400,
                exc.message,
                model=upstream.name,
                caller=caller,
                reason=exc.code,
                code=exc.code,
                param=exc.param,
            )
            return None
        return _Checked(upstream, sent, request, caller)

    async def _refused(
        self, upstream: Upstream, request: check.Inspected, caller: str, send: Send
    ) -> bool:
        """Answer a request the model cannot serve (or not yet); True when it was answered."""
        name = upstream.name
        caps = upstream.capabilities
        if caps is None:
            why = upstream.probe_error or "it has not been probed yet"
            await self._refuse(
                send,
                503,
                f"model {name!r} is not ready: what it can do is not known ({why}); "
                "try again shortly",
                model=name,
                caller=caller,
                reason="model_not_ready",
                code="model_not_ready",
                headers=[(b"retry-after", b"2")],
            )
            return True
        refused = check.refusal(caps, request)
        if refused is None:
            return False
        await self._refuse(
            send,
            400,
            f"model {name!r} lacks the capability {refused.capability!r} this request "
            f"needs (from {refused.param!r}); it offers: {', '.join(caps.words())}. "
            "Remove that part of the request or choose a model that offers it.",
            model=name,
            caller=caller,
            reason="model_lacks_capability",
            code="model_lacks_capability",
            param=refused.param,
        )
        return True

    async def _send_upstream(
        self, checked: _Checked, scope: Scope, receive: Receive, send: Send
    ) -> None:
        upstream, body, request, caller = checked
        spec = upstream.spec
        limit = upstream.limit
        per_caller = upstream.callers_in_flight
        bound = len(body) + (
            spec.default_max_tokens if request.max_tokens is None else request.max_tokens
        )
        held = await self._reserve(upstream, caller, bound, send)
        if held is None:
            return
        spent = 0
        try:
            if not per_caller.enter(caller):
                busy = f"already has {per_caller.limit} request(s) in flight on model"
                await self._busy(send, spec.name, caller, "caller_busy", busy)
                return
            try:
                await limit.acquire()
            except QueueFull as exc:
                per_caller.leave(caller)
                busy = f"{exc.limit} request(s) in flight and {exc.queue} waiting"
                await self._busy(send, spec.name, caller, "queue_full", busy)
                return
            except BaseException:  # cancelled while waiting in line: the caller left
                per_caller.leave(caller)
                raise
            gauge = self.metrics.in_flight_of(spec.name)
            gauge.inc()
            try:
                provider = PROVIDER_NAMES[spec.kind]
                exchange = Exchange(
                    pool=self._pool,
                    spec=spec,
                    endpoint=upstream.endpoint,
                    body=body,
                    stream=request.stream,
                    receive=receive,
                    send=send,
                    metrics=self.metrics,
                    caller=caller,
                    clock=self._clock,
                    genai=self.metrics.genai_of(provider, spec.upstream_model),
                    watch=scope.get(WATCH_DISCONNECT),
                )
                if self._spans is None:
                    await exchange.run()
                else:
                    await self._spans.upstream(exchange, provider=provider)
                spent = exchange.spent(bound)
                if exchange.upstream_failed:
                    self.registry.upstream_failed(upstream)
            finally:
                gauge.dec()
                limit.release()
                per_caller.leave(caller)
        finally:
            upstream.token_budget.settle(held, spent)

    async def _reserve(
        self, upstream: Upstream, caller: str, bound: int, send: Send
    ) -> Reservation | None:
        """Hold ``bound`` of the caller's tokens per minute; None when refused (answered 429)."""
        budget = upstream.token_budget
        held = budget.reserve(caller, bound)
        if not isinstance(held, float):
            return held
        wait = str(max(1, math.ceil(held)))
        await self._refuse(
            send,
            429,
            f"caller {caller!r} spent or holds its {budget.limit} tokens per minute on model "
            f"{upstream.name!r} (tokens_per_minute_per_caller); retry in {wait} s",
            model=upstream.name,
            caller=caller,
            reason="caller_over_token_budget",
            code="caller_over_token_budget",
            headers=[(b"retry-after", wait.encode())],
        )
        return None

    async def _busy(self, send: Send, model: str, caller: str, reason: str, busy: str) -> None:
        """429 with ``Retry-After: 1``: a slot frees when a request in flight ends."""
        if reason == "caller_busy":
            code = "caller_busy"
            message = f"caller {caller!r} {busy} {model!r} (max_in_flight_per_caller)"
        else:
            code, message = "model_busy", f"model {model!r} is busy: {busy}"
        await self._refuse(
            send,
            429,
            message + "; retry after a second",
            model=model,
            caller=caller,
            reason=reason,
            code=code,
            headers=[(b"retry-after", b"1")],
        )

    async def _models(self, scope: Scope, send: Send) -> None:
        caller = caller_of(scope)
        if caller == UNIDENTIFIED:
            await send_error(send, 403, _UNIDENTIFIED, code="caller_unidentified")
            return
        await send_json(send, 200, self._list_models(caller))

    def _list_models(self, caller: str) -> dict[str, Any]:
        """The models ``caller`` may use (issue 31, item 5: only those)."""
        data = []
        for upstream in self.registry.upstreams.values():
            if not allowed(upstream.spec.callers, caller):
                continue
            entry: dict[str, Any] = {
                "id": upstream.name,
                "object": "model",
                "created": 0,
                "owned_by": "ankka",
            }
            if upstream.capabilities is not None:
                entry["capabilities"] = upstream.capabilities.words()
            data.append(entry)
        return answers.ModelList.model_validate({"object": "list", "data": data}).model_dump(
            exclude_unset=True
        )

    async def _show(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = caller_of(scope)
        if caller == UNIDENTIFIED:
            await send_json(send, 403, _show_error(_UNIDENTIFIED))
            return
        try:
            body = json.loads(await read_body(scope, receive, 64 * 1024))
        except (ValueError, RecursionError, TooLarge, ConnectionResetError):
            await send_json(send, 400, _show_error('send a JSON object {"model": "<name>"}'))
            return
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        upstream = self.registry.get(str(name)) if isinstance(name, str) else None
        if upstream is None:
            await send_json(send, 404, _show_error(f"model '{name}' not found"))
            return
        if not allowed(upstream.spec.callers, caller):
            await send_json(send, 403, _show_error(_not_allowed(caller, upstream.name)))
            return
        if upstream.capabilities is None:
            why = upstream.probe_error or "not probed yet"
            await send_json(send, 503, _show_error(f"model '{name}' is not ready: {why}"))
            return
        shown = answers.Show.model_validate(to_ollama_show(upstream.capabilities))
        await send_json(send, 200, shown.model_dump(exclude_unset=True))

    def operations(self, path: str) -> tuple[int, bytes, bytes]:
        """(status, content type, body) for /healthz, /readyz or /metrics.

        Shared by the app and the plain-HTTP health port (:mod:`ankka._kernel.health`), which
        kubelet probes and Prometheus scrape without a client certificate.
        """
        if path == "/metrics":
            return 200, CONTENT_TYPE.encode(), self.metrics.render()
        if path == "/healthz":
            return 200, b"application/json", b'{"ok": true}'
        models = {
            u.name: {
                "probed": u.probed,
                "capabilities": u.capabilities.words() if u.capabilities else None,
                "error": u.probe_error,
            }
            for u in self.registry.upstreams.values()
        }
        ready = self.registry.ready()
        readiness = answers.Readiness.model_validate({"ready": ready, "models": models})
        body = json.dumps(readiness.model_dump()).encode()
        return (200 if ready else 503), b"application/json", body
