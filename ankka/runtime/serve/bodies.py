"""Reading a JSON request body into a pydantic model, with errors that name what was wrong.

The body's size is bounded in front of every route (:mod:`ankka.runtime.serve.bounds`); what got
through is refused when it is not JSON or is nested deeper than the decoder takes (both 400
``invalid_json``), or does not fit the model (422 ``invalid_request``, naming each field and the
shape expected).
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ankka._kernel.errors import InvalidJSON, RequestError

__all__ = ["parse_body"]

M = TypeVar("M", bound=BaseModel)


def parse_body(raw: bytes, model: type[M], shape: str, *, limit: int | None = None) -> M:
    """``raw`` decoded as ``model``; ``shape`` is how the error describes the body expected."""
    if limit is not None and len(raw) > limit:
        raise RequestError(f"the body is larger than {limit} bytes")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidJSON(f"the body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidJSON(f"the body is nested too deeply to read; send {shape}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise RequestError(f"the body does not fit {shape}: {problems}") from exc
