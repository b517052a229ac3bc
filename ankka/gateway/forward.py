"""Send one checked request to its model's server and relay the answer as it arrives.

Over the gateway's pooled upstream client (:mod:`ankka._kernel.upstream`); its failures are
turned here into the gateway's answers (503 when the server cannot be reached, 504 when it does
not answer in time, 502 for anything else), each naming the model. A stream is relayed chunk by
chunk as the upstream sends it, never buffered; if the caller goes away mid-stream the upstream
request is cancelled and its connection closed, so nothing keeps generating for nobody.

Tokens are read from the upstream's ``usage`` with a byte search over the answer's tail, not by
parsing the answer: the metrics must not cost a JSON parse of every response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re

from ankka._kernel.clock import Clock
from ankka._kernel.redact import MIN_SECRET, REDACTED, redact_bytes
from ankka._kernel.upstream import (
    AnswerTooLarge,
    ConnectFailed,
    Endpoint,
    Pool,
    Response,
    UpstreamError,
    UpstreamTimeout,
)
from ankka.gateway.metrics import GatewayMetrics, GenAIMetrics, ModelCallerMetrics
from ankka.gateway.models_file import ModelSpec
from ankka.gateway.wire import Receive, Send, WatchDisconnect, error_body, send_bytes, send_error

__all__ = ["Exchange"]

log = logging.getLogger("ankka.gateway")

_PROMPT = re.compile(rb'"prompt_tokens"\s*:\s*(\d+)')
_COMPLETION = re.compile(rb'"completion_tokens"\s*:\s*(\d+)')
_CONNECT_TIMEOUT_S = 5.0
_STREAM_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def _count_usage(
    tail: bytes, metrics: ModelCallerMetrics, genai: GenAIMetrics
) -> tuple[int | None, int | None]:
    """Count the answer's tokens in the metrics; return (prompt, completion), None when the
    upstream's usage gave no such count."""
    at = tail.rfind(b'"usage"')
    if at < 0:
        return None, None
    usage = tail[at:]
    found = _PROMPT.search(usage)
    prompt = int(found.group(1)) if found else None
    found = _COMPLETION.search(usage)
    completion = int(found.group(1)) if found else None
    if prompt is not None:
        metrics.prompt_tokens.inc(prompt)
        genai.input_tokens.observe(prompt)
    if completion is not None:
        metrics.completion_tokens.inc(completion)
        genai.output_tokens.observe(completion)
    return prompt, completion


def _without_secrets(content: bytes, spec: ModelSpec, *, error: bool) -> bytes:
    """The answer without the model's key; an error body also without credential shapes.

    Servers that refuse a key often quote it back. An answer is only searched for the exact
    key (a model's own text may well mention ``sk-`` or ``Bearer``)."""
    key = spec.bearer().encode()
    if error:
        return redact_bytes(content, (key,))
    if len(key) >= MIN_SECRET and key in content:
        return content.replace(key, REDACTED.encode())
    return content


def _failure(spec: ModelSpec, exc: UpstreamError) -> tuple[int, str, str, str]:
    """(status, code, message, metric kind) for a transport failure."""
    name = spec.name
    if isinstance(exc, ConnectFailed):
        return (
            503,
            "upstream_unavailable",
            f"model {name!r} is unavailable: its server cannot be reached; try again later",
            "unavailable",
        )
    if isinstance(exc, AnswerTooLarge):
        return (
            502,
            "upstream_answer_too_large",
            f"model {name!r} answered more than the gateway's limit of {exc.limit} bytes for a "
            "whole answer; ask for fewer tokens, stream the answer, or raise its "
            "max_answer_bytes in the models file",
            "too_large",
        )
    if isinstance(exc, UpstreamTimeout):
        return (
            504,
            "upstream_timeout",
            f"model {name!r} did not answer within {spec.timeout_s:g}s; try a shorter request "
            "or raise its timeout_s in the models file",
            "timeout",
        )
    return (
        502,
        "upstream_error",
        f"model {name!r} failed while answering ({type(exc).__name__}); try again",
        "protocol",
    )


class Exchange:
    """One forwarded request: what is sent where, for whom, and how it ended.

    Built by the gateway for each checked request and run once (:meth:`run`); ``upstream_failed``,
    ``answered``, ``caller_left``, ``status``, ``failure`` and the token counts are read after
    it returns (the upstream span's attributes). Everything the relay needs is
    an attribute, so the steps (send, relay whole, relay a stream, fail) take no parameters.
    """

    __slots__ = (
        "_started",
        "answered",
        "body",
        "caller",
        "caller_left",
        "clock",
        "completion_tokens",
        "cut_off",
        "endpoint",
        "failure",
        "genai",
        "headers",
        "metrics",
        "of",
        "pool",
        "prompt_tokens",
        "receive",
        "send",
        "spec",
        "status",
        "stream",
        "tokens",
        "upstream_failed",
        "watch",
    )

    def __init__(
        self,
        *,
        pool: Pool,
        spec: ModelSpec,
        endpoint: Endpoint,
        body: bytes,
        stream: bool,
        receive: Receive,
        send: Send,
        metrics: GatewayMetrics,
        caller: str,
        clock: Clock,
        genai: GenAIMetrics,
        watch: WatchDisconnect | None = None,
        headers: bytes = b"",
    ) -> None:
        self.pool = pool
        self.genai = genai
        self.headers = headers  # more request header lines (the trace context), CRLF-ended
        self.watch = watch
        self.spec = spec
        self.endpoint = endpoint
        self.body = body
        self.stream = stream
        self.receive = receive
        self.send = send
        self.metrics = metrics
        self.of: ModelCallerMetrics = metrics.of(spec.name, caller)
        self.caller = caller
        self.clock = clock
        # The model's server could not be reached or answered 5xx: its model is re-probed.
        self.upstream_failed = False
        # Set just before the last byte is handed to the server: from then on a disconnect
        # message means "answered", not "the caller left".
        self.answered = False
        self.caller_left = False
        self._started = 0.0
        self.tokens = 0  # prompt + completion, from the upstream's usage (0 when it gave none)
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.status: int | None = None  # the upstream's HTTP status, once it answered
        self.failure: str | None = None  # why the call failed: a transport kind or the status
        # The model was asked and its answer is not known whole: it may have spent anything.
        self.cut_off = False

    async def run(self) -> None:
        """Send the body to the model's server and relay its answer.

        For as long as it runs, the caller's disconnect cancels it, so an abandoned request
        stops at once, whether it is waiting for the upstream's first byte or relaying a
        stream; cancelling closes the upstream connection. The gateway's own server tells of
        the disconnect through ``watch`` (no task per request); under uvicorn a watcher task
        waits on ``receive`` for it.
        """
        watch = self.watch
        watcher: asyncio.Task[None] | None = None
        if watch is not None:
            watch(self._left)
        else:
            me = asyncio.current_task()
            assert me is not None
            watcher = asyncio.get_running_loop().create_task(self._watch_disconnect(me))
        self._started = self.clock.monotonic()
        try:
            await self._exchange()
        except asyncio.CancelledError:
            if not self.caller_left:
                raise
            me = asyncio.current_task()
            assert me is not None
            me.uncancel()
            self.metrics.caller_left(self.spec.name, self.caller)
            self.cut_off = True
            log.info(
                "model %r: the caller left; the upstream request was cancelled", self.spec.name
            )
        finally:
            self.answered = True
            if watcher is None:
                assert watch is not None
                watch(None)
            else:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            seconds = self.clock.monotonic() - self._started
            self.of.latency.observe(seconds)
            if not self.caller_left:
                failure = self.failure
                (self.genai.duration if failure is None else self.genai.failed(failure)).observe(
                    seconds
                )

    def _left(self) -> bool:
        """The caller went away: True (cancel the exchange) unless it was already answered."""
        if self.answered:
            return False
        self.caller_left = True
        return True

    async def _watch_disconnect(self, me: asyncio.Task[object]) -> None:
        # The request body was read whole, so the next message is the disconnect.
        while (await self.receive())["type"] != "http.disconnect":
            pass
        if self._left():
            me.cancel()

    def spent(self, bound: int) -> int:
        """What the exchange spent, for a token budget: the answer's usage; ``bound`` when the
        model was asked and its usage is unknown (a 200 without usage, a stream cut off, a
        caller who left); nothing when the model was not asked or refused."""
        if self.prompt_tokens is not None or self.completion_tokens is not None:
            return self.tokens
        return bound if self.cut_off else 0

    def _failed(self, exc: UpstreamError) -> tuple[int, str, str]:
        """Count a transport failure; (status, code, message) to answer it with."""
        status, code, message, kind = _failure(self.spec, exc)
        self.metrics.upstream_error(self.spec.name, self.caller, kind)
        self.failure = kind
        self.answered = True
        return status, code, message

    async def _exchange(self) -> None:
        spec = self.spec
        try:
            response = await self.pool.post(
                self.endpoint,
                self.body,
                connect_timeout=_CONNECT_TIMEOUT_S,
                read_timeout=spec.timeout_s,
                headers=self.headers,
            )
        except UpstreamError as exc:
            log.warning("model %r at %s: %s", spec.name, spec.url, exc)
            self.upstream_failed = isinstance(exc, ConnectFailed)
            self.cut_off = not self.upstream_failed  # sent, then no answer: it may have run
            status, code, message = self._failed(exc)
            await send_error(self.send, status, message, code=code)
            return
        self.status = response.status
        if response.status != 200:
            self.failure = str(response.status)
        try:
            if self.stream and response.status == 200:
                await self._relay_stream(response)
            else:
                await self._relay_whole(response)
                if response.status >= 500:
                    self.upstream_failed = True
        finally:
            response.close()

    async def _relay_whole(self, response: Response) -> None:
        try:
            content = await response.read(limit=self.spec.max_answer_bytes)
        except UpstreamError as exc:
            self.cut_off = True
            status, code, message = self._failed(exc)
            await send_error(self.send, status, message, code=code)
            return
        status = response.status
        answer = _without_secrets(content, self.spec, error=status != 200)
        content_type = response.header(b"content-type", b"application/json")
        self.answered = True
        await send_bytes(self.send, status, answer, content_type=content_type)
        # Counted once the answer is out: off the caller's wait, before anything else runs.
        if status >= 500:
            self.metrics.upstream_error(self.spec.name, self.caller, f"http_{status}")
        elif status == 200:
            self._counted(_count_usage(content[-2048:], self.of, self.genai))

    async def _relay_stream(self, response: Response) -> None:
        send = self.send
        previous = b""
        last = b""
        await send({"type": "http.response.start", "status": 200, "headers": _STREAM_HEADERS})
        try:
            async for chunk in response.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                previous, last = last, chunk
        except UpstreamError as exc:
            self.cut_off = True
            _, code, message = self._failed(exc)
            event = b"data: " + error_body(502, message, code=code) + b"\n\n"
            await send({"type": "http.response.body", "body": event, "more_body": False})
            return
        self.answered = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        self._counted(_count_usage(previous + last, self.of, self.genai))

    def _counted(self, usage: tuple[int | None, int | None]) -> None:
        self.prompt_tokens, self.completion_tokens = usage
        self.tokens = (usage[0] or 0) + (usage[1] or 0)
        self.cut_off = usage == (None, None)  # a 200 without usage: it spent, how much unknown
