"""Reading the console's server-rendered pages in tests: an element by its data attribute,
and the figures a page marks with one (``data-usage="input_tokens">12<``)."""

from __future__ import annotations

import re

__all__ = ["element", "figures"]


def element(page: str, opening: str, key: str, closing: str) -> str:
    """The first ``<opening data-key="...">`` … ``closing`` of ``page`` (the test fails
    showing the page when there is none)."""
    found = re.search(rf"<{opening}=\"{re.escape(key)}\".*?{re.escape(closing)}", page, re.S)
    assert found is not None, page
    return found.group(0)


def figures(text: str, attribute: str) -> dict[str, int]:
    """Each ``attribute="NAME">N<`` of ``text``, as NAME → N."""
    return {k: int(v) for k, v in re.findall(rf'{attribute}="(\w+)">(\d+)<', text)}
