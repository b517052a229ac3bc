"""The head of an OpenAPI document and its plain pieces, for the gateway's document
(:mod:`ankka.gateway.openapi`); the runtime's is FastAPI's, with the same head (3.1, a title,
version ``1``). Pure data; no heavy imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["TEXT", "document", "json_body"]

TEXT: dict[str, Any] = {
    "description": "text",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}


def json_body(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A required JSON request body of ``schema``."""
    return {"required": True, "content": {"application/json": {"schema": dict(schema)}}}


def document(
    title: str, paths: Mapping[str, Any], *, components: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An OpenAPI 3.1 document named ``title``."""
    head: dict[str, Any] = {"openapi": "3.1.0", "info": {"title": title, "version": "1"}}
    return {
        **head,
        "paths": dict(paths),
        **({"components": dict(components)} if components else {}),
    }
