"""Questions are checked where they are built: a clear error at declaration, naming it."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.judgments import Choice, JudgmentPlan, Option, Score, YesNo


def test_a_choice_keeps_its_keys_and_words_in_declared_order() -> None:
    team = Choice("team", "Which team?", {"billing": "bills", "shipping": "parcels"})
    assert team.keys == ("billing", "shipping")
    assert team.options[1] == Option("shipping", "parcels")
    assert team.kind == "choice"


def test_a_choice_of_keys_alone_shows_the_keys() -> None:
    assert Choice("team", "Which team?", ["billing", "other"]).options[0].text == "billing"


def test_a_duplicate_option_key_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"'team'.*'billing' is declared twice"):
        Choice("team", "Which team?", ["billing", "other", Option("billing", "again")])


def test_an_empty_question_text_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"question 'urgent': the text is empty"):
        YesNo("urgent", "   ")


def test_an_empty_option_text_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigurationError, match=r"option 'other': the text is empty"):
        Choice("team", "Which team?", {"billing": "bills", "other": ""})


def test_too_many_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"256 option.*2 to 255"):
        Choice("big", "Which?", [f"k{i}" for i in range(256)])


def test_one_option_is_no_choice() -> None:
    with pytest.raises(ConfigurationError, match=r"1 option"):
        Choice("one", "Which?", ["only"])


def test_a_question_id_must_be_a_wire_id() -> None:
    with pytest.raises(ConfigurationError, match=r"'Team Name' is not a wire id"):
        YesNo("Team Name", "Is it?")


def test_an_option_key_with_spaces_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"'two words' is not a key"):
        Choice("team", "Which?", ["two words", "other"])


def test_a_score_has_digit_keys_and_names_its_ends() -> None:
    tone = Score("tone", "How polite?", levels=3, low="rude", high="very polite")
    assert tone.keys == ("0", "1", "2")
    assert tone.options[0].text == "0 (rude)"
    assert tone.options[2].text == "2 (very polite)"


@pytest.mark.parametrize("levels", [1, 11])
def test_a_score_has_two_to_ten_levels(levels: int) -> None:
    with pytest.raises(ConfigurationError, match=rf"{levels} levels"):
        Score("tone", "How polite?", levels=levels)


def test_a_yes_no_question_has_the_keys_yes_and_no() -> None:
    assert YesNo("urgent", "Urgent?").keys == ("yes", "no")


def test_a_plan_refuses_two_questions_with_one_id() -> None:
    with pytest.raises(ConfigurationError, match=r"two questions share the id 'urgent'"):
        JudgmentPlan(text="hi", questions=(YesNo("urgent", "A?"), YesNo("urgent", "B?")))


def test_a_plan_refuses_a_coverage_floor_outside_zero_to_one() -> None:
    with pytest.raises(ConfigurationError, match=r"coverage_floor"):
        JudgmentPlan(text="hi", questions=(YesNo("urgent", "A?"),), coverage_floor=1.5)


def test_a_plan_refuses_something_that_is_not_a_question() -> None:
    with pytest.raises(ConfigurationError, match=r"is not a question"):
        JudgmentPlan(text="hi", questions=("urgent",))  # type: ignore[arg-type]
