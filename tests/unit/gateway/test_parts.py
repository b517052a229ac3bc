"""The gateway's small pure parts: the models file, the concurrency limit, identities, readiness."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from ankka._kernel.clock import ManualClock
from ankka._kernel.tls import peer_uri_sans
from ankka._kernel.upstream import Endpoint
from ankka.api.capabilities import Capability, ModelCapabilities
from ankka.gateway.callers import CallersInFlight, Reservation, TokenBudget, allowed
from ankka.gateway.limits import ConcurrencyLimit, QueueFull
from ankka.gateway.models_file import ModelsFile, ModelsFileError, parse_models
from ankka.gateway.registry import Registry
from ankka.gateway.wire import caller_of
from ankka.operator.models import ServedModel, callers_of
from ankka.operator.models import models_file as operator_models_file

OLLAMA = {"name": "small", "kind": "ollama", "url": "http://127.0.0.1:11434/"}


def test_a_minimal_model_takes_its_defaults() -> None:
    [spec] = parse_models({"models": [OLLAMA]}).specs
    assert spec.url == "http://127.0.0.1:11434"
    assert spec.upstream_model == "small"
    assert (spec.max_concurrency, spec.max_queue, spec.timeout_s) == (None, 100, 600.0)
    assert spec.bearer() == "none"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({**OLLAMA, "kind": "vllm"}, "'kind' must be one of"),
        ({**OLLAMA, "url": "127.0.0.1:1"}, "'url' must be"),
        ({**OLLAMA, "max_concurrency": 0}, "'max_concurrency'"),
        ({**OLLAMA, "colour": "blue"}, "unknown key(s) ['colour']"),
        ({"name": "x", "kind": "openai", "url": "http://h"}, "declare its 'capabilities'"),
        ({"kind": "ollama", "url": "http://h"}, "'name'"),
    ],
)
def test_a_wrong_entry_is_named_with_what_is_wrong(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(ModelsFileError) as wrong:
        parse_models({"models": [entry]})
    assert says in str(wrong.value)


def test_a_name_listed_twice_is_refused() -> None:
    with pytest.raises(ModelsFileError, match="listed twice"):
        parse_models({"models": [OLLAMA, OLLAMA]})


def test_the_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENDOR_KEY", "sk-test")
    entry = {"name": "v", "kind": "openai", "url": "https://h", "capabilities": ["completion"]}
    [spec] = parse_models({"models": [{**entry, "api_key_env": "VENDOR_KEY"}]}).specs
    assert spec.bearer() == "sk-test"


def test_the_models_file_notices_a_change(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("models: []\n")
    models_file = ModelsFile(path)
    assert models_file.load().specs == ()
    assert not models_file.changed()
    path.write_text("models:\n  - {name: small, kind: ollama, url: 'http://h'}\n")
    assert models_file.changed()
    assert [s.name for s in models_file.load().specs] == ["small"]


async def test_the_limit_queues_then_refuses_and_hands_slots_over_in_order() -> None:
    limit = ConcurrencyLimit(1, queue=1)
    await limit.acquire()
    waiter = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    assert limit.waiting == 1
    with pytest.raises(QueueFull):
        await limit.acquire()
    limit.release()  # the slot moves to the waiter
    await waiter
    assert (limit.in_flight, limit.waiting) == (1, 0)
    limit.release()
    assert limit.in_flight == 0


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    limit = ConcurrencyLimit(1, queue=1)
    await limit.acquire()
    waiter = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limit.waiting == 0
    limit.release()
    assert limit.in_flight == 0


def test_the_caller_is_the_service_in_the_client_certificate() -> None:
    sans = peer_uri_sans(
        {"subjectAltName": (("DNS", "x"), ("URI", "ankka://service/team-a/helper"))}
    )
    assert caller_of({"extensions": {"tls": {"peer_uri_sans": sans}}}) == "team-a/helper"
    assert caller_of({"extensions": {"tls": {"peer_uri_sans": ()}}}) == "unidentified"
    assert caller_of({}) == "anonymous"


class NoClient:
    async def get(self, url: str) -> Any:
        raise AssertionError("no probe expected")

    async def post(self, url: str, *, json: Any) -> Any:
        raise AssertionError("no probe expected")


async def test_ready_only_once_every_model_was_probed_and_reload_keeps_probes() -> None:
    models = parse_models({"models": [OLLAMA]})
    registry = Registry(models, NoClient())
    assert not registry.ready()
    small = registry.upstreams["small"]
    small.capabilities = ModelCapabilities("small", frozenset({Capability.COMPLETION}))
    small.probed = True
    assert registry.ready()

    registry.replace(parse_models({"models": [{**OLLAMA, "max_concurrency": 2}]}))
    assert registry.upstreams["small"].capabilities is not None  # same server: probe kept
    registry.replace(parse_models({"models": [{**OLLAMA, "url": "http://elsewhere"}]}))
    assert registry.upstreams["small"].capabilities is None  # moved: probe again
    assert not registry.ready()


def test_the_upstream_key_never_shows_in_a_repr() -> None:
    endpoint = Endpoint.of("https://models.example:8443/v1/chat/completions", bearer="sk-secret")
    assert (endpoint.host, endpoint.port, endpoint.tls) == ("models.example", 8443, True)
    assert b"Host: models.example:8443\r\n" in endpoint.head
    assert "sk-secret" not in repr(endpoint)


def test_an_upstream_failure_makes_its_model_due_for_a_probe_now() -> None:
    clock = ManualClock(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), monotonic=100.0)
    registry = Registry(parse_models({"models": [OLLAMA]}), NoClient(), clock=clock)
    small = registry.upstreams["small"]
    small.next_probe = 160.0  # the next periodic probe

    registry.upstream_failed(small)

    assert small.next_probe == 100.0


def test_the_file_the_operator_renders_is_read_as_it_is_rendered() -> None:
    rendered = operator_models_file(
        [
            ServedModel(
                "qwen",
                "ollama",
                "http://qwen.models.svc:11434",
                max_concurrency=2,
                upstream_model="qwen3:4b",
            ),
            ServedModel("hosted", "openai", "https://h.example", capabilities=("completion",)),
        ]
    )

    models = parse_models(yaml.safe_load(rendered))

    assert [(s.name, s.kind, s.max_concurrency) for s in models.specs] == [
        ("hosted", "openai", None),
        ("qwen", "ollama", 2),
    ]
    assert [s.upstream_model for s in models.specs] == ["hosted", "qwen3:4b"]
    assert parse_models(yaml.safe_load(operator_models_file([]))).specs == ()


# The models file's small defects (issue 13, defect 7).


def _poll(registry: Registry, models_file: ModelsFile) -> None:
    """What the maintenance loop does each poll."""
    if models_file.changed():
        registry.reload(models_file)


def test_a_broken_models_file_is_logged_once_per_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": [OLLAMA]}))
    models_file = ModelsFile(path)
    registry = Registry(models_file.load(), NoClient())
    path.write_text("models: [ {name: small\n")  # a YAML syntax error

    with caplog.at_level("ERROR", logger="ankka.gateway"):
        for _ in range(5):
            _poll(registry, models_file)
    assert len([r for r in caplog.records if "not YAML" in r.getMessage()]) == 1
    assert list(registry.upstreams) == ["small"], "the models read before stay in service"

    path.write_text("models: [ {name: another\n")  # a different mistake is a change: logged again
    with caplog.at_level("ERROR", logger="ankka.gateway"):
        _poll(registry, models_file)
    assert len([r for r in caplog.records if "not YAML" in r.getMessage()]) == 2


@pytest.mark.parametrize(
    "url", ["http://h:8080", "http://h:8080/", "http://h:8080/v1", "http://h:8080/v1/"]
)
def test_a_url_with_or_without_v1_is_the_same_server(url: str) -> None:
    [spec] = parse_models({"models": [{**OLLAMA, "url": url}]}).specs
    assert spec.url == "http://h:8080"
    registry = Registry(parse_models({"models": [{**OLLAMA, "url": url}]}), NoClient())
    assert registry.upstreams["small"].endpoint.path == "/v1/chat/completions"


def test_a_url_with_a_path_keeps_it() -> None:
    [spec] = parse_models({"models": [{**OLLAMA, "url": "http://h/ollama/v1"}]}).specs
    assert spec.url == "http://h/ollama"


# Who may use a model (issue 13, defect 12).


def test_callers_are_read_in_the_form_the_caller_is_named() -> None:
    entry = {
        **OLLAMA,
        "callers": ["ankka://service/team-a/helper", "ankka://platform/operator", "team-b/x"],
        "max_in_flight_per_caller": 2,
    }
    [spec] = parse_models({"models": [entry]}).specs
    assert spec.callers == frozenset({"team-a/helper", "ankka://platform/operator", "team-b/x"})
    assert spec.max_in_flight_per_caller == 2
    [open_model] = parse_models({"models": [OLLAMA]}).specs
    assert open_model.callers is None


@pytest.mark.parametrize("callers", ["team-a/helper", [""], [3]])
def test_callers_must_be_a_list_of_identities(callers: object) -> None:
    with pytest.raises(ModelsFileError, match="'callers' must be a list"):
        parse_models({"models": [{**OLLAMA, "callers": callers}]})


@pytest.mark.parametrize(
    ("uris", "caller"),
    [
        (("ankka://service/ns/agent",), "ns/agent"),
        (("spiffe://x", "ankka://platform/operator"), "ankka://platform/operator"),
        (("spiffe://x",), "unidentified"),
        ((), "unidentified"),
    ],
)
def test_a_caller_is_named_by_its_ankka_uri_only(uris: tuple[str, ...], caller: str) -> None:
    assert caller_of({"extensions": {"tls": {"peer_uri_sans": uris}}}) == caller


def test_one_callers_requests_in_flight_are_counted_apart() -> None:
    counts = CallersInFlight(1)
    assert counts.enter("a") and not counts.enter("a") and counts.enter("b")
    counts.leave("a")
    assert counts.enter("a")
    assert allowed(None, "anyone") and not allowed(frozenset({"a"}), "b")


def test_the_operator_renders_each_models_callers_from_the_agents_that_name_it() -> None:
    agents_by_model = {("shop", "smollm"): ["cart", "cart", "helper"], ("other", "smollm"): ["x"]}
    served = [
        ServedModel(
            "smollm", "ollama", "http://s", callers=callers_of("shop", "smollm", agents_by_model)
        ),
        ServedModel(
            "qwen", "ollama", "http://q", callers=callers_of("shop", "qwen", agents_by_model)
        ),
    ]

    models = parse_models(yaml.safe_load(operator_models_file(served))).by_name()

    assert models["smollm"].callers == frozenset({"shop/cart", "shop/helper"})
    assert models["qwen"].callers == frozenset(), "a model no Agent names serves nobody"


def test_a_callers_token_budget_slides_over_a_minute() -> None:
    now = [0.0]
    budget = TokenBudget(100, clock=lambda: now[0])
    first = budget.reserve("a", 10)
    assert isinstance(first, Reservation)
    budget.settle(first, 60)
    now[0] = 30.0
    second = budget.reserve("a", 10)
    assert isinstance(second, Reservation)
    budget.settle(second, 50)  # over the budget: the next request waits
    assert budget.reserve("a", 10) == 30.0, "until the first spend leaves the window"
    assert isinstance(budget.reserve("b", 10), Reservation), "another caller has its own"
    now[0] = 60.0
    assert isinstance(budget.reserve("a", 10), Reservation)
    assert isinstance(TokenBudget(None).reserve("a", 10**9), Reservation)


def test_requests_in_flight_hold_their_bound_until_they_settle() -> None:
    """Issue 31, item 8: the bound is held before the answer's usage is known."""
    budget = TokenBudget(100, clock=lambda: 0.0)
    held = [budget.reserve("a", 40) for _ in range(5)]
    admitted = [h for h in held if isinstance(h, Reservation)]
    assert len(admitted) == 3, "0, 40 and 80 held are under 100; 120 is not"
    assert held[3] == 1.0, "refused while requests in flight hold the rest: retry soon"
    for reservation in admitted:
        budget.settle(reservation, 5)  # each spent less than its bound
    assert isinstance(budget.reserve("a", 40), Reservation), "15 spent: room again"
