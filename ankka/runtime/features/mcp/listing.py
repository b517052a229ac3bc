"""What a server's ``tools/list`` answer becomes: names the model sees, a digest, a record.

A server's tool ``search`` is offered to the model as ``mcp__<server>__search`` with the
server's description and JSON Schema. A name a model API would refuse (past 64 characters, or
characters other than letters, digits, ``_`` and ``-``) is left out, as is a name listed more
than once (which of the two a call reaches is the server's choice, so neither description can
be trusted to say what runs), a tool whose schema is not a JSON Schema object or is past
:data:`MAX_SCHEMA` characters, and a tool a description guardrail refuses (descriptions are
model input too, and so a prompt-injection path).

Each turn records, per server, the digest of the listing it used, and the listing itself when
it differs from the last one recorded in the session (:class:`McpToolsRecord`), so a resumed
turn or task can see the tools it saw (the values and the record are
:mod:`ankka.runtime.records.mcp`). Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ankka._kernel.errors import Refused
from ankka.runtime.declare.guardrails import Guardrail, first_refusal
from ankka.runtime.records.mcp import ListedTool, ToolListing, offered_name

__all__ = ["checked_description", "listed", "screen"]

_MODEL_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOOLS = 500  # per server: a listing past this is cut, and the cut is logged
MAX_DESCRIPTION = 8192
MAX_SCHEMA = 32768  # characters of one tool's input schema as JSON


def shown_name(name: str) -> str:
    """A listed tool's name as logs and ``/readyz`` show it (bounded, quoted)."""
    return repr(name[:80])


def listed(server: str, raw_tools: Iterable[Any]) -> tuple[ToolListing, dict[str, str]]:
    """The listing from the SDK's tool objects, and why any were left out (by
    :func:`shown_name`)."""
    tools = list(raw_tools)
    named = Counter(str(getattr(raw, "name", "")) for raw in tools)
    kept: list[ListedTool] = []
    problems: dict[str, str] = {}
    for raw in tools:
        name = str(getattr(raw, "name", ""))
        schema = getattr(raw, "input_schema", None)
        description = str(getattr(raw, "description", None) or "")
        if len(kept) >= MAX_TOOLS:
            problems["(the rest)"] = f"it lists more than {MAX_TOOLS} tools; the rest are left out"
            break
        problem = _problem(server, name, named[name], schema, description)
        if problem is not None:
            problems[shown_name(name)] = problem
            continue
        assert isinstance(schema, Mapping)
        kept.append(ListedTool(name, description, dict(schema)))
    return ToolListing(server, tuple(kept)), problems


def _problem(server: str, name: str, times: int, schema: Any, description: str) -> str | None:
    if not _MODEL_TOOL_NAME.match(offered_name(server, name)):
        return (
            f"{offered_name(server, name)[:100]!r} is not a name a model accepts (at most 64 "
            "letters, digits, '_' or '-')"
        )
    if times > 1:
        return f"the server lists {times} tools of this name; none of them is offered"
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return "its input schema is not a JSON Schema object"
    if len(description) > MAX_DESCRIPTION:
        return f"its description is past {MAX_DESCRIPTION} characters"
    if len(json.dumps(schema, separators=(",", ":"), default=str)) > MAX_SCHEMA:
        return f"its input schema is past {MAX_SCHEMA} characters"
    return None


def checked_description(tool: ListedTool) -> str:
    """The text a description guardrail sees: the description and every description or title
    inside the schema (the model reads those too)."""
    parts = [tool.description]
    _strings(tool.input_schema, parts)
    return "\n".join(p for p in parts if p)


def _strings(node: Any, into: list[str]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("description", "title") and isinstance(value, str):
                into.append(value)
            else:
                _strings(value, into)
    elif isinstance(node, list):
        for item in node:
            _strings(item, into)


async def screen(
    listing: ToolListing, guardrails: Sequence[Guardrail]
) -> tuple[tuple[ListedTool, ...], list[tuple[str, Refused]]]:
    """The tools the description guardrails let through, and the refusals."""
    if not guardrails:
        return listing.tools, []
    kept: list[ListedTool] = []
    refused: list[tuple[str, Refused]] = []
    for tool in listing.tools:
        try:
            await first_refusal(guardrails, checked_description(tool), stage="description")
        except Refused as refusal:
            refused.append((tool.name, refusal))
            continue
        kept.append(tool)
    return tuple(kept), refused
