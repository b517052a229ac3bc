"""The one place a provider is called checks its answer, whoever the provider is."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ankka.runtime.judgments import (
    Choice,
    Inquiry,
    JudgmentFailed,
    JudgmentReadError,
    JudgmentScriptFailed,
    ProviderAnswer,
    ProviderJudgment,
    Score,
    ScriptedJudgmentProvider,
    YesNo,
    ask,
)
from ankka.runtime.records.messages import Usage

URGENT = YesNo("urgent", "Is it urgent?")
TEAM = Choice("team", "Which team?", ["billing", "shipping", "other"])
TONE = Score("tone", "How polite?", levels=3)
ALL = Inquiry("My parcel is late.", (URGENT, TEAM, TONE))


class Fixed:
    """A provider answering one fixed judgment: the shapes a real provider might get wrong."""

    name = "fixed"

    def __init__(self, answers: Mapping[str, ProviderAnswer]) -> None:
        self.answers = answers

    async def judge(self, inquiry: Inquiry) -> ProviderJudgment:
        return ProviderJudgment(self.answers, Usage(30, 1))


def measured(probabilities: Mapping[str, float], coverage: float = 0.9) -> ProviderAnswer:
    return ProviderAnswer(probabilities, coverage, "before_constraint")


async def test_a_whole_answer_is_read_by_type() -> None:
    judge = ScriptedJudgmentProvider(
        {
            "urgent": {"yes": 0.8, "no": 0.2},
            "team": "shipping",
            "tone": {"probabilities": {"0": 0.1, "1": 0.3, "2": 0.6}, "coverage": 0.7},
        }
    )
    judgment = await ask(judge, ALL)

    assert judgment.yes_no("urgent").yes == pytest.approx(0.8)
    assert judgment.yes_no("urgent").answer is True
    assert judgment.choice("team").key == "shipping"
    assert judgment.choice("team").probability == 1.0
    tone = judgment.score("tone")
    assert tone.level == 2
    assert tone.expected == pytest.approx(1.5)
    assert tone.coverage == pytest.approx(0.7)
    assert list(judgment.answers["team"].probabilities) == ["billing", "shipping", "other"]


async def test_reading_a_question_as_the_wrong_kind_names_its_kind() -> None:
    judgment = await ask(ScriptedJudgmentProvider({"urgent": "yes"}), Inquiry("x", (URGENT,)))
    with pytest.raises(JudgmentReadError, match=r"'urgent' is a yes_no question, not a choice"):
        judgment.choice("urgent")
    with pytest.raises(JudgmentReadError, match=r"no answer to question 'team'.*urgent"):
        judgment.choice("team")


async def test_a_missing_answer_fails_naming_the_question() -> None:
    provider = Fixed({"urgent": measured({"yes": 1.0, "no": 0.0})})
    with pytest.raises(JudgmentFailed, match=r"no answer to question 'team'") as failed:
        await ask(provider, Inquiry("x", (URGENT, TEAM)))
    assert failed.value.question == "team"
    assert failed.value.usage == Usage(30, 1)  # what it spent is kept for the accounts


async def test_an_answer_to_a_question_not_asked_fails() -> None:
    provider = Fixed({"urgent": measured({"yes": 1.0, "no": 0.0}), "mood": measured({})})
    with pytest.raises(JudgmentFailed, match=r"not asked: 'mood'"):
        await ask(provider, Inquiry("x", (URGENT,)))


async def test_an_unknown_option_key_fails_naming_it() -> None:
    provider = Fixed({"urgent": measured({"yes": 0.5, "no": 0.3, "maybe": 0.2})})
    with pytest.raises(JudgmentFailed, match=r"unknown option key.*'maybe'"):
        await ask(provider, Inquiry("x", (URGENT,)))


async def test_a_missing_option_key_fails_naming_it() -> None:
    provider = Fixed({"urgent": measured({"yes": 1.0})})
    with pytest.raises(JudgmentFailed, match=r"no probability for option key.*'no'"):
        await ask(provider, Inquiry("x", (URGENT,)))


async def test_probabilities_that_do_not_sum_to_one_fail() -> None:
    provider = Fixed({"urgent": measured({"yes": 0.6, "no": 0.3})})
    with pytest.raises(JudgmentFailed, match=r"sum to 0.900000, not 1"):
        await ask(provider, Inquiry("x", (URGENT,)))


async def test_a_probability_outside_zero_to_one_fails() -> None:
    provider = Fixed({"urgent": measured({"yes": 1.5, "no": -0.5})})
    with pytest.raises(JudgmentFailed, match=r"probability of 'yes' is 1.5"):
        await ask(provider, Inquiry("x", (URGENT,)))


async def test_a_coverage_under_the_floor_fails_with_the_coverage() -> None:
    provider = Fixed({"urgent": measured({"yes": 0.7, "no": 0.3}, coverage=0.42)})
    with pytest.raises(JudgmentFailed, match=r"42.0% .*under the floor of 50%") as failed:
        await ask(provider, Inquiry("x", (URGENT,)))
    assert failed.value.coverage == pytest.approx(0.42)


async def test_the_floor_is_the_askers_to_set() -> None:
    provider = Fixed({"urgent": measured({"yes": 0.7, "no": 0.3}, coverage=0.42)})
    judgment = await ask(provider, Inquiry("x", (URGENT,)), floor=0.4)
    assert judgment.answers["urgent"].coverage == pytest.approx(0.42)
    assert judgment.answers["urgent"].measured == "before_constraint"


async def test_a_scripted_coverage_under_the_floor_fails_like_a_real_one() -> None:
    judge = ScriptedJudgmentProvider(
        {"urgent": {"probabilities": {"yes": 0.5, "no": 0.5}, "coverage": 0.1}}
    )
    with pytest.raises(JudgmentFailed) as failed:
        await ask(judge, Inquiry("x", (URGENT,)))
    assert failed.value.coverage == pytest.approx(0.1)


async def test_an_unscripted_question_fails_at_once_naming_it_and_is_no_judgment_failure() -> None:
    judge = ScriptedJudgmentProvider({"urgent": "yes"})
    with pytest.raises(JudgmentScriptFailed, match=r"no answer for question 'team'") as failed:
        await ask(judge, Inquiry("x", (URGENT, TEAM)))
    assert not isinstance(failed.value, JudgmentFailed)
    assert failed.value.question == "team"


async def test_a_scripted_key_that_is_no_option_fails_naming_it() -> None:
    judge = ScriptedJudgmentProvider({"team": "sales"})
    with pytest.raises(JudgmentScriptFailed, match=r"'sales', which is not one of its keys"):
        await ask(judge, Inquiry("x", (TEAM,)))


async def test_scripted_answers_in_turn_run_out_loudly() -> None:
    judge = ScriptedJudgmentProvider({"urgent": ["yes", "no"]})
    first = await ask(judge, Inquiry("x", (URGENT,)))
    second = await ask(judge, Inquiry("x", (URGENT,)))
    assert (first.yes_no("urgent").answer, second.yes_no("urgent").answer) == (True, False)
    with pytest.raises(JudgmentScriptFailed, match=r"asked 3 times but .* 2 answer"):
        await ask(judge, Inquiry("x", (URGENT,)))


async def test_fail_next_queues_exactly_one_real_failure_per_call() -> None:
    judge = ScriptedJudgmentProvider({"urgent": "yes"})
    judge.fail_next()
    judge.fail_next("the model is down")
    with pytest.raises(JudgmentFailed, match=r"fail_next"):
        await ask(judge, Inquiry("x", (URGENT,)))
    with pytest.raises(JudgmentFailed, match=r"the model is down"):
        await ask(judge, Inquiry("x", (URGENT,)))
    judgment = await ask(judge, Inquiry("x", (URGENT,)))
    assert judgment.yes_no("urgent").yes == 1.0
    assert len(judge.inquiries) == 3
