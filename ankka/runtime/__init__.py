"""The runtime: declares agents and runs their turns (see docs/architecture.md)."""
