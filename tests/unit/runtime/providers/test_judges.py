"""A judgment provider rides on its model's text provider: same name and model, the provider
itself as the transport (nothing set up twice), a frozen value whose repr shows no transport."""

from __future__ import annotations

import dataclasses

import pytest

from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.judges import judge_for
from ankka.runtime.providers.logprob_judge import LogprobJudgmentProvider
from ankka.runtime.providers.responses import ResponsesProvider

KEY = "sk-canary-0d9f"


def test_a_chat_completions_model_gets_a_judge_over_its_own_transport() -> None:
    text = ChatCompletionsProvider(
        name="local", model="smol", base_url="http://127.0.0.1:9/v1", api_key=KEY
    )
    judge = judge_for(text)
    assert isinstance(judge, LogprobJudgmentProvider)
    assert (judge.name, judge.model) == ("local", "smol")
    assert judge.transport is text
    assert repr(judge) == "LogprobJudgmentProvider(name='local', model='smol')"
    assert KEY not in repr(judge)
    with pytest.raises(dataclasses.FrozenInstanceError):
        judge.model = "other"  # type: ignore[misc]


def test_a_responses_model_has_no_judge() -> None:
    text = ResponsesProvider(name="r", model="m", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert judge_for(text) is None


def test_a_logprob_provider_does_not_claim_scripted_measurement() -> None:
    text = ChatCompletionsProvider(name="local", model="smol", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="before or after the constraint"):
        LogprobJudgmentProvider(name="local", model="smol", transport=text, measured="scripted")
