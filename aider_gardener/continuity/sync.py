"""The session's facts in the store, so a later session (or a soft restart) can resume them.

One row per fact and session (``facts`` table, schema v2). Facts change in place (an error
becomes resolved, a file gets its commit), so saving is an upsert; a row whose values did not
change is not rewritten. ``FactSync`` remembers what it last wrote and sends only the facts
that changed since, which keeps the per-turn write to the few facts a turn touches.

Everything goes through ``Store.write``/``Store.read``: a locked, closed or degraded store fails
here exactly as it does for the rest of the store, and the caller decides (it wraps these calls
in its ``attempt``).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Iterable

from ..continuity.facts import Fact, FactBook

if TYPE_CHECKING:
    from .db import Store

_COLUMNS = (
    "session_id",
    "id",
    "kind",
    "key",
    "text",
    "turn",
    "entry_id",
    "status",
    "superseded_by",
    "detail",
    "created",
)
_CHANGING = _COLUMNS[2:10]  # what an update may change (not the identity, not ``created``)
_UPSERT = (
    f"INSERT INTO facts({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
    " ON CONFLICT(session_id, id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _CHANGING)
    + " WHERE "
    + " OR ".join(f"facts.{c} IS NOT excluded.{c}" for c in _CHANGING)
)
_SELECT = (
    "SELECT session_id, id, kind, key, text, turn, entry_id, status, superseded_by, detail"
    " FROM facts WHERE session_id = ? ORDER BY id"
)


def _clean(value: Any) -> Any:
    """SQLite text must be valid UTF-8: lone surrogates are replaced."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    return value


def _detail_json(detail: Any) -> str:
    for sort in (True, False):  # keys of mixed types cannot be sorted
        try:
            text = json.dumps(detail or {}, ensure_ascii=False, sort_keys=sort, default=str)
            return _clean(text)
        except (TypeError, ValueError):  # also: circular references
            continue
    return json.dumps({"unserializable": _clean(repr(detail)[:500])})


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def _row(session_id: str, fact: Fact, now: float) -> tuple[Any, ...]:
    return (
        _clean(str(session_id)),
        _int(fact.id),
        _clean(str(fact.kind)),
        _clean(str(fact.key)),
        _clean(str(fact.text)),
        _int(fact.turn),
        _clean(fact.entry_id) if fact.entry_id is not None else None,
        _clean(str(fact.status)),
        _int(fact.superseded_by) if fact.superseded_by is not None else None,
        _detail_json(fact.detail),
        now,
    )


def save_facts(store: "Store", session_id: str | None, facts: Iterable[Fact]) -> int:
    """Upsert ``facts`` as ``session_id``'s (the store's own session when None). Returns how
    many rows were inserted or changed. Raises what ``Store.write`` raises."""
    sid = session_id or store.session_id
    now = time.time()
    rows = [_row(sid, f, now) for f in facts]
    if not rows:
        return 0

    def step(c: sqlite3.Connection) -> int:
        written = 0
        for row in rows:
            written += max(c.execute(_UPSERT, row).rowcount, 0)
        return written

    return store.write(step)


def delete_facts(store: "Store", session_id: str | None, ids: Iterable[int]) -> int:
    """Delete ``session_id``'s facts with these ids; how many rows went."""
    sid = session_id or store.session_id
    rows = [(sid, int(i)) for i in ids]

    def step(c: sqlite3.Connection) -> int:
        return sum(
            max(c.execute("DELETE FROM facts WHERE session_id = ? AND id = ?", r).rowcount, 0)
            for r in rows
        )

    return store.write(step) if rows else 0


def load_facts(store: "Store", session_id: str | None = None) -> list[Fact]:
    """The facts of ``session_id`` in the order they were learnt, each with ``session`` set.
    None: the latest earlier session that saved any, i.e. the one this session resumes
    (sessions that started after this one, such as a concurrent Aider, are not "before")."""

    def q(c: sqlite3.Connection) -> list[Fact]:
        sid = session_id
        if sid is None:
            sid = _previous_session(c, store.session_id)
            if sid is None:
                return []
        return [_fact(row) for row in c.execute(_SELECT, (sid,))]

    return store.read(q)


def _previous_session(c: sqlite3.Connection, current: str) -> str | None:
    row = c.execute("SELECT started FROM sessions WHERE id = ?", (current,)).fetchone()
    until = row[0] if row and row[0] is not None else math.inf
    found = c.execute(
        "SELECT f.session_id, coalesce(s.started, max(f.created)) AS began"
        " FROM facts f LEFT JOIN sessions s ON s.id = f.session_id"
        " WHERE f.session_id != ? GROUP BY f.session_id"
        " HAVING began <= ? ORDER BY began DESC LIMIT 1",
        (current, until if until != math.inf else 1e300),
    ).fetchone()
    return found[0] if found else None


def _fact(row: tuple[Any, ...]) -> Fact:
    session, fid, kind, key, text, turn, entry, status, superseded_by, detail = row
    try:
        parsed = json.loads(detail) if detail else {}
    except ValueError:
        parsed = {}
    return Fact(
        id=fid,
        kind=kind,
        key=key,
        text=text,
        turn=turn,
        entry_id=entry,
        status=status,
        superseded_by=superseded_by,
        detail=parsed if isinstance(parsed, dict) else {"value": parsed},
        session=session,
    )


class FactSync:
    """Write a ``FactBook`` to the store incrementally: ``flush(book)`` saves the facts added
    or changed since the last successful flush (nothing at all when the book's ``version`` has
    not moved). A failed write raises and is retried in full by the next flush."""

    def __init__(self, store: "Store", session_id: str | None = None) -> None:
        self.store = store
        self.session_id = session_id or store.session_id
        self._saved: dict[int, tuple[Any, ...]] = {}
        self._version: int | None = None
        self._book_id = 0

    def changed(self, book: FactBook) -> list[Fact]:
        return [f for f in book if self._saved.get(f.id) != _fingerprint(f)]

    def flush(self, book: FactBook) -> int:
        if self._version == book.version and self._book_id == id(book):
            return 0
        pending = self.changed(book)
        written = save_facts(self.store, self.session_id, pending) if pending else 0
        for fact in pending:
            self._saved[fact.id] = _fingerprint(fact)
        if self._book_id == id(book):  # facts taken out of the same book (``/forget``) go too
            gone = set(self._saved) - {f.id for f in book}
            if gone:
                written += delete_facts(self.store, self.session_id, gone)
                for fact_id in gone:
                    del self._saved[fact_id]
        self._version, self._book_id = book.version, id(book)
        return written


def _fingerprint(fact: Fact) -> tuple[Any, ...]:
    return (
        fact.kind,
        fact.key,
        fact.text,
        fact.turn,
        fact.entry_id,
        fact.status,
        fact.superseded_by,
        _detail_json(fact.detail),
    )
