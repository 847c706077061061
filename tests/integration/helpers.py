"""Small helpers shared by the integration tests."""

from __future__ import annotations


def history_of(request: list[dict]) -> list[dict]:
    """The messages of one request after Aider's fixed prefix (system prompt, examples)."""
    return [m for m in request if m.get("role") != "system"]


def text_of(request: list[dict]) -> str:
    return "\n".join(m["content"] for m in request if isinstance(m.get("content"), str))
