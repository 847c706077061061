"""What the gardener says about itself at start: one line with the mode, the history budget, the
store and its size, and how recall will work.

A user who starts ``aider-gardener`` should see that it runs and where it keeps things without
reading the docs. The store itself opens lazily (at the first message, so a failing or slow
store costs nothing at start); the count here is one read-only query on the file if it exists.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from .session import GardenerSession

MODE_WORDS = {
    "evict": "evict mode (compress and evict old context)",
    "rag": "rag mode (compress, evict, recall)",
    "incremental": "incremental mode (rolling summary + recent turns, recall)",
}


def startup_line(session: GardenerSession, coder: Any) -> str:
    """E.g. ``gardener: rag mode (compress, evict, recall), history budget 8.0k tokens, store
    .aider.gardener/store.sqlite (123 entries), semantic recall (embedding model loading in the
    background; …)``. The model starts loading at start, in a background thread
    (``embeddings.preload``); worker.py's notes say when it is ready."""
    from ..store.db import resolve_location

    cfg = session.config
    root = getattr(coder, "root", None)
    _, path = resolve_location(cfg.store, root)
    parts = [MODE_WORDS.get(cfg.mode, f"{cfg.mode} mode")]
    try:
        parts.append(f"history budget {_fmt_k(session.budget(coder))} tokens")
    except Exception:  # noqa: BLE001 - a coder without a model: say nothing about it
        pass
    count = entry_count(path)
    size = "new" if count is None else f"{count:,} entr{'y' if count == 1 else 'ies'}"
    parts.append(f"store {_shown(path, root)} ({size})")
    if not cfg.vectors:
        parts.append("full-text recall only (--no-gardener-vectors)")
    elif cfg.chroma_url:
        parts.append(f"semantic recall via {cfg.chroma_url}")
    else:
        parts.append(
            f"semantic recall{_model_words(path)} (embedding model loading in the background;"
            " full-text search until it is ready)"
        )
    return "gardener: " + ", ".join(parts)


def _model_words(path: Path) -> str:
    """ " with multilingual-e5-small" when the store embeds with the non-default model (the
    default is not named, as before the choice existed)."""
    from ..store import model_choice

    key = model_choice.resolve(path.parent)
    before = model_choice.recorded(path.parent)
    if before is not None and before != key:  # the flag chose the other model: say so now
        return (
            f" with {model_choice.display_name(key)} (was {model_choice.display_name(before)}:"
            " the store re-indexes in the background)"
        )
    if key == model_choice.DEFAULT:
        return ""
    return f" with {model_choice.display_name(key)}"


def entry_count(path: Path) -> int | None:
    """Entries in the store file, or None when there is none yet. Read-only, never waits on a
    writer for more than a moment, never raises."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.2)
        try:
            return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def _shown(path: Path, root: str | None) -> str:
    """The store path relative to the repository when it is inside it."""
    if root:
        try:
            rel = os.path.relpath(path, root)
            if not rel.startswith(".."):
                return rel
        except ValueError:
            pass
    return str(path)


def _fmt_k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


RECALLED_WORDS = 40  # characters of what names one recalled entry in the status line


def recalled_names(session: GardenerSession) -> str:
    """What this request recalled, for the status line: `` (t5ifzcaz3j `sh import.sh`; …)``,
    each id with its command, path or first words. "1 recalled from the store" alone did not
    say what had entered the prompt. "" when nothing was, or the store cannot say."""
    ids = list(getattr(session, "rag_ids", None) or [])
    store = session.store
    if not ids or store is None:
        return ""
    try:
        entries = store.get_entries(ids)
    except Exception:  # noqa: BLE001 - the names are a nicety; the count is still said
        return ""
    names = []
    for entry_id in ids:
        entry = entries.get(entry_id)
        if entry is None:
            names.append(entry_id)
            continue
        what = getattr(entry, "command", None) or getattr(entry, "path", None)
        what = f"`{what}`" if getattr(entry, "command", None) else what
        if not what:
            what = next((ln.strip() for ln in entry.summary.splitlines() if ln.strip()), "")
        what = " ".join(str(what).split())
        if len(what) > RECALLED_WORDS:
            what = what[: RECALLED_WORDS - 1] + "…"
        names.append(f"{entry_id} {what}".rstrip())
    return f" ({'; '.join(names)})"
