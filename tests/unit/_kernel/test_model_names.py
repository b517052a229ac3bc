"""The one settings-name mapping (``ankka._kernel.model_names``), end to end: a model name an
Agent's spec gives is rendered by the operator as ``ANKKA_MODEL_<NAME>_*``, read back by the
runtime, and found again by the name the service's code spells, for requests and judgments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ankka._kernel.model_names import env_name, same_model, settings_name
from ankka.api.resources import AgentSpec
from ankka.operator.agents import invalid_reason, runtime_env
from ankka.operator.settings import Settings
from ankka.runtime.providers.config import SETTINGS, find_model, parse_environment
from ankka.runtime.providers.judges import judges_for, resolve
from ankka.runtime.providers.registry import providers_from_environment

AWKWARD = [
    "gpt-4.1",
    "gpt-4o",
    "GPT-4o-mini",
    "claude-sonnet-4.5",
    "llama3.2:3b",
    "Qwen/Qwen3-0.6B",
    "meta-llama/Llama-3.1-8B-Instruct@q4",
    "4o",
    "my model",
    # names that end like a setting's suffix
    "x-preset",
    "fast_url",
    "big-max-tokens",
    "key-api",
    "the.model",
    "café-7",
]


def spec_with(name: str, *, installation: bool) -> AgentSpec:
    model: dict[str, object] = (
        {"name": name, "installation": "smollm"}
        if installation
        else {
            "name": name,
            "preset": "openai-compatible",
            "address": "http://127.0.0.1:9/v1",
            "model": "served-as",
        }
    )
    return AgentSpec.model_validate({"image": "i", "module": "m", "models": [model]})


def rendered_environment(spec: AgentSpec) -> dict[str, str]:
    env = runtime_env(spec, Settings(), namespace="shop", name="cart")
    return {e["name"]: e["value"] for e in env if "value" in e}


@pytest.mark.parametrize("name", AWKWARD)
@pytest.mark.parametrize("installation", [True, False])
def test_a_name_from_an_agent_spec_reaches_the_runtime_by_its_own_spelling(
    name: str, installation: bool
) -> None:
    spec = spec_with(name, installation=installation)
    assert invalid_reason(spec) is None
    environ = rendered_environment(spec)
    assert env_name(name, "PRESET") in environ
    models = parse_environment(environ)
    assert len(models) == 1
    found = find_model(models, name)
    assert found is not None, (name, sorted(models))
    assert found.get("MODEL") == ("smollm" if installation else "served-as")


@pytest.mark.parametrize("name", AWKWARD)
async def test_a_judgment_finds_its_model_by_the_codes_spelling(name: str) -> None:
    environ = rendered_environment(spec_with(name, installation=False))
    providers = providers_from_environment(environ)
    try:
        judge = resolve(judges_for(providers), providers, name, asker="a guardrail")
        assert judge is not None
    finally:
        for provider in providers.values():
            await provider.aclose()


def test_an_unknown_judgment_model_names_the_variable_the_mapping_gives() -> None:
    with pytest.raises(Exception, match="ANKKA_MODEL_GPT_4_1_PRESET"):
        resolve({}, {}, "gpt-4.1", asker="a guardrail")


@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="\x7f"),
        min_size=1,
        max_size=40,
    ).filter(lambda s: any(c.isascii() and c.isalnum() for c in s))
)
def test_every_usable_name_round_trips_through_every_setting(name: str) -> None:
    for suffix in SETTINGS:
        variable = env_name(name, suffix)
        assert variable.startswith("ANKKA_MODEL_") and variable.endswith("_" + suffix)
    environ = {
        env_name(name, "PRESET"): "anthropic",  # the preset taking every setting
        env_name(name, "URL"): "http://127.0.0.1:9/v1",
        env_name(name, "MODEL"): "m",
        env_name(name, "TIMEOUT"): "5",
        env_name(name, "MAX_TOKENS"): "7",
        env_name(name, "API_KEY"): "k",
    }
    (parsed,) = parse_environment(environ).values()
    assert same_model(parsed.name, name)
    assert parsed.timeout() == 5.0


def test_two_names_that_become_one_setting_are_refused_naming_both() -> None:
    spec = AgentSpec.model_validate(
        {
            "image": "i",
            "module": "m",
            "models": [
                {"name": "gpt-4o", "installation": "a"},
                {"name": "GPT_4o", "installation": "b"},
            ],
        }
    )
    reason = invalid_reason(spec)
    assert reason is not None
    assert "'GPT_4o' and 'gpt-4o'" in reason and "ANKKA_MODEL_GPT_4O_*" in reason


@pytest.mark.parametrize("name", ["", "-", "..", "a\nb", "x" * 129])
def test_a_name_with_no_letter_or_digit_or_a_control_character_is_refused(name: str) -> None:
    with pytest.raises(ValidationError):
        spec_with(name, installation=True)


def test_the_mapping_is_upper_case_with_underscores() -> None:
    assert settings_name("llama3.2:3b") == "LLAMA3_2_3B"
    assert env_name("Qwen/Qwen3-0.6B", "MODEL") == "ANKKA_MODEL_QWEN_QWEN3_0_6B_MODEL"
