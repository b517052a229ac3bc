"""Pure: who may delegate to whom, rendered from Agents' ``spec.delegatesTo``.

An Agent whose ``spec.delegatesTo`` names another Agent (in its namespace) gets, on its
runtime, ``ANKKA_PEERS``: each agent that Agent serves (``serves``, default its name) at the
other's Service, its certificate pinned to the other's identity
(``ankka://service/<ns>/<agent>``). The named Agent gets ``ANKKA_DELEGATORS``: the callers
(``<ns>/<agent>``, as the runtime's identity layer names a certificate's URI SAN) of every
Agent naming it, and each of them as a caller in its NetworkPolicy. docs/delegation.md,
"Across runtimes"; tested in tests/unit/operator/test_delegation.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ankka.api.resources import AgentSpec
from ankka.operator.certs import agent_uri

__all__ = ["delegators_env", "delegators_of", "peers_env", "targets_of"]


def peers_env(
    spec: AgentSpec, *, namespace: str, url_of: Callable[[str], str]
) -> list[dict[str, Any]]:
    """``ANKKA_PEERS`` for an Agent's runtime (nothing when it delegates to no other Agent);
    ``url_of`` gives an Agent's Service URL."""
    peers: dict[str, dict[str, str]] = {}
    for target in spec.delegates_to:
        for served in target.serves or [target.agent]:
            peers[served] = {
                "url": url_of(target.agent),
                "identity": agent_uri(namespace, target.agent),
            }
    if not peers:
        return []
    return [{"name": "ANKKA_PEERS", "value": json.dumps(peers, sort_keys=True)}]


def targets_of(spec: Mapping[str, Any] | None) -> set[str]:
    """The Agents an Agent's spec (as stored: camelCase) names in ``delegatesTo``."""
    return {str(t.get("agent")) for t in (spec or {}).get("delegatesTo") or [] if t.get("agent")}


def delegators_of(agents: Iterable[Mapping[str, Any]], *, namespace: str, name: str) -> list[str]:
    """The Agents of ``namespace`` (other than ``name``) whose ``spec.delegatesTo`` names
    ``name``, sorted."""
    found = set()
    for body in agents:
        meta = body.get("metadata") or {}
        other = str(meta.get("name"))
        if (
            meta.get("namespace") == namespace
            and other != name
            and name in targets_of(body.get("spec"))
        ):
            found.add(other)
    return sorted(found)


def delegators_env(delegators: Sequence[str], *, namespace: str) -> list[dict[str, Any]]:
    """``ANKKA_DELEGATORS`` for the runtime the ``delegators`` (Agents' names) may call."""
    if not delegators:
        return []
    return [{"name": "ANKKA_DELEGATORS", "value": ",".join(f"{namespace}/{d}" for d in delegators)}]
