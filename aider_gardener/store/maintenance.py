"""Background upkeep of the store: expire, purge, re-score, give space back.

It runs in a daemon thread so none of it costs the user a turn, each step in its own short
transaction so it never holds the write lock long enough to stall ingestion in this or another
Aider process. Any failure is one log line; the next run tries again.

* TTL expiry is a soft delete (``deleted_reason='ttl'``): ``restore`` brings the entry back.
* Soft-deleted entries (forgotten or expired) are purged for good ``PURGE_AFTER`` after deletion,
  which is the window in which ``restore`` works; their chunks, keys and vectors go with them.
* Priorities decay with time, so they are recomputed every run (one UPDATE through the
  ``gardener_priority`` SQL function).
* The file is created with ``auto_vacuum=INCREMENTAL``, so freed pages are returned with a cheap
  ``incremental_vacuum`` once the free list is both large in bytes (``VACUUM_MIN_FREE_BYTES``)
  and a large share of the file (``VACUUM_MIN_FREE_SHARE``): below that, SQLite reuses free pages
  for new entries anyway and shrinking the file would only make it grow again.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Any

from . import priority, token_states
from .db import Store, StoreBusy, StoreReadOnly

log = logging.getLogger(__name__)

DAY = 86400.0
PURGE_AFTER = 30 * DAY
VACUUM_MIN_FREE_BYTES = 8 << 20
VACUUM_MIN_FREE_SHARE = 0.20
DEFAULT_INTERVAL = 300.0
FIRST_RUN_DELAY = 5.0  # after start-up, not during it


def expire(store: Store, now: float | None = None) -> int:
    """Soft-delete unpinned entries not accessed within their TTL. Returns how many."""
    now = time.time() if now is None else now

    def step(c: sqlite3.Connection) -> int:
        return c.execute(
            "UPDATE entries SET active = 0, deleted_at = ?, deleted_reason = 'ttl'"
            " WHERE active = 1 AND pinned = 0 AND ttl IS NOT NULL AND last_access + ttl < ?",
            (now, now),
        ).rowcount

    return store.write(step)


def purge(store: Store, now: float | None = None, after: float = PURGE_AFTER) -> list[str]:
    """Hard-delete entries soft-deleted more than ``after`` seconds ago, with their chunks,
    search keys, session links and vectors. Returns their ids."""
    now = time.time() if now is None else now

    def step(c: sqlite3.Connection) -> list[str]:
        ids = [
            r[0]
            for r in c.execute(
                "SELECT id FROM entries WHERE active = 0 AND deleted_at IS NOT NULL"
                " AND deleted_at < ?",
                (now - after,),
            )
        ]
        tables = [
            ("chunks", "entry_id"),
            ("entry_keys", "entry_id"),
            ("entry_sessions", "entry_id"),
            ("entries", "id"),  # its trigger removes the FTS5 row
        ]
        if ids and token_states.exists(c):
            tables.insert(0, (token_states.TABLE, "entry_id"))
        for i in range(0, len(ids), 500):
            batch = ids[i : i + 500]
            marks = ",".join("?" * len(batch))
            for table, column in tables:
                c.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", batch)
        return ids

    ids = store.write(step)
    if ids and store.vectors is not None:
        try:
            store.vectors.delete_entries(ids)
        except Exception as err:  # noqa: BLE001 - stale vectors are filtered at recall anyway
            log.warning("gardener: could not delete vectors of purged entries: %s", err)
    return ids


def rescore(store: Store, now: float | None = None) -> int:
    """Recompute every active entry's priority for time ``now``. Returns rows updated."""
    now = time.time() if now is None else now
    return store.write(
        lambda c: c.execute(
            f"UPDATE entries SET priority = {priority.SQL_FUNCTION}(cls, created, last_access,"
            " ?, pinned, refs, last_ref, resolved_at) WHERE active = 1",
            (now,),
        ).rowcount
    )


def free_space(store: Store) -> tuple[int, int]:
    """(free bytes, file bytes) of the main database."""

    def q(c: sqlite3.Connection) -> tuple[int, int]:
        size = c.execute("PRAGMA page_size").fetchone()[0]
        pages = c.execute("PRAGMA page_count").fetchone()[0]
        free = c.execute("PRAGMA freelist_count").fetchone()[0]
        return free * size, pages * size

    return store.read(q)


def vacuum_if_large(
    store: Store,
    min_free_bytes: int = VACUUM_MIN_FREE_BYTES,
    min_free_share: float = VACUUM_MIN_FREE_SHARE,
) -> bool:
    """Give free pages back to the file system when there are many of them. True if it did."""
    free, total = free_space(store)
    if free < min_free_bytes or not total or free / total < min_free_share:
        return False
    mode = store.read(lambda c: c.execute("PRAGMA auto_vacuum").fetchone()[0])
    if mode == 2:  # INCREMENTAL
        # executescript steps the pragma to completion; execute() frees a single page.
        store.read(lambda c: c.executescript("PRAGMA incremental_vacuum"))
    else:  # a file created without it: a full VACUUM (cannot run inside a transaction)
        store.read(lambda c: c.execute("VACUUM"))
    store.read(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    return True


def _heartbeat(store: Store) -> bool:
    store.heartbeat()
    return True


def run_once(store: Store, now: float | None = None) -> dict[str, Any]:
    """One maintenance pass; each step is independent, so one failing does not stop the rest.
    A store another process keeps locked ends the pass quietly (the store said so once, and
    each step would wait again), as does a read-only one: the next pass tries again."""
    now = time.time() if now is None else now
    report: dict[str, Any] = {}
    steps = (
        ("expired", lambda: expire(store, now)),
        ("purged", lambda: len(purge(store, now))),
        ("rescored", lambda: rescore(store, now)),
        ("vacuumed", lambda: vacuum_if_large(store)),
        ("heartbeat", lambda: _heartbeat(store)),
    )
    for name, fn in steps:
        try:
            report[name] = fn()
        except (StoreBusy, StoreReadOnly):
            report[name] = None
            break
        except Exception as err:  # noqa: BLE001 - maintenance must never take the host down
            report[name] = None
            store.warn_once(
                f"maintenance:{name}",
                f"gardener: store maintenance step {name!r} failed ({type(err).__name__}: {err})",
            )
    return report


class Maintenance:
    """The daemon thread that calls ``run_once`` every ``interval`` seconds until ``stop``."""

    def __init__(
        self, store: Store, interval: float = DEFAULT_INTERVAL, first_delay: float | None = None
    ) -> None:
        self.store = store
        self.interval = float(interval)
        self.first_delay = (
            min(self.interval, FIRST_RUN_DELAY) if first_delay is None else first_delay
        )
        self.runs = 0
        self.last: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gardener-maintenance", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        delay = self.first_delay
        while not self._stop.wait(delay):
            self.last = run_once(self.store)
            self.runs += 1
            delay = self.interval

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def start(store: Store, interval: float | None = DEFAULT_INTERVAL) -> Maintenance | None:
    """Background maintenance every ``interval`` seconds, stopped when the store closes; None
    when ``interval`` is None or 0, or for a store that cannot be written (read-only)."""
    if store.read_only is not None or not interval:
        return None
    thread = Maintenance(store, interval)
    store.attach(thread)
    thread.start()
    return thread
