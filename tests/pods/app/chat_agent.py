"""A tool-less agent for the pods tier, shipped in the weather image's /app beside examples/.

SmolLM2 cannot call tools, so the weather agent's turns are rightly refused (they
declare ``get_weather``); this agent's turns are what the real model answers in a pod.
"""

from __future__ import annotations

from ankka.runtime.agents import Service, Turn, TurnRequest

service = Service("chat")


@service.agent("chat", description="Answers in one short sentence.")
def chat(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions="Answer in one short sentence.",
        model="default",
    )
