"""The gateway's unit fixtures."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the test: what is left was not freed by
    reference counting."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
