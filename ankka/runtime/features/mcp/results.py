"""A call's arguments checked before sending, and its result turned into a tool result.

- Arguments: the model's JSON text must be an object that fits the tool's JSON Schema; a
  call that does not is an error result the model can correct, and nothing is sent. A
  ``$ref`` is resolved within the schema (and the bundled meta-schemas) only: one naming a
  network URI is never fetched (the protocol: implementations MUST NOT dereference it), and
  arguments that reach it are refused, not let through unchecked. A ``null`` for a property
  the schema neither requires nor lets be null is that property left out (models in strict
  tool mode send ``null`` for what they leave out; the protocol's ``Mcp-Param`` headers treat
  the two alike), so it is not sent.
- Results: text blocks are joined; structured content is the answer when there is no text;
  images, audio and resources are named, not inlined; ``isError`` stays an error.
- Secrets: header values are replaced by ``***`` wherever a server's answer or error echoes
  them, before anything reaches the model, the journal or a log.
- Result guardrails run on a result that is not an error; a refusal replaces the whole result
  with a notice, so the refused text reaches neither the model nor the journal.

Pure: no I/O. Called by :mod:`.servers`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable

from ankka._kernel.errors import Refused
from ankka.runtime.declare.guardrails import Guardrail, first_refusal

__all__ = [
    "ArgumentCheck",
    "Rendered",
    "guard",
    "parse_arguments",
    "redact",
    "render",
]

MAX_RESULT = 1_000_000  # characters of one result the model is given; the rest is cut, said so
_MAX_PROBLEM = 300


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    is_error: bool


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "***")
    return text


def parse_arguments(raw: str, offered: str) -> dict[str, Any] | str:
    """The arguments as an object, or the problem (an error result's text)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        return f"the arguments for tool {offered!r} are not JSON: {exc}"
    if not isinstance(value, dict):
        kind = type(value).__name__
        return f"the arguments for tool {offered!r} must be a JSON object, not {kind}"
    return value


class ArgumentCheck:
    """One tool's input schema, compiled once per listing."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(dict(schema))  # SchemaError: the caller leaves the tool out
        # An empty registry retrieves nothing: jsonschema's default one would fetch a ``$ref``
        # to an http(s) URI (with a deprecation warning), which a server's schema could aim
        # at anything the runtime can reach.
        self._validator = cls(schema, registry=Registry())
        required = schema.get("required")
        self._required = frozenset(required) if isinstance(required, list) else frozenset()

    @staticmethod
    def compile(schema: Mapping[str, Any]) -> ArgumentCheck | str:
        """The check, or why the schema does not compile."""
        try:
            return ArgumentCheck(schema)
        except SchemaError as exc:
            return str(exc.message)[:_MAX_PROBLEM]

    @staticmethod
    def compiles(schema: Mapping[str, Any]) -> str | None:
        compiled = ArgumentCheck.compile(schema)
        return compiled if isinstance(compiled, str) else None

    def settled(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments to send: a ``null`` the schema refuses for a property it does not
        require is the property left out."""
        nulls = [k for k, v in arguments.items() if v is None and k not in self._required]
        if not nulls:
            return arguments
        try:
            refused = {
                e.path[0] for e in self._validator.iter_errors(arguments) if len(e.path) == 1
            }
        except Unresolvable:
            return arguments  # :meth:`problem` says why
        return {k: v for k, v in arguments.items() if not (k in nulls and k in refused)}

    def problem(self, arguments: Mapping[str, Any], offered: str) -> str | None:
        try:
            errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        except Unresolvable as exc:
            ref = str(getattr(exc, "ref", "") or "")[:_MAX_PROBLEM]
            return (
                f"the arguments for tool {offered!r} cannot be checked: its schema refers to "
                f"{ref!r}, which is not in the schema, and a schema's references to other "
                "documents are never fetched"
            )
        if not errors:
            return None
        shown = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message[:_MAX_PROBLEM]}"
            for e in errors[:5]
        )
        return f"the arguments for tool {offered!r} do not fit its schema: {shown}"


def render(result: Any) -> Rendered:
    """An SDK ``CallToolResult`` as the text the model is given."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')} not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            text = getattr(inner, "text", None)
            parts.append(str(text) if text is not None else f"[resource {inner.uri} not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT:
        text = text[:MAX_RESULT] + f"\n[cut: the result was past {MAX_RESULT} characters]"
    return Rendered(text, bool(getattr(result, "is_error", False)))


async def guard(rendered: Rendered, guardrails: Sequence[Guardrail], offered: str) -> Rendered:
    """The result, or a refusal notice in its place."""
    if rendered.is_error or not guardrails:
        return rendered
    try:
        await first_refusal(guardrails, rendered.text, stage="result")
    except Refused as refusal:
        return Rendered(f"the result of tool {offered!r} was withheld: {refusal}", is_error=True)
    return rendered
