"""The base of every resource's wire class: camelCase keys, unknown keys refused, frozen.

Shared by ``ankka.api.resources`` (the CRDs' spec and status), ``ankka.api.pods`` (the pod
template overlay both Agent and InstallationModel take), ``ankka.api.stores`` and
``ankka.api.access`` (an Agent's store and session policy); with the one Secret key reference
they all use.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ["DNS_LABEL", "SecretKeyRef", "Wire", "checked"]

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class Wire(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown keys are refused.

    Every class and field has a description (a docstring, or the string after a field): it is
    what ``kubectl explain`` shows, and ``tests/unit/api/test_crd_docs.py`` fails on one missing.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


def checked(rule: str, message: str) -> ConfigDict:
    """A class-level CEL rule the API server checks (``x-kubernetes-validations``); the
    operator's parse checks the same with a model validator where it matters."""
    return ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [{"rule": rule, "message": message}]}
    )


class SecretKeyRef(Wire):
    """A key of a Secret in the same namespace."""

    name: str = Field(pattern=DNS_LABEL)
    """The Secret's name, in the Agent's namespace."""
    key: str = Field(min_length=1)
    """The key within the Secret."""
