"""The models file: which models the gateway serves, where their servers are, what they can do.

The operator renders this file into a ConfigMap; on a laptop it is a file someone wrote. The
gateway re-reads it when it changes (:class:`ModelsFile`), so adding a model needs no restart.
Parsing is strict and pure (:func:`parse_models`): a mistake names the entry and the key, and a
file that does not parse on reload leaves the previous models in service.

Format (YAML): a list of models (as the operator renders it), or a mapping whose ``models`` is
that list, beside optional settings::

    probe_interval_s: 60          # optional: re-probe capabilities this often
    models:
      - name: smollm2             # the name callers put in "model"
        kind: llamacpp            # ollama | llamacpp | openai
        url: http://127.0.0.1:8080  # the server's base address; a trailing /v1 is dropped
        upstream_model: SmolLM2-135M-Instruct.Q4_1.gguf  # optional: the name the server uses
        capabilities: [completion, tools]   # required for openai; ignored for the others
        thinking: [low, high]               # optional, openai only: the efforts offered
        max_concurrency: 8        # optional: requests in flight at once (default: no limit)
        max_queue: 64             # optional: requests waiting beyond that (default 100)
        timeout_s: 600            # optional: upstream read timeout (default 600)
        api_key_env: VENDOR_KEY   # optional: the environment variable holding the bearer key
        callers: [ankka://service/team-a/helper]  # optional: only these may use it
        max_in_flight_per_caller: 4  # optional: one caller's requests in flight at once
        max_answer_bytes: 33554432  # optional: largest whole answer buffered (default 32 MiB)
        tokens_per_minute_per_caller: 20000  # optional: one caller's tokens per minute
        default_max_tokens: 4096  # optional: what a request without max_tokens may generate,
                                  # as the per-minute budget reserves it (default 4096)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml

from ankka._kernel.errors import ConfigurationError
from ankka._kernel.urls import http_url
from ankka.api.capabilities import UpstreamKind
from ankka.gateway.callers import caller_names

__all__ = ["ModelSpec", "Models", "ModelsFile", "ModelsFileError", "base_address", "parse_models"]

_KINDS: tuple[UpstreamKind, ...] = ("ollama", "llamacpp", "openai")
_ENTRY_KEYS = {
    "name",
    "kind",
    "url",
    "upstream_model",
    "capabilities",
    "thinking",
    "max_concurrency",
    "max_queue",
    "timeout_s",
    "api_key_env",
    "callers",
    "max_in_flight_per_caller",
    "max_answer_bytes",
    "tokens_per_minute_per_caller",
    "default_max_tokens",
}
_TOP_KEYS = {"models", "probe_interval_s"}
# A whole (non-stream) answer is buffered to be relayed; past this it is a 502. Streams are
# relayed chunk by chunk and never buffered, so they have no such cap.
DEFAULT_MAX_ANSWER = 32 * 1024 * 1024
# What a request without max_tokens is taken to generate at most, as a per-minute token budget
# reserves it before sending (the answer's usage settles it after).
DEFAULT_MAX_TOKENS = 4096
_TPM = "tokens_per_minute_per_caller"


class ModelsFileError(ConfigurationError):
    kind = "invalid_models_file"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One served model as the file declares it."""

    name: str
    kind: UpstreamKind
    url: str
    upstream_model: str
    capabilities: tuple[str, ...] = ()
    thinking: tuple[bool | str, ...] = ()
    max_concurrency: int | None = None
    max_queue: int = 100
    timeout_s: float = 600.0
    api_key_env: str | None = None
    # Who may use the model (caller_name forms); None: every authenticated caller.
    callers: frozenset[str] | None = None
    max_in_flight_per_caller: int | None = None
    max_answer_bytes: int = DEFAULT_MAX_ANSWER
    tokens_per_minute_per_caller: int | None = None
    default_max_tokens: int = DEFAULT_MAX_TOKENS

    def probe_identity(self) -> tuple[object, ...]:
        """What decides the capabilities: a reload that keeps it keeps the probed answer."""
        return (self.kind, self.url, self.upstream_model, self.capabilities, self.thinking)

    def bearer(self) -> str:
        """The key sent upstream; ``none`` (the platform's placeholder) when no key is set."""
        if self.api_key_env:
            return os.environ.get(self.api_key_env, "") or "none"
        return "none"


@dataclass(frozen=True, slots=True)
class Models:
    specs: tuple[ModelSpec, ...]
    probe_interval_s: float = 60.0

    def by_name(self) -> dict[str, ModelSpec]:
        return {spec.name: spec for spec in self.specs}


def _positive_int(raw: object, where: str, key: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
        raise ModelsFileError(f"{where}: {key!r} must be a whole number > 0, not {raw!r}")
    return raw


def _positive_number(raw: object, where: str, key: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        raise ModelsFileError(f"{where}: {key!r} must be a number > 0, not {raw!r}")
    return float(raw)


def _words(raw: object, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(w, str) for w in raw):
        raise ModelsFileError(f"{where}: {key!r} must be a list of words, e.g. [completion, tools]")
    return tuple(cast(list[str], raw))


def _entry(raw: object, index: int) -> ModelSpec:
    where = f"models[{index}]"
    if not isinstance(raw, Mapping):
        raise ModelsFileError(f"{where}: each model is a mapping with name, kind and url")
    name = raw.get("name")
    if isinstance(name, str) and name:
        where = f"model {name!r}"
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise ModelsFileError(
            f"{where}: unknown key(s) {sorted(unknown)}; a model takes {sorted(_ENTRY_KEYS)}"
        )
    if not isinstance(name, str) or not name:
        raise ModelsFileError(f"{where}: 'name' (the name callers use) is required")
    kind = raw.get("kind")
    if kind not in _KINDS:
        raise ModelsFileError(f"{where}: 'kind' must be one of {list(_KINDS)}, not {kind!r}")
    url = raw.get("url")
    if not isinstance(url, str):
        raise ModelsFileError(f"{where}: 'url' must be an http:// or https:// address")
    try:
        url = http_url(url, setting="url", example="http://127.0.0.1:8080")
    except ConfigurationError as exc:
        raise ModelsFileError(
            f"{where}: 'url' must be an http:// or https:// address: {exc}"
        ) from None
    upstream = raw.get("upstream_model", name)
    if not isinstance(upstream, str) or not upstream:
        raise ModelsFileError(f"{where}: 'upstream_model' must be a non-empty string")
    capabilities = (
        _words(raw["capabilities"], where, "capabilities") if "capabilities" in raw else ()
    )
    if kind == "openai" and not capabilities:
        raise ModelsFileError(
            f"{where}: an 'openai' upstream cannot be probed; declare its 'capabilities', "
            "e.g. [completion, tools]"
        )
    thinking_raw = raw.get("thinking", [])
    if not isinstance(thinking_raw, list) or not all(
        isinstance(t, bool | str) for t in thinking_raw
    ):
        raise ModelsFileError(f"{where}: 'thinking' must be a list of booleans or effort names")
    concurrency = raw.get("max_concurrency")
    key_env = raw.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not key_env):
        raise ModelsFileError(f"{where}: 'api_key_env' names an environment variable")
    return ModelSpec(
        name=name,
        kind=cast(UpstreamKind, kind),
        url=base_address(url),
        upstream_model=upstream,
        capabilities=capabilities,
        thinking=tuple(thinking_raw),
        max_concurrency=(
            None if concurrency is None else _positive_int(concurrency, where, "max_concurrency")
        ),
        max_queue=(
            _positive_int(raw["max_queue"], where, "max_queue") if "max_queue" in raw else 100
        ),
        timeout_s=(
            _positive_number(raw["timeout_s"], where, "timeout_s") if "timeout_s" in raw else 600.0
        ),
        api_key_env=key_env,
        callers=_callers(raw, where),
        max_answer_bytes=(
            _positive_int(raw["max_answer_bytes"], where, "max_answer_bytes")
            if "max_answer_bytes" in raw
            else DEFAULT_MAX_ANSWER
        ),
        tokens_per_minute_per_caller=(
            _positive_int(raw[_TPM], where, _TPM) if _TPM in raw else None
        ),
        max_in_flight_per_caller=(
            _positive_int(raw["max_in_flight_per_caller"], where, "max_in_flight_per_caller")
            if "max_in_flight_per_caller" in raw
            else None
        ),
        default_max_tokens=(
            _positive_int(raw["default_max_tokens"], where, "default_max_tokens")
            if "default_max_tokens" in raw
            else DEFAULT_MAX_TOKENS
        ),
    )


def _callers(raw: Mapping[str, Any], where: str) -> frozenset[str] | None:
    if "callers" not in raw:
        return None
    listed = raw["callers"]
    if not isinstance(listed, list) or not all(isinstance(c, str) and c for c in listed):
        raise ModelsFileError(
            f"{where}: 'callers' must be a list of caller identities, e.g. "
            "[ankka://service/team-a/helper]"
        )
    return caller_names(listed)


def base_address(url: str) -> str:
    """The one rule for ``url``: the server's base address, so a trailing ``/v1`` is dropped.

    OpenAI-compatible base URLs are usually written with ``/v1`` (the runtime's own
    ``ANKKA_MODEL_<NAME>_URL`` is), while the gateway adds ``/v1/chat/completions`` and probes
    ``/api/show`` and ``/props`` at the base; both spellings therefore name the same server.
    """
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def parse_models(data: Any) -> Models:
    """Read a parsed models file. Raises :class:`ModelsFileError` naming what is wrong.

    The file is either a list of models (what the operator renders) or a mapping with a
    ``models`` list and optional settings.
    """
    if isinstance(data, list):
        data = {"models": data}
    if not isinstance(data, Mapping):
        raise ModelsFileError(
            "a models file is a list of models, or a mapping with a 'models' list"
        )
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ModelsFileError(
            f"unknown top-level key(s) {sorted(unknown)}; a models file takes {sorted(_TOP_KEYS)}"
        )
    entries = data.get("models")
    if not isinstance(entries, list):
        raise ModelsFileError("'models' must be a list of models (it may be empty: [])")
    specs = tuple(_entry(raw, i) for i, raw in enumerate(entries))
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ModelsFileError(f"model {spec.name!r} is listed twice; names must be unique")
        seen.add(spec.name)
    interval = data.get("probe_interval_s", 60)
    return Models(specs, _positive_number(interval, "the models file", "probe_interval_s"))


class ModelsFile:
    """A models file on disk, re-read when its modification time, size or inode change.

    Kubernetes updates a mounted ConfigMap by swapping a symlink, so the file is compared by
    what ``stat`` says through the link, never by keeping it open.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None

    def _stamp(self) -> tuple[int, int, int]:
        st = self.path.stat()
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def load(self) -> Models:
        """Read and parse the file now. Raises :class:`ModelsFileError`."""
        try:
            stamp = self._stamp()
            text = self.path.read_text()
        except OSError as exc:
            raise ModelsFileError(
                f"cannot read the models file {self.path}: {exc.strerror}"
            ) from exc
        # Seen, whether or not it parses: a broken file is reported once per change, not on
        # every poll until someone fixes it.
        self._seen = stamp
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ModelsFileError(f"the models file {self.path} is not YAML: {exc}") from exc
        try:
            return parse_models(data)
        except ModelsFileError as exc:
            raise ModelsFileError(f"{self.path}: {exc}") from exc

    def changed(self) -> bool:
        try:
            return self._stamp() != self._seen
        except OSError:
            return False  # mid-swap or removed: keep serving what was read last
