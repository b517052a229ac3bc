"""A 2026-07-28 result without ``resultType`` is read as ``"complete"``, as the protocol says.

The 2026-07-28 schema (``Result.resultType``, SEP-2322) has servers include ``resultType`` in
every result, and says that a client receiving a result without it MUST treat the absent field
as ``"complete"``. The SDK's client (mcp 2.3) validates each result against that schema as it
stands, so it refuses such a result ("resultType: Field required"): a server's good answer
became a tool error. :func:`absent_means_complete` wraps the session's raw-request dispatcher
so that, on a 2026-07-28 session, a result without the field reaches the SDK's validation
with ``resultType: "complete"``. A result that carries the field (``"input_required"``
included, which the SDK's multi-round-trip driver then handles) is untouched, and so is every
result of an older protocol, which has no such field.

The dispatcher is a private member of the SDK's session, as :mod:`.lenient` uses it; these two
modules are the places that know it. Called by :mod:`.connection` as each session starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import Client
from mcp.shared.dispatcher import CallOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["absent_means_complete"]

_WRAPPED = "_ankka_absent_means_complete"


def absent_means_complete(client: Client) -> None:
    """From now on, a result of this session without ``resultType`` is a complete one."""
    session = client.session
    dispatcher = session._dispatcher
    send = dispatcher.send_raw_request
    if getattr(send, _WRAPPED, False):
        return

    async def send_raw_request(
        method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raw = await send(method, params, opts)
        if "resultType" not in raw and session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return {**raw, "resultType": "complete"}
        return raw

    setattr(send_raw_request, _WRAPPED, True)
    setattr(dispatcher, "send_raw_request", send_raw_request)  # noqa: B010 (a method's slot)
