"""The gateway's own HTTP/1.1 client against real sockets: reuse, stale connections, failures.

Small servers written here on loopback play the upstream where a behaviour must be forced (a
server that closes idle connections, never answers, or speaks nonsense); the stand-in plays it
where ordinary answers are enough.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httptools
import pytest

from ankka._kernel.upstream import (
    AnswerTooLarge,
    ConnectFailed,
    Endpoint,
    Pool,
    ProtocolFailure,
    UpstreamTimeout,
)
from tests.integration.gateway.conftest import StartStandin
from tests.integration.gateway.test_upstream_failures import connections_to
from tests.support.raw_server import Handler, read_request, serve

pytestmark = pytest.mark.integration

BODY = b'{"model": "small", "messages": []}'
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


@asynccontextmanager
async def upstream(handler: Handler) -> AsyncIterator[Endpoint]:
    async with serve(handler) as port:
        yield Endpoint.of(f"http://127.0.0.1:{port}/v1/chat/completions", bearer="none")


async def post(pool: Pool, endpoint: Endpoint, *, read_timeout: float = 10.0) -> bytes:
    response = await pool.post(endpoint, BODY, connect_timeout=5.0, read_timeout=read_timeout)
    try:
        return await response.read()
    finally:
        response.close()


async def test_answers_read_whole_reuse_one_connection(start_standin: StartStandin) -> None:
    standin = start_standin({"turns": [{"text": "a"}, {"text": "b"}, {"text": "c"}]})
    pool = Pool(parser=httptools.HttpResponseParser)
    endpoint = Endpoint.of(f"{standin.url}/v1/chat/completions", bearer="none")
    try:
        answers = [await post(pool, endpoint) for _ in range(3)]
        connections = await asyncio.to_thread(connections_to, standin.url)
    finally:
        await pool.aclose()

    texts = [json.loads(a)["choices"][0]["message"]["content"] for a in answers]
    assert texts == ["a", "b", "c"]
    assert connections == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced_unseen() -> None:
    served = 0

    async def answer_once_then_close(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        nonlocal served
        await read_request(reader)
        served += 1
        writer.write(ANSWER)  # keep-alive by HTTP/1.1's default, then closed anyway
        await writer.drain()
        writer.close()

    pool = Pool(parser=httptools.HttpResponseParser)
    async with upstream(answer_once_then_close) as endpoint:
        try:
            first = await post(pool, endpoint)
            await asyncio.sleep(0.1)  # let the close arrive, so the pooled connection is stale
            second = await post(pool, endpoint)
        finally:
            await pool.aclose()

    assert (first, second, served) == (b"{}", b"{}", 2)


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'5\r\n{"a":\r\n3\r\n"b"\r\n1\r\n}\r\n0\r\n\r\n'
)


@pytest.mark.parametrize("pieces", [1, 3], ids=["at-once", "head-then-body-in-pieces"])
async def test_a_chunked_answer_is_read_whole_and_checked_against_the_limit(pieces: int) -> None:
    # At once: the answer is complete when it is read (joined without waiting); in pieces, it
    # is read as it arrives. Either way the same body, the same limit, the connection reused.
    head = CHUNKED.index(b"\r\n\r\n") + 4
    ends = [len(CHUNKED)] if pieces == 1 else [head, head + 12, len(CHUNKED)]
    cut = [CHUNKED[:end] for end in [0, *ends]]
    connections = 0

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while not reader.at_eof():
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            for a, b in itertools.pairwise(cut):
                writer.write(CHUNKED[len(a) : len(b)])
                await writer.drain()
                await asyncio.sleep(0.02)

    pool = Pool(parser=httptools.HttpResponseParser)
    async with upstream(chunked) as endpoint:
        try:
            whole = await post(pool, endpoint)
            response = await pool.post(endpoint, BODY, connect_timeout=5.0, read_timeout=10.0)
            try:
                with pytest.raises(AnswerTooLarge):
                    await response.read(limit=4)
            finally:
                response.close()
            again = await post(pool, endpoint)
        finally:
            await pool.aclose()

    assert whole == again == b'{"a":"b"}'
    # A refused answer that had arrived whole leaves its connection reusable; one refused
    # while still arriving is closed.
    assert connections == (1 if pieces == 1 else 2)


async def test_a_server_that_never_answers_is_a_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    pool = Pool(parser=httptools.HttpResponseParser)
    async with upstream(silent) as endpoint:
        try:
            with pytest.raises(UpstreamTimeout):
                await post(pool, endpoint, read_timeout=0.2)
        finally:
            await pool.aclose()


async def test_a_server_that_speaks_nonsense_is_a_protocol_failure() -> None:
    async def nonsense(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP READY\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    pool = Pool(parser=httptools.HttpResponseParser)
    async with upstream(nonsense) as endpoint:
        try:
            with pytest.raises(ProtocolFailure):
                await post(pool, endpoint)
        finally:
            await pool.aclose()


async def test_nothing_listening_is_a_connect_failure() -> None:
    async def unused(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with upstream(unused) as endpoint:
        pass  # closed again: nothing listens on that port now
    pool = Pool(parser=httptools.HttpResponseParser)
    try:
        with pytest.raises(ConnectFailed):
            await post(pool, endpoint)
    finally:
        await pool.aclose()


async def test_the_read_timeout_is_per_wait_not_per_answer_and_follows_each_request() -> None:
    # The client's one timer per connection is re-armed lazily; what it must keep: a stream
    # whose every piece comes within the timeout never times out however long it runs, and a
    # request with a short timeout, after one with a long timeout on the same connection, gets
    # its own.
    requests = 0

    async def three_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await read_request(reader)
        requests += 1
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(6):  # 0.1 s apart, 0.6 s in all
            await asyncio.sleep(0.1)
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await read_request(reader)  # answered after 0.5 s: within its timeout
        requests += 1
        await asyncio.sleep(0.5)
        writer.write(ANSWER)
        await read_request(reader)  # answered after 1 s: past its timeout
        requests += 1
        await asyncio.sleep(1.0)
        writer.write(ANSWER)
        await writer.drain()
        await asyncio.sleep(30)

    pool = Pool(parser=httptools.HttpResponseParser)
    async with upstream(three_answers) as endpoint:
        try:
            first = await post(pool, endpoint, read_timeout=0.3)
            second = await post(pool, endpoint, read_timeout=5.0)
            with pytest.raises(UpstreamTimeout):
                await post(pool, endpoint, read_timeout=0.2)
        finally:
            await pool.aclose()

    assert (first, second) == (b"x" * 6, b"{}")
    assert requests == 3  # one connection, reused
