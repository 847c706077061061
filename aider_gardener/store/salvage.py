"""Salvage: what a corrupt store still holds, copied into the fresh store that replaces it.

One bad page (a disk error, a torn write, a tool that wrote into the file) used to set the whole
store aside, and every earlier entry dropped out of recall. The damaged file is still set aside
byte for byte (db.py), but what can be read of it is copied into the fresh store first: the
output of ``sqlite3 FILE .recover`` when the shell can run it, then the damaged file itself row
by row, so only the rows on a damaged page are lost. An entry found by both is copied once.

Every entry copied must still hash to its id (``pipeline.entry_id``): a damaged page whose bytes
happen to parse is not copied as an entry. Lost chunks, keys and session links are made again
(remade chunks wait for the embedding worker); rows go in through the fresh store's triggers,
which rebuild the full-text index. Details: docs/decisions/083-corrupt-store-salvage.md.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence, TypeVar

from ..types import ContentClass
from . import priority

T = TypeVar("T")


class Target(Protocol):
    """The fresh store the rows go into. Only its guarded transactions are used, so salvage sits
    below ``db.py``, which calls it while it opens."""

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a read transaction."""

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a write transaction."""


log = logging.getLogger(__name__)

# The SQLite shell, by name or path; None copies row by row only.
SQLITE_CLI: str | None = "sqlite3"
CLI_TIMEOUT = 600.0
# Rowids past the largest one found are probed this far: the last leaf may be the damaged one.
PROBE_MARGIN = 64
BATCH = 200
# Columns an entry cannot be stored without (the rest have defaults in the schema).
ENTRY_REQUIRED = (
    "id",
    "seq",
    "session_id",
    "created",
    "cls",
    "tokens_original",
    "tokens_summary",
    "ratio",
    "priority",
    "last_access",
    "summary",
    "original",
)
# (table, primary key columns) of the tables without rowids, scanned in both directions.
KEYED_TABLES = (
    ("entry_keys", ("key", "entry_id")),
    ("entry_sessions", ("session_id", "entry_id")),
    ("session_state", ("session_id", "key")),
    ("facts", ("session_id", "id")),
)


@dataclass
class Salvaged:
    """What came back: ``entries`` copied, of ``expected`` when an index of the damaged file
    could still count them, and ``unreadable`` rows known to exist that could not be read."""

    entries: int = 0
    expected: int | None = None
    unreadable: int = 0
    sources: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if not self.entries:
            return "no entry could be saved; started a fresh store"
        total = self.expected if self.expected and self.expected >= self.entries else None
        n = f"{self.entries:,} of {total:,}" if total else f"{self.entries:,}"
        plural = "entry" if (total or self.entries) == 1 else "entries"
        return f"saved {n} {plural} into a fresh store"


def salvage(damaged: Path, store: Target) -> Salvaged:
    """Copy what ``damaged`` still holds into ``store`` (fresh, open); never raises for what
    it reads, only if the fresh store cannot be written."""
    report = Salvaged()
    saved: set[str] = set()
    with tempfile.TemporaryDirectory(prefix=".salvage-", dir=damaged.parent) as tmp:
        source = _source_uri(damaged, Path(tmp))
        sources: list[tuple[str, str]] = []
        recovered = _recover_with_cli(source, Path(tmp))
        if recovered is not None:
            sources.append(("recover", recovered.as_uri() + "?mode=ro"))
        sources.append(("rows", source))
        for name, uri in sources:
            try:
                src = sqlite3.connect(uri, uri=True, isolation_level=None)
            except sqlite3.Error as err:
                log.debug("gardener: salvage cannot open %s: %s", uri, err)
                continue
            try:
                before = len(saved)
                _copy(src, store, saved, report, count=name == "rows")
                if len(saved) > before:
                    report.sources.append(name)
            finally:
                src.close()
    _complete(store, saved)
    report.entries = store.read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone()[0])
    return report


def _source_uri(damaged: Path, tmp: Path) -> str:
    """Read the damaged file without changing it or leaving files beside it: ``immutable``
    when no -wal holds pages (the usual case, the last connection folded it in), else a copy
    of both in ``tmp``."""
    wal = damaged.with_name(damaged.name + "-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return damaged.as_uri() + "?immutable=1"
    copy = tmp / "damaged.sqlite"
    shutil.copyfile(damaged, copy)
    shutil.copyfile(wal, tmp / "damaged.sqlite-wal")
    return copy.as_uri()


def _recover_with_cli(source: str, tmp: Path) -> Path | None:
    """``sqlite3 SOURCE .recover | sqlite3 OUT``; None when the shell is missing or fails."""
    cli = shutil.which(SQLITE_CLI) if SQLITE_CLI else None
    if cli is None:
        return None
    out = tmp / "recovered.sqlite"
    dump = load = None
    try:
        dump = subprocess.Popen(
            [cli, "-batch", source, ".recover"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        load = subprocess.Popen(
            [cli, "-batch", str(out)],
            stdin=dump.stdout,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert dump.stdout is not None
        dump.stdout.close()  # the loader owns the pipe now
        load.wait(CLI_TIMEOUT)
        dump.wait(CLI_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as err:
        log.debug("gardener: sqlite3 .recover failed: %s", err)
        for proc in (dump, load):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        return None
    if dump.returncode != 0 or not out.exists():
        log.debug("gardener: sqlite3 .recover exited with %s", dump.returncode)
        return None
    return out


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    try:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    except sqlite3.Error:
        return []


def _copy(
    src: sqlite3.Connection, store: Target, saved: set[str], report: Salvaged, count: bool
) -> None:
    fresh = {t: store.read(lambda c: _columns(c, t)) for t in _TABLES}
    cols = {t: [c for c in fresh[t] if c in set(_columns(src, t))] for t in _TABLES}
    if count:  # the damaged file's own indexes, not the scratch copy's rebuilt ones
        counted = _count(src, "entries")
        if counted is not None:
            report.expected = max(report.expected or 0, counted)
    _insert(store, "sessions", cols["sessions"], _rows(src, "sessions", cols))
    _copy_entries(src, store, cols["entries"], saved, report)
    chunk_cols = cols["chunks"]
    if "entry_id" in chunk_cols:
        at = chunk_cols.index("entry_id")
        chunk_rows = (r for r in _rows(src, "chunks", cols) if r[at] in saved)
        _insert(store, "chunks", chunk_cols, chunk_rows)
    for table, key in KEYED_TABLES:
        names = cols[table]
        if not names or any(k not in names for k in key):
            continue
        rows = _scan(src, table, names, key)
        if "entry_id" in names:
            at = names.index("entry_id")
            rows = [r for r in rows if r[at] in saved]
        _insert(store, table, names, rows)


_TABLES = ("sessions", "entries", "chunks") + tuple(t for t, _ in KEYED_TABLES)


def _copy_entries(
    src: sqlite3.Connection, store: Target, names: list[str], saved: set[str], report: Salvaged
) -> None:
    from ..pipeline import entry_id

    if any(c not in names for c in ENTRY_REQUIRED):
        return
    at_id, at_original = names.index("id"), names.index("original")

    def rows() -> Iterator[tuple]:
        for row in _rows(src, "entries", {"entries": names}, report):
            eid, original = row[at_id], row[at_original]
            if eid in saved:
                continue
            if not isinstance(original, str) or entry_id(original) != eid:
                report.unreadable += 1  # a damaged page that parsed: not this entry any more
                continue
            saved.add(eid)
            yield row

    _insert(store, "entries", names, rows())


def _rows(
    src: sqlite3.Connection,
    table: str,
    cols: dict[str, list[str]],
    report: Salvaged | None = None,
) -> Iterator[tuple]:
    """Every row of a rowid table that can be read: only the rows on a damaged page are lost.
    Rowids come from scans that each stop at the first bad page: through an index (``SELECT
    rowid`` reads the smallest one), forward and backward through the table; the gaps between
    and a margin past the end are probed one by one."""
    names = cols.get(table) or []
    if not names:
        return
    found: set[int] = set()
    for sql in (
        f"SELECT rowid FROM {table}",
        f"SELECT rowid FROM {table} ORDER BY rowid",
        f"SELECT rowid FROM {table} ORDER BY rowid DESC",
    ):
        try:
            for (rowid,) in src.execute(sql):
                found.add(rowid)
        except sqlite3.Error:
            pass
    if report is not None:
        report.expected = max(report.expected or 0, len(found)) or report.expected
    top = max(found, default=0) + PROBE_MARGIN
    select = f"SELECT {', '.join(names)} FROM {table} WHERE rowid = ?"
    for rowid in sorted(found | set(range(1, top + 1))):
        try:
            row = src.execute(select, (rowid,)).fetchone()
        except sqlite3.Error:
            if report is not None and rowid in found:
                report.unreadable += 1
            continue
        if row is not None:
            yield row


def _scan(src: sqlite3.Connection, table: str, names: list[str], key: Sequence[str]) -> list:
    """Rows of a table without rowids: a scan from each end, each stopping at a bad page."""
    at = [names.index(k) for k in key]
    rows: dict[tuple, tuple] = {}
    for direction in ("ASC", "DESC"):
        order = ", ".join(f"{k} {direction}" for k in key)
        try:
            for row in src.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY {order}"):
                rows.setdefault(tuple(row[i] for i in at), row)
        except sqlite3.Error:
            pass
    return list(rows.values())


def _count(src: sqlite3.Connection, table: str) -> int | None:
    """How many rows the damaged table had, counted through an index that can still be read
    (an index lives on pages of its own); None when none can. A bare ``count(*)`` would count
    the smallest b-tree whatever ``INDEXED BY`` says: the index's first column is named."""
    try:
        indexes = [
            r[0]
            for r in src.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
            )
        ]
    except sqlite3.Error:
        return None
    counts = []
    for name in indexes:
        try:
            first = src.execute(f'PRAGMA index_info("{name}")').fetchone()
            if first is None or not first[2]:
                continue
            sql = (
                f'SELECT count(*) FROM {table} INDEXED BY "{name}"'
                f' WHERE "{first[2]}" IS NOT NULL'
            )
            counts.append(src.execute(sql).fetchone()[0])
        except sqlite3.Error:
            continue
    return max(counts) if counts else None


def _insert(store: Target, table: str, names: list[str], rows: Iterable[tuple]) -> None:
    if not names:
        return
    sql = (
        f"INSERT OR IGNORE INTO {table}({', '.join(names)})"
        f" VALUES ({', '.join('?' * len(names))})"
    )
    batch: list[tuple] = []
    for row in rows:
        batch.append(tuple(row))
        if len(batch) >= BATCH:
            store.write(lambda c: c.executemany(sql, batch))
            batch = []
    if batch:
        store.write(lambda c: c.executemany(sql, batch))


def _complete(store: Target, saved: set[str]) -> None:
    """Saved entries whose chunks, search keys or session link were lost get them again."""
    if not saved:
        return
    from .chunking import chunk

    def lacking(table: str, column: str) -> list[Any]:
        return store.read(
            lambda c: c.execute(
                "SELECT id, session_id, created, cls, path, summary, original, context"
                f" FROM entries e WHERE NOT EXISTS (SELECT 1 FROM {table} x"
                f" WHERE x.{column} = e.id)"
            ).fetchall()
        )

    for eid, _sid, _created, cls, _path, _summary, original, context in lacking(
        "chunks", "entry_id"
    ):
        try:
            parts = chunk(original, ContentClass(cls))
        except Exception:  # noqa: BLE001 - a class this gardener does not know: one chunk
            parts = [original] if original.strip() else []
        rows = [(f"{eid}:{n}", eid, n, t, "" if n else context) for n, t in enumerate(parts)]
        _insert(store, "chunks", ["chunk_id", "entry_id", "n", "text", "context"], rows)
    for eid, _sid, _created, _cls, path, summary, _original, _context in lacking(
        "entry_keys", "entry_id"
    ):
        keys = priority.extract_keys(summary)
        if path:
            keys = priority.path_keys(path) + keys
        _insert(store, "entry_keys", ["key", "entry_id"], [(k, eid) for k in keys])
    links = [(sid, eid, created) for eid, sid, created, *_ in lacking("entry_sessions", "entry_id")]
    _insert(store, "entry_sessions", ["session_id", "entry_id", "first_seen"], links)
