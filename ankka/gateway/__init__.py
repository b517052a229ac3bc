"""The checked model gateway: one OpenAI-compatible address for the installation models.

It refuses a request the model cannot serve before sending it, knows the caller from its client
certificate, and relays everything else without touching it. ``ankka gateway`` runs it
(:mod:`ankka.gateway.cli`); docs/gateway.md describes it for users.

Modules, from the edge inward: ``cli`` (the command) → ``server`` (its own HTTP/1.1 server,
httptools on an asyncio protocol) → ``app`` (raw ASGI, the ``Gateway`` that
owns the background loop and the pools) → ``check`` (the pure decision) and ``forward`` (the
relay, error mapping, usage) → ``upstream`` (the pooled HTTP/1.1 client) and ``registry`` (models,
probes, ``limits``) over ``models_file``; ``metrics`` and ``wire`` are shared helpers.
"""
