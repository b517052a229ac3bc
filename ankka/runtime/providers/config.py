"""Named models from the environment, and the preset table.

A service's models are configured as ``ANKKA_MODEL_<NAME>_<SETTING>`` variables; an agent
asks for a model by its lowercased name (``ANKKA_MODEL_DEFAULT_*`` is ``model="default"``).
Each model names a preset, and the preset says which settings it needs and which it takes.

The variable names are built from :data:`PREFIX` and the settings' suffixes, never listed
literally. A variable under the prefix that is no setting is refused at start, naming it, so a
misspelt suffix is reported as what it is and not as some other fault of the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ankka._kernel.errors import ConfigurationError

__all__ = [
    "PREFIX",
    "PRESETS",
    "SETTINGS",
    "ModelSettings",
    "Preset",
    "Setting",
    "env_name",
    "parse_environment",
]

PREFIX = "ANKKA_MODEL_"


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
        Setting("API_KEY", "the key sent as a bearer token", secret=True),
        Setting("TIMEOUT", "seconds one model call may take (default 120)"),
    )
}


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    summary: str
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    defaults: Mapping[str, str] = field(default_factory=dict)

    @property
    def accepted(self) -> tuple[str, ...]:
        return ("PRESET", *self.required, *self.optional)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "openai-compatible",
            "any server speaking OpenAI Chat Completions (vLLM, llama.cpp, LiteLLM, ...); "
            "with no API_KEY the bearer `none` is sent",
            required=("URL", "MODEL"),
            optional=("API_KEY", "TIMEOUT"),
        ),
    )
}


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """One configured model. ``values`` maps setting suffixes to their values."""

    name: str
    preset: Preset
    values: Mapping[str, str]

    def get(self, suffix: str) -> str | None:
        return self.values.get(suffix, self.preset.defaults.get(suffix))

    def timeout(self) -> float:
        raw = self.get("TIMEOUT")
        if raw is None:
            return 120.0
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if seconds <= 0:
            raise ConfigurationError(
                f"{env_name(self.name, 'TIMEOUT')}={raw!r} is not a positive number of seconds"
            )
        return seconds

    def __repr__(self) -> str:
        shown = {k: ("***" if SETTINGS[k].secret else v) for k, v in self.values.items()}
        return f"ModelSettings(name={self.name!r}, preset={self.preset.name!r}, values={shown})"


def env_name(model: str, suffix: str) -> str:
    return f"{PREFIX}{model.upper().replace('-', '_')}_{suffix}"


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
    models: dict[str, ModelSettings] = {}
    for name, values in grouped.items():
        models[name] = _model(name, values)
    return models


def _model(name: str, values: dict[str, str]) -> ModelSettings:
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
        if suffix not in preset.accepted:
            raise ConfigurationError(
                f"{env_name(name, suffix)} is not a setting of preset {preset.name!r} "
                f"(it takes {', '.join(env_name(name, s) for s in preset.accepted)})"
            )
    for suffix in preset.required:
        if not values.get(suffix) and suffix not in preset.defaults:
            raise ConfigurationError(
                f"{env_name(name, suffix)} is required by preset {preset.name!r}: "
                f"{SETTINGS[suffix].meaning}"
            )
    settings = ModelSettings(name, preset, dict(values))
    settings.timeout()  # validate now, at start
    return settings
