"""Pure: where an Agent's runtime keeps its sessions (``spec.store``), as container env and a
volume, and what the operator refuses.

- SQLite: ``ANKKA_STORE=sqlite:////var/lib/ankka/sessions.sqlite3`` on the ``data`` volume
  (an emptyDir, or ``claimName``'s PersistentVolumeClaim with the Recreate strategy so two pods
  never write one file). One replica only: with more, each pod would keep sessions of its own
  and consecutive turns of one session would see different histories, so the Agent fails with
  ``Rendered=False``, reason ``SqliteNeedsOneReplica``.
- PostgreSQL: ``ANKKA_STORE`` from the DSN's Secret key, or ``postgresql://`` with libpq's
  ``PGHOST``/``PGPORT``/``PGDATABASE``/``PGUSER``/``PGPASSWORD`` from the parts' Secret, all
  through ``valueFrom`` (no value in the Deployment); ``PGSSLMODE``; and ``PGOPTIONS`` setting
  the search_path to the Agent's own schema (``ankka_<namespace>_<agent>`` unless
  ``schema``), which the runtime creates on first open under its migration lock.
- Neither: the chart's shared PostgreSQL (``store.postgres`` in values.yaml) when it has one,
  its Secret copied into the Agent's namespace as ``<agent>-store`` (owned by the Agent); else
  SQLite on an emptyDir.

Called by ``ankka.operator.agents`` and ``ankka.operator.reconcile``; tested without a
cluster (``tests/unit/operator/test_stores.py``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ankka.api.resources import AgentSpec
from ankka.api.stores import PostgresStore, SslMode, Store
from ankka.api.wire import SecretKeyRef
from ankka.operator.objects import Obj, labels_for, owner_reference
from ankka.operator.settings import Settings

__all__ = [
    "DATA_DIR",
    "SQLITE_URL",
    "agent_schema",
    "copied_secret",
    "copied_secret_name",
    "effective_store",
    "store_env",
    "store_refusal",
    "store_volume",
]

DATA_DIR = "/var/lib/ankka"  # the image's working directory is not the runtime user's to write
SQLITE_URL = f"sqlite:///{DATA_DIR}/sessions.sqlite3"
STORE_VARIABLE = "ANKKA_STORE"  # ankka serve's --store default (ankka.runtime.cli_serve)
_NOT_IN_A_SCHEMA = re.compile(r"[^a-z0-9_]")


def copied_secret_name(agent: str) -> str:
    return f"{agent}-store"


def effective_store(spec: AgentSpec, settings: Settings, *, agent: str) -> Store:
    """The Agent's own store, else the chart's shared PostgreSQL (its Secret copied next to
    the Agent), else SQLite on an emptyDir."""
    if spec.store is not None:
        return spec.store
    if settings.default_store_secret:
        name = copied_secret_name(agent)
        if settings.default_store_dsn_key:
            shared = PostgresStore(
                dsn_secret_ref=SecretKeyRef(name=name, key=settings.default_store_dsn_key)
            )
        else:
            shared = PostgresStore(secret_name=name)
        if settings.default_store_ssl_mode:
            shared = shared.model_copy(
                update={"ssl_mode": SslMode(settings.default_store_ssl_mode)}
            )
        return Store(postgres=shared)
    return Store()


def store_refusal(spec: AgentSpec, store: Store) -> str | None:
    """Why this store cannot serve this Agent (SQLite with several replicas), or None."""
    if store.postgres is None and spec.replicas > 1:
        return (
            f"spec.replicas: {spec.replicas} replicas cannot share an SQLite store (each pod "
            "would keep sessions of its own, so consecutive turns would see different "
            "histories); set spec.store.postgres (a PostgreSQL from a Secret), or replicas: 1"
        )
    return None


def agent_schema(namespace: str, agent: str) -> str:
    """``ankka_<namespace>_<agent>`` as a PostgreSQL identifier (at most 63 characters)."""
    raw = _NOT_IN_A_SCHEMA.sub("_", f"ankka_{namespace}_{agent}".lower())
    if len(raw) <= 63:
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{raw[:54]}_{digest}"


def _from(name: str, key: str, *, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, "key": key}
    if optional:
        ref["optional"] = True
    return {"valueFrom": {"secretKeyRef": ref}}


def store_env(store: Store, *, namespace: str, agent: str) -> list[dict[str, Any]]:
    """The runtime container's store settings."""
    pg = store.postgres
    if pg is None:
        return [{"name": STORE_VARIABLE, "value": SQLITE_URL}]
    env: list[dict[str, Any]] = []
    if pg.dsn_secret_ref is not None:
        ref = pg.dsn_secret_ref
        env.append({"name": STORE_VARIABLE, **_from(ref.name, ref.key)})
    else:
        assert pg.secret_name is not None  # the CRD's rule: one of the two
        keys = pg.keys
        env.append({"name": STORE_VARIABLE, "value": "postgresql://"})
        for variable, key, optional in (
            ("PGHOST", keys.host, False),
            ("PGPORT", keys.port, True),
            ("PGDATABASE", keys.database, False),
            ("PGUSER", keys.user, False),
            ("PGPASSWORD", keys.password, False),
        ):
            env.append({"name": variable, **_from(pg.secret_name, key, optional=optional)})
    if pg.ssl_mode is not None:
        env.append({"name": "PGSSLMODE", "value": pg.ssl_mode.value})
    schema = pg.schema_ or agent_schema(namespace, agent)
    env.append({"name": "PGOPTIONS", "value": f"-c search_path={schema}"})
    return env


def store_volume(store: Store) -> dict[str, Any]:
    """The ``data`` volume at DATA_DIR: the SQLite file's claim, else an emptyDir."""
    if store.sqlite is not None and store.sqlite.claim_name:
        return {"name": "data", "persistentVolumeClaim": {"claimName": store.sqlite.claim_name}}
    return {"name": "data", "emptyDir": {}}


def copied_secret(source: Obj, *, namespace: str, agent: str, uid: str) -> Obj:
    """The chart's shared store Secret (from the platform namespace), as the Agent's own copy:
    a Secret reference cannot cross namespaces."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": copied_secret_name(agent),
            "namespace": namespace,
            "labels": {**labels_for("agent", agent), "ankka.dev/role": "store"},
            "ownerReferences": [owner_reference("Agent", agent, uid)],
        },
        "type": "Opaque",
        "data": dict(source.get("data") or {}),
    }
