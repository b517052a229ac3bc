"""The service's judgment providers, one per configured model that can answer judgments.

A judgment provider rides on its model's text provider: the same transport (connection pool,
TLS, errors naming the configured provider), so nothing is configured twice. Each provider
says through the model seam whether its wire answers judgments
(:class:`~.base.AnswersJudgments`): Chat Completions models (presets ``openai-compatible``,
``ollama``, ``installation``) give a :class:`~.logprob_judge.LogprobJudgmentProvider`; an
installation model's is checked against the gateway's ``/api/show`` (``logprobs``) before
anything is sent. Models of other presets (Anthropic, OpenAI Responses) give none, and asking
one is refused naming the model.
"""

from __future__ import annotations

from collections.abc import Mapping

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.providers.base import AnswersJudgments, ModelProvider
from ankka.runtime.providers.config import env_name, find_model

__all__ = ["judge_for", "judges_for", "resolve"]


def judge_for(provider: ModelProvider) -> JudgmentProvider | None:
    """The judgment provider over ``provider``'s model, or None when its wire has no logprobs."""
    return provider.judgment_provider() if isinstance(provider, AnswersJudgments) else None


def judges_for(providers: Mapping[str, ModelProvider]) -> dict[str, JudgmentProvider]:
    judges: dict[str, JudgmentProvider] = {}
    for name, provider in providers.items():
        judge = judge_for(provider)
        if judge is not None:
            judges[name] = judge
    return judges


def resolve(
    judges: Mapping[str, JudgmentProvider],
    providers: Mapping[str, ModelProvider],
    model: str,
    *,
    asker: str,
) -> JudgmentProvider:
    """The judgment provider of ``model``, or a ConfigurationError saying why there is none."""
    judge = find_model(judges, model)
    if judge is not None:
        return judge
    if find_model(providers, model) is not None:
        raise ConfigurationError(
            f"{asker} asks model {model!r} for a judgment, but its preset does not answer "
            "judgments (they need a Chat Completions server that returns logprobs: "
            "openai-compatible, ollama or installation)"
        )
    configured = ", ".join(sorted(providers)) or "none"
    env = env_name(model, "PRESET")
    raise ConfigurationError(
        f"{asker} asks model {model!r} for a judgment, which is not configured "
        f"(configured: {configured}); set {env} and its settings"
    )
