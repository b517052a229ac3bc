"""Questions are values: a choice, a score or a yes/no, each with a wire id and option keys.

A question is checked where it is built, so a duplicate key, an empty text or too many options
is a :class:`~ankka._kernel.errors.ConfigurationError` at declaration, naming the question, and
never a surprise at the first request. The wire id is the name the answer is stored and
rendered under (``judgment.choice("team")``, ``{"answers": {"team": ...}}``); option keys are
the names of the options in the answer. What the model is shown to pick (single-token labels
such as ``A``, ``B``) is the provider's business, never the service's.

    Choice("team", "Which team should handle it?", {"billing": "payments, invoices", ...})
    Score("tone", "How polite is the message?", levels=5)       # keys "0" ... "4"
    YesNo("urgent", "Does the customer need an answer today?")  # keys "yes", "no"
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

from ankka._kernel.errors import ConfigurationError

__all__ = [
    "MAX_CHOICES",
    "MAX_LEVELS",
    "Choice",
    "Option",
    "Question",
    "QuestionKind",
    "Score",
    "YesNo",
    "check_questions",
]

MAX_CHOICES = 255
MAX_LEVELS = 10
MAX_QUESTIONS = 32
MAX_TEXT = 2000
MAX_OPTION_TEXT = 500

QuestionKind = Literal["choice", "score", "yes_no"]

_ID = re.compile(r"[a-z][a-z0-9_]{0,63}")
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class Option:
    """One option: its key in the answer and the words the model is shown."""

    key: str
    text: str


def _check_text(where: str, text: str, limit: int) -> None:
    if not text.strip():
        raise ConfigurationError(f"{where}: the text is empty; say what is asked")
    if len(text) > limit:
        raise ConfigurationError(f"{where}: the text has {len(text)} characters; at most {limit}")


def _check_id(question_id: str) -> None:
    if not _ID.fullmatch(question_id):
        raise ConfigurationError(
            f"question id {question_id!r} is not a wire id: lowercase letters, digits and '_', "
            "starting with a letter, at most 64 characters"
        )


def _check_options(where: str, options: Sequence[Option], low: int, high: int) -> None:
    if not low <= len(options) <= high:
        raise ConfigurationError(
            f"{where}: {len(options)} option(s); a question of this kind has {low} to {high}"
        )
    seen: set[str] = set()
    for option in options:
        if not _KEY.fullmatch(option.key):
            raise ConfigurationError(
                f"{where}: option key {option.key!r} is not a key: letters, digits, '_', '.' "
                "and '-', at most 64 characters"
            )
        if option.key in seen:
            raise ConfigurationError(f"{where}: option key {option.key!r} is declared twice")
        seen.add(option.key)
        _check_text(f"{where}, option {option.key!r}", option.text, MAX_OPTION_TEXT)


def _options(raw: Mapping[str, str] | Sequence[str | Option]) -> tuple[Option, ...]:
    if isinstance(raw, Mapping):
        return tuple(Option(str(k), str(v)) for k, v in raw.items())
    return tuple(o if isinstance(o, Option) else Option(o, o) for o in raw)


@dataclass(frozen=True, slots=True, init=False)
class Choice:
    """Pick one of 2 to 255 options. ``options`` maps keys to the words shown (or lists keys,
    shown as they are)."""

    id: str
    text: str
    options: tuple[Option, ...]
    kind: ClassVar[QuestionKind] = "choice"

    def __init__(self, id: str, text: str, options: Mapping[str, str] | Sequence[str | Option]):
        _check_id(id)
        where = f"question {id!r}"
        _check_text(where, text, MAX_TEXT)
        parsed = _options(options)
        _check_options(where, parsed, 2, MAX_CHOICES)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "options", parsed)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(o.key for o in self.options)


@dataclass(frozen=True, slots=True, init=False)
class Score:
    """A level from 0 to ``levels - 1`` (2 to 10 levels); keys are ``"0"``, ``"1"``, ...
    ``low`` and ``high`` say what the ends mean."""

    id: str
    text: str
    options: tuple[Option, ...]
    levels: int
    kind: ClassVar[QuestionKind] = "score"

    def __init__(self, id: str, text: str, *, levels: int = 5, low: str = "", high: str = ""):
        _check_id(id)
        where = f"question {id!r}"
        _check_text(where, text, MAX_TEXT)
        if not 2 <= levels <= MAX_LEVELS:
            raise ConfigurationError(f"{where}: {levels} levels; a score has 2 to {MAX_LEVELS}")
        words = {0: low, levels - 1: high}
        parsed = tuple(
            Option(str(i), f"{i} ({words[i]})" if words.get(i) else str(i)) for i in range(levels)
        )
        _check_options(where, parsed, 2, MAX_LEVELS)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "options", parsed)
        object.__setattr__(self, "levels", levels)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(o.key for o in self.options)


@dataclass(frozen=True, slots=True, init=False)
class YesNo:
    """Yes or no; keys ``"yes"`` and ``"no"``."""

    id: str
    text: str
    options: tuple[Option, ...]
    kind: ClassVar[QuestionKind] = "yes_no"

    def __init__(self, id: str, text: str):
        _check_id(id)
        _check_text(f"question {id!r}", text, MAX_TEXT)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "options", (Option("yes", "yes"), Option("no", "no")))

    @property
    def keys(self) -> tuple[str, ...]:
        return ("yes", "no")


Question: TypeAlias = Choice | Score | YesNo


def check_questions(questions: Sequence[Question], *, where: str) -> tuple[Question, ...]:
    """The questions of one judgment: 1 to 32, each a question value, ids unique."""
    found = tuple(questions)
    if not 1 <= len(found) <= MAX_QUESTIONS:
        raise ConfigurationError(
            f"{where}: {len(found)} question(s); a judgment asks 1 to {MAX_QUESTIONS}"
        )
    ids: set[str] = set()
    for question in found:
        if not isinstance(question, Choice | Score | YesNo):
            raise ConfigurationError(
                f"{where}: {question!r} is not a question (Choice, Score or YesNo)"
            )
        if question.id in ids:
            raise ConfigurationError(f"{where}: two questions share the id {question.id!r}")
        ids.add(question.id)
    return found
