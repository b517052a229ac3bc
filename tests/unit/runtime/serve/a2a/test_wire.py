"""The pure A2A pieces: a message's text, decisions, a task on the wire, the cards."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf import json_format, struct_pb2

from ankka._kernel.errors import RequestError
from ankka.runtime.serve.a2a.card import CardSettings, agent_card, base_url
from ankka.runtime.serve.a2a.decisions import decisions_of
from ankka.runtime.serve.a2a.port import AgentInfo
from ankka.runtime.serve.a2a.wire import Said, TaskView, derived_id, message_text, to_task

PENDING = [{"id": "apr_1", "digest": "d" * 64, "tool": "refund"}]


def _message(*parts: pb.Part) -> pb.Message:
    return pb.Message(message_id="m", role=pb.ROLE_USER, parts=list(parts))


def _data(value: object) -> pb.Part:
    part = pb.Part()
    part.data.CopyFrom(json_format.ParseDict(value, struct_pb2.Value()))  # type: ignore[arg-type]
    return part


def test_text_and_data_parts_become_one_text_in_order() -> None:
    text = message_text(_message(pb.Part(text="Refund"), _data({"order": "A-1"})))
    assert text == 'Refund\n{"order": "A-1"}'


def test_a_file_part_is_refused_naming_what_is_taken() -> None:
    with pytest.raises(ContentTypeNotSupportedError, match="text and JSON data"):
        message_text(_message(pb.Part(url="https://example.invalid/x.png")))


def test_a_message_without_text_is_refused() -> None:
    with pytest.raises(InvalidParamsError):
        message_text(_message(pb.Part(text="  ")))


def test_derived_ids_are_stable_and_differ_by_caller() -> None:
    assert derived_id("a2a", "echo", "ann", "m1") == derived_id("a2a", "echo", "ann", "m1")
    assert derived_id("a2a", "echo", "ann", "m1") != derived_id("a2a", "echo", "bob", "m1")


def test_one_pending_request_is_decided_by_a_word_with_its_digest() -> None:
    [decision] = decisions_of(_message(pb.Part(text="approve: looks right")), PENDING)
    assert (decision.approval, decision.decision, decision.digest) == (
        "apr_1",
        "approved",
        "d" * 64,
    )
    assert decision.reason == "looks right"


def test_two_pending_requests_need_the_approval_named() -> None:
    two = [*PENDING, {"id": "apr_2", "digest": "e" * 64}]
    with pytest.raises(InvalidParamsError, match="name the approval"):
        decisions_of(_message(pb.Part(text="refuse")), two)
    [decision] = decisions_of(_message(_data({"decision": "refuse", "approval": "apr_2"})), two)
    assert (decision.approval, decision.digest) == ("apr_2", "e" * 64)


def test_a_message_that_decides_nothing_is_refused() -> None:
    with pytest.raises(InvalidParamsError, match="approve or refuse"):
        decisions_of(_message(pb.Part(text="maybe later")), PENDING)


def test_history_length_keeps_the_most_recent_messages() -> None:
    view = TaskView(
        "t",
        "c",
        "completed",
        datetime(2026, 1, 1, tzinfo=UTC),
        result="hi",
        history=[Said("user", "q", "m1"), Said("agent", "hi", "m2")],
    )
    assert [m.message_id for m in to_task(view, history_length=1).history] == ["m2"]
    assert not to_task(view, history_length=0).history
    assert len(to_task(view).history) == 2
    assert not to_task(view, artifacts=False).artifacts
    assert to_task(view).status.state == pb.TASK_STATE_COMPLETED


def test_a_card_names_both_bindings_at_the_base_and_the_runtimes_schemes() -> None:
    agent = AgentInfo("echo", "Answers.", "request")
    settings = CardSettings(mtls=True, bearer=True, bearer_format="kubernetes-service-account")
    card = agent_card(agent, settings, "https://agents.example/a2a/echo")
    assert [(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces] == [
        ("JSONRPC", "1.0", "https://agents.example/a2a/echo"),
        ("HTTP+JSON", "1.0", "https://agents.example/a2a/echo"),
    ]
    assert set(card.security_schemes) == {"mtls", "bearer"}
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["mtls"], ["bearer"]]


def test_an_autonomous_agents_skills_are_its_task_types() -> None:
    agent = AgentInfo("r", "Researches.", "autonomous", True, (("summary", "Sums up.", {}),))
    card = agent_card(agent, CardSettings(), "http://h/a2a/r")
    assert [s.id for s in card.skills] == ["summary"]
    assert list(card.default_output_modes) == ["application/json"]
    assert not card.security_schemes


def test_card_urls_come_from_the_public_url_or_the_host_never_the_bind_address() -> None:
    public = CardSettings(public_url="https://agents.example/team/")
    assert base_url(public, scheme="http", host="0.0.0.0:8000", agent="echo") == (
        "https://agents.example/team/a2a/echo"
    )
    assert base_url(CardSettings(tls=True), scheme="http", host="pod:8443", agent="e") == (
        "https://pod:8443/a2a/e"
    )
    with pytest.raises(RequestError, match="Host"):
        base_url(CardSettings(), scheme="http", host="evil/<script>", agent="e")


def test_remote_agents_come_from_the_variables_the_operator_renders() -> None:
    from ankka.runtime.providers.remote_agents import remote_agents_from_environment

    found = remote_agents_from_environment(
        {
            "ANKKA_A2A_REMOTE_HELPER_CARD_URL": "https://h/.well-known/agent-card.json",
            "ANKKA_A2A_REMOTE_HELPER_TOKEN": "s3cret-token",
            "ANKKA_MODEL_DEFAULT_URL": "http://m",
        }
    )
    assert list(found) == ["helper"]
    assert found["helper"].card_url == "https://h/.well-known/agent-card.json"
    assert "s3cret" not in repr(found["helper"])


def test_the_cards_are_open_to_every_caller_and_nothing_else_of_a2a_is() -> None:
    from ankka.runtime.serve.bounds import is_open

    assert is_open("/.well-known/agent-card.json")
    assert is_open("/a2a/echo/.well-known/agent-card.json")
    assert not is_open("/a2a/echo")
    assert not is_open("/a2a/echo/tasks")
    assert not is_open("/a2a/x/y/.well-known/agent-card.json")
    assert not is_open("/v1/sessions/s/.well-known/agent-card.json")
