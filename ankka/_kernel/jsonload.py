"""JSON decoding through orjson, with the standard library's answer wherever the two differ.

orjson is several times faster than ``json``, which matters where ankka decodes a lot: a
session's cold fold and every model answer. But it reads an integer past 64 bits as a float,
silently, and refuses what ``json`` accepts (``NaN``, ``Infinity``, an escaped lone surrogate).
:func:`loads` sends those to ``json``: a run of 19 digits (which may be such an integer; rare,
and a digit run inside a string only costs the slower decoder) before trying orjson, a refusal
after. So a body decodes to the values, or fails with the error, ``json.loads`` would give.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["loads"]

_LONG_DIGITS = re.compile(r"[0-9]{19}")
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19}")


def loads(body: str | bytes) -> Any:
    """``json.loads(body)``, through orjson where that gives the same (module docstring)."""
    long = _LONG_DIGITS.search(body) if isinstance(body, str) else _LONG_DIGITS_BYTES.search(body)
    if long is not None:
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)
