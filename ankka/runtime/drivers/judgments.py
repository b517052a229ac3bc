"""Planning a judgment handler's call: run the handler, find the judgment provider. Pure.

The host calls :func:`plan_judgment` and then :func:`~.verify.ask` with what it returns; like
an agent's turn, the handler does no I/O, so building it costs nothing and can be repeated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ankka._kernel.errors import ConfigurationError, NotFound
from ankka.runtime.declare.judgments.plan import JudgmentPlan, JudgmentRequest
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.judges import resolve

if TYPE_CHECKING:
    from ankka.runtime.declare.agents import Service

__all__ = ["plan_judgment"]


def plan_judgment(
    service: Service,
    judges: Mapping[str, JudgmentProvider],
    providers: Mapping[str, ModelProvider],
    request: JudgmentRequest,
) -> tuple[JudgmentPlan, JudgmentProvider]:
    """The handler's plan for ``request`` and the judgment provider of its model; no I/O."""
    name = request.handler
    declaration = service.judgment_declaration(name)
    if declaration is None:
        known = ", ".join(sorted(service.judgments)) or "none"
        raise NotFound(
            f"there is no judgment handler {name!r} in this service (judgment handlers: {known})"
        )
    plan = declaration.handler(request)
    if not isinstance(plan, JudgmentPlan):
        raise ConfigurationError(
            f"judgment {name!r}: its handler returned {type(plan).__name__}, not a JudgmentPlan"
        )
    return plan, resolve(judges, providers, plan.model, asker=f"judgment {name!r}")
