"""The two tools every autonomous agent has: ``complete_task`` and ``fail_task``.

They are tools like any other to the engine (the :class:`~ankka.runtime.declare.tools.
RunnableTool` seam), named in the task's plan as the tools that end the work: an answer of
one without error is the task's end (:class:`~ankka.runtime.engine.steps.Ended`).

``complete_task`` judges its input: a result that does not decode goes back to the model as a
tool error; one that decodes is checked by the task type's rules in declared order, then by
the agent's output guardrails. A refusal is a tool error too, and the task is
``result-rejected`` until the model tries again. A rule or guardrail that raises has decided
nothing: the check is made again, counted as a failed attempt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ankka._kernel.errors import Refused
from ankka.runtime.declare.autonomous import COMPLETE_TASK, AutonomousAgent, TaskType
from ankka.runtime.declare.tools import ApprovalRule, ToolOutcome, ToolSpec
from ankka.runtime.drivers.tasks.decide import (
    ACCEPTED,
    ENDED_AS_FAILED,
    Decoded,
    Malformed,
    RuleRaised,
    check_rules,
    decode_fail,
    decode_result,
)
from ankka.runtime.drivers.tasks.prompt import complete_spec, fail_spec
from ankka.runtime.engine.executor import Executor, Ledger

__all__ = ["Builtin", "CompleteTask", "FailTask"]

Failed = Callable[[str, str], Awaitable[None]]  # (error, condition): pauses, or ends the task


class Builtin:
    """A built-in tool: named by its spec, and never waits for a person."""

    __slots__ = ()
    spec: ToolSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def approval(self) -> ApprovalRule | None:
        return None

    def needs_approval(self, raw_arguments: str) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class FailTask(Builtin):
    """``fail_task``: its input is a reason; the task ends failed with it."""

    spec: ToolSpec

    @classmethod
    def of(cls) -> FailTask:
        return cls(fail_spec())

    async def run(self, raw_arguments: str) -> ToolOutcome:
        reason = decode_fail(raw_arguments)
        if isinstance(reason, Malformed):
            return ToolOutcome(reason.message, is_error=True)
        return ToolOutcome(ENDED_AS_FAILED, is_error=False)


@dataclass(frozen=True, slots=True)
class CompleteTask(Builtin):
    """``complete_task`` for one task of ``task_type``; ``rejected`` hears a refusal's reason
    (the task is ``result-rejected``), ``failed`` a check that raised."""

    spec: ToolSpec
    task_type: TaskType
    agent: AutonomousAgent
    executor: Executor
    ledger: Ledger
    rejected: Callable[[str], Awaitable[None]]
    failed: Failed

    @classmethod
    def of(
        cls,
        task_type: TaskType,
        agent: AutonomousAgent,
        executor: Executor,
        ledger: Ledger,
        *,
        rejected: Callable[[str], Awaitable[None]],
        failed: Failed,
    ) -> CompleteTask:
        return cls(complete_spec(task_type), task_type, agent, executor, ledger, rejected, failed)

    async def run(self, raw_arguments: str) -> ToolOutcome:
        decoded = decode_result(self.task_type, raw_arguments)
        if isinstance(decoded, Malformed):
            return ToolOutcome(decoded.message, is_error=True)
        refusal = await self._refusal(decoded)
        if refusal is None:
            return ToolOutcome(ACCEPTED, is_error=False)
        by, reason = refusal
        why = f"the result was rejected by {by}: {reason}"
        await self.rejected(why)
        return ToolOutcome(why + f"; correct it and call {COMPLETE_TASK} again", is_error=True)

    async def _refusal(self, decoded: Decoded) -> tuple[str, str] | None:
        """The first refusal (by whom, why), or None; checks that raise are made again."""
        while True:
            try:
                refusal = check_rules(self.task_type, decoded.value)
                if refusal is None:
                    await self.executor.guard(
                        self.agent.output_guardrails,
                        decoded.value.model_dump_json(),
                        stage="output",
                        ledger=self.ledger,
                    )
                return refusal
            except Refused as exc:
                return exc.by, exc.reason
            except RuleRaised as exc:
                await self.failed(str(exc), "checks_failing")
            except Exception as exc:
                error = f"an output guardrail raised {type(exc).__name__}: {exc}"
                await self.failed(error, "checks_failing")
