"""The Aider integration: every coder gardened, eviction instead of Aider's summarizer, session
RAG, throttled command output, and the ``/context-pressure``, ``/recall``, ``/forget`` and
``/pin`` commands. ``aider_gardener.main`` is the ``aider-gardener`` entry point.

Importing this package imports Aider (seconds); the rest of ``aider_gardener`` does not need it.
"""

from __future__ import annotations

from .. import offline  # noqa: F401  (before aider/litellm load)
from .commands import GardenCommands
from .mixin import GardenerMixin
from .options import GardenerConfig, add_gardener_group, config_from_args
from .registry import garden_coders, gardened, gardened_class, is_gardened, restore_coders
from .session import GardenerSession

__all__ = [
    "GardenCommands",
    "GardenerConfig",
    "GardenerMixin",
    "GardenerSession",
    "add_gardener_group",
    "config_from_args",
    "garden_coders",
    "gardened",
    "gardened_class",
    "is_gardened",
    "restore_coders",
]
