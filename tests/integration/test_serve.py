"""``ankka serve`` over real HTTP on loopback, with the stand-in as the model."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env, received
from tests.support.eventually import eventually_async
from tests.support.processes import REPO, Server, ankka_command, start

pytestmark = pytest.mark.integration

WEATHER_SCRIPT = json.loads((REPO / "examples" / "weather-standin.json").read_text())


def turn(
    server: Server, message: str, *, agent: str = "weather", session: str = "s"
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/agents/{agent}/sessions/{session}", json={"message": message}, timeout=30
    )


def messages(server: Server, session: str = "s") -> list[dict[str, Any]]:
    answer = httpx.get(f"{server.url}/v1/sessions/{session}/messages").json()
    result: list[dict[str, Any]] = answer["messages"]
    return result


def test_the_weather_example_answers_with_its_tool(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(WEATHER_SCRIPT)
    server = serve(model.url)
    answer = turn(server, "What is the weather in Helsinki?")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["reply"] == "It is -3 °C with light snow in Helsinki: dress warmly."
    assert body["usage"] == {
        "input_tokens": 227,
        "output_tokens": 34,
        "cache_read_tokens": 96,
        "cache_write_tokens": 0,
    }
    assert body["cost"] == "unknown"
    conversation = messages(server)
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool", "assistant"]
    assert conversation[2]["content"] == "Helsinki: -3 °C, light snow"
    assert all(m["agent"] == "weather" for m in conversation)
    assert "usage" not in conversation[1] and conversation[3]["usage"] == body["usage"]
    sent = received(model)
    assert sent[1]["body"]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": sent[1]["body"]["messages"][-2]["tool_calls"][0]["id"],
        "content": "Helsinki: -3 °C, light snow",
    }
    assert sent[0]["headers"]["authorization"] == "Bearer none"


def test_the_history_survives_a_restart_of_the_server(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(["one", "two"])
    first = serve(model.url)
    assert turn(first, "hello", agent="polite").status_code == 200
    first.stop()
    second = serve(model.url)
    assert turn(second, "again", agent="polite").json()["reply"] == "two"
    assert [m["content"] for m in messages(second)] == ["hello", "one", "again", "two"]
    last_request = received(model)[-1]["body"]["messages"]
    assert [m["content"] for m in last_request] == ["hello", "one", "again"]


async def test_concurrent_requests_to_one_session_are_answered_one_at_a_time_in_arrival_order(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    count = 50
    model = standin([{"text": f"reply {i}", "delay_ms": 5} for i in range(count)])
    server = serve(model.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        tasks: list[asyncio.Task[httpx.Response]] = []

        async def admitted() -> int:
            # Requests answered, then those the server holds (running or queued). The answered
            # ones are counted before asking: a request answered while the question is on its
            # way would otherwise be counted twice (held when the server looked, answered when
            # the test looked) and launch the next request early. A turn that committed but
            # has not yet left its slot is counted once (it is not answered yet); counting
            # committed turns as well would count it twice. Undercounting only makes the test
            # wait longer.
            answered = sum(t.done() for t in tasks)
            summary = (await client.get("/v1/sessions/s")).json()
            return answered + int(summary["pending"])

        async def holds(requests: int) -> bool:
            return await admitted() >= requests

        for i in range(count):
            # Launch request i only once the server holds the previous ones, so "arrival
            # order" is known to the test without relying on timing.
            tasks.append(
                asyncio.create_task(
                    client.post("/v1/agents/polite/sessions/s", json={"message": f"m{i}"})
                )
            )
            await eventually_async(
                partial(holds, i + 1),
                what=f"request {i} to be admitted",
                timeout=60,
                interval=0.005,
            )
        answers = await asyncio.gather(*tasks)
    assert [a.json()["reply"] for a in answers] == [f"reply {i}" for i in range(count)]
    sent = received(model)
    for i, request in enumerate(sent):
        contents = [m["content"] for m in request["body"]["messages"]]
        expected: list[str] = []
        for j in range(i):
            expected += [f"m{j}", f"reply {j}"]
        assert contents == [*expected, f"m{i}"], f"turn {i} did not see the turns before it"
    for earlier, later in itertools.pairwise(sent):
        assert earlier["answered"] < later["received"], "two turns of one session overlapped"


async def test_requests_to_different_sessions_overlap(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin([{"text": "slow", "delay_ms": 500}, {"text": "slow", "delay_ms": 500}])
    server = serve(model.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        answers = await asyncio.gather(
            client.post("/v1/agents/polite/sessions/a", json={"message": "hi"}),
            client.post("/v1/agents/polite/sessions/b", json={"message": "hi"}),
        )
    assert [a.status_code for a in answers] == [200, 200]
    first, second = received(model)
    assert second["received"] < first["answered"], "the two sessions ran one after the other"


def test_a_stream_agent_answers_as_server_sent_events(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(WEATHER_SCRIPT)
    server = serve(model.url)
    with httpx.stream(
        "POST",
        f"{server.url}/v1/agents/streamer/sessions/s",
        json={"message": "Weather in Helsinki?"},
        timeout=30,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [
            (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("data: ", 1)[1]))
            for block in response.read().decode().strip().split("\n\n")
        ]
    kinds = [k for k, _ in events]
    assert kinds[:2] == ["tool_call", "tool_result"]
    assert kinds[-1] == "done" and kinds.count("delta") > 1
    text = "".join(d["text"] for k, d in events if k == "delta")
    assert (
        text == events[-1][1]["reply"] == "It is -3 °C with light snow in Helsinki: dress warmly."
    )
    assert received(model)[0]["body"]["stream"] is True
    assert [m["role"] for m in messages(server)] == ["user", "assistant", "tool", "assistant"]


def test_a_typed_agent_replies_with_json(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(['{"city": "Oslo", "celsius": 1}', "not json at all"])
    server = serve(model.url)
    assert turn(server, "Oslo?", agent="typed").json()["reply"] == {"city": "Oslo", "celsius": 1.0}
    sent = received(model)[0]["body"]["response_format"]
    assert (
        sent["type"] == "json_schema" and "celsius" in sent["json_schema"]["schema"]["properties"]
    )
    failed = turn(server, "again?", agent="typed")
    assert failed.status_code == 502
    assert failed.json()["error"]["type"] == "turn_failed"
    assert len(messages(server)) == 2


def test_metrics_count_turns_calls_tools_and_tokens(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(WEATHER_SCRIPT)
    server = serve(model.url)
    turn(server, "Helsinki?")
    metrics = httpx.get(f"{server.url}/metrics")
    assert metrics.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = metrics.text
    assert 'ankka_turns_total{agent="weather",outcome="ok"} 1.0' in text
    assert 'ankka_model_calls_total{agent="weather",model="standin",provider="default"} 2.0' in text
    assert 'ankka_tool_calls_total{agent="weather",outcome="ok",tool="get_weather"} 1.0' in text
    assert 'ankka_tokens_total{agent="weather",kind="input",provider="default"} 227.0' in text
    assert "ankka_turn_seconds_bucket" in text
    # prometheus-client's process collector: this runtime's own process.
    assert "process_cpu_seconds_total" in text
    assert "process_resident_memory_bytes" in text
    assert httpx.get(f"{server.url}/healthz").json() == {"ok": True}
    assert httpx.get(f"{server.url}/readyz").status_code == 200


def test_tool_names_a_model_invents_do_not_grow_the_metrics_labels(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    invented = [{"name": f"invented_{n}", "arguments": {}} for n in range(20)]
    model = standin(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}, *invented]},
            {"text": "Done."},
        ]
    )
    server = serve(model.url)
    assert turn(server, "Oslo?").json()["reply"] == "Done."
    text = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_tool_calls_total{agent="weather",outcome="ok",tool="get_weather"} 1.0' in text
    assert 'ankka_tool_calls_total{agent="weather",outcome="error",tool="(unknown)"} 20.0' in text
    assert "invented_" not in text


# Bad input -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    """One stand-in and one ``ankka serve`` for the malformed bodies: a refused body changes
    nothing a later one could see (each counts the model's requests itself, on its own
    session), so the cases share the processes instead of starting two each."""
    work = tmp_path_factory.mktemp("refusing")
    script = work / "script.json"
    script.write_text(json.dumps(["never sent"]))
    model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    store = f"sqlite:///{work / 'sessions.sqlite3'}"
    command = ankka_command("serve", "tests.integration.services:service", "--port", "0")
    try:
        server = start([*command, "--store", store], env=model_env(model.url))
    except BaseException:
        model.stop()
        raise
    yield model, server
    server.stop()
    model.stop()


@pytest.mark.parametrize(
    ("body", "status", "kind", "words"),
    [
        (b'{"message": ', 400, "invalid_json", "not valid JSON"),
        (b"{}", 422, "invalid_request", "message: Field required"),
        (b'{"message": ""}', 422, "invalid_request", "message"),
        (b'{"message": 3}', 422, "invalid_request", "message: Input should be a valid string"),
        (b'{"message": "hi", "sesion": "x"}', 422, "invalid_request", "sesion"),
    ],
)
def test_a_malformed_body_is_refused_naming_what_is_wrong(
    refusing: tuple[Server, Server],
    body: bytes,
    status: int,
    kind: str,
    words: str,
) -> None:
    model, server = refusing
    asked = len(received(model))
    session = f"malformed-{kind}-{len(body)}"
    answer = httpx.post(f"{server.url}/v1/agents/weather/sessions/{session}", content=body)
    assert answer.status_code == status
    assert answer.json()["error"]["type"] == kind
    assert words in answer.json()["error"]["message"]
    assert len(received(model)) == asked, "a refused body reached the model"
    assert messages(server, session) == []


def test_an_unknown_agent_is_404(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    # A bare module name serves its `service`.
    server = serve(standin([]).url, target="tests.integration.services")
    answer = turn(server, "hi", agent="wether")
    assert answer.status_code == 404
    assert "'wether'" in answer.json()["error"]["message"]


def test_a_guardrail_refusal_is_403_with_its_reason_and_writes_nothing(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(["never sent"])
    server = serve(model.url)
    answer = turn(server, "HELLO THERE", agent="polite")
    assert answer.status_code == 403
    assert answer.json()["error"] == {
        "type": "refused",
        "message": "refused by input guardrail 'no_shouting': please do not shout",
    }
    assert received(model) == [] and messages(server) == []


def test_tool_arguments_that_do_not_decode_reach_the_model_as_an_error(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"town": "Oslo"}}]},
            {"text": "sorry"},
        ]
    )
    server = serve(model.url)
    assert turn(server, "Oslo?").json()["reply"] == "sorry"
    result = received(model)[1]["body"]["messages"][-1]
    assert result["role"] == "tool" and "city" in result["content"]
    assert messages(server)[2]["is_error"] is True


def test_an_exhausted_script_is_a_502_naming_the_provider_and_loses_nothing(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(["only answer"])
    server = serve(model.url)
    assert turn(server, "first", agent="polite").status_code == 200
    failed = turn(server, "second", agent="polite")
    assert failed.status_code == 502
    error = failed.json()["error"]
    assert error["type"] == "model_error"
    assert "model provider 'default'" in error["message"] and "418" in error["message"]
    assert "no turn left" in error["message"] and "OpenAI" not in error["message"]
    assert [m["content"] for m in messages(server)] == ["first", "only answer"]


def test_a_model_server_that_is_down_is_a_502_naming_the_provider(
    serve: Callable[..., Server],
) -> None:
    server = serve("http://127.0.0.1:9")
    failed = turn(server, "hi", agent="polite")
    assert failed.status_code == 502
    assert failed.json()["error"]["type"] == "model_unavailable"
    assert "model provider 'default'" in failed.json()["error"]["message"]


def test_an_unwritable_store_path_is_a_clear_start_up_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    finished = subprocess.run(
        ankka_command(
            "serve",
            "examples.weather:service",
            "--port",
            "0",
            "--store",
            f"sqlite:///{blocker}/x/sessions.sqlite3",
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 2
    assert "cannot open the session store" in finished.stderr
    assert "--store" in finished.stderr


def test_an_unknown_model_variable_is_refused_at_start(tmp_path: Path) -> None:
    finished = subprocess.run(
        ankka_command("serve", "examples.weather:service", "--port", "0"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "ANKKA_MODEL_DEFAULT_MODLE": "x"},
    )
    assert finished.returncode == 2
    assert "ANKKA_MODEL_DEFAULT_MODLE is not a setting" in finished.stderr
