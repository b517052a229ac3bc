"""Issuing and renewing the certificates the operator signs: the gateway's (in the platform
namespace) and every Agent's runtime's (in the Agent's namespace).

Why Agents' certificates are judged from the Agent's status and not from their Secrets: the
operator reads no Secret outside the platform namespace (its ClusterRole may create and patch
Secrets, never get, list or watch them). So an Agent's status records what was issued
(``certificateNotAfter``, ``certificateRenewAt`` and ``certificateProfile``, a digest of the CA
and the names, ``certs.profile``); a certificate is issued again when the profile changes (a
new CA, new names), at two thirds of its life, or when the resync finds its Secret gone (a
no-op merge patch answers 404). The gateway's Secret lives in the platform namespace, where the
operator reads it, and is judged from its content.

Called by ``agent_reconcile`` (on every reconcile, cached until the renewal time),
``handlers`` (the gateway's at start) and ``periodic`` (every certificate check).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import replace
from typing import Any

from ankka.operator import agents, certs, events, tlssecrets
from ankka.operator.agent_status import Issued
from ankka.operator.objects import Obj, owner_reference, timestamp
from ankka.operator.reconcile import Platform, record

__all__ = ["due_agents", "ensure_agent_certificate", "ensure_gateway_certificate"]

log = logging.getLogger("ankka.operator")


def _at(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def _issue(
    p: Platform,
    *,
    namespace: str,
    name: str,
    uri: str,
    role: str,
    dns_names: tuple[str, ...],
    owners: list[dict[str, Any]] | None,
    reason: str,
    renewed: bool,
    create: bool,
) -> certs.KeyPair:
    """Issue a certificate into its Secret (created, or applied over what is there) and post
    the Event; returns the pair."""
    ca = p.require_ca()
    log.info("issuing certificate %s/%s for %s: %s", namespace, name, uri, reason)
    server, client = True, role != "gateway"  # a runtime serves its Service and calls out
    pair = certs.issue(
        ca,
        uri=uri,
        now=p.clock.now(),
        lifetime=p.settings.certificate_lifetime,
        server=server,
        client=client,
        dns_names=dns_names,
    )
    body = tlssecrets.certificate_secret(
        namespace=namespace,
        name=name,
        pair=pair,
        ca_cert_pem=ca.cert_pem,
        uri=uri,
        role=role,
        dns_names=dns_names,
        owners=owners,
    )
    if not create or await p.kube.create(body) is None:  # there already: replace it
        await p.kube.apply(body)
    about = (
        {**owners[0], "namespace": namespace}
        if owners
        else {"apiVersion": "v1", "kind": "Secret", "name": name, "namespace": namespace}
    )
    words = (
        f"certificate {name} for {uri} {'renewed' if renewed else 'issued'} ({reason}); "
        f"valid until {timestamp(certs.not_after(pair.cert_pem))}"
    )
    happening = events.Happening(
        "Normal", "CertificateRenewed" if renewed else "CertificateIssued", words
    )
    p.metrics.certificates.labels(role, "renewed" if renewed else "issued").inc()
    await record(p, about, happening)
    return pair


async def ensure_gateway_certificate(p: Platform) -> None:
    """Read, judge and (re)issue the gateway's certificate Secret (platform namespace)."""
    s = p.settings
    dns = (
        s.gateway_service,
        f"{s.gateway_service}.{s.namespace}.svc",
        f"{s.gateway_service}.{s.namespace}.svc.cluster.local",
    )
    key = (s.namespace, s.gateway_tls_secret)
    now = p.clock.now()
    known = p.good_certificates.get(key)
    if known is not None and now < known[1]:
        return
    pair = tlssecrets.pair_of(await p.kube.get("v1", "Secret", *key))
    ca = p.require_ca()
    reason = certs.needs_renewal(
        pair, ca=ca, uri=certs.GATEWAY_URI, now=now, dns_names=dns, server=True
    )
    if reason is not None:
        pair = await _issue(
            p,
            namespace=s.namespace,
            name=s.gateway_tls_secret,
            uri=certs.GATEWAY_URI,
            role="gateway",
            dns_names=dns,
            owners=None,
            reason=reason,
            renewed=pair is not None,
            create=False,
        )
    assert pair is not None
    expiry = timestamp(certs.not_after(pair.cert_pem))
    p.good_certificates[key] = (certs.GATEWAY_URI, certs.renew_at(pair.cert_pem), expiry)


async def ensure_agent_certificate(
    p: Platform,
    *,
    namespace: str,
    name: str,
    uid: str,
    status: Obj | None,
    check_exists: bool = False,
) -> Issued:
    """The Agent's runtime certificate, judged from what its ``status`` records (and, with
    ``check_exists``, whether its Secret is still there); issued when it must be."""
    secret = agents.certificate_secret_name(name)
    uri, dns = certs.agent_uri(namespace, name), certs.agent_dns_names(namespace, name)
    profile = certs.profile(p.require_ca(), uri=uri, dns_names=dns)
    now = p.clock.now()
    known = p.agent_certificates.get((namespace, name))
    fresh = known is not None and known.profile == profile and now < _at(known.renew_at)
    if known is not None and fresh and not check_exists:
        return known
    stored = Issued.recorded(status)
    reason, create = await _why_issue(p, stored, profile, now, namespace, secret, check_exists)
    if reason is None:
        assert stored is not None
        stored = replace(stored, authority=p.require_ca().cert_pem)
        p.agent_certificates[(namespace, name)] = stored
        return stored
    pair = await _issue(
        p,
        namespace=namespace,
        name=secret,
        uri=uri,
        role="agent",
        dns_names=dns,
        owners=[owner_reference("Agent", name, uid)],
        reason=reason,
        renewed=stored is not None,
        create=create,
    )
    issued = Issued(
        timestamp(certs.not_after(pair.cert_pem)),
        timestamp(certs.renew_at(pair.cert_pem)),
        profile,
        p.require_ca().cert_pem,
    )
    p.agent_certificates[(namespace, name)] = issued
    return issued


async def _why_issue(
    p: Platform,
    stored: Issued | None,
    profile: str,
    now: dt.datetime,
    namespace: str,
    secret: str,
    check_exists: bool,
) -> tuple[str | None, bool]:
    """(why the certificate must be issued, whether its Secret is to be created) or (None, _)."""
    if stored is None:
        return "no certificate yet", True
    if stored.profile != profile:
        return "the platform CA or the names it must carry changed", False
    if now >= _at(stored.renew_at):
        return "two thirds of its life have passed", False
    if check_exists:
        # A no-op merge patch: 404 when the Secret is gone, with no read verb needed.
        labels = {"metadata": {"labels": {tlssecrets.CERT_LABEL: "agent"}}}
        if not await p.kube.patch("v1", "Secret", namespace, secret, labels):
            return "its Secret is gone", True
    return None, False


def due_agents(agents_seen: list[Obj], *, now: dt.datetime) -> list[tuple[str, str]]:
    """(namespace, name) of the Agents whose recorded certificate is due for renewal."""
    due = []
    for agent in agents_seen:
        meta = agent.get("metadata") or {}
        issued = Issued.recorded(agent.get("status"))
        if meta.get("deletionTimestamp") or issued is None:
            continue
        if now >= _at(issued.renew_at):
            due.append((str(meta.get("namespace")), str(meta.get("name"))))
    return due
