"""Hostile connections for the connection-bound tests: sockets that send nothing, stop
mid-head or stop mid-body, held open until the test lets go, and a way to see a server
close one (bounded: a read that waits past ``within`` seconds fails the test)."""

from __future__ import annotations

import resource
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.eventually import eventually

__all__ = [
    "MID_BODY",
    "MID_HEAD",
    "SILENT",
    "closed_count",
    "hold",
    "is_closed",
    "open_files_at_least",
    "past_share",
    "requests_held",
    "read_until_closed",
]

SILENT = b""
MID_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
MID_BODY = (
    b"POST /v1/agents/polite/sessions/held HTTP/1.1\r\nHost: x\r\n"
    b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"message": '
)


@contextmanager
def hold(
    host: str,
    port: int,
    count: int,
    *,
    send: bytes = SILENT,
    tls: ssl.SSLContext | None = None,
    source: str | None = None,
) -> Iterator[list[socket.socket]]:
    """Open ``count`` connections that send ``send`` and then nothing; closed on exit.
    ``source``: the local address to connect from (another loopback address, 127.0.0.2, is
    another source to the server)."""
    held: list[socket.socket] = []
    bind = (source, 0) if source is not None else None
    try:
        for _ in range(count):
            raw = socket.create_connection((host, port), timeout=10, source_address=bind)
            sock = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
            held.append(sock)
            if send:
                sock.sendall(send)
        yield held
    finally:
        for sock in held:
            sock.close()


@contextmanager
def requests_held(
    host: str, port: int, tls: ssl.SSLContext, requests: list[bytes]
) -> Iterator[list[ssl.SSLSocket]]:
    """One TLS connection per request in ``requests``, each sent whole and then left open
    (its answer unread); closed on exit."""
    held: list[ssl.SSLSocket] = []
    try:
        for request in requests:
            raw = socket.create_connection((host, port), timeout=10)
            sock = tls.wrap_socket(raw, server_hostname=host)
            held.append(sock)
            sock.sendall(request)
        yield held
    finally:
        for sock in held:
            sock.close()


def past_share(answer: bytes) -> bool:
    """Whether ``answer`` (raw HTTP) is the refusal of a request past its caller's share."""
    return (
        answer.startswith(b"HTTP/1.1 429")
        and b"retry-after: 1" in answer.lower()
        and b"too_many_requests" in answer
    )


def open_files_at_least(count: int) -> None:
    """Raise this process's soft limit on open files to ``count`` (within the hard limit), so a
    test can hold that many sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count if hard == resource.RLIM_INFINITY else min(count, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def read_until_closed(sock: socket.socket, *, within: float = 20.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(within)
    received = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except (ConnectionResetError, ssl.SSLError):
            return received
        if not chunk:
            return received
        received += chunk


def closed_count(socks: list[socket.socket], at_least: int, *, within: float = 10.0) -> int:
    """How many of ``socks`` the server has closed, once at least ``at_least`` (≥ 1) are; the
    test fails if that takes past ``within`` seconds. A server closes an evicted connection on
    its next loop turn, maybe after it answered."""

    def closed() -> int:
        count = sum(is_closed(s) for s in socks)
        return count if count >= at_least else 0

    return eventually(
        closed,
        what=f"the server to close {at_least} of {len(socks)} connections",
        timeout=within,
        interval=0.02,
    )


def is_closed(sock: socket.socket) -> bool:
    """True when the server has closed ``sock`` (reading it would return at once)."""
    sock.settimeout(0.0)
    try:
        if isinstance(sock, ssl.SSLSocket):  # TLS cannot peek; nothing is due on these anyway
            return sock.recv(1) == b""
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    except (ConnectionResetError, ssl.SSLError):
        return True
    finally:
        sock.settimeout(10)
