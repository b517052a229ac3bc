"""A ``tools/list`` page read tool by tool, for a server whose listing the SDK refuses whole.

The SDK's client validates a page against the protocol's schema as one value, so one tool
whose input schema is not an object (or any other malformed entry) fails the whole listing,
and with it every turn of every agent using the server. :func:`lenient_page` asks for the
same page without that validation, validates each tool on its own (against the negotiated
protocol version's schema, the check the SDK would have made), and gives back the page of the
tools that pass and why each other one was left out. It hands the kept page to the session as
the SDK's own listing does (so a later call's output-schema check finds its tool).

Two private members of the SDK's session are used (its request envelope and its raw-request
dispatcher), as the SDK's own subscriptions module does; this module is the one place that
knows them. Called by :mod:`.connection` only after the SDK refused a page.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import CallOptions
from mcp_types import methods
from pydantic import ValidationError

__all__ = ["Page", "lenient_page", "refusal"]

_MAX_PROBLEM = 300


class Page:
    """One page: the tools kept, the cursor of the next page, and why others were left out."""

    def __init__(
        self, tools: list[types.Tool], next_cursor: str | None, problems: dict[str, str]
    ) -> None:
        self.tools = tools
        self.next_cursor = next_cursor
        self.problems = problems


def refusal(error: ValidationError) -> str:
    """A short account of a validation error, without the values it quotes."""
    shown = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'result'}: {e['msg']}" for e in error.errors()[:3]
    )
    return shown[:_MAX_PROBLEM]


async def lenient_page(client: Client, cursor: str | None) -> Page:
    session = client.session
    version = session.protocol_version or "2025-11-25"
    request = types.ListToolsRequest(
        params=types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
    )
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: CallOptions = {}
    session._stamp(data, opts)  # the envelope send_request builds
    raw = await session._dispatcher.send_raw_request(  # the request, unvalidated
        data["method"], data.get("params"), opts
    )
    listed = raw.get("tools")
    if not isinstance(listed, list):
        raise ValueError("its tools/list answer has no list of tools")
    rest = {k: v for k, v in raw.items() if k != "tools"}
    kept: list[dict[str, Any]] = []
    problems: dict[str, str] = {}
    for index, tool in enumerate(listed):
        name = tool.get("name") if isinstance(tool, dict) else None
        shown = repr(name[:80]) if isinstance(name, str) else f"(number {index + 1})"
        try:
            methods.validate_server_result("tools/list", version, {**rest, "tools": [tool]})
        except ValidationError as exc:
            problems[shown] = f"the protocol's schema refuses it: {refusal(exc)}"
            continue
        except (KeyError, ValueError):
            pass  # a version the table does not know: the SDK would not have checked either
        kept.append(tool)
    try:
        page = types.ListToolsResult.model_validate({**rest, "tools": kept}, by_name=False)
    except ValidationError as exc:
        why = refusal(exc)
        raise ValueError(f"its tools/list answer does not fit the protocol: {why}") from None
    complete = cursor is None and page.next_cursor is None
    session._absorb_tool_listing(page, complete=complete)  # as list_tools does
    return Page(list(page.tools), page.next_cursor, problems)
