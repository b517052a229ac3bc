"""A long chat whose memory is compacted: ``ankka serve examples.long_chat:service``.

The agent ``chat`` reads the whole session, but what the model is sent from memory stays
under 4,000 characters: once it passes three quarters of that, the compaction consumer
summarises the oldest turns (with the same model, ``default``) and keeps the last 6 messages
verbatim. The turn that crosses the line never waits for the summary. Nothing is lost:
``GET /v1/sessions/{s}/messages`` still returns every message, and ``?as_sent=true`` shows
the summary and the verbatim rest the model now sees.

Try it with the stand-in (its script answers every call, the summariser's included, with the
same short line)::

    ankka standin --script examples/long-chat-standin.json --port 8090 &
    ANKKA_MODEL_DEFAULT_PRESET=openai-compatible ANKKA_MODEL_DEFAULT_URL=http://127.0.0.1:8090/v1 \\
        ankka serve examples.long_chat:service
"""

from __future__ import annotations

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.compaction import Compaction

service = Service("long-chat")

COMPACTION = Compaction(limit_chars=4000, keep_messages=6)
MAX_REPLY_TOKENS = 200


@service.agent("chat", description="Chats for as long as you like; its memory is compacted.")
def chat(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions="You are a helpful assistant. Answer in one or two sentences.",
        model="default",
        compaction=COMPACTION,
        # One or two sentences need far fewer; a small local model that rambles on stops here
        # instead of running into the model's timeout.
        max_output_tokens=MAX_REPLY_TOKENS,
    )
