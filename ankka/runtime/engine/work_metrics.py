"""Prometheus metrics of a runtime's work beside its turns: tasks, their iterations, approvals
and delegations (docs/observability.md).

Counted where the change is committed, by the process that committed it, so a task that ends
once is counted once across replicas and restarts (the counts of one process; sum them over
the replicas). Task events are counted as they are published (:meth:`WorkMetrics.heard`, the
task notifier's every notice, never a relayed one). Labels carry agent names, tool names (of
declared approvals: bounded by the service) and fixed words; never a task id, a session or
text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ankka.runtime.engine.labelled import Labelled

__all__ = ["APPROVAL_BUCKETS", "WorkMetrics"]

# From seconds to a day: a person's decision may take that long.
APPROVAL_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86400.0)

_ENDED = {"task_completed": "completed", "task_failed": "failed", "task_cancelled": "cancelled"}
_ITERATIONS = {"iteration_completed": "completed", "iteration_failed": "failed"}


class WorkMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.tasks_started = Labelled(
            Counter(
                "ankka_tasks_started", "Tasks whose first iteration started", ["agent"], registry=r
            )
        )
        self.tasks_ended = Labelled(
            Counter(
                "ankka_tasks_ended",
                "Tasks that reached a final state, by state (completed, failed, cancelled)",
                ["agent", "state"],
                registry=r,
            )
        )
        self.task_ends = Labelled(
            Counter(
                "ankka_task_ends",
                "Tasks ended by the runtime for a cause of its own, by cause (budget_exhausted, "
                "repeated_call, deadline_exceeded)",
                ["agent", "cause"],
                registry=r,
            )
        )
        self.iterations = Labelled(
            Counter(
                "ankka_task_iterations",
                "Task iterations, by outcome (completed, failed)",
                ["agent", "outcome"],
                registry=r,
            )
        )
        self.approvals_requested = Labelled(
            Counter(
                "ankka_approvals_requested",
                "Tool calls that waited for a decision",
                ["agent", "tool"],
                registry=r,
            )
        )
        self.approvals_decided = Labelled(
            Counter(
                "ankka_approvals_decided",
                "Approvals decided, by decision (approved, refused, expired)",
                ["agent", "tool", "decision"],
                registry=r,
            )
        )
        self.approval_seconds = Labelled(
            Histogram(
                "ankka_approval_decision_seconds",
                "Time from a call's suspension to its decision",
                ["agent", "decision"],
                buckets=APPROVAL_BUCKETS,
                registry=r,
            )
        )
        self.approvals_pending = Gauge(
            "ankka_approvals_pending",
            "Approvals waiting for a decision, in the store (every replica's), as last read",
            registry=r,
        )
        self.delegations = Labelled(
            Counter(
                "ankka_delegations",
                "Delegation calls, by outcome (child_made: a child task was made; refused)",
                ["agent", "child_agent", "outcome"],
                registry=r,
            )
        )

    def heard(self, event: str, agent: str, data: Mapping[str, Any]) -> None:
        """A task notice was published (drivers/tasks/notify.py)."""
        if event == "task_started":
            self.tasks_started.labels(agent).inc()
        elif event in _ENDED:
            self.tasks_ended.labels(agent, _ENDED[event]).inc()
        elif event in _ITERATIONS:
            self.iterations.labels(agent, _ITERATIONS[event]).inc()

    def ended_for(self, agent: str, cause: str) -> None:
        """The runtime ended a task itself (its budget spent, a call repeated...)."""
        self.task_ends.labels(agent, cause).inc()

    def requested(self, agent: str, tools: list[str]) -> None:
        for tool in tools:
            self.approvals_requested.labels(agent, tool).inc()

    def decided(self, agent: str, tool: str, decision: str, seconds: float | None) -> None:
        self.approvals_decided.labels(agent, tool, decision).inc()
        if seconds is not None and seconds >= 0:
            self.approval_seconds.labels(agent, decision).observe(seconds)

    def pending(self, count: int) -> None:
        """The store's count of approvals waiting (read at start and on each timer tick)."""
        self.approvals_pending.set(count)

    def delegated(self, agent: str, child_agent: str, outcome: str) -> None:
        self.delegations.labels(agent, child_agent, outcome).inc()
