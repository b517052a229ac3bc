"""Pure: the pod template overlay merged into what the operator renders, and the securityContext
every pod it renders carries (PodSecurity "restricted").

Who owns what: the operator owns the container's command, ports, probes and volume mounts, the
pod's volumes (the certificate Secret among them), its ServiceAccount (the identity) and the
selector labels; the overlay (``ankka.api.pods.PodOverlay``) adds resources, env, envFrom,
image pull Secrets, scheduling, a priority class, annotations, more labels and the numeric
user. Nothing the overlay says can remove or replace what the operator owns: a clash is refused
by :func:`overlay_conflict` before anything is rendered, naming the field.

Called by ``ankka.operator.agents`` and ``ankka.operator.models``; tested without a cluster
(``tests/unit/operator/test_pods.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ankka.api.pods import PodOverlay

__all__ = [
    "RUNTIME_USER",
    "annotations_meta",
    "apply_overlay",
    "container_security",
    "overlay_conflict",
    "pod_security",
    "template_metadata",
]

RUNTIME_USER = 10001  # ankka's image's user (Containerfile, scripts/image.sh)
_OWNED_LABEL_PREFIX = "app.kubernetes.io/"


def pod_security(overlay: PodOverlay, *, default_user: int | None) -> dict[str, Any]:
    """The pod's securityContext: non-root, the RuntimeDefault seccomp profile, and the
    overlay's numeric user and groups (else ``default_user``, else the image's own)."""
    wanted = overlay.security_context
    context: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    user = wanted.run_as_user if wanted and wanted.run_as_user else default_user
    group = wanted.run_as_group if wanted and wanted.run_as_group is not None else default_user
    fs_group = wanted.fs_group if wanted and wanted.fs_group is not None else default_user
    for key, value in (("runAsUser", user), ("runAsGroup", group), ("fsGroup", fs_group)):
        if value is not None:
            context[key] = value
    return context


def container_security(overlay: PodOverlay, *, read_only_root: bool) -> dict[str, Any]:
    """A container's securityContext: no privilege escalation, every capability dropped, the
    root filesystem read-only unless the overlay (or ``read_only_root``) says otherwise."""
    wanted = overlay.security_context
    read_only = (
        wanted.read_only_root_filesystem
        if wanted is not None and wanted.read_only_root_filesystem is not None
        else read_only_root
    )
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": read_only,
        "runAsNonRoot": True,
    }


def overlay_conflict(overlay: PodOverlay, *, env: Iterable[str], field: str = "spec") -> str | None:
    """Why ``overlay`` cannot be merged (it names what the operator owns), or None.

    ``env`` are the variables the operator renders on the container."""
    owned = set(env)
    for i, var in enumerate(getattr(overlay, "env", []) or []):
        if var.name in owned:
            return (
                f"{field}.env[{i}].name: {var.name} is set by the operator (from the spec's "
                "own fields); remove it, or set what it comes from"
            )
    for key in overlay.pod_labels:
        if key.startswith(_OWNED_LABEL_PREFIX):
            return (
                f"{field}.podLabels: {key} is the operator's (it selects the pods and their "
                "NetworkPolicy); use a label of your own"
            )
    return None


def _dump(items: Iterable[Any]) -> list[dict[str, Any]]:
    return [i.model_dump(by_alias=True, exclude_none=True, mode="json") for i in items]


def apply_overlay(pod: dict[str, Any], container: dict[str, Any], overlay: PodOverlay) -> None:
    """Merge ``overlay`` into the rendered ``pod`` spec and its main ``container`` (in place,
    on dicts this module's caller just built). Owned keys are never touched. ``env`` is the
    caller's to render: it comes after the operator's own variables (an Agent's in
    ``agents.runtime_env``, a model server's in ``models.server_children``)."""
    if overlay.resources is not None:
        resources = overlay.resources.model_dump(by_alias=True, exclude_defaults=True)
        if resources:
            container["resources"] = resources
    if overlay.env_from:
        container["envFrom"] = _dump(overlay.env_from)
    if overlay.image_pull_secrets:
        pod["imagePullSecrets"] = _dump(overlay.image_pull_secrets)
    if overlay.node_selector:
        pod["nodeSelector"] = dict(overlay.node_selector)
    if overlay.tolerations:
        pod["tolerations"] = _dump(overlay.tolerations)
    if overlay.affinity:
        pod["affinity"] = dict(overlay.affinity)
    if overlay.priority_class_name:
        pod["priorityClassName"] = overlay.priority_class_name


def annotations_meta(given: Mapping[str, str]) -> dict[str, Any]:
    """``{"annotations": ...}`` for an object's metadata, or nothing when none are given (a
    ServiceAccount's from ``serviceAccountAnnotations``)."""
    return {"annotations": dict(given)} if given else {}


def template_metadata(labels: dict[str, str], overlay: PodOverlay) -> dict[str, Any]:
    """The pod template's metadata: the overlay's labels and annotations, the operator's
    selector labels over them."""
    meta: dict[str, Any] = {"labels": {**overlay.pod_labels, **labels}}
    if overlay.pod_annotations:
        meta["annotations"] = dict(overlay.pod_annotations)
    return meta
