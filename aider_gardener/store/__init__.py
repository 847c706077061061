"""The store: every original the gardener compressed, searchable and recallable.

``open_store()`` is what the Aider integration calls; ``Store`` is the class (``store/db.py``).
``RecallHit`` comes from ``store/recall.py`` and is imported on first use, so opening a store
for ingest alone never loads the recall and vector stack.
"""

from __future__ import annotations

from typing import Any

from .db import Entry, Store, open_store

__all__ = ["Entry", "RecallHit", "Store", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "RecallHit":
        from .recall import RecallHit

        return RecallHit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
