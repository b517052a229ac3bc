"""The operator's Prometheus metrics: reconciles, holds and releases, certificates, probes.

One registry per :class:`~ankka.operator.reconcile.Platform` (tests build several in one
process), with prometheus-client's process collector (``process_*``). Served on the metrics
port (``ANKKA_OPERATOR_METRICS_PORT``, the chart's ``operator.metricsPort``) by the startup
handler. Labels are kinds and outcomes only: never an object's name (a cluster's Agents would
grow the label set without bound), never a key.

- ``ankka_operator_reconciles_total{kind, outcome}`` and ``ankka_operator_reconcile_seconds``:
  each reconcile of an Agent or InstallationModel (``outcome`` ``ok`` or ``error``);
- ``ankka_operator_agent_transitions_total{reason}``: an Agent's phase changes, by the Event
  they post (``Held``, ``Released``, ``Rendered``, ``InvalidSpec``);
- ``ankka_operator_hold_seconds``: from a reconcile's start (lock wait included) to the status
  that holds the Agent; ``ankka_operator_release_seconds``: from seeing a model become Served
  to every Agent naming it reconciled (the releases written);
- ``ankka_operator_certificates_total{role, action}``: certificates issued or renewed (role
  ``agent`` or ``gateway``);
- ``ankka_operator_probes_total{outcome}`` and ``ankka_operator_probe_seconds``: probes of
  installation models (``served`` or ``failed``).
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from ankka._kernel.exposition import LATENCY_BUCKETS

__all__ = ["OperatorMetrics"]


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        self.reconciles = Counter(
            "ankka_operator_reconciles",
            "Reconciles of Agents and InstallationModels, by outcome",
            ["kind", "outcome"],
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "ankka_operator_reconcile_seconds",
            "Time of one reconcile",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.transitions = Counter(
            "ankka_operator_agent_transitions",
            "Agents' phase changes, by the Event posted (Held, Released, Rendered, InvalidSpec)",
            ["reason"],
            registry=r,
        )
        self.hold_seconds = Histogram(
            "ankka_operator_hold_seconds",
            "From a reconcile's start to the status that holds its Agent",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.release_seconds = Histogram(
            "ankka_operator_release_seconds",
            "From seeing a model become Served to every Agent naming it reconciled",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.certificates = Counter(
            "ankka_operator_certificates",
            "Certificates issued or renewed, by role",
            ["role", "action"],
            registry=r,
        )
        self.probes = Counter(
            "ankka_operator_probes",
            "Probes of installation models, by outcome (served, failed)",
            ["outcome"],
            registry=r,
        )
        self.probe_seconds = Histogram(
            "ankka_operator_probe_seconds",
            "Time of one probe of an installation model",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
