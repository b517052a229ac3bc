"""The same call made again and again: how many times a task asked for one tool with the same
arguments. Pure.

A model stuck in a loop asks for the same thing over and over (the same search, the same
delegation); the engine counts a call's twins among everything the work produced so far, by
the tool's name and the digest of its arguments' canonical JSON (key order and spacing do not
make two calls differ), and the planner stops the work at the limit, before the call that
reached it runs (:class:`~ankka.runtime.engine.steps.Repeated`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache

from ankka.runtime.records.messages import AssistantMessage, Message, ToolCall

__all__ = ["call_digest", "twins"]


@lru_cache(maxsize=256)
def call_digest(name: str, arguments: str) -> str:
    """A short digest of a call: its tool's name and its arguments as canonical JSON (the
    raw text when it is not JSON). Kept for the last 256 calls digested: every iteration of
    a task counts the twins of its next call among all its earlier ones, which would parse
    and hash each earlier call again (issue 23, Speed). The bound holds 256 calls' arguments
    alive at most (each bounded by a model answer's output)."""
    try:
        canonical = json.dumps(
            json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"),
            ensure_ascii=False,
        )  # fmt: skip
    except ValueError:
        canonical = arguments
    return hashlib.sha256(f"{name}\0{canonical}".encode()).hexdigest()[:16]


def twins(produced: Sequence[Message], answer: AssistantMessage, call: ToolCall) -> int:
    """How many calls asked for ``call``'s tool with its arguments: every call of the answers
    in ``produced`` before ``answer``, and of ``answer`` up to and including ``call`` (both
    found by identity: call ids may repeat from one answer to the next)."""
    wanted = call_digest(call.name, call.arguments)
    count = 0
    for message in produced:
        if not isinstance(message, AssistantMessage):
            continue
        for asked in message.tool_calls:
            if asked.name == call.name and (
                asked.arguments == call.arguments
                or call_digest(asked.name, asked.arguments) == wanted
            ):
                count += 1
            if message is answer and asked is call:
                return count
        if message is answer:
            break
    return count
