"""Build the providers a service's configuration names (one per configured model).

One builder per preset of :data:`~.config.PRESETS`; a preset in the table without a builder
fails loudly. SDKs of optional extras are imported only when their preset is configured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import httpx2

from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.checked import CapabilityCheck, ollama_probe
from ankka.runtime.providers.config import ModelSettings, parse_environment

__all__ = ["BUILDERS", "build_provider", "providers_from_environment"]


def _anthropic(settings: ModelSettings) -> ModelProvider:
    from ankka.runtime.providers.anthropic import AnthropicProvider

    return AnthropicProvider(
        name=settings.name,
        model=settings.get("MODEL") or "",
        api_key=settings.get("API_KEY") or "",
        base_url=settings.get("URL") or "",
        timeout=settings.timeout(),
        max_tokens=settings.max_tokens(),
    )


def _openai(settings: ModelSettings) -> ModelProvider:
    from ankka.runtime.providers.responses import ResponsesProvider

    return ResponsesProvider(
        name=settings.name,
        model=settings.get("MODEL") or "",
        api_key=settings.get("API_KEY"),
        base_url=settings.get("URL") or "",
        timeout=settings.timeout(),
    )


def _chat(settings: ModelSettings) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(
        name=settings.name,
        model=settings.get("MODEL") or "",
        base_url=settings.get("URL") or "",
        api_key=settings.get("API_KEY"),
        timeout=settings.timeout(),
    )


def _ollama(settings: ModelSettings) -> ModelProvider:
    inner = _chat(settings)
    show = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0))
    address = inner.base_url.removesuffix("/v1")
    return CapabilityCheck(
        inner,
        probe=ollama_probe(show, address=address, model=inner.model),
        on_close=show.aclose,
    )


def _installation(settings: ModelSettings) -> ModelProvider:
    from ankka.runtime.providers.installation import installation_model

    assert settings.tls_dir is not None  # config resolves it for this preset
    return installation_model(
        name=settings.name,
        model=settings.get("MODEL") or "",
        base_url=settings.get("URL") or "",
        tls_dir=settings.tls_dir,
        timeout=settings.timeout(),
    )


BUILDERS: dict[str, Callable[[ModelSettings], ModelProvider]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "openai-compatible": _chat,
    "ollama": _ollama,
    "installation": _installation,
}


def build_provider(settings: ModelSettings) -> ModelProvider:
    builder = BUILDERS.get(settings.preset.name)
    if builder is None:
        raise AssertionError(f"preset {settings.preset.name!r} is in the table but has no builder")
    return builder(settings)


def providers_from_environment(environ: Mapping[str, str]) -> dict[str, ModelProvider]:
    return {name: build_provider(s) for name, s in parse_environment(environ).items()}
