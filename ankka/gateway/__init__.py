"""The checked model gateway: one OpenAI-compatible address for the installation models."""
