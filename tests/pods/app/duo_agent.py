"""The replicas' agent of the pods tier (tests/pods/test_workload.py): its instructions name
the pod that runs the turn (``$HOSTNAME``, the pod's name), so the stand-in's record of each
request says which replica sent it, and every request carries the session's history as the
store gave it to that replica."""

from __future__ import annotations

import os

from ankka.runtime.agents import Service, Turn, TurnRequest

service = Service("duo")


@service.agent("duo", description="Answers from whichever replica the turn reached.")
def duo(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions=f"You run in pod {os.environ.get('HOSTNAME', '?')}.",
        model="default",
    )
