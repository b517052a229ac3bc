"""A request body read as JSON into a pydantic shape, with errors that name what was wrong.

The body's size is bounded in front of every route (:mod:`ankka.runtime.bounds`); this reads
what got through: not JSON, nested deeper than the decoder takes (both 400 ``invalid_json``),
or not of the shape (422 ``invalid_request``, naming each field and the shape expected).
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from ankka._kernel.errors import InvalidJSON, RequestError

__all__ = ["parse_body"]

Body = TypeVar("Body", bound=BaseModel)


async def parse_body(request: Request, shape: type[Body], form: str) -> Body:
    """The body as ``shape``; ``form`` is how the errors write the shape expected."""
    raw = await request.body()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidJSON(f"the body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidJSON(f"the body is nested too deeply to read; send {form}") from exc
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise RequestError(f"the body does not fit {form}: {problems}") from exc
