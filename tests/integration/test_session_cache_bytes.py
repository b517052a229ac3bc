"""Long sessions do not fill ``ankka serve``'s memory (issue 31, item 10): the folds of recent
sessions are bounded by ``--session-cache-mb``, not only by how many sessions they are.

Eighty sessions of about 1.8 MB each (144 MB of history) against a real ``ankka serve`` with
an 8 MiB cache: the cache's bytes (``ankka_session_cache_bytes``) stay within it, the
process's resident memory grows by far less than the history (the cache, and the 64 MiB a
provider keeps of sent request prefixes, counting the messages they hold), and an evicted
session is folded again from the store, whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Script
from tests.support.processes import Server

pytestmark = pytest.mark.integration

SESSIONS = 80
TURNS = 2
SIZE = 900_000  # characters of each message: under the 1 MiB body limit


def _rss(server: Server) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _cache_bytes(server: Server) -> float:
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith("ankka_session_cache_bytes "):
            return float(line.split()[-1])
    raise AssertionError("ankka_session_cache_bytes is not in /metrics")


def test_eighty_long_sessions_stay_within_the_session_cache(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    turns = SESSIONS * TURNS + 2
    model = standin([{"text": f"Noted {n}."} for n in range(turns)])
    server = serve(model.url, args=["--session-cache-mb", "8"])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert client.post("/v1/agents/polite/sessions/warm", json={"message": "hi"}).is_success
        before = _rss(server)
        for session in range(SESSIONS):
            for number in range(TURNS):
                message = f"{session}.{number} " + "long history " * (SIZE // 13)
                sent = client.post(
                    f"/v1/agents/polite/sessions/s{session}", json={"message": message}
                )
                assert sent.status_code == 200, sent.text[:300]
            assert _cache_bytes(server) <= 8 * 2**20
        grown = _rss(server) - before
        assert _cache_bytes(server) > 0
        # Held whole, the history alone is 144 MB (it was, bounded by sessions only).
        assert grown < 110 * 2**20, f"ankka serve grew by {grown / 2**20:.0f} MiB"
        again = client.post("/v1/agents/polite/sessions/s0", json={"message": "and now?"})
        assert again.status_code == 200, again.text[:300]
        shown = client.get("/v1/sessions/s0/messages", params={"as_sent": "true"}).json()
    assert [m["role"] for m in shown["messages"]].count("user") == TURNS + 1
