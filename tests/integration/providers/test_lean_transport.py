"""The providers' HTTP transport (ankka's lean client under the SDKs) against real sockets.

The SDK builds the request and keeps its retries; the transport sends what it built, reuses
keep-alive connections, and hands httpx2's errors
back so the SDK's retry and error paths are the ones it always had.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest

from ankka._kernel.errors import ModelUnavailable
from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.lean_http import LeanClient, LeanTransport
from ankka.runtime.records.messages import UserMessage
from tests.integration.gateway.test_upstream_failures import connections_to
from tests.integration.providers.conftest import WIRES, Build, Standin, settings_for
from tests.support.raw_server import Handler, read_request, serve

pytestmark = pytest.mark.integration

HELLO = ModelRequest("", [UserMessage("Hello?")])
ANSWER = (
    b'{"choices":[{"message":{"role":"assistant","content":"hi"}}],'
    b'"usage":{"prompt_tokens":1,"completion_tokens":1},"model":"m"}'
)


@asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[str]:
    async with serve(handler) as port:
        yield f"http://127.0.0.1:{port}/v1"


def answer(body: bytes, status: bytes = b"200 OK") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def provider(url: str, *, key: str | None = None, retries: int = 2) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(
        name="lean", model="m", base_url=url, api_key=key, timeout=10.0, max_retries=retries
    )


async def complete_against(
    handler: Handler, *, key: str | None = None, retries: int = 0
) -> ModelResponse:
    """One ``complete`` of a provider at ``handler``'s server; the provider closed after."""
    async with server(handler) as url:
        model = provider(url, key=key, retries=retries)
        try:
            return await model.complete(HELLO)
        finally:
            await model.aclose()


async def test_the_request_the_sdk_built_is_sent_as_built() -> None:
    seen: list[tuple[bytes, bytes]] = []

    async def capture(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(answer(ANSWER))
        await writer.drain()

    response = await complete_against(capture, key="sk-lean-0123")

    head, body = seen[0]
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:] if line)}
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert headers["host"].startswith("127.0.0.1:")
    assert headers["authorization"] == "Bearer sk-lean-0123"
    assert headers["content-type"] == "application/json"
    assert "x-stainless-retry-count" in headers  # the SDK's own headers ride along
    assert body == b'{"model":"m","messages":[{"role":"user","content":"Hello?"}]}'
    assert response.content == "hi"


async def test_calls_in_a_row_reuse_one_connection(standin: Standin) -> None:
    standin.script([{"text": "a"}, {"text": "b"}, {"text": "c"}])
    model = provider(f"{standin.url}/v1")
    try:
        texts = [(await model.complete(HELLO)).content for _ in range(3)]
        connections = await asyncio.to_thread(connections_to, standin.url)
    finally:
        await model.aclose()

    assert texts == ["a", "b", "c"]
    assert connections == 1


async def test_the_sdk_still_retries_a_503_over_the_transport() -> None:
    statuses = [b"503 Service Unavailable", b"200 OK"]

    async def busy_then_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while statuses:
            await read_request(reader)
            status = statuses.pop(0)
            body = ANSWER if status == b"200 OK" else b'{"error":{"message":"busy"}}'
            writer.write(answer(body, status))
            await writer.drain()

    response = await complete_against(busy_then_ok, retries=1)

    assert response.content == "hi"
    assert statuses == []


async def test_a_server_that_answers_nonsense_is_unavailable_naming_the_provider() -> None:
    async def nonsense(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"this is not HTTP\r\n\r\n")
        await writer.drain()

    with pytest.raises(ModelUnavailable) as caught:
        await complete_against(nonsense)

    assert caught.value.provider == "lean"
    assert "cannot reach the server" in str(caught.value)


@pytest.mark.parametrize("wire", WIRES)
async def test_every_wire_streams_through_the_transport(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([{"text": "streamed words"}])
    model = build("lean", **settings_for(wire, standin))
    texts = [item async for item in model.stream(HELLO)]

    assert texts[-1].content == "streamed words"  # type: ignore[union-attr]


async def test_an_answer_delimited_by_closing_the_connection_is_read_whole() -> None:
    async def http_10(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + ANSWER)
        await writer.drain()
        writer.close()

    response = await complete_against(http_10)

    assert response.content == "hi"


async def test_an_answer_cut_before_its_declared_length_is_unavailable() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(ANSWER)[:-10])
        await writer.drain()
        writer.close()

    with pytest.raises(ModelUnavailable) as caught:
        await complete_against(cut)

    assert "closed the connection mid-answer" in str(caught.value)


def capturing(seen: list[tuple[bytes, bytes]], answers: list[bytes] | None = None) -> Handler:
    """A handler that records every request on a connection and answers each in turn
    (``answers``, then ``ANSWER`` whole)."""

    async def capture(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                seen.append(await read_request(reader))
            except asyncio.IncompleteReadError:
                return
            writer.write(answers.pop(0) if answers else answer(ANSWER))
            await writer.drain()

    return capture


async def test_the_lean_client_sends_byte_for_byte_what_httpx2s_own_client_sends() -> None:
    seen: list[tuple[bytes, bytes]] = []
    async with server(capturing(seen)) as url:
        ours = provider(url, key="sk-lean-0123")
        theirs = ChatCompletionsProvider(
            name="lean",
            model="m",
            base_url=url,
            api_key="sk-lean-0123",
            timeout=10.0,
            http_client=httpx2.AsyncClient(
                transport=LeanTransport(),
                timeout=httpx2.Timeout(10.0, connect=10.0),
                follow_redirects=True,
            ),
        )
        try:
            for model in (ours, theirs, ours):  # the second of ours from the kept template
                await model.complete(HELLO)
        finally:
            await ours.aclose()
            await theirs.aclose()

    assert isinstance(ours._transport.client._client, LeanClient)
    assert seen[0] == seen[1] == seen[2]


async def test_the_lean_client_follows_a_redirect_with_the_same_body() -> None:
    seen: list[tuple[bytes, bytes]] = []
    moved = b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v2/chat\r\nContent-Length: 0\r\n\r\n"
    async with server(capturing(seen, [moved])) as url:
        model = provider(url)
        try:
            response = await model.complete(HELLO)
        finally:
            await model.aclose()

    assert response.content == "hi"
    assert [head.split(b"\r\n")[0] for head, _ in seen] == [
        b"POST /v1/chat/completions HTTP/1.1",
        b"POST /v2/chat HTTP/1.1",
    ]
    assert seen[0][1] == seen[1][1]


async def test_the_lean_client_keeps_a_cookie_the_server_set_as_httpx2_does() -> None:
    seen: list[tuple[bytes, bytes]] = []
    with_cookie = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: lb=node-2; Path=/\r\n"
        b"Content-Length: " + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
    )
    async with server(capturing(seen, [with_cookie])) as url:
        model = provider(url)
        try:
            await model.complete(HELLO)
            await model.complete(HELLO)
        finally:
            await model.aclose()

    assert b"cookie: lb=node-2" not in seen[0][0].lower()
    assert b"cookie: lb=node-2" in seen[1][0].lower()


async def test_a_url_joined_once_follows_a_new_base_url() -> None:
    first: list[tuple[bytes, bytes]] = []
    second: list[tuple[bytes, bytes]] = []
    async with server(capturing(first)) as one, server(capturing(second)) as other:
        model = provider(one)
        try:
            await model.complete(HELLO)
            model._transport.client.base_url = other  # the SDK's own setter
            await model.complete(HELLO)
        finally:
            await model.aclose()

    assert len(first) == len(second) == 1
    assert second[0][0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")


def _mock_clients(
    handler: Any,
) -> tuple[LeanClient, httpx2.AsyncClient]:
    timeout = httpx2.Timeout(5.0)
    ours = LeanClient(transport=httpx2.MockTransport(handler), timeout=timeout)
    theirs = httpx2.AsyncClient(
        transport=httpx2.MockTransport(handler), timeout=timeout, follow_redirects=True
    )
    return ours, theirs


async def test_credentials_in_the_url_become_basic_auth_as_httpx2s_own_client_makes_them() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, content=ANSWER)

    ours, theirs = _mock_clients(handler)
    url = "http://user:secret@127.0.0.1:9/v1/chat/completions"
    for client in (ours, theirs):
        request = client.build_request(
            "POST", url, content=b"{}", headers=[("Authorization", "Bearer k")]
        )
        await client.send(request)
        await client.aclose()

    assert seen[0].headers["authorization"].startswith("Basic ")
    assert seen[0].headers.raw == seen[1].headers.raw


@pytest.mark.parametrize("follow", [False, True])
async def test_a_redirect_to_a_bad_location_is_treated_as_httpx2_treats_it(follow: bool) -> None:
    closed: list[bool] = []

    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b""

        async def aclose(self) -> None:
            closed.append(True)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(302, headers={"Location": "http://[::1"}, stream=Body())

    ours, _ = _mock_clients(handler)
    request = ours.build_request("POST", "http://127.0.0.1:9/v1/x", content=b"{}", headers=[])
    try:
        if follow:
            with pytest.raises(httpx2.RemoteProtocolError):
                await ours.send(request, follow_redirects=True)
        else:
            response = await ours.send(request, follow_redirects=False)
            assert response.status_code == 302 and response.next_request is None
    finally:
        await ours.aclose()
    assert closed  # never left holding its connection
