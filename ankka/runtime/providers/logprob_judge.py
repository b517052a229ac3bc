"""The judgment provider over a real model's logprobs (Chat Completions servers).

For each question one request (see :mod:`.logprobs` for its shape and how the answer is read),
through the same transport as the model's text provider: llama.cpp (its grammar), vLLM or
OpenAI where allowed (a JSON schema). ``measured`` declares where the server computes the
logprobs it returns: before the constraint (llama.cpp; vLLM's default raw logprobs) or after
it (a server that reports the masked distribution); the provider does not change it. The
questions of one judgment are asked one after another: they share the text as their prefix, so
from the second on a server's prompt cache serves it.

Refusals before anything is sent: when ``capabilities`` is given (the installation model's
``/api/show``, answered by the gateway's probe), a model without ``logprobs`` is refused with
:class:`~.errors.LogprobsMissing`. A server that answers without logprobs is refused the same
way, after the fact, the first time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ankka.api.capabilities import Capability, ModelCapabilities
from ankka.runtime.declare.judgments.errors import JudgmentFailed, LogprobsMissing
from ankka.runtime.declare.judgments.seam import Inquiry, Measured, ProviderAnswer, ProviderJudgment
from ankka.runtime.providers.chat_wire import read_usage
from ankka.runtime.providers.logprobs import Constraint, encode_question, read_answer
from ankka.runtime.records.messages import Usage

__all__ = ["ChatTransport", "LogprobJudgmentProvider"]


class ChatTransport(Protocol):
    """What the provider needs of a model's transport: one JSON POST, errors translated."""

    async def post_json(self, path: str, body: bytes) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LogprobJudgmentProvider:
    """Named after its model's text provider, over that provider's transport: nothing of the
    transport (pool, TLS, retries, error translation) is set up here."""

    name: str
    model: str
    transport: ChatTransport = field(repr=False)
    constraint: Constraint = field(default="grammar", repr=False)
    measured: Measured = field(default="before_constraint", repr=False)
    top_logprobs: int = field(default=20, repr=False)
    capabilities: Callable[[], Awaitable[ModelCapabilities]] | None = field(
        default=None, repr=False
    )

    def __post_init__(self) -> None:
        if self.measured == "scripted":
            raise ValueError("a logprob provider measures before or after the constraint")

    async def judge(self, inquiry: Inquiry) -> ProviderJudgment:
        if self.capabilities is not None:
            caps = await self.capabilities()
            if not caps.has(Capability.LOGPROBS):
                raise LogprobsMissing(provider=self.name, model=self.model, sent=False)
        answers: dict[str, ProviderAnswer] = {}
        usage = Usage()
        model = self.model
        for question in inquiry.questions:
            body = encode_question(
                model=self.model,
                text=inquiry.text,
                question=question,
                instructions=inquiry.instructions,
                constraint=self.constraint,
                top_logprobs=self.top_logprobs,
            )
            data = await self.transport.post_json("/chat/completions", body)
            usage = usage + read_usage(data.get("usage"))
            model = str(data.get("model") or model)
            try:
                answers[question.id] = read_answer(
                    data,
                    question,
                    constraint=self.constraint,
                    measured=self.measured,
                    provider=self.name,
                    model=self.model,
                )
            except JudgmentFailed as exc:
                exc.usage = usage  # spent all the same: the session's accounts keep it
                raise
        return ProviderJudgment(answers, usage, model)
