"""Where the reranker's token states live between recalls: a table of the store, one row per
chunk, written by the embedding worker for the chunks a recall reads first (an entry's first
chunk and its gist) and by a recall for any other chunk it had to encode.

Encoding twenty candidates is what made a cold ``/recall`` cost a second on two cores; reading
twenty rows costs a millisecond. The states are a cache derived from the chunk text, so the table
is created on demand outside the schema versions (an older gardener opening the store ignores
it), dropped rows are only recomputed, and a store without it reranks as before. Each row packs
the word pieces' unit vectors (punctuation left out) as int8 with one float16 scale per piece
(~0.4 KB a piece, ~23 KB a chunk); the rounding moves a cosine by less than 0.01. The table is
capped at ``MAX_BYTES``, the oldest rows dropped first: recall favours recent entries, and a
dropped row is encoded again (and kept) when a recall needs it.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Callable, Protocol, Sequence, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

TABLE = "token_states"
DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE}("
    " chunk_id TEXT PRIMARY KEY, entry_id TEXT NOT NULL, data BLOB NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_entry ON {TABLE}(entry_id)",
)
MAX_BYTES = 48 << 20  # ~2,400 chunks: the first chunks and gists of a long project's entries
LEADING = 0  # chunks numbered up to this (the first; the gist is -1) are kept by the worker
# The text a chunk was embedded from, as the worker's queue reads it (``Store.pending_chunks``).
EMBED_TEXT_SQL = (
    "CASE c.context WHEN '' THEN c.text ELSE c.text || char(10) || substr(c.context, 1, ?) END"
)


class StatesStore(Protocol):
    """What this module uses of ``db.Store``."""

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a read transaction."""

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a write transaction."""


def create(conn: sqlite3.Connection) -> None:
    for sql in DDL:
        conn.execute(sql)


def exists(conn: sqlite3.Connection) -> bool:
    """Whether the table was created: it comes with the first states a process keeps."""
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(sql, (TABLE,)).fetchone() is not None


def pack(states: Any) -> bytes:
    """``(pieces, dims)`` float unit vectors as bytes: pieces (uint16), float16 scales, int8."""
    import numpy as np

    states = np.asarray(states, dtype=np.float32)
    scale = np.abs(states).max(axis=1) if len(states) else np.zeros(0, dtype=np.float32)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32) / 127.0
    q = np.clip(np.rint(states / scale[:, None]), -127, 127).astype(np.int8)
    head = np.array([len(states), states.shape[1] if states.ndim == 2 else 0], dtype=np.uint16)
    return head.tobytes() + scale.astype(np.float16).tobytes() + q.tobytes()


def unpack(data: bytes) -> Any:
    """The float32 ``(pieces, dims)`` array ``pack`` was given (to within its rounding)."""
    import numpy as np

    n, dims = (int(x) for x in np.frombuffer(data[:4], dtype=np.uint16))
    scale = np.frombuffer(data[4 : 4 + 2 * n], dtype=np.float16).astype(np.float32)
    q = np.frombuffer(data[4 + 2 * n :], dtype=np.int8).reshape(n, dims)
    return q.astype(np.float32) * scale[:, None]


def load(store: StatesStore, chunk_ids: Sequence[str], context_chars: int) -> dict[str, tuple]:
    """chunk id -> (the text it was embedded from, its packed states or None)."""
    ids = list(dict.fromkeys(chunk_ids))
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))

    def q(c: sqlite3.Connection) -> dict[str, tuple]:
        states, join = (
            ("s.data", f" LEFT JOIN {TABLE} s ON s.chunk_id = c.chunk_id")
            if exists(c)
            else ("NULL", "")
        )
        sql = (
            f"SELECT c.chunk_id, {EMBED_TEXT_SQL}, {states} FROM chunks c{join}"
            f" WHERE c.chunk_id IN ({marks})"
        )
        rows = c.execute(sql, (context_chars, *ids)).fetchall()
        return {cid: (text or "", data) for cid, text, data in rows}

    try:
        return store.read(q)
    except Exception as err:  # noqa: BLE001 - the reranker encodes what it cannot read
        log.debug("gardener: reading token states failed: %s", err)
        return {}


def full(store: StatesStore) -> bool:
    """Whether the table holds ``MAX_BYTES`` already: catching up would only push out rows."""

    def q(c: sqlite3.Connection) -> bool:
        if not exists(c):
            return False
        used = c.execute(f"SELECT sum(length(data)) FROM {TABLE}").fetchone()[0]
        return (used or 0) >= MAX_BYTES - MAX_BYTES // 16

    try:
        return store.read(q)
    except Exception:  # noqa: BLE001 - then do not catch up now
        return True


def save(store: StatesStore, rows: Sequence[tuple[str, bytes]]) -> bool:
    """Keep (chunk id, packed states) rows; False when the store would not take them."""
    if not rows:
        return True

    def step(c: sqlite3.Connection) -> None:
        create(c)
        c.executemany(
            f"INSERT OR REPLACE INTO {TABLE}(chunk_id, entry_id, data) VALUES (?, ?, ?)",
            [(cid, cid.rsplit(":", 1)[0], data) for cid, data in rows],
        )
        over = c.execute(f"SELECT sum(length(data)) FROM {TABLE}").fetchone()[0] - MAX_BYTES
        if over > 0:  # the oldest rows that add up to the excess
            c.execute(
                f"DELETE FROM {TABLE} WHERE rowid IN (SELECT rowid FROM (SELECT rowid,"
                " sum(length(data)) OVER (ORDER BY rowid) - length(data) AS before"
                f" FROM {TABLE}) WHERE before < ?)",
                (over,),
            )

    try:
        store.write(step)
        return True
    except Exception as err:  # noqa: BLE001 - a cache that is not written is recomputed
        log.debug("gardener: saving token states failed: %s", err)
        return False
