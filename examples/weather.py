"""The weather agent: one agent, one tool. Served by ``ankka serve examples.weather:service``.

The model decides to call ``get_weather``; the platform runs it, sends the result back and
writes the whole turn to the session's journal.
"""

from __future__ import annotations

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.tools import tool

service = Service("weather")

# A fixed table keeps the example deterministic and offline; a real tool would call an API.
_FORECASTS = {
    "helsinki": "-3 °C, light snow",
    "oslo": "1 °C, overcast",
    "lisbon": "17 °C, sunny",
}


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    forecast = _FORECASTS.get(city.strip().lower())
    if forecast is None:
        raise ValueError(f"no weather station for {city!r}; known: {', '.join(_FORECASTS)}")
    return f"{city}: {forecast}"


@service.agent("weather", description="Answers questions about the weather.")
def weather(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions=(
            "You answer questions about the weather. Use get_weather for every city you are "
            "asked about, then answer in one sentence."
        ),
        tools=[get_weather],
        model="default",
    )
