"""Reading Chat Completions answers: whole and streamed, tool calls and usage."""

from __future__ import annotations

from typing import Any

from ankka.runtime.providers.chat_wire import StreamAccumulator, read_response
from ankka.runtime.records.messages import ToolCall, Usage


def test_a_whole_answer_with_tool_calls_and_cached_tokens() -> None:
    response = read_response(
        {
            "model": "m1",
            "choices": [
                {
                    "message": {
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}},
                            {"id": "c2", "function": {"name": "g", "arguments": {"b": 2}}},
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": 8},
            },
        },
        model="fallback",
    )
    assert response.tool_calls == (
        ToolCall("c1", "f", '{"a": 1}'),
        ToolCall("c2", "g", '{"b":2}'),
    )
    assert response.usage == Usage(10, 3, 8, 0)
    assert response.model == "m1"
    assert response.finish_reason == "tool_calls"  # the chat span's finish reason


def test_streamed_tool_call_deltas_are_joined_by_index() -> None:
    acc = StreamAccumulator("m")
    chunks: list[dict[str, Any]] = [
        {"choices": [{"delta": {"role": "assistant", "content": "Let me "}}]},
        {"choices": [{"delta": {"content": "check."}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {"name": "get_", "arguments": '{"ci'},
                            }
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "c2",
                                "function": {"name": "other", "arguments": "{}"},
                            }
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "function": {"name": "weather", "arguments": 'ty": "Oslo"}'},
                            }
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}},
    ]
    texts = [acc.add(c) for c in chunks]
    assert [t for t in texts if t] == ["Let me ", "check."]
    result = acc.result()
    assert result.content == "Let me check."
    assert result.tool_calls == (
        ToolCall("c1", "get_weather", '{"city": "Oslo"}'),
        ToolCall("c2", "other", "{}"),
    )
    assert result.usage == Usage(5, 7)
    assert result.finish_reason == "tool_calls"
