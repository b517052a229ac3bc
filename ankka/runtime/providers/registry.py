"""Build the providers a service's configuration names (one per configured model)."""

from __future__ import annotations

from collections.abc import Mapping

from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.config import ModelSettings, parse_environment

__all__ = ["build_provider", "providers_from_environment"]


def build_provider(settings: ModelSettings) -> ModelProvider:
    preset = settings.preset.name
    if preset == "openai-compatible":
        return ChatCompletionsProvider(
            name=settings.name,
            model=settings.get("MODEL") or "",
            base_url=settings.get("URL") or "",
            api_key=settings.get("API_KEY"),
            timeout=settings.timeout(),
        )
    raise AssertionError(f"preset {preset!r} is in the table but has no builder")


def providers_from_environment(environ: Mapping[str, str]) -> dict[str, ModelProvider]:
    return {name: build_provider(s) for name, s in parse_environment(environ).items()}
