"""Serve an ASGI app over TLS on loopback inside the test's event loop (uvicorn, port 0).

The installation tests need the stand-in behind TLS that asks for a client certificate, as
the gateway is; uvicorn takes the certificate files, so the app runs unchanged.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn

from tests.support.eventually import eventually_async

__all__ = ["serve_tls"]


@asynccontextmanager
async def serve_tls(
    app: Any, *, cert: Path, key: Path, client_ca: Path | None
) -> AsyncIterator[str]:
    """Serve ``app`` at ``https://127.0.0.1:PORT`` (yielded); with ``client_ca``, a client
    certificate issued by it is required."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="critical",
        access_log=False,
        lifespan="off",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        ssl_ca_certs=str(client_ca) if client_ca else None,
        ssl_cert_reqs=ssl.CERT_REQUIRED if client_ca else ssl.CERT_NONE,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:

        async def started() -> bool:
            if task.done():  # it ended before it started: its error, at once
                task.result()
                raise RuntimeError("the TLS server stopped before it started")
            return bool(server.started)

        await eventually_async(started, what="the TLS server to start", interval=0.01)
        yield f"https://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
