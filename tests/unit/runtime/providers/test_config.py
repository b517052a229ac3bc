"""Models from the environment: ANKKA_MODEL_<NAME>_<SETTING>."""

from __future__ import annotations

from typing import Any

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.config import env_name, parse_environment, settings_name
from ankka.runtime.providers.registry import providers_from_environment

BASE = {
    "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
    "ANKKA_MODEL_DEFAULT_URL": "http://127.0.0.1:9/v1",
    "ANKKA_MODEL_DEFAULT_MODEL": "small",
}


def test_a_complete_model_is_read() -> None:
    models = parse_environment({**BASE, "PATH": "/bin", "ANKKA_MODELS_ADDRESS": "https://gw"})
    assert list(models) == ["default"]
    assert models["default"].get("URL") == "http://127.0.0.1:9/v1"
    assert models["default"].timeout() == 120.0


def test_names_may_contain_underscores() -> None:
    env = {k.replace("DEFAULT", "FAST_ONE"): v for k, v in BASE.items()}
    assert list(parse_environment(env)) == ["fast_one"]


async def test_a_keyless_server_gets_the_bearer_none() -> None:
    provider = providers_from_environment(BASE)["default"]
    assert isinstance(provider, ChatCompletionsProvider)
    assert provider._transport.client.api_key == "none"
    await provider.aclose()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"ANKKA_MODEL_DEFAULT_MODLE": "x"}, "ANKKA_MODEL_DEFAULT_MODLE is not a setting"),
        ({"ANKKA_MODEL_": "x"}, "ANKKA_MODEL_ is not a setting"),
        ({"ANKKA_MODEL_OTHER_URL": "http://x"}, "ANKKA_MODEL_OTHER_PRESET is not"),
        ({"ANKKA_MODEL_DEFAULT_PRESET": "openia"}, "'openia' is not a preset"),
        ({"ANKKA_MODEL_DEFAULT_TIMEOUT": "soon"}, "ANKKA_MODEL_DEFAULT_TIMEOUT='soon'"),
        ({"ANKKA_MODEL_DEFAULT_URL": ""}, "ANKKA_MODEL_DEFAULT_URL is required"),
    ],
)
def test_a_wrong_variable_is_refused_naming_it(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_environment({**BASE, **extra})


def test_the_key_never_appears_in_a_settings_repr() -> None:
    models = parse_environment({**BASE, "ANKKA_MODEL_DEFAULT_API_KEY": "sk-very-secret"})
    assert "sk-very-secret" not in repr(models)


# One mapping from a model's name to its settings' <NAME> (issue 13, defect 9).


@pytest.mark.parametrize(
    ("model", "name"),
    [("my-model", "MY_MODEL"), ("my_model", "MY_MODEL"), ("gpt-4.1", "GPT_4_1"), ("a", "A")],
)
def test_a_model_name_maps_to_one_settings_name(model: str, name: str) -> None:
    assert settings_name(model) == name
    assert env_name(model, "PRESET") == f"ANKKA_MODEL_{name}_PRESET"


async def test_a_dashed_model_name_finds_its_settings(make_runtime: Any) -> None:
    service = Service("s")

    @service.agent("a")
    def agent(request: TurnRequest) -> Turn:
        return Turn(message=request.message, model="my-model")

    env = {k.replace("DEFAULT", "MY_MODEL"): v for k, v in BASE.items()}
    [(configured, _)] = parse_environment(env).items()
    runtime, _ = await make_runtime(service, ["hi"], model=configured)

    planned = runtime.plan("a", "s1", "hello")

    assert planned.provider.name == configured


async def test_an_unconfigured_model_names_the_variable_to_set(make_runtime: Any) -> None:
    service = Service("s")

    @service.agent("a")
    def agent(request: TurnRequest) -> Turn:
        return Turn(message=request.message, model="other-model.v2")

    runtime, _ = await make_runtime(service, ["hi"])

    with pytest.raises(ConfigurationError) as missing:
        runtime.plan("a", "s1", "hello")
    assert "ANKKA_MODEL_OTHER_MODEL_V2_PRESET" in str(missing.value)
