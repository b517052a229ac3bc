"""The remote A2A agents a runtime is configured with (``ANKKA_A2A_REMOTE_<NAME>_*``), apart
from their client (:mod:`.a2a_remote`): ``ankka serve`` reads these at start, and imports the
client (the a2a-sdk's, with ``httpx`` and protobuf) only when one of its agents delegates to
one of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["RemoteAgent", "remote_agents_from_environment"]

_PREFIX = "ANKKA_A2A_REMOTE_"


@dataclass(frozen=True, slots=True)
class RemoteAgent:
    """An agent of another platform: its card's URL and how to authenticate to it."""

    name: str
    card_url: str
    token_file: str | None = None  # Authorization: Bearer <the file's content>
    token: str | None = field(default=None, repr=False)  # or the token itself (a secret)
    tls_cert: str | None = None  # a client certificate (and key, and the CA it trusts)
    tls_key: str | None = None
    tls_ca: str | None = None


def remote_agents_from_environment(env: Mapping[str, str]) -> dict[str, RemoteAgent]:
    """The remote agents an Agent's spec names, as the operator renders them:
    ``ANKKA_A2A_REMOTE_<NAME>_CARD_URL`` and, when it wants a token, ``..._TOKEN``."""
    found: dict[str, RemoteAgent] = {}
    for key, value in env.items():
        if key.startswith(_PREFIX) and key.endswith("_CARD_URL"):
            name = key.removeprefix(_PREFIX).removesuffix("_CARD_URL")
            token = env.get(f"{_PREFIX}{name}_TOKEN") or None
            found[name.lower()] = RemoteAgent(name.lower(), value, token=token)
    return found
