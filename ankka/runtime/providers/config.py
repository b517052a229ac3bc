"""Named models from the environment, and the preset table.

A service's models are configured as ``ANKKA_MODEL_<NAME>_<SETTING>`` variables; an agent
asks for a model by its name (``ANKKA_MODEL_DEFAULT_*`` is ``model="default"``,
``ANKKA_MODEL_GPT_4_1_*`` is ``model="gpt-4.1"``). :func:`settings_name` is the one mapping
from a model's name to that ``<NAME>`` (``ankka._kernel.model_names``, shared with the
operator, which renders these variables from an Agent's ``spec.models``), used by the
runtime's lookup (:func:`find_model`) and by every error that names a variable.
Each model names a preset, and the preset says which settings it needs and which it takes.

The variable names are built from :data:`PREFIX` and the settings' suffixes, never listed
literally. A variable under the prefix that is no setting is refused at start, naming it, so a
misspelt suffix is reported as what it is and not as some other fault of the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ankka._kernel.errors import ConfigurationError
from ankka._kernel.model_names import PREFIX, env_name, find_model, settings_name
from ankka._kernel.redact import remember
from ankka._kernel.urls import http_url

__all__ = [
    "ADDRESS_VARIABLE",
    "PREFIX",
    "PRESETS",
    "SETTINGS",
    "TLS_DIR_VARIABLE",
    "ModelSettings",
    "Preset",
    "Setting",
    "env_name",
    "find_model",
    "parse_environment",
    "settings_name",
]

ADDRESS_VARIABLE = "ANKKA_MODELS_ADDRESS"  # the gateway, rendered by the operator
TLS_DIR_VARIABLE = "ANKKA_TLS_DIR"  # the service's client certificate: tls.crt, tls.key, ca.crt

Wire = Literal["anthropic", "responses", "chat-completions"]


@dataclass(frozen=True, slots=True)
class Setting:
    suffix: str
    meaning: str
    secret: bool = False


SETTINGS: dict[str, Setting] = {
    s.suffix: s
    for s in (
        Setting("PRESET", "which preset (wire protocol and defaults) the model uses"),
        Setting("MODEL", "the model's name on the server"),
        Setting("URL", "the server's base URL (for Chat Completions, the one ending in /v1)"),
        Setting("API_KEY", "the key sent to the server", secret=True),
        Setting(
            "TIMEOUT",
            "seconds one attempt of a model call may take (default 120; a timed-out call is "
            "not retried); separate from how long a caller waits for the turn",
        ),
        Setting("MAX_TOKENS", "the most tokens an answer may have (default 4096)"),
    )
}


@dataclass(frozen=True, slots=True)
class Preset:
    """One row of the preset table.

    ``key_variable`` is the vendor's own variable read when ``API_KEY`` is not set;
    ``refused`` maps settings the preset refuses to why (said in the refusal).
    """

    name: str
    wire: Wire
    summary: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    defaults: Mapping[str, str] = field(default_factory=dict)
    key_variable: str | None = None
    refused: Mapping[str, str] = field(default_factory=dict)

    @property
    def accepted(self) -> tuple[str, ...]:
        return ("PRESET", *self.required, *self.optional)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "anthropic",
            "anthropic",
            "Anthropic's Messages API (needs the `anthropic` extra: `pip install "
            "'ankka[anthropic]'`)",
            required=("MODEL", "API_KEY"),
            optional=("URL", "TIMEOUT", "MAX_TOKENS"),
            defaults={"URL": "https://api.anthropic.com"},
            key_variable="ANTHROPIC_API_KEY",
        ),
        Preset(
            "openai",
            "responses",
            "OpenAI's own API, spoken as Responses (reasoning kept within a turn)",
            required=("MODEL", "API_KEY"),
            optional=("URL", "TIMEOUT"),
            defaults={"URL": "https://api.openai.com/v1"},
            key_variable="OPENAI_API_KEY",
        ),
        Preset(
            "openai-compatible",
            "chat-completions",
            "any server speaking OpenAI Chat Completions (vLLM, llama.cpp, LiteLLM, ...); "
            "with no API_KEY the bearer `none` is sent",
            required=("URL", "MODEL"),
            optional=("API_KEY", "TIMEOUT"),
        ),
        Preset(
            "ollama",
            "chat-completions",
            "an Ollama server; its `/api/show` is asked once per model and a request needing "
            "tools or an effort the model lacks is refused before it is sent",
            required=("MODEL",),
            optional=("URL", "API_KEY", "TIMEOUT"),
            defaults={"URL": "http://127.0.0.1:11434/v1"},
        ),
        Preset(
            "installation",
            "chat-completions",
            f"a model served on the platform, reached through the gateway at "
            f"`${ADDRESS_VARIABLE}/v1` over mTLS with the certificate in `${TLS_DIR_VARIABLE}`; "
            "checked against `/api/show` like `ollama`",
            required=("MODEL",),
            optional=("TIMEOUT",),
            refused={
                "URL": f"the address comes from {ADDRESS_VARIABLE}, which the operator renders",
                "API_KEY": "an installation model is reached with the service's client "
                f"certificate (from {TLS_DIR_VARIABLE}), never a key",
            },
        ),
    )
}


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """One configured model. ``values`` maps setting suffixes to their values; ``tls_dir`` is
    set for an installation model only (its URL is resolved from the models address)."""

    name: str
    preset: Preset
    values: Mapping[str, str]
    tls_dir: str | None = None

    def get(self, suffix: str) -> str | None:
        return self.values.get(suffix, self.preset.defaults.get(suffix))

    def timeout(self) -> float:
        return self._positive("TIMEOUT", 120.0)

    def max_tokens(self) -> int:
        return int(self._positive("MAX_TOKENS", 4096, whole=True))

    def _positive(self, suffix: str, default: float, *, whole: bool = False) -> float:
        raw = self.get(suffix)
        if raw is None:
            return default
        try:
            value = float(int(raw)) if whole else float(raw)
        except ValueError:
            value = -1.0
        if value <= 0:
            kind = "whole number" if whole else "number of seconds"
            raise ConfigurationError(
                f"{env_name(self.name, suffix)}={raw!r} is not a positive {kind}"
            )
        return value

    def __repr__(self) -> str:
        shown = {k: ("***" if SETTINGS[k].secret else v) for k, v in self.values.items()}
        return f"ModelSettings(name={self.name!r}, preset={self.preset.name!r}, values={shown})"


def _split(variable: str) -> tuple[str, str] | None:
    rest = variable[len(PREFIX) :]
    for suffix in sorted(SETTINGS, key=len, reverse=True):
        if rest.endswith("_" + suffix) and len(rest) > len(suffix) + 1:
            return rest[: -len(suffix) - 1].lower(), suffix
    return None


def parse_environment(environ: Mapping[str, str]) -> dict[str, ModelSettings]:
    """Every model configured in ``environ``; a ConfigurationError names the first fault."""
    grouped: dict[str, dict[str, str]] = {}
    for variable in sorted(environ):
        if not variable.startswith(PREFIX):
            continue
        split = _split(variable)
        if split is None:
            known = ", ".join(SETTINGS)
            raise ConfigurationError(
                f"{variable} is not a setting: model settings are {PREFIX}<NAME>_<SETTING> "
                f"with SETTING one of {known}"
            )
        name, suffix = split
        grouped.setdefault(name, {})[suffix] = environ[variable]
    return {name: _model(name, values, environ) for name, values in grouped.items()}


def _model(name: str, values: dict[str, str], environ: Mapping[str, str]) -> ModelSettings:
    preset_name = values.get("PRESET")
    if preset_name is None:
        others = ", ".join(env_name(name, s) for s in values)
        raise ConfigurationError(
            f"{others} set but {env_name(name, 'PRESET')} is not: either set the preset "
            "or check the variable's spelling"
        )
    preset = PRESETS.get(preset_name)
    if preset is None:
        raise ConfigurationError(
            f"{env_name(name, 'PRESET')}={preset_name!r} is not a preset; presets: "
            f"{', '.join(PRESETS)}"
        )
    for suffix in values:
        if suffix in preset.refused:
            raise ConfigurationError(
                f"{env_name(name, suffix)} is refused by preset {preset.name!r}: "
                f"{preset.refused[suffix]}; remove it"
            )
        if suffix not in preset.accepted:
            raise ConfigurationError(
                f"{env_name(name, suffix)} is not a setting of preset {preset.name!r} "
                f"(it takes {', '.join(env_name(name, s) for s in preset.accepted)})"
            )
    values = dict(values)
    if preset.key_variable and not values.get("API_KEY") and environ.get(preset.key_variable):
        values["API_KEY"] = environ[preset.key_variable]
    for suffix in preset.required:
        if not values.get(suffix) and suffix not in preset.defaults:
            also = f" (or {preset.key_variable})" if suffix == "API_KEY" else ""
            raise ConfigurationError(
                f"{env_name(name, suffix)}{also} is required by preset {preset.name!r}: "
                f"{SETTINGS[suffix].meaning}"
            )
    tls_dir: str | None = None
    if preset.name == "installation":
        values["URL"], tls_dir = _installation(name, environ)
    elif "URL" in values:  # a default is a URL; what was set is checked now, not at a turn
        values["URL"] = http_url(values["URL"], setting=env_name(name, "URL"))
    settings = ModelSettings(name, preset, values, tls_dir)
    remember(*(v for k, v in values.items() if SETTINGS[k].secret))  # hidden from every error
    settings.timeout()  # validate now, at start
    settings.max_tokens()
    return settings


def _installation(name: str, environ: Mapping[str, str]) -> tuple[str, str]:
    address = environ.get(ADDRESS_VARIABLE, "").strip()
    if not address:
        raise ConfigurationError(
            f"model {name!r} is an installation model but {ADDRESS_VARIABLE} is not set: the "
            "operator sets it on the platform's container; outside a cluster set it to the "
            "gateway's address"
        )
    address = http_url(address, setting=ADDRESS_VARIABLE, example="https://ankka-gateway:8443")
    tls_dir = environ.get(TLS_DIR_VARIABLE, "").strip()
    if not tls_dir:
        raise ConfigurationError(
            f"model {name!r} is an installation model but {TLS_DIR_VARIABLE} is not set: it "
            "names the folder holding the service's tls.crt, tls.key and ca.crt"
        )
    return address.rstrip("/") + "/v1", tls_dir
