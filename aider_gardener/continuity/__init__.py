"""Continuity: structured facts, the session-state block, checkpoints, resume and soft restart.

Data flows one way: Aider's messages and events -> ``tracker`` (patterns, no LLM) -> ``facts``
-> ``state`` (the stable prefix the model always sees) and ``checkpoint`` (files on disk that a
soft restart or a new session reads back).
"""

from .facts import Fact, FactBook

__all__ = ["Fact", "FactBook"]
