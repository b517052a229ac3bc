"""``ankka up --model URL``: an existing model server adopted, as an InstallationModel adopts one.

The server is asked, once, before anything starts: which model it serves (``GET /v1/models``,
unless ``--model-name`` says), then what it is: Ollama when ``POST /api/show`` answers for that
model (the gateway then reads its capabilities there, as for an Ollama InstallationModel),
llama.cpp when ``GET /props`` answers, and otherwise a plain OpenAI-compatible server, whose
capabilities cannot be probed and are declared as ``completion`` and ``tools``. Every way this
can fail says what to pass instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx2

from ankka._kernel.errors import ConfigurationError
from ankka._kernel.urls import http_url
from ankka.api.capabilities import UpstreamKind

__all__ = ["DECLARED", "Adopted", "AdoptError", "adopt", "model_url"]

# What a server that answers neither /api/show nor /props is declared to do (kind openai).
DECLARED = ("completion", "tools")
_KIND_WORDS = {"ollama": "Ollama", "llamacpp": "llama.cpp", "openai": "OpenAI-compatible"}


class AdoptError(ConfigurationError):
    """The server ``--model`` names cannot be adopted; the message says what to pass."""

    kind = "model_not_adopted"


@dataclass(frozen=True, slots=True)
class Adopted:
    url: str  # the server's base address (no /v1), as the gateway's models file takes it
    model: str  # the model's name on the server
    kind: UpstreamKind
    capabilities: tuple[str, ...] = ()  # declared, for kind openai only

    def describe(self) -> str:
        how = {
            "ollama": "its /api/show answered: the gateway probes it there",
            "llamacpp": "its /props answered: the gateway probes it there",
            "openai": f"no /api/show or /props: declared {', '.join(self.capabilities)}",
        }[self.kind]
        return f"{_KIND_WORDS[self.kind]} server at {self.url} serving {self.model} ({how})"


def model_url(value: str) -> str:
    """``--model``'s URL, checked (scheme and host), without a trailing ``/`` or ``/v1``."""
    url = http_url(
        value,
        setting="--model",
        example="http://127.0.0.1:11434 (Ollama) or http://127.0.0.1:8080/v1; or standin, local",
    )
    return url.rstrip("/").removesuffix("/v1")


def adopt(url: str, model: str | None, *, client: httpx2.Client) -> Adopted:
    """Ask the server at ``url`` (see :func:`model_url`) what it serves and what it is."""
    name = model or _only_model(url, client)
    try:
        show = client.post(f"{url}/api/show", json={"model": name})
        if show.status_code == 200 and isinstance(_json(show), dict):
            return Adopted(url, name, "ollama")
        if show.status_code == 404 and model is not None and _ollama_lacks(show):
            # Ollama's answer for a model it does not have: name one it has.
            raise AdoptError(
                f"the Ollama server at {url} has no model {name!r}; pass --model-name with one "
                "it has (`ollama list`), or pull it first (`ollama pull NAME`)"
            )
        props = client.get(f"{url}/props")
        if props.status_code == 200 and isinstance(_json(props), dict):
            return Adopted(url, name, "llamacpp")
    except httpx2.HTTPError as exc:
        raise _unreachable(url, exc) from None
    return Adopted(url, name, "openai", DECLARED)


def _only_model(url: str, client: httpx2.Client) -> str:
    try:
        answer = client.get(f"{url}/v1/models")
    except httpx2.HTTPError as exc:
        raise _unreachable(url, exc) from None
    body = _json(answer) if answer.status_code == 200 else None
    data = body.get("data") if isinstance(body, dict) else None
    names = [str(m["id"]) for m in data or [] if isinstance(m, dict) and m.get("id")]
    if len(names) == 1:
        return names[0]
    if not names:
        raise AdoptError(
            f"the server at {url} did not list its models (GET /v1/models answered "
            f"HTTP {answer.status_code}); pass --model-name NAME, the model's name on it"
        )
    shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
    raise AdoptError(
        f"the server at {url} serves {len(names)} models ({shown}); pass --model-name with one"
    )


def _ollama_lacks(response: httpx2.Response) -> bool:
    """Ollama's own 404 for a model it does not have: ``{"error": "model 'x' not found"}``."""
    body = _json(response)
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, str) and "not found" in error


def _json(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _unreachable(url: str, exc: httpx2.HTTPError) -> AdoptError:
    return AdoptError(
        f"cannot reach the model server at {url} ({type(exc).__name__}: {exc}); start it, or "
        "pass another --model (standin, local, or the server's URL)"
    )
