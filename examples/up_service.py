"""What ``ankka up`` serves by default: the weather agent and the researcher, in one service.

``examples/weather.py`` answers questions with its tool; ``examples/tasks.py``'s researcher
works ``summary`` tasks. Served together so one ``ankka up`` shows both a session and a task
in the console; ``examples/up-standin.json`` scripts the stand-in for the README's question,
then for one task.
"""

from __future__ import annotations

from ankka.runtime.agents import Service
from examples import tasks, weather

service = Service("platform")
service.agent("weather", description=weather.service.agents["weather"].description)(weather.weather)
service.autonomous(tasks.researcher)

__all__ = ["service"]
