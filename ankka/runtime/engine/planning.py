"""A planned turn: what a request turn will run, as one frozen value. Pure: builds, never runs.

:func:`plan` runs an agent's handler on a request and finds the model its :class:`Turn`
names; :func:`plan_effect` does the second half for an effect built some other way. Both give
a :class:`PlannedTurn`, which is what :meth:`Runtime.run
<ankka.runtime.drivers.request.Runtime.run>` takes:

- a request from the HTTP API: ``plan(service, providers, TurnRequest(agent, session, text))``;
- an approval resuming a suspended turn: the same call on the recorded ``planned.request`` (a
  handler does no I/O, so building again gives the same effect).

A task has no handler: its driver builds the engine's plan from the task's records and finds
its model with :func:`provider_for` (:mod:`ankka.runtime.drivers.tasks.iteration`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ankka._kernel.errors import ConfigurationError, NotFound
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.config import env_name, find_model

__all__ = ["PlannedTurn", "plan", "plan_effect", "provider_for"]


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """One turn ready to run: the request it answers, the effect and the provider."""

    request: TurnRequest
    effect: Turn
    provider: ModelProvider

    @property
    def agent(self) -> str:
        return self.request.agent

    @property
    def session(self) -> str:
        return self.request.session

    @property
    def message(self) -> str:
        return self.request.message

    @property
    def streams(self) -> bool:
        return self.effect.streams


def plan(
    service: Service, providers: Mapping[str, ModelProvider], request: TurnRequest
) -> PlannedTurn:
    """Run the agent's handler on ``request`` and find its model; no I/O."""
    declaration = service.declaration(request.agent)
    if declaration is None:
        known = ", ".join(sorted(service.agents)) or "none"
        raise NotFound(f"there is no agent {request.agent!r} in this service (agents: {known})")
    effect = declaration.handler(request)
    if not isinstance(effect, Turn):
        raise ConfigurationError(
            f"agent {request.agent!r}: its handler returned {type(effect).__name__}, not a Turn"
        )
    return plan_effect(providers, request, effect)


def plan_effect(
    providers: Mapping[str, ModelProvider], request: TurnRequest, effect: Turn
) -> PlannedTurn:
    """Plan ``effect`` (built by the caller, not a handler) for ``request``; no I/O."""
    return PlannedTurn(request, effect, provider_for(providers, request.agent, effect.model))


def provider_for(providers: Mapping[str, ModelProvider], agent: str, model: str) -> ModelProvider:
    """The configured provider named ``model``; a clear error naming the setting if none.
    Task iterations (``ankka.runtime.drivers.tasks.prompt``) find their model here too."""
    provider = find_model(providers, model)
    if provider is None:
        configured = ", ".join(sorted(providers)) or "none"
        env = env_name(model, "PRESET")
        raise ConfigurationError(
            f"agent {agent!r} asks for model {model!r}, which is not configured "
            f"(configured: {configured}); set {env} and its settings"
        )
    return provider
