"""The one mapping between a model's name and its ``ANKKA_MODEL_<NAME>_*`` variables.

A service's code asks for a model by name (``Turn(model="gpt-4.1")``); the runtime is told
about that model by environment variables (``ANKKA_MODEL_GPT_4_1_PRESET`` ...), which the
operator renders from an Agent's ``spec.models[].name`` and a person sets by hand under
``ankka serve``. Every part that spells or reads those names goes through here: the runtime's
model settings (``ankka.runtime.providers.config``), its judgments, its error messages, and the
operator's env rendering. Pure string work, no imports: the operator and the runtime both
import it (``_kernel`` is shared by every deployable).

The mapping: upper case, with every character a variable name cannot hold (``-``, ``.``,
``:``, ``/``, spaces, anything outside ASCII letters and digits) written ``_``. It is many to
one: ``gpt-4o``, ``GPT_4o`` and ``gpt.4o`` are one model, ``GPT_4O``. Going back, a variable
gives the lower-cased settings name (``gpt_4o``), and :func:`same_model` (or comparing
:func:`settings_name` of both) finds the model the code asked for by its own spelling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

__all__ = [
    "PREFIX",
    "env_name",
    "find_model",
    "same_model",
    "settings_name",
]

T = TypeVar("T")

PREFIX = "ANKKA_MODEL_"
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_]")


def settings_name(model: str) -> str:
    """The ``<NAME>`` in a model's ``ANKKA_MODEL_<NAME>_*`` variables."""
    return _NOT_IN_A_NAME.sub("_", model).upper()


def env_name(model: str, suffix: str) -> str:
    """The variable of one setting (``PRESET``, ``MODEL``, ``URL`` ...) of ``model``."""
    return f"{PREFIX}{settings_name(model)}_{suffix}"


def same_model(a: str, b: str) -> bool:
    """Whether two spellings name one model (``gpt-4o`` and ``gpt_4o`` do)."""
    return settings_name(a) == settings_name(b)


def find_model(configured: Mapping[str, T], model: str) -> T | None:
    """The entry of ``configured`` (keyed by model name) that ``model`` names, or None.

    An exact name wins; otherwise the one whose settings name is ``model``'s (the environment
    gives ``gpt_4_1`` for ``ANKKA_MODEL_GPT_4_1_*``, an agent asks for ``gpt-4.1``).
    """
    found = configured.get(model)
    if found is not None:
        return found
    for name, value in configured.items():
        if same_model(name, model):
            return value
    return None
