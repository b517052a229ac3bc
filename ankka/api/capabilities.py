"""What a served model can do, in Ollama's ``/api/show`` vocabulary.

The gateway (which refuses requests a model cannot serve), the operator (which writes the
probed capabilities into an InstallationModel's status) and the runtime's installation provider
all read capabilities. The vocabulary and the pure parsers live here; the one probe that does
I/O (:func:`probe`) takes its HTTP client from the caller.

Sources, by upstream kind:

- ``ollama``: ``POST /api/show`` answers ``capabilities`` and, for thinking models,
  ``thinking.values``; the context length is ``model_info["<arch>.context_length"]``.
- ``llamacpp``: llama.cpp does not serve ``/api/show`` (it answers 404). ``GET /props``
  answers ``chat_template_caps`` (``supports_tools``, ``supports_reasoning_effort``),
  ``modalities.vision`` and ``default_generation_settings.n_ctx``.
- ``openai``: capabilities are declared by whoever configures the upstream.

``logprobs`` is ankka's one word beyond Ollama's vocabulary: the model's answers carry
``logprobs`` / ``top_logprobs`` when asked (what a judgment needs). Ollama's ``/api/show`` does
not say it, so for ``ollama`` it is read when a server lists it; for ``llamacpp`` the probe
asks the model for one token with logprobs and notes whether the answer carries them; for
``openai`` it is declared.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ankka._kernel.errors import DependencyFailed
from ankka._kernel.redact import redact

__all__ = [
    "Capability",
    "ModelCapabilities",
    "ProbeError",
    "UpstreamKind",
    "carries_logprobs",
    "from_llamacpp",
    "from_ollama_show",
    "missing_for_request",
    "probe",
    "to_ollama_show",
]

UpstreamKind = Literal["ollama", "llamacpp", "openai"]


class Capability(enum.StrEnum):
    """One capability word of Ollama's vocabulary."""

    COMPLETION = "completion"
    TOOLS = "tools"
    THINKING = "thinking"
    VISION = "vision"
    EMBEDDING = "embedding"
    LOGPROBS = "logprobs"  # ankka's addition: answers carry logprobs when asked


ThinkingValue = bool | str


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What one model offers. ``thinking_values`` is empty unless ``thinking`` is offered.

    Words outside the vocabulary (newer Ollama releases add some) are kept in ``other`` so
    they can be shown, but no decision depends on them.
    """

    model: str
    capabilities: frozenset[Capability]
    thinking_values: tuple[ThinkingValue, ...] = ()
    context_length: int | None = None
    other: frozenset[str] = field(default_factory=frozenset)

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities

    def allows_effort(self, effort: ThinkingValue) -> bool:
        """True when a request's reasoning effort is among the model's thinking values."""
        if Capability.THINKING not in self.capabilities:
            return False
        if not self.thinking_values:
            # A thinking model that names no levels accepts thinking on or off only.
            return isinstance(effort, bool)
        return effort in self.thinking_values

    def words(self) -> list[str]:
        """The capability words in a stable order, vocabulary first."""
        known = [c.value for c in Capability if c in self.capabilities]
        return known + sorted(self.other)


def _split_words(words: Iterable[object]) -> tuple[frozenset[Capability], frozenset[str]]:
    known: set[Capability] = set()
    other: set[str] = set()
    for word in words:
        if not isinstance(word, str):
            continue
        try:
            known.add(Capability(word))
        except ValueError:
            other.add(word)
    return frozenset(known), frozenset(other)


def from_ollama_show(model: str, body: Mapping[str, Any]) -> ModelCapabilities:
    """Read an Ollama ``/api/show`` answer."""
    raw_words = body.get("capabilities")
    if not isinstance(raw_words, list):
        raise ProbeError(model, "the /api/show answer has no 'capabilities' list")
    known, other = _split_words(raw_words)
    thinking = body.get("thinking")
    values: tuple[ThinkingValue, ...] = ()
    if isinstance(thinking, Mapping):
        raw_values = thinking.get("values")
        if isinstance(raw_values, list):
            values = tuple(v for v in raw_values if isinstance(v, bool | str))
    context_length: int | None = None
    info = body.get("model_info")
    if isinstance(info, Mapping):
        for key, value in info.items():
            if str(key).endswith(".context_length") and isinstance(value, int):
                context_length = value
                break
    return ModelCapabilities(
        model=model,
        capabilities=known,
        thinking_values=values,
        context_length=context_length,
        other=other,
    )


def from_llamacpp(
    model: str, props: Mapping[str, Any], models: Mapping[str, Any] | None = None
) -> ModelCapabilities:
    """Derive capabilities from llama.cpp's ``GET /props`` (and ``GET /v1/models``)."""
    caps = props.get("chat_template_caps")
    if not isinstance(caps, Mapping):
        raise ProbeError(model, "the /props answer has no 'chat_template_caps'")
    words: set[Capability] = {Capability.COMPLETION}
    if caps.get("supports_tools") and caps.get("supports_tool_calls", True):
        words.add(Capability.TOOLS)
    values: tuple[ThinkingValue, ...] = ()
    if caps.get("supports_reasoning_effort"):
        words.add(Capability.THINKING)
        values = ("low", "medium", "high")
    modalities = props.get("modalities")
    if isinstance(modalities, Mapping) and modalities.get("vision"):
        words.add(Capability.VISION)
    context_length: int | None = None
    settings = props.get("default_generation_settings")
    if isinstance(settings, Mapping) and isinstance(settings.get("n_ctx"), int):
        context_length = settings["n_ctx"]
    if context_length is None and models is not None:
        for entry in models.get("data") or []:
            meta = entry.get("meta") if isinstance(entry, Mapping) else None
            if isinstance(meta, Mapping) and isinstance(meta.get("n_ctx"), int):
                context_length = meta["n_ctx"]
                break
    return ModelCapabilities(
        model=model,
        capabilities=frozenset(words),
        thinking_values=values,
        context_length=context_length,
    )


def to_ollama_show(caps: ModelCapabilities) -> dict[str, Any]:
    """Render capabilities as an Ollama ``/api/show`` answer (the gateway serves this)."""
    body: dict[str, Any] = {"capabilities": caps.words(), "details": {}, "model_info": {}}
    if caps.has(Capability.THINKING):
        body["thinking"] = {"values": list(caps.thinking_values)}
    if caps.context_length is not None:
        body["model_info"]["general.context_length"] = caps.context_length
    return body


def missing_for_request(
    caps: ModelCapabilities,
    *,
    tools: bool = False,
    effort: ThinkingValue | None = None,
    images: bool = False,
    logprobs: bool = False,
) -> str | None:
    """The first capability a request needs and the model lacks, in words; None if served."""
    if tools and not caps.has(Capability.TOOLS):
        return "tools"
    if effort is not None and not caps.allows_effort(effort):
        offered = ", ".join(str(v) for v in caps.thinking_values) or "none"
        return f"thinking with effort {effort!r} (offered: {offered})"
    if images and not caps.has(Capability.VISION):
        return "vision"
    if logprobs and not caps.has(Capability.LOGPROBS):
        return "logprobs"
    return None


class ProbeError(DependencyFailed):
    """A model's capabilities could not be learned; says which model and why.

    Whoever serves the model must act (it is down, or answers something else than its kind).
    """

    kind = "probe_failed"
    status = 502

    def __init__(self, model: str, reason: str) -> None:
        reason = redact(reason)  # the reason may quote the server or a URL with credentials
        super().__init__(f"could not learn what model {model!r} can do: {reason}")
        self.model = model
        self.reason = reason


class _Response(Protocol):
    status_code: int

    def json(self) -> Any: ...


class HTTPClient(Protocol):
    """The two calls a probe makes; an ``httpx2.AsyncClient`` satisfies it."""

    async def get(self, url: str) -> Any: ...

    async def post(self, url: str, *, json: Any) -> Any: ...


async def probe(
    client: HTTPClient,
    *,
    kind: UpstreamKind,
    url: str,
    model: str,
    declared: Iterable[str] = (),
    declared_thinking: Iterable[ThinkingValue] = (),
) -> ModelCapabilities:
    """Learn what ``model`` at ``url`` can do. Raises :class:`ProbeError` on any failure."""
    base = url.rstrip("/")
    if kind == "openai":
        known, other = _split_words(declared)
        if not known:
            raise ProbeError(model, "an 'openai' upstream must declare its capabilities")
        return ModelCapabilities(
            model=model,
            capabilities=known,
            thinking_values=tuple(declared_thinking),
            other=other,
        )
    try:
        if kind == "ollama":
            response = await client.post(f"{base}/api/show", json={"model": model})
            body = _json_or_raise(model, "/api/show", response)
            return from_ollama_show(model, body)
        props = _json_or_raise(model, "/props", await client.get(f"{base}/props"))
        models_response = await client.get(f"{base}/v1/models")
        models = models_response.json() if models_response.status_code == 200 else None
        found = from_llamacpp(model, props, models)
        if await _returns_logprobs(client, base, model):
            found = replace(found, capabilities=found.capabilities | {Capability.LOGPROBS})
        return found
    except ProbeError:
        raise
    except Exception as exc:  # transport errors of whatever client the caller passed
        raise ProbeError(model, f"{type(exc).__name__}: {exc}") from exc


# Greedy, so the one token is the model's likeliest and never a sampled end of text (an answer
# with no token carries no logprobs and would read as a model without them).
LOGPROBS_PROBE: dict[str, Any] = {
    "messages": [{"role": "user", "content": "Say yes."}],
    "max_tokens": 1,
    "temperature": 0,
    "logprobs": True,
    "top_logprobs": 1,
}


async def _returns_logprobs(client: HTTPClient, base: str, model: str) -> bool:
    """Ask for one token with logprobs; True when the answer carries them."""
    response = await client.post(
        f"{base}/v1/chat/completions", json={"model": model, **LOGPROBS_PROBE}
    )
    body = _json_or_raise(model, "/v1/chat/completions", response)
    return carries_logprobs(body)


def carries_logprobs(body: Mapping[str, Any]) -> bool:
    """Whether a Chat Completions answer carries per-token logprobs with alternatives."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return False
    logprobs = choices[0].get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        return False
    return isinstance(content[0].get("top_logprobs", content[0].get("top_probs")), list)


def _json_or_raise(model: str, path: str, response: Any) -> Mapping[str, Any]:
    if response.status_code != 200:
        raise ProbeError(model, f"{path} answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError as exc:
        raise ProbeError(model, f"{path} did not answer JSON") from exc
    if not isinstance(body, Mapping):
        raise ProbeError(model, f"{path} did not answer a JSON object")
    return body
