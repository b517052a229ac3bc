"""Running the platform on one machine: development tooling, never part of a deployable.

- :mod:`ankka.local.standin` — the scripted stand-in model server (``ankka standin``), which
  speaks Chat Completions, Responses, Anthropic Messages and Ollama's ``/api/show`` from one
  script; the script format itself is :mod:`ankka.runtime.providers.script`, shared with the
  runtime's
  public test double :class:`ankka.runtime.providers.scripted.ScriptedProvider`.
- :mod:`ankka.local.local_model` — llama.cpp's server with SmolLM2, both from PyPI
  (``ankka local-model``).

This package may import the runtime and the gateway; they never import it (``.importlinter``).
"""
