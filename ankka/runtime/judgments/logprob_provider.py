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
from typing import Any, Protocol

from ankka.api.capabilities import Capability, ModelCapabilities
from ankka.runtime.judgments.errors import JudgmentFailed, LogprobsMissing
from ankka.runtime.judgments.logprobs import Constraint, encode_question, read_answer
from ankka.runtime.judgments.seam import Inquiry, Measured, ProviderAnswer, ProviderJudgment
from ankka.runtime.messages import Usage
from ankka.runtime.providers.chat_wire import read_usage

__all__ = ["ChatTransport", "LogprobJudgmentProvider"]


class ChatTransport(Protocol):
    """What the provider needs of a model's transport: one JSON POST, errors translated."""

    async def post_json(self, path: str, body: bytes) -> dict[str, Any]: ...


class LogprobJudgmentProvider:
    def __init__(
        self,
        *,
        name: str,
        model: str,
        transport: ChatTransport,
        constraint: Constraint = "grammar",
        measured: Measured = "before_constraint",
        top_logprobs: int = 20,
        capabilities: Callable[[], Awaitable[ModelCapabilities]] | None = None,
    ) -> None:
        if measured == "scripted":
            raise ValueError("a logprob provider measures before or after the constraint")
        self._name = name
        self._model = model
        self._transport = transport
        self._constraint: Constraint = constraint
        self._measured: Measured = measured
        self._top_logprobs = top_logprobs
        self._capabilities = capabilities

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    def __repr__(self) -> str:
        return f"LogprobJudgmentProvider(name={self._name!r}, model={self._model!r})"

    async def judge(self, inquiry: Inquiry) -> ProviderJudgment:
        if self._capabilities is not None:
            caps = await self._capabilities()
            if not caps.has(Capability.LOGPROBS):
                raise LogprobsMissing(provider=self._name, model=self._model, sent=False)
        answers: dict[str, ProviderAnswer] = {}
        usage = Usage()
        model = self._model
        for question in inquiry.questions:
            body = encode_question(
                model=self._model,
                text=inquiry.text,
                question=question,
                instructions=inquiry.instructions,
                constraint=self._constraint,
                top_logprobs=self._top_logprobs,
            )
            data = await self._transport.post_json("/chat/completions", body)
            usage = usage + read_usage(data.get("usage"))
            model = str(data.get("model") or model)
            try:
                answers[question.id] = read_answer(
                    data,
                    question,
                    constraint=self._constraint,
                    measured=self._measured,
                    provider=self._name,
                    model=self._model,
                )
            except JudgmentFailed as exc:
                exc.usage = usage  # spent all the same: the session's accounts keep it
                raise
        return ProviderJudgment(answers, usage, model)
