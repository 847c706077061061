"""The store: every original the gardener compressed, searchable and recallable.

``open_store()`` is what the Aider integration calls: a ``Store`` (``store/db.py``) with its
background maintenance (``store/maintenance.py``).
``RecallHit`` comes from ``store/recall.py`` and is imported on first use, so opening a store
for ingest alone never loads the recall and vector stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import maintenance
from .db import Entry, Store

__all__ = ["Entry", "RecallHit", "Store", "open_store"]


def __getattr__(name: str) -> Any:
    if name == "RecallHit":
        from .recall import RecallHit

        return RecallHit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(
    location: str | Path | None = None,
    *,
    root: str | Path | None = None,
    scope: str = "project",
    vectors: bool = True,
    chroma_url: str | None = None,
    maintenance_interval: float | None = 300.0,
    **kwargs: Any,
) -> Store:
    """The store as Aider uses it: under the git root (or ``--gardener-store``), vectors and
    embedding worker on, maintenance every five minutes."""
    store = Store(
        location,
        root=root,
        scope=scope,
        vectors=vectors,
        chroma_url=chroma_url,
        **kwargs,
    )
    maintenance.start(store, maintenance_interval)
    return store
