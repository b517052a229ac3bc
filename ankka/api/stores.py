"""Where an Agent's runtime keeps its sessions, tasks and approvals (``Agent.spec.store``).

SQLite on a volume for one replica, or PostgreSQL from a Secret (a DSN or its parts) for any
number; ``ankka.operator.stores`` renders either as the runtime's ``ANKKA_STORE`` and libpq's
variables. Part of the Agent's wire shape (``ankka.api.resources``), split out to keep that
module small.
"""

from __future__ import annotations

import enum

from pydantic import Field, model_validator

from ankka.api.wire import DNS_LABEL, SecretKeyRef, Wire, checked

__all__ = ["PostgresKeys", "PostgresStore", "SqliteStore", "SslMode", "Store"]


class SqliteStore(Wire):
    """SQLite in one file on a volume of the pod, for one replica (the operator refuses more:
    each pod would keep sessions of its own)."""

    claim_name: str | None = Field(default=None, pattern=DNS_LABEL, max_length=253)
    """A PersistentVolumeClaim to keep the file on, so sessions outlive the pod; without one,
    an emptyDir (sessions last as long as the pod)."""


class SslMode(enum.StrEnum):
    """libpq's sslmode: disable, allow, prefer, require, verify-ca or verify-full."""

    DISABLE = "disable"
    ALLOW = "allow"
    PREFER = "prefer"
    REQUIRE = "require"
    VERIFY_CA = "verify-ca"
    VERIFY_FULL = "verify-full"


class PostgresKeys(Wire):
    """The keys of the Secret that hold each part (CloudNativePG's and most operators' names by
    default)."""

    host: str = Field(default="host", min_length=1, max_length=253)
    """The server's host name."""
    port: str = Field(default="port", min_length=1, max_length=253)
    """Its port (optional in the Secret: 5432 without it)."""
    database: str = Field(default="dbname", min_length=1, max_length=253)
    """The database."""
    user: str = Field(default="user", min_length=1, max_length=253)
    """The role to log in as."""
    password: str = Field(default="password", min_length=1, max_length=253)
    """Its password."""


class PostgresStore(Wire):
    """PostgreSQL from a Secret: a whole DSN in one key (dsnSecretRef), or its parts as keys of
    one Secret (secretName). The values reach the runtime through valueFrom, never the
    Deployment; every replica shares the sessions, one turn at a time per session."""

    model_config = checked(
        "has(self.dsnSecretRef) != has(self.secretName)",
        "give dsnSecretRef (a DSN) or secretName (its parts), not both",
    )

    dsn_secret_ref: SecretKeyRef | None = None
    """A key holding the whole DSN, e.g. postgresql://cart:PASSWORD@pg.db.svc:5432/shop."""
    secret_name: str | None = Field(default=None, pattern=DNS_LABEL, max_length=253)
    """A Secret holding the parts, by the keys in keys (host, port, dbname, user, password)."""
    keys: PostgresKeys = Field(default_factory=PostgresKeys)
    """Which key of secretName holds which part."""
    ssl_mode: SslMode | None = None
    """libpq's sslmode (PGSSLMODE)."""
    schema_: str | None = Field(
        default=None, alias="schema", pattern=r"^[a-z_][a-z0-9_]*$", max_length=63
    )
    """The schema the runtime's tables live in, created when missing (the role needs CREATE
    on the database); default ankka_<namespace>_<agent>, so Agents sharing one database never
    share tables."""

    @model_validator(mode="after")
    def _one_source(self) -> PostgresStore:
        if (self.dsn_secret_ref is None) == (self.secret_name is None):
            raise ValueError("give dsnSecretRef (a DSN) or secretName (its parts), not both")
        return self


class Store(Wire):
    """Where the runtime keeps its sessions, tasks and approvals: sqlite or postgres."""

    model_config = checked(
        "!(has(self.sqlite) && has(self.postgres))", "a store is sqlite or postgres, not both"
    )

    sqlite: SqliteStore | None = None
    """SQLite on a volume of the pod (one replica)."""
    postgres: PostgresStore | None = None
    """PostgreSQL from a Secret (any number of replicas)."""

    @model_validator(mode="after")
    def _one_kind(self) -> Store:
        if self.sqlite is not None and self.postgres is not None:
            raise ValueError("a store is sqlite or postgres, not both")
        return self
