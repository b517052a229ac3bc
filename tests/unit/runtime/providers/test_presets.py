"""The preset rules: what each preset needs, takes and refuses, and how it says so."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.providers.config import PREFIX, PRESETS, SETTINGS, env_name, parse_environment
from ankka.runtime.providers.registry import BUILDERS

ADDRESS = {"ANKKA_MODELS_ADDRESS": "https://gateway.ankka.svc:8443/", "ANKKA_TLS_DIR": "/tls"}


def test_the_table_has_the_presets_the_platform_promises() -> None:
    assert {"anthropic", "openai", "openai-compatible", "ollama", "installation"} <= set(PRESETS)


def test_every_preset_has_a_builder() -> None:
    assert set(BUILDERS) == set(PRESETS)


def test_variable_names_are_built_from_the_prefix() -> None:
    assert env_name("my-model", "URL") == f"{PREFIX}MY_MODEL_URL"
    assert all(s.suffix == s.suffix.upper() for s in SETTINGS.values())


def test_a_misspelt_suffix_is_refused_naming_the_variable() -> None:
    environ = {
        "ANKKA_MODEL_MAIN_PRESET": "openai-compatible",
        "ANKKA_MODEL_MAIN_MODEL": "m",
        "ANKKA_MODEL_MAIN_URLS": "http://x/v1",
    }
    with pytest.raises(ConfigurationError) as caught:
        parse_environment(environ)
    assert "ANKKA_MODEL_MAIN_URLS is not a setting" in str(caught.value)
    assert "required" not in str(caught.value), "not refused for another reason"


def test_a_setting_the_preset_does_not_take_is_refused() -> None:
    environ = {
        "ANKKA_MODEL_MAIN_PRESET": "openai",
        "ANKKA_MODEL_MAIN_MODEL": "gpt-5",
        "ANKKA_MODEL_MAIN_API_KEY": "k",
        "ANKKA_MODEL_MAIN_MAX_TOKENS": "10",
    }
    with pytest.raises(ConfigurationError, match="ANKKA_MODEL_MAIN_MAX_TOKENS is not a setting"):
        parse_environment(environ)


def test_an_unknown_preset_is_refused_listing_the_presets() -> None:
    with pytest.raises(ConfigurationError, match="openai-compatible"):
        parse_environment({"ANKKA_MODEL_MAIN_PRESET": "gemini", "ANKKA_MODEL_MAIN_MODEL": "m"})


def test_settings_without_a_preset_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="ANKKA_MODEL_MAIN_PRESET is not"):
        parse_environment({"ANKKA_MODEL_MAIN_MODEL": "m"})


def test_the_vendors_key_variables_are_read_for_their_presets() -> None:
    environ = {
        "ANTHROPIC_API_KEY": "sk-ant-1",
        "OPENAI_API_KEY": "sk-oai-1",
        "ANKKA_MODEL_CLAUDE_PRESET": "anthropic",
        "ANKKA_MODEL_CLAUDE_MODEL": "claude-sonnet-4-5",
        "ANKKA_MODEL_GPT_PRESET": "openai",
        "ANKKA_MODEL_GPT_MODEL": "gpt-5",
        "ANKKA_MODEL_LOCAL_PRESET": "openai-compatible",
        "ANKKA_MODEL_LOCAL_MODEL": "m",
        "ANKKA_MODEL_LOCAL_URL": "http://127.0.0.1:8080/v1",
    }
    models = parse_environment(environ)
    assert models["claude"].get("API_KEY") == "sk-ant-1"
    assert models["gpt"].get("API_KEY") == "sk-oai-1"
    assert models["local"].get("API_KEY") is None, "a vendor's key goes to its own preset only"


def test_the_models_own_key_wins_over_the_vendors() -> None:
    environ = {
        "OPENAI_API_KEY": "sk-shared",
        "ANKKA_MODEL_GPT_PRESET": "openai",
        "ANKKA_MODEL_GPT_MODEL": "gpt-5",
        "ANKKA_MODEL_GPT_API_KEY": "sk-own",
    }
    assert parse_environment(environ)["gpt"].get("API_KEY") == "sk-own"


def test_a_missing_key_names_both_variables() -> None:
    environ = {"ANKKA_MODEL_CLAUDE_PRESET": "anthropic", "ANKKA_MODEL_CLAUDE_MODEL": "c"}
    with pytest.raises(ConfigurationError) as caught:
        parse_environment(environ)
    assert "ANKKA_MODEL_CLAUDE_API_KEY" in str(caught.value)
    assert "ANTHROPIC_API_KEY" in str(caught.value)


def test_the_repr_never_shows_a_key() -> None:
    environ = {
        "ANKKA_MODEL_GPT_PRESET": "openai",
        "ANKKA_MODEL_GPT_MODEL": "gpt-5",
        "ANKKA_MODEL_GPT_API_KEY": "sk-very-secret",
    }
    assert "sk-very-secret" not in repr(parse_environment(environ)["gpt"])


def test_an_installation_model_names_only_its_model() -> None:
    environ = {
        **ADDRESS,
        "ANKKA_MODEL_BRAIN_PRESET": "installation",
        "ANKKA_MODEL_BRAIN_MODEL": "qwen3:4b",
    }
    brain = parse_environment(environ)["brain"]
    assert brain.get("URL") == "https://gateway.ankka.svc:8443/v1"
    assert brain.tls_dir == "/tls"


@pytest.mark.parametrize(
    ("suffix", "why"), [("URL", "ANKKA_MODELS_ADDRESS"), ("API_KEY", "client certificate")]
)
def test_an_installation_model_refuses_an_address_or_a_key_saying_which(
    suffix: str, why: str
) -> None:
    environ = {
        **ADDRESS,
        "ANKKA_MODEL_BRAIN_PRESET": "installation",
        "ANKKA_MODEL_BRAIN_MODEL": "qwen3:4b",
        f"ANKKA_MODEL_BRAIN_{suffix}": "sk-should-not-show",
    }
    with pytest.raises(ConfigurationError) as caught:
        parse_environment(environ)
    assert f"ANKKA_MODEL_BRAIN_{suffix} is refused by preset 'installation'" in str(caught.value)
    assert why in str(caught.value)
    assert "sk-should-not-show" not in str(caught.value)


@pytest.mark.parametrize("missing", ["ANKKA_MODELS_ADDRESS", "ANKKA_TLS_DIR"])
def test_an_installation_model_needs_the_address_and_the_tls_folder(missing: str) -> None:
    environ = {
        **ADDRESS,
        "ANKKA_MODEL_BRAIN_PRESET": "installation",
        "ANKKA_MODEL_BRAIN_MODEL": "qwen3:4b",
    }
    del environ[missing]
    with pytest.raises(ConfigurationError, match=missing):
        parse_environment(environ)


def test_ollama_has_a_local_default_address_and_needs_no_key() -> None:
    environ = {"ANKKA_MODEL_LLAMA_PRESET": "ollama", "ANKKA_MODEL_LLAMA_MODEL": "llama3.2"}
    llama = parse_environment(environ)["llama"]
    assert llama.get("URL") == "http://127.0.0.1:11434/v1"
    assert llama.get("API_KEY") is None


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_timeout_must_be_a_positive_number(value: str) -> None:
    environ = {
        "ANKKA_MODEL_LLAMA_PRESET": "ollama",
        "ANKKA_MODEL_LLAMA_MODEL": "llama3.2",
        "ANKKA_MODEL_LLAMA_TIMEOUT": value,
    }
    with pytest.raises(ConfigurationError, match="ANKKA_MODEL_LLAMA_TIMEOUT"):
        parse_environment(environ)


def test_other_variables_are_none_of_its_business() -> None:
    assert parse_environment({"ANKKA_MODELS_ADDRESS": "https://x", "PATH": "/bin"}) == {}
