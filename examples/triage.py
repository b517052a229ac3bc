"""The triage judgment: is a customer's message urgent, and which team should take it?

Served by ``ankka serve examples.triage:service``; asked with
``curl -s localhost:8000/v1/agents/triage/judgments -d '{"text": "..."}'``. The model writes
no text: each question is answered with a probability per option, read from the model's
logprobs, and the share of probability the options held (the coverage).
"""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.judgments import Choice, JudgmentPlan, JudgmentRequest, YesNo

service = Service("triage")

URGENT = YesNo("urgent", "Does the customer need help today, before anything else?")
TEAM = Choice(
    "team",
    "Which team should answer the customer?",
    {
        "billing": "billing: invoices, payments, refunds, charges",
        "shipping": "shipping: deliveries, parcels, tracking, addresses",
        "other": "other: anything else",
    },
)


@service.judgment("triage", description="Urgency and team of a customer's message.")
def triage(request: JudgmentRequest) -> JudgmentPlan:
    return JudgmentPlan(
        text=f"A customer wrote:\n{request.text}",
        questions=(URGENT, TEAM),
        instructions=(
            "You triage customer messages for a web shop. Answer each question with the label "
            "of one option and nothing else."
        ),
        model="default",
    )
