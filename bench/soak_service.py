"""The service ``bench/connection_soak.py --target runtime`` serves: alice's agent streams from
the slow model, bob's answers from the fast one, so her held streams never take his turns."""

from __future__ import annotations

from ankka.runtime.agents import Service, Turn, TurnRequest

service = Service("soak")


@service.agent("held")
def held(request: TurnRequest) -> Turn:
    return Turn(message=request.message, answer="stream", model="slow")


@service.agent("quick")
def quick(request: TurnRequest) -> Turn:
    return Turn(message=request.message, model="fast")
