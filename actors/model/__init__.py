"""The model client actor: chat completions against OpenAI-compatible endpoints."""

from actors.model.client import ModelClient, ModelOutcome, ModelRequest

__all__ = ["ModelClient", "ModelOutcome", "ModelRequest"]
