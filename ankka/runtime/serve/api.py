"""The runtime API's FastAPI frame: its routes' class, its errors, its document.

:func:`ankka.runtime.serve.http.create_app` builds a :class:`RuntimeAPI` (FastAPI, on the
Starlette the console and A2A routes use too) from routers whose routes are :class:`ApiRoute`:

- **bodies** are read as JSON whatever their ``Content-Type`` says (``curl -d`` sends a form
  type), after the whole body arrived through the bounds in front
  (:mod:`ankka.runtime.serve.bounds`: a body past the limit, or a caller who left, is answered
  as itself, not as a body FastAPI could not parse);
- **every error** is ``{"error": {"type", "message"}}`` (:class:`~ankka.runtime.serve.wire.Error`):
  ankka's own errors with their status, FastAPI's validation errors as ankka's: a body that
  is not JSON (or nested deeper than the decoder takes, or empty) 400 ``invalid_json``, one
  that does not fit, or a query value out of range, 422 ``invalid_request`` naming the field;
  routing's 404 and 405 (``Allow`` kept); anything unexpected 500 ``internal_error``, logged
  once, without the values it was about;
- **every answer** passes through its route's response model and sends only the fields the
  route set (:mod:`ankka.runtime.serve.wire`); an answer of another status than the route's
  own goes through :func:`sent`, checked the same way;
- **the document** at ``/openapi.json`` is FastAPI's, with the ``{agent}`` values this
  service declares listed as each path's enum. A ``GET`` route answers ``HEAD`` too, as
  Starlette's routes do (not a second operation in the document).
"""

from __future__ import annotations

import logging
import math
import typing
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from ankka._kernel.errors import AnkkaError, InvalidJSON, RequestError, StoreError
from ankka.runtime.serve.wire import Body, Error, ErrorDetail, Wire

__all__ = [
    "ApiRoute",
    "EventStream",
    "events",
    "RuntimeAPI",
    "errors",
    "error_json",
    "sent",
]

log = logging.getLogger("ankka.runtime")

_ROUTING = {404: "not_found", 405: "method_not_allowed"}
_STATUS_WORDS = {
    400: "the request cannot be read",
    401: "no valid bearer token, when the server takes tokens",
    403: "not permitted, or refused (a guardrail)",
    404: "no such agent, session object or endpoint",
    409: "conflicts with what is recorded",
    413: "the body is larger than --max-body-bytes",
    422: "the body, a query value or an id does not fit (the message names it)",
    429: "past a bound of the caller's or the runtime's (Retry-After: when to try again)",
    500: "a configuration error, or the runtime failed unexpectedly",
    502: "the model or the judgment failed",
    503: "a dependency is unavailable (the store, the token review, a judged guardrail)",
    504: "the model timed out",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that can answer each of ``statuses`` with an error."""
    return {s: {"model": Error, "description": _STATUS_WORDS[s]} for s in statuses}


def sent(model: type[Wire], data: Mapping[str, Any], status: int) -> Response:
    """``data`` through ``model`` (as a route's own answer goes), answered with ``status``."""
    checked = model.model_validate(data)
    return Response(
        checked.model_dump_json(exclude_unset=True),
        status_code=status,
        media_type="application/json",
    )


def events(description: str, *names: str) -> dict[str, Any]:
    """A ``200`` of server-sent events named ``names``, each event's ``data`` one JSON object
    (as schemathesis reads a stream: one event at a time against the schema)."""
    event = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": list(names)},
            "data": {"type": "string", "contentMediaType": "application/json"},
            "id": {"type": "string", "description": "a number growing within the process"},
        },
    }
    return {"description": description, "content": {"text/event-stream": {"schema": event}}}


class EventStream(StreamingResponse):
    """Server-sent events (documented as ``text/event-stream``)."""

    media_type = "text/event-stream"


def _body_model(endpoint: Callable[..., Any]) -> type[Body] | None:
    hints = typing.get_type_hints(endpoint)
    found = [h for h in hints.values() if isinstance(h, type) and issubclass(h, Body)]
    return found[0] if found else None


class ApiRoute(APIRoute):
    """A route of the runtime's API: its body read as JSON after the bounds let it through;
    its answer only the fields it set; ``GET`` also answers ``HEAD``."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        self.body_model = _body_model(endpoint)  # before: the handler is built in __init__
        super().__init__(path, endpoint, **kwargs)

    def _as_get(self, scope: Scope) -> Scope:
        if scope.get("method") == "HEAD" and "GET" in (self.methods or ()):
            return {**scope, "method": "GET"}  # the server leaves the body out
        return scope

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        return super().matches(self._as_get(scope))

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().handle(self._as_get(scope), receive, send)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_model is None:
            return handler

        async def read_as_json(request: Request) -> Response:
            scope = request.scope
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            headers.append((b"content-type", b"application/json"))
            request = Request({**scope, "headers": headers}, request.receive)
            await request.body()  # the bounds' own errors are raised here, as themselves
            return await handler(request)

        return read_as_json


def error_json(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The one mapping from an exception to the API's error: its status and its body."""
    if isinstance(exc, AnkkaError):
        return exc.status, _error(exc.kind, str(exc))
    if isinstance(exc, HTTPException) and exc.status_code in _ROUTING:
        allow = (exc.headers or {}).get("Allow")
        message = f"use {allow} here" if allow else "no such endpoint; see GET /openapi.json"
        return exc.status_code, _error(_ROUTING[exc.status_code], message)
    if isinstance(exc, ResponseValidationError):
        # Only where and what: the values are the caller's data (a conversation, a result).
        where = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors())
        log.error("an answer did not fit its model: %s", where)
    else:
        log.error("unexpected failure", exc_info=exc)
    return 500, _error("internal_error", "the runtime failed unexpectedly; see its log")


def _error(kind: str, message: str) -> dict[str, Any]:
    return Error(error=ErrorDetail(type=kind, message=message)).model_dump()


def _where(loc: Iterable[object]) -> str:
    return ".".join(str(p) for p in loc)


def _shape(request: Request) -> str:
    model = getattr(request.scope.get("route"), "body_model", None)
    return model.shape if model is not None else "a JSON object"


def _said(problem: Mapping[str, Any]) -> str:
    """A problem in words: a validator's own sentence as it wrote it, else pydantic's."""
    error = (problem.get("ctx") or {}).get("error")
    if problem.get("type") == "value_error" and error is not None:
        return str(error)
    return str(problem.get("msg", ""))


def _refusal(request: Request, exc: RequestValidationError) -> AnkkaError:
    """What FastAPI's validation found, as ankka's error: the body's problems named against
    its shape, each query or path value by its name."""
    problems = list(exc.errors())
    shape = _shape(request)
    for problem in problems:
        loc = tuple(problem.get("loc", ()))
        if problem.get("type") == "json_invalid":
            at = f" (at character {loc[1]})" if len(loc) > 1 else ""
            reason = (problem.get("ctx") or {}).get("error", "")
            return InvalidJSON(f"the body is not valid JSON: {reason}{at}; send {shape}")
        if loc == ("body",) and problem.get("type") == "missing":
            return InvalidJSON(f"the body is empty; send {shape}")
    body = [p for p in problems if tuple(p.get("loc", ()))[:1] == ("body",)]
    said = []
    if body:
        fields = "; ".join(f"{_where(p['loc'][1:]) or 'body'}: {_said(p)}" for p in body)
        said.append(f"the body does not fit {shape}: {fields}")
    for p in problems:
        where, *name = p.get("loc", ())
        if where == "query":
            said.append(f"?{_where(name)}= {_said(p)}")
        elif where != "body":
            said.append(f"{_where(name)} {_said(p)}")
    return RequestError("; ".join(said))


def _unreadable(request: Request, exc: HTTPException) -> AnkkaError | None:
    """FastAPI's 400 for a body it could not decode, as ``invalid_json`` saying why."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, AnkkaError):
        return cause
    if isinstance(cause, RecursionError):
        return InvalidJSON(f"the body is nested too deeply to read; send {_shape(request)}")
    return InvalidJSON(f"the body is not valid JSON: {cause}")


def _answer(request: Request, exc: BaseException) -> Response:
    status, body = error_json(exc)
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}  # Allow (405)
    if isinstance(exc, AnkkaError) and exc.retry_after is not None:
        # A store outage, a caller over its TokenReview rate: try again then (whole seconds).
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    if isinstance(exc, StoreError) and status >= 500:
        # A dependency's failure, said in one line: the store names itself and what to do.
        log.warning("%s %s: %s", request.method, request.url.path, exc)
    return Response(
        Error.model_validate(body).model_dump_json(),
        status_code=status,
        headers=headers or None,
        media_type="application/json",
    )


async def _on_ankka(request: Request, exc: Exception) -> Response:
    return _answer(request, exc)


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return _answer(request, _refusal(request, exc))


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _answer(request, _unreadable(request, exc) or exc)


# Whatever else a route raises is answered here. An ExceptionMiddleware of our own, not
# ``exception_handlers={Exception: ...}``: Starlette sends that one from ServerErrorMiddleware,
# which re-raises after answering, so the server would log the failure twice and close the
# caller's connection.
_UNEXPECTED = Middleware(ExceptionMiddleware, handlers={Exception: _on_ankka})
_HANDLERS: dict[Any, Callable[[Request, Exception], Coroutine[Any, Any, Response]]] = {
    AnkkaError: _on_ankka,
    RequestValidationError: _on_validation,
    HTTPException: _on_http,
}


class RuntimeAPI(FastAPI):
    """The runtime's app: ankka's errors, no browser pages of FastAPI's (``/docs`` would load
    scripts from elsewhere), no telemetry of FastAPI's (ankka's own spans wrap the app), and
    a document whose ``{agent}`` parameters list ``agents`` (path → the names it takes)."""

    def __init__(self, *, agents: Mapping[str, Iterable[str]], **kwargs: Any) -> None:
        super().__init__(
            title="ankka runtime",
            version="1",
            docs_url=None,
            redoc_url=None,
            middleware=[_UNEXPECTED],
            exception_handlers=_HANDLERS,
            telemetry={
                "tracing": False,
                "metrics": False,
                "logs": False,
                "operation_spans": False,
            },
            **kwargs,
        )
        self.router.route_class = ApiRoute  # every route added from here on
        self._agents = {path: sorted(names) or ["none"] for path, names in agents.items()}

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            document = get_openapi(
                title=self.title,
                version=self.version,
                openapi_version=self.openapi_version,
                description=self.description,
                routes=self.routes,
            )
            for path, item in document.get("paths", {}).items():
                for operation in item.values():
                    for parameter in operation.get("parameters", ()):
                        if parameter["in"] == "path" and parameter["name"] == "agent":
                            parameter["schema"]["enum"] = self._agents.get(path, ["none"])
                    _errors_in_json(operation["responses"])
            schemas = document.get("components", {}).get("schemas", {})
            for fastapis in ("HTTPValidationError", "ValidationError"):
                schemas.pop(fastapis, None)
            self.openapi_schema = document
        return self.openapi_schema


_ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _errors_in_json(responses: dict[str, Any]) -> None:
    """Every error answer as it is sent: ankka's :class:`Error` in JSON. FastAPI documents a
    route's extra answers in the route's own media type (a stream's, the metrics' text) and
    adds a 422 of its own validation shape; the handlers above answer neither."""
    for status, response in responses.items():
        if not status.startswith(("4", "5")):
            continue
        content = response.get("content", {})
        schemas = [c.get("schema", {}) for c in content.values()]
        if status == "422" and any("HTTPValidationError" in str(s) for s in schemas):
            response["description"] = _STATUS_WORDS[422]
            schemas = [_ERROR_REF]
        if _ERROR_REF in schemas:
            response["content"] = {"application/json": {"schema": _ERROR_REF}}
