"""One error tree: every public exception class in ``ankka/`` derives from ``AnkkaError``,
through one of its five families, by who must act (``ankka._kernel.errors.FAMILIES``:
configuration, request incl. access denied, refused, dependency failed, turn failed).

Whoever catches ankka's errors (the HTTP layers, the CLIs, a user's own code) can then catch
one root, or the family of whoever must act, and read ``kind`` and ``status``; a class outside
the tree is a failure nobody maps. Private classes (a leading underscore) are control flow
inside one module and stay out.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Iterable
from pathlib import Path

import pytest

from ankka._kernel.errors import (
    FAMILIES,
    AnkkaError,
    ConfigurationError,
    DependencyFailed,
    ModelError,
    RequestError,
    StoreError,
    TurnFailed,
)
from ankka._kernel.tls import TLSFilesError
from ankka.api.capabilities import ProbeError
from ankka.operator.kube import KubeError
from ankka.runtime.providers import anthropic_wire, responses_wire
from ankka.runtime.providers.failures import StreamFailed

PACKAGE = Path(__file__).resolve().parents[2] / "ankka"


def ankka_modules() -> list[types.ModuleType]:
    """Every module of the package, imported (``__main__`` modules run their CLI: skipped)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return [importlib.import_module(name) for name in names]


def outside_the_tree(modules: Iterable[types.ModuleType]) -> list[str]:
    """Public exception classes defined in ``modules`` that do not derive from AnkkaError."""
    found = []
    for module in modules:
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and not issubclass(value, AnkkaError)
            ):
                found.append(f"{module.__name__}.{name}")
    return found


def public_errors(modules: Iterable[types.ModuleType]) -> list[type[AnkkaError]]:
    return [
        value
        for module in modules
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, AnkkaError)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    ]


def family_of(error: type[AnkkaError]) -> type[AnkkaError] | None:
    """The nearest public root of ``error``: the first family in its MRO."""
    return next((c for c in error.__mro__ if c in FAMILIES), None)


def test_the_root_has_five_families_and_nothing_else_beneath_it() -> None:
    children = {e for e in public_errors(ankka_modules()) if AnkkaError in e.__bases__}
    assert children == set(FAMILIES)


def test_every_public_error_belongs_to_one_family() -> None:
    errors = [e for e in public_errors(ankka_modules()) if e is not AnkkaError]
    assert len(errors) > 40
    orphans = [f"{e.__module__}.{e.__name__}" for e in errors if family_of(e) is None]
    assert orphans == []
    mixed = [
        f"{e.__module__}.{e.__name__}"
        for e in errors
        if len({f for f in FAMILIES if issubclass(e, f)}) > 1
    ]
    assert mixed == []


@pytest.mark.parametrize(
    ("error", "family"),
    [
        ("ankka.runtime.serve.identity.Unauthenticated", RequestError),
        ("ankka.runtime.serve.tokenreview.TokenRefused", RequestError),
        ("ankka.runtime.declare.policy.NotPermitted", RequestError),
        ("ankka.runtime.providers.failures.StreamFailed", DependencyFailed),
        ("ankka._kernel.upstream.UpstreamError", DependencyFailed),
        ("ankka.operator.kube.KubeError", DependencyFailed),
        ("ankka.runtime.features.mcp.connection.CallFailed", DependencyFailed),
        ("ankka.runtime.store.journal_store.ConcurrentAppend", DependencyFailed),
        ("ankka.runtime.drivers.approval_errors.HandlerGone", TurnFailed),
        ("ankka.runtime.declare.judgments.errors.JudgmentScriptFailed", ConfigurationError),
    ],
)
def test_each_error_is_in_the_family_of_whoever_must_act(
    error: str, family: type[AnkkaError]
) -> None:
    module, _, name = error.rpartition(".")
    found = getattr(importlib.import_module(module), name)
    assert family_of(found) is family


def test_a_refused_token_is_an_unidentified_caller_and_a_failed_stream_a_model_error() -> None:
    from ankka.runtime.serve.identity import Unauthenticated
    from ankka.runtime.serve.tokenreview import TokenRefused

    assert issubclass(TokenRefused, Unauthenticated)
    assert TokenRefused.kind == Unauthenticated.kind and TokenRefused.status == 401
    assert issubclass(StreamFailed, ModelError) and StreamFailed.kind == "model_error"
    assert str(StreamFailed("quota")) == "quota"  # the adapter names the provider
    assert issubclass(StoreError, DependencyFailed) and StoreError.status == 500


def test_every_public_exception_in_ankka_derives_from_the_root() -> None:
    modules = ankka_modules()
    assert len(modules) > 50  # the walk found the package
    assert outside_the_tree(modules) == []


def test_a_public_exception_outside_the_tree_is_reported() -> None:
    module = types.ModuleType("ankka.example")
    module.__dict__["AnkkaError"] = AnkkaError
    exec(
        "class Lost(Exception): pass\n"
        "class _Private(Exception): pass\n"
        "class Kept(AnkkaError): pass\n",
        module.__dict__,
    )
    assert outside_the_tree([module]) == ["ankka.example.Lost"]


@pytest.mark.parametrize(
    ("error", "root"),
    [
        (KubeError, AnkkaError),
        (ProbeError, AnkkaError),
        (TLSFilesError, ConfigurationError),
        (StreamFailed, AnkkaError),
    ],
)
def test_the_errors_an_operator_meets_are_in_the_tree(
    error: type[Exception], root: type[AnkkaError]
) -> None:
    assert issubclass(error, root)


def test_both_wire_adapters_share_one_stream_failure() -> None:
    assert "StreamFailed" not in vars(responses_wire).get("__all__", ())
    assert "StreamFailed" not in vars(anthropic_wire).get("__all__", ())
    with pytest.raises(StreamFailed, match="quota"):
        responses_wire.read_response({"status": "failed", "error": {"message": "quota"}}, model="m")


def test_a_failed_kube_request_keeps_the_api_servers_status_apart_from_its_own() -> None:
    error = KubeError("GET /api/v1/namespaces/x/secrets/y", 403, "forbidden")
    assert error.http_status == 403
    assert error.status == 502  # what ankka answers, like every AnkkaError
    assert error.kind == "kube_error"
    assert "HTTP 403: forbidden" in str(error)
