"""Which embedding model a store's vectors come from, so every client of the store uses it.

Two models: ``minilm`` (all-MiniLM-L6-v2, the default) and ``multilingual-e5`` (``e5.py``:
better recall on non-English sessions, ~5x the CPU per chunk). Vectors of one model mean
nothing to the other, so each model has its own chromadb collection, and the store remembers
its model in ``<store>/embedding-model`` (the chunks' ``embedded`` flags mean "by that model").
The model is chosen explicitly (``--gardener-embedder``, ``GARDENER_EMBED_MODEL``), else by the
store's language (``language.py``: E5 for a non-English one), else the store's recorded one, else
``minilm``: ``gardener-mcp`` and the Claude Code hooks, which pass no
choice, follow the project's Aider session. An explicit choice that differs switches the store:
every chunk is queued again (``Store._follow_model``) and re-embedded into the other collection
in the background while full-text recall carries on; the old collection is kept.

The choice is process-wide (one model is loaded per process): the first store a process opens
with vectors decides it. Design: docs/decisions/088-multilingual-e5.md.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from . import e5, language, markers

log = logging.getLogger(__name__)

MODEL_ENV = "GARDENER_EMBED_MODEL"
DEFAULT = "minilm"
E5 = "multilingual-e5"
MODELS = {DEFAULT: "all-MiniLM-L6-v2", E5: "multilingual-e5-small"}
MARKER = "embedding-model"

_lock = threading.Lock()
_requested: str | None = None
_chosen: str | None = None
_warned_env = False


def normalise(name: str | None) -> str | None:
    """A model key from what a user typed (key or full model name, any case), or None."""
    text = (name or "").strip().lower()
    if not text:
        return None
    for key, full in MODELS.items():
        if text in (key, full.lower()):
            return key
    if text in ("e5", "multilingual"):
        return E5
    return None


def request(name: str | None) -> None:
    """The user's explicit choice (``--gardener-embedder``); None leaves it to the store."""
    global _requested
    key = normalise(name)
    if name and key is None:
        raise ValueError(f"unknown embedding model {name!r} (choose from {', '.join(MODELS)})")
    with _lock:
        _requested = key or _requested


def requested() -> str | None:
    global _warned_env
    if _requested is not None:
        return _requested
    raw = os.environ.get(MODEL_ENV, "")
    key = normalise(raw)
    if raw.strip() and key is None and not _warned_env:
        _warned_env = True
        log.warning(
            "gardener: %s=%r is not a model (%s); the store's model is used",
            MODEL_ENV,
            raw,
            ", ".join(MODELS),
        )
    return key


def recorded(store_dir: Path | str) -> str | None:
    """The model the store's vectors come from, or None for a store that never said."""
    return normalise(markers.read(store_dir, MARKER))


def resolve(store_dir: Path | str | None) -> str:
    """Explicit choice, else the store's language's, else the store's, else the default
    (decides nothing)."""
    if store_dir is None:
        return requested() or DEFAULT
    return requested() or by_language(store_dir) or recorded(store_dir) or DEFAULT


def by_language(store_dir: Path | str) -> str | None:
    """multilingual-e5 for a store whose sessions are not in English (``language.py``), when
    its package is installed; None leaves the choice to the store's record."""
    code = language.recorded(store_dir)
    if code is None or code == language.ENGLISH or e5.available() is not None:
        return None
    return E5


def choose(store_dir: Path | str | None) -> str:
    """This process's model: fixed by the first call (the first store opened with vectors)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = resolve(store_dir)
        return _chosen


def active() -> str:
    """The process's model, or what it would be for a store that recorded none."""
    return _chosen or requested() or DEFAULT


def record(store_dir: Path | str, key: str) -> None:
    markers.write(store_dir, MARKER, key)


def collection_name(base: str, key: str) -> str:
    """The default model keeps the collection name stores have always had."""
    return base if key == DEFAULT else f"{base}-{key}"


def display_name(key: str) -> str:
    return MODELS.get(key, key)


def active_name() -> str:
    """The name of the process's model, as the user reads it."""
    return display_name(active())


def _reset_for_tests() -> None:
    global _requested, _chosen, _warned_env
    with _lock:
        _requested = None
        _chosen = None
        _warned_env = False
