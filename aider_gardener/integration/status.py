"""Small readings for what the gardener says about itself: the store's entry count (one
read-only query on the file, so a failing or slow store costs nothing at start), the store's
path as the user would type it, token counts in ``k``, and what a request recalled.

The start-up line is built in ``startup.py`` from these.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .session import GardenerSession


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


def shown_path(path: Path, root: str | None) -> str:
    """The store path relative to the repository when it is inside it."""
    if root:
        try:
            rel = os.path.relpath(path, root)
            if not rel.startswith(".."):
                return rel
        except ValueError:
            pass
    return str(path)


def fmt_k(n: int) -> str:
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
