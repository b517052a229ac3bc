"""Why a model server the operator deployed does not serve: its pods' container statuses, in
words, as the InstallationModel's ``ServerRunning`` condition.

Why this exists: a probe that fails says only that nothing answered. When the server's
container keeps dying (llama.cpp killed by SIGILL on a node whose CPU reports AMX its kernel
refuses, a server out of memory, a bad argument), the pods say how: the kubelet's
``state``/``lastState.terminated`` (exit code, signal, reason, the container's termination
message) and ``restartCount``. The operator reads the pods of the model's Deployment when its
probe fails (:func:`ankka.operator.reconcile.probe_model`) and this module turns them into a
condition that names the signal (``illegal instruction (SIGILL)``, never ``132``).

Pure: pods in, a condition out; tested without a cluster (tests/unit/operator/test_server_pods.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ankka._kernel.exits import signal_of, signal_words
from ankka.api.resources import ConditionStatus
from ankka.operator.objects import Obj, condition

__all__ = [
    "CONDITION",
    "SERVER_CONTAINER",
    "Trouble",
    "pod_selector",
    "running_condition",
    "server_trouble",
    "termination_words",
]

CONDITION = "ServerRunning"
SERVER_CONTAINER = "server"  # the container's name in models.server_children
_MESSAGE_CHARS = 600  # of a container's own termination message, the end


@dataclass(frozen=True, slots=True)
class Trouble:
    """A server container that died: a reason (CamelCase) and words for people."""

    reason: str
    message: str


def pod_selector(labels: dict[str, str]) -> str:
    """The label selector of a Deployment's pods, from its ``matchLabels``."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def termination_words(terminated: dict[str, Any]) -> str:
    """``died of illegal instruction (SIGILL) (exit code 132)``, from a container's
    ``terminated`` state; a signal is named whether the kubelet reports it (``signal``) or
    only the exit code a shell or an entrypoint made of it (``128+N``)."""
    code = terminated.get("exitCode")
    reason = terminated.get("reason") or ""
    sig = terminated.get("signal")
    if not isinstance(sig, int) or sig <= 0:
        sig = signal_of(code) if isinstance(code, int) else None
    if reason == "OOMKilled":
        return f"was killed for want of memory (OOMKilled, exit code {code})"
    if sig is not None:
        return f"died of {signal_words(sig)} (exit code {code})"
    extra = f", {reason}" if reason and reason not in ("Error", "Completed") else ""
    return f"exited with code {code}{extra}"


def _status_of(pod: Obj) -> dict[str, Any] | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((s for s in statuses if s.get("name") == SERVER_CONTAINER), None)


def _pod_trouble(pod: Obj) -> tuple[int, Trouble] | None:
    status = _status_of(pod)
    if status is None:
        return None
    state = status.get("state") or {}
    last = status.get("lastState") or {}
    terminated = state.get("terminated") or last.get("terminated")
    if not isinstance(terminated, dict):
        return None  # never died (it may still be loading the model)
    restarts = int(status.get("restartCount") or 0)
    waiting = (state.get("waiting") or {}).get("reason")
    name = (pod.get("metadata") or {}).get("name", "?")
    words = f"pod {name}: the server container {termination_words(terminated)}"
    if restarts:
        words += f", restarted {restarts} time{'s' if restarts != 1 else ''}"
    if waiting:
        words += f", now {waiting}"
    said = str(terminated.get("message") or "").strip()
    if said:
        words += f"; its last words: {said[-_MESSAGE_CHARS:]}"
    if terminated.get("reason") == "OOMKilled":
        reason = "OOMKilled"
    elif waiting == "CrashLoopBackOff":
        reason = "CrashLoopBackOff"
    else:
        reason = "ContainerDied"
    return restarts, Trouble(reason, words)


def server_trouble(pods: Iterable[Obj]) -> Trouble | None:
    """The server container that died the most among ``pods`` (None when none died)."""
    found = [t for t in (_pod_trouble(pod) for pod in pods) if t is not None]
    if not found:
        return None
    return max(found, key=lambda item: item[0])[1]


def running_condition(
    previous: list[dict[str, Any]],
    trouble: Trouble | None,
    *,
    served: bool,
    now: dt.datetime,
) -> dict[str, Any] | None:
    """The ``ServerRunning`` condition to set, or None to leave the conditions as they are:
    False with the trouble while the server's container dies; True once the model is served
    again after that (a model whose server never died gets no such condition)."""
    if trouble is not None:
        return condition(CONDITION, ConditionStatus.FALSE, trouble.reason, trouble.message, now=now)
    had = any(c.get("type") == CONDITION for c in previous)
    if served and had:
        return condition(CONDITION, ConditionStatus.TRUE, "Running", "serving", now=now)
    return None
