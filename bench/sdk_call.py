"""What one call costs in the openai SDK and the HTTP client under it, the network left out.

ankka's Chat Completions transport (``OpenAITransport.post_json``: the SDK's ``post``, its
retries and headers, over the providers' HTTP client) against a transport that answers at
once from memory, so only the SDK's and the client's own work per call is timed: building the
options and the request, sending it to the transport, reading the answer and decoding it.

Run: ``python bench/sdk_call.py`` (``--calls N``). Before and after: ``ANKKA_FROM=DIR python
bench/sdk_call.py`` measures DIR's checkout (one whose ``lean_client`` takes no transport gets
httpx2's own client, as its providers had).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx2

sys.path.insert(0, os.environ.get("ANKKA_FROM") or str(Path(__file__).resolve().parents[1]))

ANSWER = (
    b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":'
    b'"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,'
    b'"completion_tokens":1}}'
)
REQUEST = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


class Answering(httpx2.AsyncBaseTransport):
    """Answers every request with ``ANSWER``, from memory."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(ANSWER))]
        return httpx2.Response(200, headers=headers, stream=httpx2.ByteStream(ANSWER))


def client() -> httpx2.AsyncClient:
    from ankka.runtime.providers.lean_http import lean_client

    try:
        return lean_client(httpx2.Timeout(60), transport=Answering())
    except TypeError:  # an older checkout: httpx2's own client over its transport
        return httpx2.AsyncClient(transport=Answering(), timeout=60, follow_redirects=True)


async def run(calls: int) -> list[float]:
    from ankka.runtime.providers.openai_transport import OpenAITransport

    transport = OpenAITransport(
        provider="p",
        base_url="http://127.0.0.1:9/v1",
        api_key=None,
        timeout=60,
        http_client=client(),
    )
    times: list[float] = []
    try:
        for index in range(calls + calls // 10):
            began = time.perf_counter()
            await transport.post_json("/chat/completions", REQUEST)
            if index >= calls // 10:  # the first tenth warms up
                times.append((time.perf_counter() - began) * 1e6)
    finally:
        await transport.aclose()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=3000, help="measured calls")
    args = parser.parse_args()
    times = asyncio.run(run(args.calls))
    print(
        f"{os.environ.get('ANKKA_FROM') or 'this checkout'}: p50 {statistics.median(times):.1f}"
        f" µs per call, mean {statistics.fmean(times):.1f} µs ({args.calls} calls, load "
        f"average {os.getloadavg()[0]:.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
