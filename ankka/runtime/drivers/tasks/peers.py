"""The peers a runtime delegates to (``ANKKA_PEERS``: the agents other runtimes serve), read and
checked at start apart from the follower that calls them (:mod:`.remote`, which imports
``httpx``, the a2a-sdk's client and ``cryptography``): ``ankka serve`` imports that only when
a peer or a remote A2A agent is configured."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ankka._kernel.errors import ConfigurationError

__all__ = ["PEERS_VARIABLE", "Peer", "check_peers", "peers_from_environment"]

PEERS_VARIABLE = "ANKKA_PEERS"


class Peer(BaseModel):
    """Where another runtime serves ``agent``: its base URL, the URI SAN its certificate
    must carry (https with ``--tls-dir``), and a file holding a bearer token to send."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(min_length=1, max_length=128)
    url: str = Field(pattern=r"^https?://", max_length=2000)
    identity: str | None = Field(default=None, max_length=2000)
    token_file: str | None = None


def peers_from_environment(env: Mapping[str, str]) -> dict[str, Peer]:
    """``ANKKA_PEERS``: a JSON object, agent → ``{"url", "identity"?, "token_file"?}``."""
    raw = env.get(PEERS_VARIABLE, "").strip()
    if not raw:
        return {}
    try:
        given = json.loads(raw)
        if not isinstance(given, dict):
            raise ValueError("not an object")
        return {
            str(name): Peer.model_validate({"agent": name, **entry})
            for name, entry in given.items()
        }
    except (ValueError, TypeError, ValidationError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        what = f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}" if first else exc
        raise ConfigurationError(
            f'{PEERS_VARIABLE} is not a JSON object of agent → {{"url", "identity"?, '
            f'"token_file"?}} ({what})'
        ) from None


def check_peers(peers: Mapping[str, Peer], tls_dir: str | None) -> None:
    """Refuse an https peer with no identity when this runtime calls with its certificate
    (``ankka serve`` checks it at start, before anything listens)."""
    for name, peer in peers.items():
        if tls_dir is not None and peer.url.startswith("https://") and not peer.identity:
            raise ConfigurationError(
                f"{PEERS_VARIABLE}: peer {name!r} is https with --tls-dir; name the URI SAN "
                'its certificate carries as its "identity" (ankka://service/<ns>/<agent>)'
            )
