"""A session's sent request prefix, encoded once and spliced into its next request.

Requests are prefix-stable by design: a session's next request starts with the same
instructions and the same message objects (its history only grows, see
:class:`~ankka.runtime.engine.view.SentView`), then adds its new messages. Every wire
(:mod:`.chat_wire`, :mod:`.responses_wire`, :mod:`.anthropic_wire`) encodes its message array
item by item with one fixed encoder (:data:`dumps`), and says, with each encoding, up to which
message the items are *stable*: items that no appended message can change. Chat Completions
merges a user message into a summary just before it, so a trailing summary is not stable;
Responses and Anthropic replay reasoning only after the last user message, so an answer
carrying it is not stable (a later user message drops it); Anthropic also merges neighbouring
same-role messages, so its last wire message is not stable (the next can join it).
:class:`EncodedPrefixes` keeps the stable items' bytes of each session's last request, and the
next request encodes only from that boundary and joins the rest after the bytes kept: the
same bytes as a whole encoding (``tests/unit/runtime/providers/test_prefix_splice.py``
compares them over many turns on every wire). No I/O.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.records.messages import Message, footprint

__all__ = ["EncodedPrefixes", "ItemEncoder", "Items", "dumps", "encode_body"]

dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class Items:
    """A request's array items encoded from message ``begin`` on (each one JSON value), and
    the boundary: ``items[:count]`` encode the messages before ``stable``, whose encoding no
    appended message can change."""

    items: list[bytes]
    stable: int
    count: int


# (request, begin) -> the items of request.messages[begin:] (and of whatever the array opens
# with when begin is 0). ``begin`` is always a boundary the same encoder called stable.
ItemEncoder = Callable[[ModelRequest, int], Items]


@dataclass(frozen=True, slots=True)
class _Prefix:
    encoder: ItemEncoder
    instructions: str
    messages: tuple[Message, ...]
    encoded: bytes  # the stable items, joined with commas, without the brackets
    held: int  # the messages' footprint

    @property
    def weight(self) -> int:
        return len(self.encoded) + self.held


def _joined(head: bytes, items: list[bytes]) -> bytes:
    return b",".join([head, *items]) if head else b",".join(items)


class EncodedPrefixes:
    """The encoded stable prefix of the last request of each session a provider has sent.

    A session is known by its first message object (an entry holds the messages, so their ids
    are not reused while it lives); that the kept messages open the request is checked object
    by object, at C speed, so a request that does not continue the kept one (a compaction, a
    memory selection that dropped messages, other instructions, a fold read back after a
    restart) is encoded whole and kept in its place. At most ``sessions`` entries and
    ``limit`` bytes are kept, the least recently used dropped first: the bytes encoded and
    the messages an entry holds on to (:func:`~ankka.runtime.records.messages.footprint`),
    so a kept prefix does not hold memory that the session cache let go of uncounted."""

    def __init__(self, *, sessions: int = 1024, limit: int = 64 * 1024 * 1024) -> None:
        self._entries: dict[int, _Prefix] = {}
        self._bytes = 0
        self._sessions = sessions
        self._limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    def items(self, request: ModelRequest, encoder: ItemEncoder) -> bytes:
        """The request's array without its brackets, byte for byte as ``encoder`` has it
        encoding the request whole."""
        messages = request.messages
        if not messages:
            return b",".join(encoder(request, 0).items)
        key = id(messages[0])
        kept = self._entries.pop(key, None)
        if kept is not None:
            self._bytes -= kept.weight
        if (
            kept is not None
            and kept.encoder is encoder
            and kept.instructions == request.instructions
            and len(kept.messages) <= len(messages)
            and all(map(operator.is_, kept.messages, messages))
        ):
            begin, head, held = len(kept.messages), kept.encoded, kept.held
        else:
            begin, head, held = 0, b"", 0
        new = encoder(request, begin)
        body = _joined(head, new.items)
        if new.stable > 0:
            stable = body if new.count == len(new.items) else _joined(head, new.items[: new.count])
            held += sum(footprint(m) for m in messages[begin : new.stable])
            kept_messages = tuple(messages[: new.stable])
            self._keep(key, _Prefix(encoder, request.instructions, kept_messages, stable, held))
        return body

    def _keep(self, key: int, prefix: _Prefix) -> None:
        self._entries[key] = prefix
        self._bytes += prefix.weight
        while self._entries and (self._bytes > self._limit or len(self._entries) > self._sessions):
            dropped = self._entries.pop(next(iter(self._entries)))
            self._bytes -= dropped.weight


def encode_body(
    body: dict[str, Any],
    key: str,
    extra: Mapping[str, Any] | None,
    whole: Callable[[], list[Any]],
    spliced: tuple[EncodedPrefixes, ModelRequest, ItemEncoder] | None,
) -> bytes:
    """``body`` (``body[key]`` a placeholder holding the array's place) with ``extra``'s keys
    applied, encoded. With ``spliced`` (the memo, the request and its wire's item encoder)
    the array's items come from the memo and the keys around it are encoded apart: the same
    bytes, since the encoder writes each pair on its own. Without it, or when ``extra``
    replaces the array, ``whole()`` is the array and the body is encoded in one go."""
    replaced = extra is not None and key in extra
    if extra:
        body.update(extra)
    if spliced is None or replaced:
        if not replaced:
            body[key] = whole()
        return dumps(body).encode()
    memo, request, encoder = spliced
    names = list(body)
    at = names.index(key)
    head = dumps({k: body[k] for k in names[:at]}).encode()[:-1]
    tail = dumps({k: body[k] for k in names[at + 1 :]}).encode()[1:]
    return b"".join(
        (
            head,
            b"," if at else b"",
            dumps(key).encode(),
            b":[",
            memo.items(request, encoder),
            b"]",
            b"," if at + 1 < len(names) else b"",
            tail,
        )
    )
