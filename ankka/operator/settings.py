"""The operator's settings, read once from the environment (the chart sets them).

Kept apart from the handlers so builders take them as a plain value and tests build their own.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ankka._kernel.errors import ConfigurationError
from ankka.api.stores import SslMode

__all__ = ["Settings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Where the platform lives and how the operator paces itself.

    ``namespace`` is the platform's (the gateway, the models ConfigMap, the CA Secret).
    """

    namespace: str = "ankka-system"
    gateway_service: str = "ankka-gateway"
    gateway_port: int = 8443
    models_configmap: str = "ankka-models"
    ca_secret: str = "ankka-ca"
    gateway_tls_secret: str = "ankka-gateway-tls"
    certificate_lifetime: dt.timedelta = dt.timedelta(hours=24)
    certificate_check_seconds: float = 60.0
    probe_tick_seconds: float = 2.0
    probe_timeout_seconds: float = 5.0
    agent_resync_seconds: float = 60.0
    # How often each Team's backlog is read from its runtime (its counts in status).
    team_refresh_seconds: float = 5.0
    field_manager: str = "ankka-operator"
    # A NetworkPolicy per Agent (the chart's networkPolicies.enabled).
    network_policies: bool = True
    # The API server runtimes send TokenReviews to ("" renders no TokenReview settings), and
    # the chart's ClusterRole and ClusterRoleBinding that allow it (tokenReview.enabled).
    token_review_url: str = "https://kubernetes.default.svc"
    token_review_binding: str = "ankka-runtime-token-review"
    # The chart's shared PostgreSQL (store.postgres): a Secret in the platform namespace that
    # every Agent without spec.store uses, copied next to it; a whole DSN under
    # default_store_dsn_key, else the parts (host, port, dbname, user, password). "": none.
    default_store_secret: str = ""
    default_store_dsn_key: str = ""
    default_store_ssl_mode: str = ""
    # Where /metrics is served over plain HTTP (ANKKA_OPERATOR_METRICS_PORT, the chart's
    # operator.metricsPort; 0 picks a free port); None: not served.
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    # How many gateway processes serve the models (the chart's gateway.replicas): each keeps
    # its limits in its own memory, so the models file gives each its share.
    gateway_replicas: int = 1

    @property
    def models_address(self) -> str:
        """``ANKKA_MODELS_ADDRESS`` for every runtime: the gateway's in-cluster URL."""
        return f"https://{self.gateway_service}.{self.namespace}.svc:{self.gateway_port}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read ``ANKKA_OPERATOR_*`` and ``ANKKA_NAMESPACE``; unknown values fail, named."""
        env = os.environ if env is None else env
        defaults = cls()

        lifetime = _number(
            env,
            "ANKKA_OPERATOR_CERT_LIFETIME_SECONDS",
            defaults.certificate_lifetime.total_seconds(),
        )

        ssl_mode = env.get("ANKKA_OPERATOR_STORE_SSL_MODE", "")
        if ssl_mode and ssl_mode not in {m.value for m in SslMode}:
            known = ", ".join(m.value for m in SslMode)
            raise ConfigurationError(
                f"ANKKA_OPERATOR_STORE_SSL_MODE={ssl_mode[:20]!r} is not an sslmode ({known})"
            )

        return cls(
            default_store_secret=env.get("ANKKA_OPERATOR_STORE_SECRET", ""),
            default_store_dsn_key=env.get("ANKKA_OPERATOR_STORE_DSN_KEY", ""),
            default_store_ssl_mode=ssl_mode,
            namespace=env.get("ANKKA_NAMESPACE", defaults.namespace),
            metrics_port=_port(env, "ANKKA_OPERATOR_METRICS_PORT"),
            metrics_host=env.get("ANKKA_OPERATOR_METRICS_HOST", defaults.metrics_host),
            gateway_replicas=_count(env, "ANKKA_GATEWAY_REPLICAS", defaults.gateway_replicas),
            network_policies=_switch(
                env, "ANKKA_OPERATOR_NETWORK_POLICIES", defaults.network_policies
            ),
            token_review_url=env.get("ANKKA_TOKEN_REVIEW_URL", defaults.token_review_url),
            gateway_service=env.get("ANKKA_GATEWAY_SERVICE", defaults.gateway_service),
            certificate_lifetime=dt.timedelta(seconds=lifetime),
            certificate_check_seconds=_number(
                env, "ANKKA_OPERATOR_CERT_CHECK_SECONDS", defaults.certificate_check_seconds
            ),
            probe_tick_seconds=_number(
                env, "ANKKA_OPERATOR_PROBE_TICK_SECONDS", defaults.probe_tick_seconds
            ),
            agent_resync_seconds=_number(
                env, "ANKKA_OPERATOR_AGENT_RESYNC_SECONDS", defaults.agent_resync_seconds
            ),
            team_refresh_seconds=_number(
                env, "ANKKA_OPERATOR_TEAM_REFRESH_SECONDS", defaults.team_refresh_seconds
            ),
        )


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ConfigurationError(f"{name}={raw!r} must be greater than zero")
    return value


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ConfigurationError(f"{name}={raw[:20]!r} is neither true nor false")
    return raw.strip().lower() == "true"


def _port(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigurationError(f"{name}={raw[:20]!r} is not a port number")
    return int(raw)


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(f"{name}={raw[:20]!r} is not a whole number of at least 1")
    return int(raw)
