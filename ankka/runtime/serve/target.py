"""``MODULE[:ATTR]``: the Service ``ankka serve`` (and ``ankka up``) is told to serve.

:func:`load_service` imports the module (the current directory first on the path) and returns
the :class:`~ankka.runtime.agents.Service` it names. Every way the target can be wrong is a
:class:`TargetError` that says what to pass instead: a file path (``./svc.py:service``) names
the module it means (``svc:service``), ``svc.py`` is answered "did you mean svc:service", a
missing attribute lists the Services the module has, and a module whose own import fails is
named with the error and the line of the user's file where it happened.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ankka._kernel.errors import ConfigurationError

if TYPE_CHECKING:
    from ankka.runtime.declare.agents import Service

__all__ = ["TargetError", "load_service", "split_target"]


class TargetError(ConfigurationError):
    """``MODULE[:ATTR]`` names no Service; the message says what to pass instead."""

    kind = "invalid_target"


def split_target(target: str) -> tuple[str, str]:
    """``(module, attr)``; the attribute defaults to ``service``. A file path or a ``.py``
    name is refused with the module name it stands for."""
    module, _, attr = target.strip().partition(":")
    attr = attr or "service"
    meant = _module_of_path(module)
    if meant is not None:
        hint = f"{meant}:{attr}"
        where = Path(module).parent
        run_from = (
            "" if str(where) in ("", ".") else f", run from {where}/ (or put it on PYTHONPATH)"
        )
        raise TargetError(
            f"{target!r} is a file, not a module: did you mean {hint}? (a Service is named "
            f"MODULE[:ATTR], imported from the current directory{run_from})"
        )
    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise TargetError(
            f"{target!r} is not MODULE[:ATTR]: name the Python module and its Service, "
            "e.g. svc:service for svc.py, or ankka.local.demo:service"
        )
    if not attr.isidentifier():
        raise TargetError(f"{target!r}: {attr!r} is not an attribute name (MODULE[:ATTR])")
    return module, attr


def _module_of_path(module: str) -> str | None:
    """The dotted module a path-shaped name means (``./pkg/svc.py`` → ``svc``), or None."""
    if not (module.endswith(".py") or "/" in module or "\\" in module):
        return None
    stem = Path(module.removesuffix(".py")).name
    return stem if stem.isidentifier() else "MODULE"


def load_service(target: str) -> Service:
    """The Service ``target`` names; a :class:`TargetError` says what to pass instead."""
    from ankka.runtime.declare.agents import Service

    name, attr = split_target(target)
    module = _import(name)
    found = getattr(module, attr, None)
    services = sorted(k for k, v in vars(module).items() if isinstance(v, Service))
    if found is None:
        listed = ", ".join(f"{name}:{s}" for s in services)
        offer = f"; it has {listed}" if services else "; it defines no Service"
        raise TargetError(f"module {name!r} has no {attr!r}{offer}")
    if not isinstance(found, Service):
        offer = f"; did you mean {name}:{services[0]}?" if services else ""
        raise TargetError(
            f"{name}:{attr} is a {type(found).__name__}, not a Service "
            f"(ankka.runtime.agents.Service){offer}"
        )
    return found


def _import(name: str) -> ModuleType:
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name != exc.name and not name.startswith(f"{exc.name}."):
            raise TargetError(
                f"importing {name!r} failed: it imports {exc.name!r}, which is not installed "
                f"in this Python ({sys.executable})"
            ) from None
        parent, _, last = name.rpartition(".")
        if parent and _has(parent, last):
            raise TargetError(
                f"cannot import {name!r}: {parent!r} is a module, not a package; did you mean "
                f"{parent}:{last}? (MODULE:ATTR takes a colon)"
            ) from None
        file = Path(here, *name.split(".")).with_suffix(".py")
        raise TargetError(
            f"cannot import {name!r}: no module of that name in {here} or on the path "
            f"({file.name} not found); run from the folder holding it, or pass another "
            "MODULE[:ATTR]"
        ) from None
    except ConfigurationError as exc:  # a declaration the platform refused
        raise TargetError(f"{name}: {exc}") from None
    except Exception as exc:  # the user's module failed to import: where, in one line
        raise TargetError(f"importing {name!r} failed: {_located(exc)}") from None


def _has(module: str, attr: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), attr)
    except Exception:  # the hint is a guess; no guess is no hint
        return False


def _located(exc: BaseException) -> str:
    """``Type: message (file, line N)`` at the last frame of the failing import."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "importlib" not in f.filename]
    where = f" ({ours[-1].filename}, line {ours[-1].lineno})" if ours else ""
    return f"{type(exc).__name__}: {exc}{where}"
