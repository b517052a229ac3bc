"""The pod template overlay shared by Agent and InstallationModel's server: what a platform team
sets on the pods the operator renders (resources, env from Secrets and ConfigMaps, image pull
Secrets, scheduling, priority, ServiceAccount annotations, a numeric user).

The fields sit flat on ``AgentSpec`` and ``ModelServer`` (``spec.resources``,
``spec.tolerations``, ``spec.server.tolerations`` ...), spelt as a Pod spells them. The operator
merges them into what it renders (``ankka.operator.pods``) and keeps what it owns: the
container's command, ports, probes, the certificate volume, the ServiceAccount (the pod's
identity), the selector labels and a securityContext that passes PodSecurity "restricted".
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Any

from pydantic import Field, StrictInt, StrictStr, WithJsonSchema, field_validator

from ankka.api.wire import DNS_LABEL, Wire, checked

__all__ = [
    "QUANTITY",
    "ConfigMapKeyRef",
    "EnvFrom",
    "EnvVar",
    "EnvVarSource",
    "FieldRef",
    "LocalObjectReference",
    "NamedRef",
    "PodOverlay",
    "PodSecurity",
    "Quantity",
    "Resources",
    "SecretKeySelector",
    "Toleration",
]

# Kubernetes' resource.Quantity, as its own OpenAPI spells it: an integer (``nvidia.com/gpu: 1``)
# or a string (``500m``, ``4Gi``).
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[
    StrictInt | StrictStr,
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY}),
]
_ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
_LABEL_KEY = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


class Resources(Wire):
    """Container resources: requests and limits by resource name (cpu, memory, nvidia.com/gpu).

    A quantity is an integer or a string as Kubernetes writes it: ``nvidia.com/gpu: 1``,
    ``cpu: 500m``, ``memory: 4Gi``.
    """

    requests: dict[str, Quantity] = Field(default_factory=dict, max_length=32)
    """What the scheduler reserves for the container."""
    limits: dict[str, Quantity] = Field(default_factory=dict, max_length=32)
    """The most the container may use (GPUs are asked for here)."""

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, value: dict[str, int | str]) -> dict[str, int | str]:
        for name, amount in value.items():
            if isinstance(amount, int) and amount < 0:
                raise ValueError(f"{name}: {amount!r} is not a quantity")
            if isinstance(amount, str) and not re.match(QUANTITY, amount):
                raise ValueError(f"{name}: {amount!r} is not a quantity such as 1, 500m or 4Gi")
        return value


class SecretKeySelector(Wire):
    """A key of a Secret in the pod's namespace."""

    name: str = Field(pattern=DNS_LABEL, max_length=253)
    """The Secret's name."""
    key: str = Field(min_length=1, max_length=253)
    """The key within the Secret."""
    optional: bool | None = None
    """Start the pod even when the Secret or the key is missing."""


class ConfigMapKeyRef(Wire):
    """A key of a ConfigMap in the pod's namespace."""

    name: str = Field(pattern=DNS_LABEL, max_length=253)
    """The ConfigMap's name."""
    key: str = Field(min_length=1, max_length=253)
    """The key within the ConfigMap."""
    optional: bool | None = None
    """Start the pod even when the ConfigMap or the key is missing."""


class FieldRef(Wire):
    """A field of the pod itself, e.g. metadata.name or status.podIP."""

    field_path: str = Field(min_length=1, max_length=256)
    """The field's path, as the Downward API spells it."""


class EnvVarSource(Wire):
    """Where a variable's value comes from: one of a Secret's key, a ConfigMap's key, a field."""

    model_config = checked(
        "[has(self.secretKeyRef), has(self.configMapKeyRef), "
        "has(self.fieldRef)].filter(x, x).size() == 1",
        "valueFrom takes exactly one of secretKeyRef, configMapKeyRef, fieldRef",
    )

    secret_key_ref: SecretKeySelector | None = None
    """A key of a Secret: the value never appears in the Deployment."""
    config_map_key_ref: ConfigMapKeyRef | None = None
    """A key of a ConfigMap."""
    field_ref: FieldRef | None = None
    """A field of the pod (the Downward API)."""


class EnvVar(Wire):
    """An environment variable of the container: a value, or valueFrom a Secret or ConfigMap."""

    model_config = checked(
        "!(has(self.value) && has(self.valueFrom))",
        "an env entry has a value or a valueFrom, not both",
    )

    name: str = Field(min_length=1, max_length=256, pattern=_ENV_NAME)
    """The variable's name."""
    value: str | None = None
    """The variable's value."""
    value_from: EnvVarSource | None = None
    """Where the value comes from instead: a Secret's key, a ConfigMap's key, a field."""

    def rendered(self) -> dict[str, Any]:
        """As a container's env entry."""
        if self.value_from is not None:
            source = self.value_from.model_dump(by_alias=True, exclude_none=True)
            return {"name": self.name, "valueFrom": source}
        return {"name": self.name, "value": self.value or ""}


class NamedRef(Wire):
    """A Secret or ConfigMap by name, for envFrom."""

    name: str = Field(pattern=DNS_LABEL, max_length=253)
    """Its name, in the pod's namespace."""
    optional: bool | None = None
    """Start the pod even when it is missing."""


class EnvFrom(Wire):
    """Every key of a Secret or a ConfigMap as a variable (with an optional prefix)."""

    model_config = checked(
        "has(self.secretRef) != has(self.configMapRef)",
        "envFrom takes one of secretRef or configMapRef",
    )

    prefix: str | None = Field(default=None, max_length=128, pattern=_ENV_NAME)
    """Put before every key's name."""
    secret_ref: NamedRef | None = None
    """A Secret whose keys become variables."""
    config_map_ref: NamedRef | None = None
    """A ConfigMap whose keys become variables."""


class LocalObjectReference(Wire):
    """An object in the pod's namespace, by name (an image pull Secret)."""

    name: str = Field(pattern=DNS_LABEL, max_length=253)
    """Its name."""


class TolerationOperator(enum.StrEnum):
    """Exists (any value) or Equal (the value given)."""

    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(enum.StrEnum):
    """NoSchedule, PreferNoSchedule or NoExecute."""

    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(Wire):
    """A node taint the pods tolerate, e.g. a GPU pool's nvidia.com/gpu:NoSchedule."""

    key: str | None = Field(default=None, max_length=317)
    """The taint's key; empty with operator Exists tolerates every taint."""
    operator: TolerationOperator | None = None
    """Exists or Equal (the default)."""
    value: str | None = Field(default=None, max_length=63)
    """The taint's value, with Equal."""
    effect: TaintEffect | None = None
    """The taint's effect; empty tolerates every effect."""
    toleration_seconds: int | None = None
    """With NoExecute: how long the pod stays bound after the taint appears."""


class PodSecurity(Wire):
    """The numeric user and groups the pods run as (PodSecurity "restricted" stays in force:
    non-root, no privilege escalation, every capability dropped, the RuntimeDefault seccomp
    profile)."""

    run_as_user: int | None = Field(default=None, ge=1, le=2147483647)
    """The user id (not 0: root is refused). Runtimes default to 10001, ankka's image's user."""
    run_as_group: int | None = Field(default=None, ge=0, le=2147483647)
    """The primary group id."""
    fs_group: int | None = Field(default=None, ge=0, le=2147483647)
    """The group that owns the pod's volumes."""
    read_only_root_filesystem: bool | None = None
    """Mount the image read-only (runtimes: always; model servers: false unless set, since
    most write caches into their image's home)."""


class PodOverlay(Wire):
    """Pod settings merged into what the operator renders (it keeps what it owns)."""

    resources: Resources | None = None
    """The container's resources, e.g. {limits: {nvidia.com/gpu: 1, memory: 8Gi}}."""
    env_from: list[EnvFrom] = Field(default_factory=list, max_length=32)
    """Secrets and ConfigMaps whose every key becomes a variable of the container."""
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list, max_length=16)
    """Secrets holding registry credentials for the image."""
    node_selector: dict[str, str] = Field(default_factory=dict, max_length=32)
    """Node labels the pods need, e.g. a GPU pool's."""
    tolerations: list[Toleration] = Field(default_factory=list, max_length=32)
    """Taints the pods tolerate."""
    affinity: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """The pods' affinity, as a Pod spells it (nodeAffinity, podAffinity, podAntiAffinity); the
    API server checks it when the operator applies the Deployment."""
    priority_class_name: str | None = Field(default=None, pattern=DNS_LABEL, max_length=253)
    """The pods' PriorityClass."""
    service_account_annotations: dict[str, str] = Field(default_factory=dict, max_length=32)
    """Annotations on the pods' ServiceAccount, e.g. a cloud's workload identity."""
    pod_annotations: dict[str, str] = Field(default_factory=dict, max_length=64)
    """Annotations on the pods."""
    pod_labels: dict[str, str] = Field(default_factory=dict, max_length=32)
    """More labels on the pods (not the app.kubernetes.io/* ones the operator selects by)."""
    security_context: PodSecurity | None = None
    """The numeric user and groups the pods run as."""

    @field_validator("pod_labels")
    @classmethod
    def _label_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not re.match(_LABEL_KEY, key):
                raise ValueError(f"{key!r} is not a label key")
        return value
