"""The refunds agent: a tool that needs a person's approval for large amounts.

Served by ``ankka serve examples.refunds:service``. ``refund(order, amount)`` runs at once up
to 100; above that the turn stops before the call, the caller is answered 202 with the
request (its id, arguments and digest), and a person decides with
``POST /v1/approvals/{id}`` ``{"decision": "approve", "digest": "..."}``. Approved, the call
runs once, with exactly the arguments shown; refused, the model is told a person refused and
why. Undecided for an hour, the request expires. See docs/approvals.md.
"""

from __future__ import annotations

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.tools import tool

service = Service("refunds")

APPROVAL_ABOVE = 100.0


@tool(requires_approval=lambda args: args.amount > APPROVAL_ABOVE, approval_timeout=3600)
def refund(order: str, amount: float) -> str:
    """Refund ``amount`` on an order. Refunds above 100 wait for a person's approval."""
    # A real tool would call the payment provider; the example only says what it did.
    return f"refunded {amount:.2f} on order {order}"


@service.agent("refunds", description="Refunds orders; large refunds wait for a person.")
def refunds(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions=(
            "You handle refund requests. Call refund with the order id and the amount, then "
            "say in one sentence what happened. If a refund was refused, say so and why."
        ),
        tools=[refund],
        model="default",
    )
