"""Fixtures shared by the integration tier (real servers on loopback)."""

from tests.integration.llamacpp import llama_server

__all__ = ["llama_server"]
