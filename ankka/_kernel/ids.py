"""Identifier helpers: short, unique, sortable enough for logs."""

from __future__ import annotations

import uuid

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """A fresh id such as ``turn_3f2c...``; the prefix says what it identifies."""
    return f"{prefix}_{uuid.uuid4().hex}"
