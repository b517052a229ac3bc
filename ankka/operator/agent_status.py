"""An Agent's status, a pure function of what its reconcile found: staged conditions, a phase,
and ready/desired replicas read from the Deployment it owns.

The conditions, each with a CamelCase reason and words for ``kubectl describe``:

- ``Rendered``: its children are applied (``Applied``), or its spec cannot be rendered
  (``InvalidSpec``, the message naming the field; nothing runs);
- ``ModelsServed``: every InstallationModel it names is ``Served`` (``AllServed``), or it is
  held for them (``Awaiting``, naming them);
- ``Available``: its Deployment has the desired replicas available, as the Deployment
  controller counts them (``MinimumReplicasAvailable``, ``ScaledToZero``), or why not
  (``Held``, ``NotRendered``, ``Progressing``, ``ReplicaFailure``, ``ProgressDeadlineExceeded``
  with the Deployment's own message, e.g. a pod PodSecurity refused);
- ``Ready``: all three, so ``kubectl wait --for=condition=Ready agent/NAME`` returns once the
  pods serve; otherwise the reason and message of the first stage that is not done.

The phase says the same in one word: ``Failed``, ``Held``, ``Progressing`` (rendered and
released, pods not all available yet) or ``Ready``. Called by ``ankka.operator.reconcile``;
tested without a cluster (``tests/unit/operator/test_agent_status.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ankka.api.resources import ConditionStatus
from ankka.operator.objects import Obj, condition, set_condition

__all__ = ["STAGES", "Availability", "Issued", "availability", "failed_status", "rendered_status"]

STAGES = ("Rendered", "ModelsServed", "Available")
_TRUE, _FALSE = ConditionStatus.TRUE, ConditionStatus.FALSE


@dataclass(frozen=True, slots=True)
class Availability:
    """What the Agent's Deployment says about its pods."""

    ready: int  # replicas available (ready for minReadySeconds), as the Deployment counts them
    available: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Issued:
    """What an Agent's status records of its certificate (``ankka.operator.certificates``),
    and the CA that issued it (public: ``ankka approve`` checks the runtime with it)."""

    not_after: str
    renew_at: str
    profile: str
    authority: str = ""

    def fields(self) -> dict[str, str]:
        out = {
            "certificateNotAfter": self.not_after,
            "certificateRenewAt": self.renew_at,
            "certificateProfile": self.profile,
        }
        if self.authority:
            out["certificateAuthority"] = self.authority
        return out

    @classmethod
    def recorded(cls, status: Obj | None) -> Issued | None:
        s = status or {}
        values = (s.get("certificateNotAfter"), s.get("certificateRenewAt"))
        if not all(isinstance(v, str) for v in values):
            return None
        profile, authority = s.get("certificateProfile"), s.get("certificateAuthority")
        return cls(str(values[0]), str(values[1]), str(profile or ""), str(authority or ""))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _deployment_problem(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """The Deployment's own account of a failure: a pod it could not create (a quota, an
    admission refusal such as PodSecurity) or a rollout past its deadline."""
    for cond in status.get("conditions") or []:
        kind, state = cond.get("type"), cond.get("status")
        if kind == "ReplicaFailure" and state == "True":
            return "ReplicaFailure", str(cond.get("message") or cond.get("reason") or "")
        if kind == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return "ProgressDeadlineExceeded", str(cond.get("message") or "")
    return None


def availability(deployment: Obj | None, *, desired: int, held: bool) -> Availability:
    """Whether ``desired`` replicas of the Agent's runtime are available in ``deployment``."""
    status = (deployment or {}).get("status") or {}
    ready = _int(status.get("availableReplicas"))
    if held:
        return Availability(
            ready, False, "Held", "held with 0 replicas until its models are served"
        )
    if deployment is None:
        return Availability(0, False, "Progressing", "its Deployment is not there yet")
    generation = (deployment.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    spec_replicas = (deployment.get("spec") or {}).get("replicas")
    if not isinstance(observed, int) or not isinstance(generation, int) or observed < generation:
        return Availability(
            ready, False, "Progressing", "the Deployment controller has not seen its change yet"
        )
    if spec_replicas != desired:
        return Availability(
            ready, False, "Progressing", f"its Deployment is being scaled to {desired}"
        )
    if desired == 0:
        return Availability(ready, True, "ScaledToZero", "spec.replicas is 0: no pods asked for")
    counted = f"{ready} of {desired} replica(s) available"
    if ready >= desired and _int(status.get("updatedReplicas")) >= desired:
        return Availability(ready, True, "MinimumReplicasAvailable", counted)
    problem = _deployment_problem(status)
    if problem is not None:
        return Availability(ready, False, problem[0], f"{counted}: {problem[1]}")
    return Availability(ready, False, "Progressing", counted)


def _status(
    previous: Mapping[str, Any] | None,
    new_conditions: Sequence[dict[str, Any]],
    *,
    generation: int | None,
    fields: Mapping[str, Any],
) -> Obj:
    conditions = list((previous or {}).get("conditions") or [])
    for new in new_conditions:
        conditions = set_condition(conditions, new)
    return {**fields, "conditions": conditions, "observedGeneration": generation}


def _ready(stages: Sequence[dict[str, Any]], *, now: dt.datetime, ready_words: str) -> Obj:
    for stage in stages:
        if stage["status"] != _TRUE.value:
            return condition("Ready", _FALSE, stage["reason"], stage["message"], now=now)
    return condition("Ready", _TRUE, "Available", ready_words, now=now)


def _replicas(ready: int, desired: int) -> dict[str, Any]:
    return {
        "readyReplicas": ready,
        "desiredReplicas": desired,
        "replicasReady": f"{ready}/{desired}",
    }


def failed_status(
    previous: Mapping[str, Any] | None,
    *,
    reason: str,
    desired: int,
    generation: int | None,
    now: dt.datetime,
    code: str = "InvalidSpec",
) -> Obj:
    """An Agent that cannot be rendered: ``Failed``, ``Rendered=False`` (``code``, by default
    ``InvalidSpec``) saying why, and so not ``Available`` nor ``Ready``. ``ModelsServed``,
    ``awaitingModels`` and the certificate's expiry, written before, are left alone."""
    rendered = condition("Rendered", _FALSE, code, reason, now=now)
    available = condition(
        "Available", _FALSE, "NotRendered", "no pods run until the spec is fixed", now=now
    )
    ready = condition("Ready", _FALSE, code, reason, now=now)
    fields = {"phase": "Failed", **_replicas(0, desired)}
    return _status(previous, [rendered, available, ready], generation=generation, fields=fields)


def rendered_status(
    previous: Mapping[str, Any] | None,
    *,
    awaited: Sequence[str],
    replicas: int,
    deployment: Obj | None,
    certificate: Issued,
    generation: int | None,
    now: dt.datetime,
    a2a_card_url: str | None = None,
) -> Obj:
    """A rendered Agent: ``Held`` while any InstallationModel it names is not served (named in
    ``ModelsServed`` and ``awaitingModels``), ``Progressing`` until ``deployment`` has
    ``replicas`` available, then ``Ready``. A condition whose status did not change keeps its
    ``lastTransitionTime``."""
    rendered = condition("Rendered", _TRUE, "Applied", "its children are applied", now=now)
    if awaited:
        served = condition(
            "ModelsServed",
            _FALSE,
            "Awaiting",
            "waiting for InstallationModels: " + ", ".join(awaited),
            now=now,
        )
    else:
        served = condition(
            "ModelsServed",
            _TRUE,
            "AllServed",
            "every installation model it names is served",
            now=now,
        )
    pods = availability(deployment, desired=replicas, held=bool(awaited))
    available = condition(
        "Available", _TRUE if pods.available else _FALSE, pods.reason, pods.message, now=now
    )
    ready = _ready([rendered, served, available], now=now, ready_words=pods.message)
    phase = "Held" if awaited else "Ready" if pods.available else "Progressing"
    fields = {
        "phase": phase,
        "awaitingModels": list(awaited),
        **certificate.fields(),
        **_replicas(pods.ready, replicas),
    }
    if a2a_card_url is not None:
        fields["a2aCardUrl"] = a2a_card_url
    stages = [rendered, served, available, ready]
    return _status(previous, stages, generation=generation, fields=fields)
