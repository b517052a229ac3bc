"""What a person's answer to a server's form (an elicitation) sends back (pure).

A server asks with a flat JSON Schema object (``requestedSchema``: string, number, integer,
boolean and enum fields, each maybe with a ``default``). The person fills some fields; SEP-1034
says a field left empty takes the schema's default. :func:`accepted` builds the content that is
sent: the person's values, the defaults for the rest, checked against the schema, so a server
never receives a value its own schema refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ankka._kernel.errors import RequestError

__all__ = ["accepted"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def accepted(schema: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The content for an ``accept`` answer; a :class:`RequestError` names a field that is
    unknown, of the wrong type, outside its enum, or required and missing."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for name in given:
        if name not in properties:
            raise RequestError(f"the form has no field {name!r}")
    content: dict[str, Any] = {}
    for name, field in properties.items():
        if not isinstance(field, Mapping):
            continue
        if name in given:
            content[name] = given[name]
        elif "default" in field:
            content[name] = field["default"]
        else:
            continue
        _check(name, field, content[name])
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if name not in content:
            raise RequestError(f"the form's field {name!r} is required")
    return content


def _check(name: str, field: Mapping[str, Any], value: Any) -> None:
    kind = field.get("type")
    types = _TYPES.get(kind) if isinstance(kind, str) else None
    is_bool = isinstance(value, bool)
    if types is not None and (not isinstance(value, types) or (is_bool and kind != "boolean")):
        raise RequestError(f"the form's field {name!r} takes a {kind}")
    options = field.get("enum")
    if isinstance(options, list) and value not in options:
        raise RequestError(f"the form's field {name!r} takes one of {options}")
