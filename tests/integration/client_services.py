"""One service with a turn, an approval and a task for a generated client to drive
(tests/integration/test_generated_client.py): the weather agent, the refunds agent (a refund
over 100 waits for a person) and the researcher (``summary`` tasks)."""

from __future__ import annotations

from ankka.runtime.agents import Service
from examples.refunds import service as refunds
from examples.tasks import researcher
from examples.weather import service as weather

service = Service("generated-client")
for _declared in (*weather.agents.values(), *refunds.agents.values()):
    service.agent(_declared.name, description=_declared.description)(_declared.handler)
service.autonomous(researcher)

__all__ = ["service"]
