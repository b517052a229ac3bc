"""The served models and what each can do, kept current by one maintenance loop.

Each :class:`Upstream` pairs a model's declaration with its probed capabilities and its
concurrency limit. :meth:`Registry.maintain` is the gateway's only background loop: it probes
models that were never probed, re-probes each on an interval and soon after an upstream failure
(a server that went down may come back as a different model), and re-reads the models file
when it changes. It is started and awaited by :class:`ankka.gateway.app.Gateway`, which owns it.

A failed re-probe keeps the capabilities learned before (the refusal decisions stay as they
were) and is retried with a growing delay; ``/readyz`` shows the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.upstream import Endpoint
from ankka.api.capabilities import HTTPClient, ModelCapabilities, ProbeError, probe
from ankka.gateway.callers import CallersInFlight, TokenBudget
from ankka.gateway.limits import ConcurrencyLimit
from ankka.gateway.models_file import Models, ModelsFile, ModelsFileError, ModelSpec

__all__ = ["Registry", "Upstream"]

log = logging.getLogger("ankka.gateway")

_RETRY_FIRST_S = 0.5
_RETRY_MAX_S = 30.0
_FILE_POLL_S = 1.0


@dataclass(eq=False)
class Upstream:
    """One served model: its declaration, what it can do once probed, its concurrency."""

    spec: ModelSpec
    limit: ConcurrencyLimit
    capabilities: ModelCapabilities | None = None
    probe_error: str | None = None
    probed: bool = False  # a probe has finished at least once, well or not
    next_probe: float = 0.0
    failures: int = field(default=0, repr=False)
    endpoint: Endpoint = field(init=False, repr=False)
    callers_in_flight: CallersInFlight = field(init=False, repr=False)
    token_budget: TokenBudget = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Parsed once: the request path only appends the body's length and the body.
        self.endpoint = Endpoint.of(
            f"{self.spec.url}/v1/chat/completions", bearer=self.spec.bearer()
        )
        self.callers_in_flight = CallersInFlight(self.spec.max_in_flight_per_caller)
        self.token_budget = TokenBudget(self.spec.tokens_per_minute_per_caller)

    @property
    def name(self) -> str:
        return self.spec.name


def _limit(spec: ModelSpec) -> ConcurrencyLimit:
    return ConcurrencyLimit(spec.max_concurrency, spec.max_queue)


class Registry:
    """The models in service; replaced whole on reload, keeping what reloading did not change."""

    def __init__(
        self,
        models: Models,
        client: HTTPClient,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._client = client
        self._clock = clock or SystemClock()
        self._wake = asyncio.Event()
        self.models = models
        self.upstreams: dict[str, Upstream] = {
            spec.name: Upstream(spec, _limit(spec)) for spec in models.specs
        }

    def get(self, name: str) -> Upstream | None:
        return self.upstreams.get(name)

    def ready(self) -> bool:
        """Every model has been probed at least once (so every refusal decision can be made)."""
        return all(u.probed for u in self.upstreams.values())

    def replace(self, models: Models) -> None:
        """Serve ``models`` from now on; an unchanged model keeps its probe and its queue."""
        old = self.upstreams
        new: dict[str, Upstream] = {}
        for spec in models.specs:
            before = old.get(spec.name)
            if before is not None and before.spec.probe_identity() == spec.probe_identity():
                same_limit = (before.spec.max_concurrency, before.spec.max_queue) == (
                    spec.max_concurrency,
                    spec.max_queue,
                )
                new[spec.name] = Upstream(
                    spec,
                    before.limit if same_limit else _limit(spec),
                    before.capabilities,
                    before.probe_error,
                    before.probed,
                    before.next_probe,
                )
            else:
                new[spec.name] = Upstream(spec, _limit(spec))
        self.models = models
        self.upstreams = new
        self._wake.set()

    def upstream_failed(self, upstream: Upstream) -> None:
        """Re-probe soon: a failed call may mean the server restarted as something else."""
        upstream.next_probe = min(upstream.next_probe, self._clock.monotonic())
        self._wake.set()

    async def probe_one(self, upstream: Upstream) -> None:
        spec = upstream.spec
        try:
            caps = await probe(
                self._client,
                kind=spec.kind,
                url=spec.url,
                model=spec.upstream_model,
                declared=spec.capabilities,
                declared_thinking=spec.thinking,
            )
        except ProbeError as exc:
            upstream.failures += 1
            delay = min(_RETRY_FIRST_S * 2 ** (upstream.failures - 1), _RETRY_MAX_S)
            upstream.next_probe = self._clock.monotonic() + delay
            if upstream.probe_error != exc.reason:
                log.warning("model %r: %s (retrying)", spec.name, exc)
            upstream.probe_error = exc.reason
        else:
            upstream.failures = 0
            upstream.next_probe = self._clock.monotonic() + self.models.probe_interval_s
            if upstream.capabilities != caps or upstream.probe_error:
                log.info("model %r serves %s", spec.name, ", ".join(caps.words()))
            upstream.capabilities = caps
            upstream.probe_error = None
        upstream.probed = True

    async def probe_due(self) -> float:
        """Probe every model that is due; answer the seconds until the next one is."""
        now = self._clock.monotonic()
        due = [u for u in self.upstreams.values() if u.next_probe <= now]
        if due:
            await asyncio.gather(*(self.probe_one(u) for u in due))
        upcoming = [u.next_probe for u in self.upstreams.values()]
        return max(0.0, min(upcoming) - self._clock.monotonic()) if upcoming else _RETRY_MAX_S

    def reload(self, models_file: ModelsFile) -> None:
        try:
            models = models_file.load()
        except ModelsFileError as exc:
            log.error("%s; still serving the models read before", exc)
            return
        self.replace(models)
        log.info("models file reloaded: %s", ", ".join(s.name for s in models.specs) or "none")

    async def maintain(
        self, models_file: ModelsFile | None, *, poll_s: float = _FILE_POLL_S
    ) -> None:
        """Probe, re-probe and reload until cancelled."""
        while True:
            self._wake.clear()
            if models_file is not None and models_file.changed():
                self.reload(models_file)
            wait = await self.probe_due()
            if models_file is not None:
                wait = min(wait, poll_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait)
