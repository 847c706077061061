"""Finding and opening the project's store for clients other than Aider (MCP server, hooks).

One place decides where a non-Aider client's store is, so that a Claude Code hook, the MCP server
and an Aider session in the same repository all read and write the same
``<git root>/.aider.gardener/store.sqlite``: the rules of ``--gardener-store`` /
``store.db.resolve_location``, with the places such clients learn their project from
(``$CLAUDE_PROJECT_DIR``, then the working directory). A hook is a new process per event, so it
passes a stable session id (``client_session_id``), or every event would be a session of its own.
The long-lived process (``worker=True``) preloads the model and drains the embedding queue that
one-event processes (``worker=False``) leave. ``write_client_checkpoint`` writes where Aider's
``/checkpoints`` and ``/resume`` find it, never holding less than the checkpoint before it.

Rules in full: docs/decisions/024-one-store-for-every-client.md
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

from ..preload import preload
from ..store import open_store
from ..store.db import Store, find_git_root, resolve_location

log = logging.getLogger(__name__)

STORE_ENV = "AIDER_GARDENER_STORE"
PROJECT_ENV = "CLAUDE_PROJECT_DIR"
CHECKPOINT_DIRNAME = "checkpoints"  # integration.keeper's, which imports Aider
MAINTENANCE_INTERVAL = 300.0  # as the Aider session's store (``db.open_store``)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def project_dir(cwd: str | Path | None = None) -> Path:
    """The project a client works in: the git root of ``cwd`` (default ``$CLAUDE_PROJECT_DIR``,
    then the working directory), or that directory itself outside a repository."""
    base = cwd if cwd not in (None, "") else os.environ.get(PROJECT_ENV) or None
    start = Path(base).expanduser() if base is not None else Path.cwd()
    try:
        start = start.resolve()
    except OSError:
        start = Path(os.path.abspath(start))
    return find_git_root(start) or start


def store_location(
    cwd: str | Path | None = None, store: str | Path | None = None
) -> tuple[Path, Path]:
    """(store folder, sqlite file) without opening anything.

    The rules: docs/decisions/024-one-store-for-every-client.md."""
    location = store if store not in (None, "") else os.environ.get(STORE_ENV) or None
    return resolve_location(location, None if location is not None else project_dir(cwd))


def client_session_id(client: str, raw: str | None) -> str | None:
    """A store session id for a client's own session id (``claude-<uuid>``), stable across
    the processes of one client session; None when the client gave none."""
    if not raw or not str(raw).strip():
        return None
    return f"{_UNSAFE.sub('-', client)}-{_UNSAFE.sub('-', str(raw).strip())[:80]}"


def open_project_store(
    cwd: str | Path | None = None,
    store: str | Path | None = None,
    vectors: bool = True,
    worker: bool = True,
    *,
    session_id: str | None = None,
    scope: str = "project",
    chroma_url: str | None = None,
    model: str = "gpt-4o",
) -> Store:
    """The project's store, opened as the client needs it (see the module docstring).

    Never raises for a locked, corrupt or unwritable store: like Aider's, it degrades (moves a
    corrupt file aside, or runs in memory with ``store.degraded`` saying why), and the caller
    reports ``degraded`` instead of pretending its writes are kept."""
    folder, _ = store_location(cwd, store)
    location = store if store not in (None, "") else os.environ.get(STORE_ENV) or None
    root = project_dir(cwd)
    if vectors and worker:
        preload()  # numpy & co. in this thread before the model's thread imports them too
        _preload_model(folder)
    opened = open_store(
        location,
        root=None if location is not None else root,
        session_id=session_id,
        scope=scope,
        vectors=bool(vectors and worker),
        chroma_url=chroma_url,
        model=model,
        project_root=str(root),
        maintenance_interval=MAINTENANCE_INTERVAL if worker else None,
    )
    if vectors and not worker and opened.degraded is None and opened.path is not None:
        _attach_index(opened, chroma_url)
    return opened


def latest_client_session(store: Store, exclude: tuple[str, ...] = ()) -> str | None:
    """The session that most recently stored an entry (other than ``exclude``, e.g. the
    caller's own): the one a hook is writing now. None when no other session stored any."""
    marks = ",".join("?" * len(exclude)) or "''"

    def q(c: sqlite3.Connection) -> str | None:
        row = c.execute(
            "SELECT session_id FROM entry_sessions"
            f" WHERE session_id NOT IN ({marks}) ORDER BY first_seen DESC LIMIT 1",
            tuple(exclude),
        ).fetchone()
        return row[0] if row else None

    try:
        return store.read(q)
    except Exception as err:  # noqa: BLE001 - a figure, not a failure
        log.debug("gardener: finding the latest session failed: %s", err)
        return None


def checkpoint_folder(store: Store) -> Path:
    return Path(store.dir) / CHECKPOINT_DIRNAME


def write_client_checkpoint(
    store: Store,
    note: str | None = None,
    *,
    trigger: str = "manual",
    session_id: str | None = None,
) -> tuple[Path, Any]:
    """Write a verified checkpoint and return (its path, the parsed ``Checkpoint`` read back
    from disk). ``session_id``: the client session whose stored facts it holds (default: the
    latest session that stored anything, not the caller's own). Raises ``CheckpointError``
    with a one-line reason when it cannot be written or read back."""
    from ..continuity.checkpoint import (
        carried_facts,
        load_latest,
        read_checkpoint,
        render_checkpoint,
        write_checkpoint,
    )
    from ..continuity.facts import FactBook

    folder = checkpoint_folder(store)
    own = getattr(store, "session_id", None)
    sid = session_id or latest_client_session(store, exclude=(own,) if own else ())
    book = FactBook()
    if sid:
        try:
            from ..continuity.sync import load_facts

            book = FactBook(load_facts(store, sid))
        except Exception as err:  # noqa: BLE001 - a checkpoint from the last one still helps
            log.debug("gardener: reading the session's facts failed: %s", err)
    if not len(book) and folder.is_dir():
        latest = load_latest(folder, warn=lambda message: log.debug("%s", message))
        if latest is not None:
            book = carried_facts(latest.facts)
    text = render_checkpoint(
        book,
        trigger=trigger,
        session=sid or own or "",
        project=str(getattr(store, "project_root", "") or ""),
        note=note or None,
    )
    path = write_checkpoint(folder, text)
    return path, read_checkpoint(path)


def _preload_model(folder: Path) -> bool:
    """Start the model load now, in the background, as the Aider session does at start."""
    try:
        from ..store import embeddings

        return embeddings.preload(folder)
    except Exception as err:  # noqa: BLE001 - without the model recall is full-text
        log.debug("gardener: embedding preload failed: %s", err)
        return False


def _attach_index(store: Store, chroma_url: str | None) -> None:
    """The vector index for queries only (no worker thread): a short process that wants hybrid
    recall, and pays the model load in its own thread when it first queries."""
    try:
        from ..store import vectors as vectors_mod

        store.vectors = vectors_mod.open_index(store.dir, chroma_url)
    except Exception as err:  # noqa: BLE001 - full-text recall still works
        log.debug("gardener: vector index unavailable: %s", err)
        store.vectors = None
