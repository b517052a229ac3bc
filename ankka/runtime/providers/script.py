"""The script both test doubles answer from: the stand-in server and the scripted provider.

A script is a JSON list of turns, served in order, or an object
``{"turns": [...], "models": {"NAME": {"capabilities": [...], "thinking": [...],
"context_length": N}}}`` whose ``models`` the stand-in answers on Ollama's ``/api/show``
(a model not listed there gets 404, as from Ollama). Each turn is ``{"text": "..."}`` or
``{"tool_calls": [{"name": "...", "arguments": {...}}]}``, optionally with
``"usage": {"input_tokens": N, "output_tokens": N, "cache_read_tokens": N,
"cache_write_tokens": N}`` and ``"delay_ms": N`` (the stand-in waits that long before
answering; the scripted provider waits on its injected clock), ``"status": N`` (answered as
that HTTP error: the stand-in in the endpoint's error shape, the scripted provider by raising
what an HTTP provider raises for it; ``text`` is then the error's message),
``"reasoning": "..."`` (the stand-in sends it as a Responses reasoning item or an Anthropic
thinking block; the scripted provider returns it as the answer's provider state),
``"when": "user" | "tool"`` (the turn answers only a request whose last message is from that
role), ``"call": N`` (the turn answers only the N-th model call of a conversation, counted
from 1 by the model's answers the request carries) and ``"contains": "TEXT"`` (the turn answers
only a request whose instructions or messages contain TEXT: a script can give each session or
task its own turns, ``"contains": "Task t1 (type"``). The first unserved turn that fits is
served, so sessions running at once can share one script; :class:`TurnQueue` is that rule, for
both doubles. Parsing is strict: a mistake in a script names the turn and the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.records.messages import Usage

__all__ = [
    "Script",
    "ScriptTurn",
    "ScriptedCall",
    "ScriptedModel",
    "TurnQueue",
    "load_script",
    "parse_script",
    "parse_turns",
]

_TURN_KEYS = {
    "text",
    "tool_calls",
    "usage",
    "delay_ms",
    "when",
    "call",
    "reasoning",
    "status",
    "contains",
}
_WHEN = ("user", "tool")
_USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    name: str
    arguments: str  # JSON text, as a model would send it


@dataclass(frozen=True, slots=True)
class ScriptTurn:
    text: str | None = None
    tool_calls: tuple[ScriptedCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    delay_ms: float = 0.0
    when: str | None = None
    reasoning: str | None = None
    status: int | None = None
    call: int | None = None
    contains: str | None = None

    def fits(self, last_role: str | None, call: int | None = None, text: str = "") -> bool:
        """Whether this turn answers a request whose last message is from ``last_role``, which
        is the ``call``-th model call of its conversation and whose instructions and messages,
        joined, are ``text``."""
        if self.call is not None and self.call != call:
            return False
        if self.when is not None and self.when != last_role:
            return False
        return self.contains is None or self.contains in text


class ScriptError(ConfigurationError):
    kind = "invalid_script"


def _usage(raw: object, where: str) -> Usage:
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: 'usage' must be an object")
    unknown = set(raw) - _USAGE_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown usage key(s) {sorted(unknown)}")
    for key, value in raw.items():
        if not isinstance(value, int) or value < 0:
            raise ScriptError(f"{where}: usage {key!r} must be a whole number ≥ 0")
    return Usage.from_dict(raw)


def _call(raw: object, where: str) -> ScriptedCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ScriptError(f"{where}: each tool call needs a 'name' string")
    arguments = raw.get("arguments", {})
    # A string is sent verbatim (so a script can send arguments that do not decode).
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ScriptedCall(raw["name"], text)


def parse_turn(raw: object, where: str) -> ScriptTurn:
    if isinstance(raw, str):
        return ScriptTurn(text=raw)
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: a turn is an object with 'text' or 'tool_calls'")
    unknown = set(raw) - _TURN_KEYS
    if unknown:
        raise ScriptError(
            f"{where}: unknown key(s) {sorted(unknown)}; a turn takes {sorted(_TURN_KEYS)}"
        )
    text = raw.get("text")
    calls_raw = raw.get("tool_calls", [])
    if text is None and not calls_raw and "status" not in raw:
        raise ScriptError(f"{where}: needs 'text', 'tool_calls' or 'status'")
    if text is not None and not isinstance(text, str):
        raise ScriptError(f"{where}: 'text' must be a string")
    if not isinstance(calls_raw, list):
        raise ScriptError(f"{where}: 'tool_calls' must be a list")
    calls = tuple(_call(c, f"{where}, tool call {i}") for i, c in enumerate(calls_raw))
    usage = _usage(raw["usage"], where) if "usage" in raw else Usage()
    delay = raw.get("delay_ms", 0)
    if not isinstance(delay, int | float) or delay < 0:
        raise ScriptError(f"{where}: 'delay_ms' must be a number ≥ 0")
    when = raw.get("when")
    if when is not None and when not in _WHEN:
        raise ScriptError(f"{where}: 'when' must be one of {list(_WHEN)}, not {when!r}")
    reasoning = raw.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        raise ScriptError(f"{where}: 'reasoning' must be a string")
    status = raw.get("status")
    if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
        raise ScriptError(f"{where}: 'status' must be an HTTP error status, 400 to 599")
    call = raw.get("call")
    if call is not None and (not isinstance(call, int) or isinstance(call, bool) or call < 1):
        raise ScriptError(f"{where}: 'call' must be a whole number ≥ 1")
    contains = raw.get("contains")
    if contains is not None and (not isinstance(contains, str) or not contains):
        raise ScriptError(f"{where}: 'contains' must be a non-empty string")
    return ScriptTurn(text, calls, usage, float(delay), when, reasoning, status, call, contains)


class TurnQueue:
    """A script's turns in serving order: the first unserved turn that fits a request is next.

    Shared by the stand-in and the scripted provider, so ``when`` means the same to both.
    """

    def __init__(self, turns: list[ScriptTurn]) -> None:
        self.turns = turns
        self.served = 0
        self._used = [False] * len(turns)
        self._first_unserved = 0

    def take(
        self, last_role: str | None, call: int | None = None, text: str = ""
    ) -> ScriptTurn | None:
        """The first unserved turn that fits a request whose last message is ``last_role``'s,
        which is the ``call``-th model call of its conversation and whose instructions and
        messages, joined, are ``text``."""
        while self._first_unserved < len(self.turns) and self._used[self._first_unserved]:
            self._first_unserved += 1
        for index in range(self._first_unserved, len(self.turns)):
            if not self._used[index] and self.turns[index].fits(last_role, call, text):
                self._used[index] = True
                self.served += 1
                return self.turns[index]
        return None


@dataclass(frozen=True, slots=True)
class ScriptedModel:
    """What ``/api/show`` says of one model."""

    capabilities: tuple[str, ...]
    thinking: tuple[bool | str, ...] = ()
    context_length: int | None = None


@dataclass(frozen=True, slots=True)
class Script:
    turns: list[ScriptTurn]
    models: dict[str, ScriptedModel]


_MODEL_KEYS = {"capabilities", "thinking", "context_length"}


def _model(name: str, raw: object) -> ScriptedModel:
    where = f"model {name!r}"
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: expected an object with 'capabilities'")
    unknown = set(raw) - _MODEL_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown key(s) {sorted(unknown)}")
    caps = raw.get("capabilities")
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise ScriptError(f"{where}: 'capabilities' must be a list of strings")
    thinking = raw.get("thinking", [])
    if not isinstance(thinking, list) or not all(isinstance(t, bool | str) for t in thinking):
        raise ScriptError(f"{where}: 'thinking' must be a list of booleans or level names")
    length = raw.get("context_length")
    if length is not None and (not isinstance(length, int) or length <= 0):
        raise ScriptError(f"{where}: 'context_length' must be a positive whole number")
    return ScriptedModel(tuple(caps), tuple(thinking), length)


def parse_script(data: Any) -> Script:
    """Read a whole script: its turns and, in the object form, its models."""
    if isinstance(data, dict):
        unknown = set(data) - {"turns", "models"}
        if unknown:
            raise ScriptError(
                f"unknown top-level key(s) {sorted(unknown)}; a script takes 'turns' and 'models'"
            )
        models_raw = data.get("models", {})
        if not isinstance(models_raw, dict):
            raise ScriptError("'models' must map model names to what /api/show answers")
        models = {str(k): _model(str(k), v) for k, v in models_raw.items()}
        return Script(parse_turns(data.get("turns", [])), models)
    return Script(parse_turns(data), {})


def parse_turns(turns: Any) -> list[ScriptTurn]:
    if not isinstance(turns, list):
        raise ScriptError("a script is a JSON list of turns (or an object with a 'turns' list)")
    return [parse_turn(raw, f"turn {i}") for i, raw in enumerate(turns)]


def load_script(path: str | Path) -> Script:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ScriptError(f"cannot read the script {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ScriptError(f"the script {path} is not JSON: {exc}") from exc
    return parse_script(data)
