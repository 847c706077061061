"""The store: one SQLite file per project holding every original the gardener compressed.

``<git root>/.aider.gardener/store.sqlite`` (or ``--gardener-store``), the folder 0700 with a
``.gitignore`` of ``*`` and the file 0600: originals can hold secrets a command printed. WAL and
short ``BEGIN IMMEDIATE`` transactions, so two Aider processes on one project both write; a store
another process keeps locked costs one wait per turn, and entries that could not be written then
wait in memory for ``flush_unwritten``. It never crashes the host: a corrupt file is set aside and
salvaged (``salvage.py``), an unwritable one opens read-only, a locked or newer one degrades to a
private in-memory store, and every public method logs one line and returns a neutral value.

Ids are content addressed (``pipeline.entry_id``), so a handle printed in a summary stays valid
and the same output ingested twice is one entry, linked to every session that met it. Full text
is FTS5 (``porter unicode61``) over the original, summary, path, the words inside identifiers
and a conversation turn's context; every query term is quoted, so user input is just text.
Design and measurements: docs/decisions/081-full-text-search.md and 082-sqlite-store.md.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import socket
import sqlite3
import sys
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .. import offline  # noqa: F401  (before tiktoken/chromadb load)
from ..preload import preload
from ..types import CompressionResult, CompressOptions, ContentClass, Source
from . import language, priority, token_states
from .gist import gist
from .query import (
    CONVERSATION_CLASSES,
    PREVIOUS_TURN_WINDOW,
    build_match,
    cjk_pairs,
    query_terms,
    quote_term,
)
from .salvage import salvage

log = logging.getLogger(__name__)

T = TypeVar("T")

STORE_DIRNAME = ".aider.gardener"
STORE_FILENAME = "store.sqlite"
SCHEMA_VERSION = 3
# quick_check reads every page; above this size opening would stall Aider's start-up, so large
# stores rely on SQLite reporting corruption when a damaged page is actually read.
QUICK_CHECK_MAX_BYTES = 64 << 20
DEFAULT_BUSY_TIMEOUT = 5.0
# What SQLite's own busy handler waits per attempt once the store is open; longer waits happen in
# ``_write``'s loop with the store's lock released between attempts (decision 082).
SQLITE_SLICE = 0.05
# Entries a busy store could not write, kept for ``flush_unwritten``: bounded, as a lock held
# all day must not grow the process without end (the oldest are then given up, and said so).
MAX_UNWRITTEN_BYTES = 64 << 20
GITIGNORE = ".gitignore"
GITIGNORE_TEXT = "# aider-gardener: originals may hold secrets; never commit this folder\n*\n"
# What the gardener itself puts in a store folder: a folder holding only these is the
# gardener's own even when it is not named ``.aider.gardener`` (``protect_folder``).
OWN_NAMES = re.compile(
    r"^(?:store\.sqlite.*|[^/]*\.(?:sqlite3?|db)(?:-wal|-shm|-journal|\.corrupt-.*)?|chroma"
    r"|chroma\.lock|checkpoints|shown|models|embedding-model|\.embedding-model\..*|\.gitignore)$"
)
# WAL checkpoints run in a background thread (they made ingest's slowest writes slow, decision
# 082); the inline auto-checkpoint stays as a bound (40 MB) in case that thread falls behind.
WAL_AUTOCHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT = 16 << 20  # truncate the -wal file back to this after a checkpoint
CHECKPOINT_COALESCE = 0.25  # seconds: one checkpoint for a burst of ingests
FTS_WEIGHTS = (1.0, 0.75, 2.0, 0.5, 1.0)  # original, summary, path, terms, context
CONTEXT_CHARS = 1000
# The embedded share is shorter: the vector of a one-line turn should stay mostly about that
# turn, and embedding cost grows with length (measured: decision 080).
EMBED_CONTEXT_CHARS = 400
# ``deleted_reason`` of an entry the user forgot, and of an entry hidden as a copy of one
# (``copy:<id>``); maintenance's TTL expiry writes 'ttl'.
FORGOTTEN = "forget"
COPY_OF = "copy:"
MIN_COPY_CHARS = 64
_MISSING: Any = object()

# --- Schema -----------------------------------------------------------------------------------

_V1 = (
    """CREATE TABLE sessions(
        id TEXT PRIMARY KEY,
        started REAL NOT NULL,
        last_seen REAL NOT NULL,
        pid INTEGER,
        host TEXT,
        cwd TEXT)""",
    """CREATE TABLE session_state(
        session_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value REAL NOT NULL DEFAULT 0,
        updated REAL,
        PRIMARY KEY(session_id, key)) WITHOUT ROWID""",
    # seq is the FTS5 content rowid: an explicit column because VACUUM may renumber implicit
    # rowids of a table without an INTEGER PRIMARY KEY, which would silently detach the index.
    # Column order matters: SQLite reaches a column by walking the row's overflow-page chain,
    # so the small columns every query filters on come first and the large texts last (with
    # them first, a filter on ``active`` read whole logs: decision 081).
    """CREATE TABLE entries(
        id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        created REAL NOT NULL,
        cls TEXT NOT NULL,
        role TEXT,
        command TEXT,
        tool TEXT,
        path TEXT,
        tokens_original INTEGER NOT NULL,
        tokens_summary INTEGER NOT NULL,
        ratio REAL NOT NULL,
        priority REAL NOT NULL,
        pinned INTEGER NOT NULL DEFAULT 0,
        last_access REAL NOT NULL,
        ttl REAL,
        active INTEGER NOT NULL DEFAULT 1,
        resolved INTEGER NOT NULL DEFAULT 0,
        resolved_at REAL,
        refs INTEGER NOT NULL DEFAULT 0,
        last_ref REAL,
        seen INTEGER NOT NULL DEFAULT 1,
        deleted_at REAL,
        deleted_reason TEXT,
        summary TEXT NOT NULL,
        terms TEXT NOT NULL DEFAULT '',
        original TEXT NOT NULL,
        raw BLOB)""",
    "CREATE INDEX entries_active_priority ON entries(active, priority)",
    "CREATE INDEX entries_cls ON entries(cls, active)",
    """CREATE TABLE entry_sessions(
        session_id TEXT NOT NULL,
        entry_id TEXT NOT NULL,
        first_seen REAL NOT NULL,
        PRIMARY KEY(session_id, entry_id)) WITHOUT ROWID""",
    "CREATE INDEX entry_sessions_entry ON entry_sessions(entry_id)",
    """CREATE TABLE entry_keys(
        key TEXT NOT NULL,
        entry_id TEXT NOT NULL,
        PRIMARY KEY(key, entry_id)) WITHOUT ROWID""",
    "CREATE INDEX entry_keys_entry ON entry_keys(entry_id)",
    """CREATE TABLE chunks(
        chunk_id TEXT PRIMARY KEY,
        entry_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        text TEXT NOT NULL,
        embedded INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX chunks_entry ON chunks(entry_id)",
    "CREATE INDEX chunks_pending ON chunks(embedded) WHERE embedded = 0",
    """CREATE VIRTUAL TABLE entries_fts USING fts5(
        original, summary, path, terms,
        content='entries', content_rowid='seq',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
        INSERT INTO entries_fts(rowid, original, summary, path, terms)
        VALUES (new.seq, new.original, new.summary, coalesce(new.path, ''), new.terms);
    END""",
    """CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, original, summary, path, terms)
        VALUES ('delete', old.seq, old.original, old.summary, coalesce(old.path, ''), old.terms);
    END""",
    # Only the indexed columns re-index: touching last_access or priority must stay cheap.
    """CREATE TRIGGER entries_fts_update AFTER UPDATE OF original, summary, path, terms
        ON entries BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, original, summary, path, terms)
        VALUES ('delete', old.seq, old.original, old.summary, coalesce(old.path, ''), old.terms);
        INSERT INTO entries_fts(rowid, original, summary, path, terms)
        VALUES (new.seq, new.original, new.summary, coalesce(new.path, ''), new.terms);
    END""",
)

# v2: the session's structured facts (continuity/facts.py; read and written by continuity/sync.py).
_V2 = (
    """CREATE TABLE facts(
        session_id TEXT NOT NULL,
        id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        text TEXT NOT NULL,
        turn INTEGER NOT NULL,
        entry_id TEXT,
        status TEXT NOT NULL,
        superseded_by INTEGER,
        detail TEXT NOT NULL DEFAULT '{}',
        created REAL NOT NULL,
        PRIMARY KEY(session_id, id)) WITHOUT ROWID""",
)

# v3: the turn a conversation turn answers, indexed with it (see ``CONVERSATION_CLASSES``). FTS5
# cannot add a column, so the index is rebuilt over the new column set. The first chunk keeps a
# copy, which the embedding worker appends to the text it embeds: an added column sits after the
# original and raw bytes, so reading ``entries.context`` in the queue would read every row whole.
_V3 = (
    "ALTER TABLE entries ADD COLUMN context TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE chunks ADD COLUMN context TEXT NOT NULL DEFAULT ''",
    "DROP TRIGGER IF EXISTS entries_fts_insert",
    "DROP TRIGGER IF EXISTS entries_fts_delete",
    "DROP TRIGGER IF EXISTS entries_fts_update",
    "DROP TABLE IF EXISTS entries_fts",
    """CREATE VIRTUAL TABLE entries_fts USING fts5(
        original, summary, path, terms, context,
        content='entries', content_rowid='seq',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER entries_fts_insert AFTER INSERT ON entries BEGIN
        INSERT INTO entries_fts(rowid, original, summary, path, terms, context)
        VALUES (new.seq, new.original, new.summary, coalesce(new.path, ''), new.terms,
                new.context);
    END""",
    """CREATE TRIGGER entries_fts_delete AFTER DELETE ON entries BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, original, summary, path, terms, context)
        VALUES ('delete', old.seq, old.original, old.summary, coalesce(old.path, ''), old.terms,
                old.context);
    END""",
    """CREATE TRIGGER entries_fts_update AFTER UPDATE OF original, summary, path, terms, context
        ON entries BEGIN
        INSERT INTO entries_fts(entries_fts, rowid, original, summary, path, terms, context)
        VALUES ('delete', old.seq, old.original, old.summary, coalesce(old.path, ''), old.terms,
                old.context);
        INSERT INTO entries_fts(rowid, original, summary, path, terms, context)
        VALUES (new.seq, new.original, new.summary, coalesce(new.path, ''), new.terms,
                new.context);
    END""",
    "INSERT INTO entries_fts(entries_fts) VALUES ('rebuild')",
)

# Each migration takes the schema from version-1 to version; append, never edit a shipped one.
MIGRATIONS: list[tuple[int, Sequence[str]]] = [(1, _V1), (2, _V2), (3, _V3)]


class StoreError(Exception):
    """An internal store problem the public methods turn into one log line."""


class StoreBusy(StoreError):
    """Another process kept the store locked for longer than ``busy_timeout``."""


class StoreTooNew(StoreError):
    """The file was written by a newer gardener whose schema this one does not know."""


class StoreCorrupt(StoreError):
    pass


class StoreReadOnly(StoreError):
    """The store was opened read-only (it could not be written); said once, at open."""


# --- Entry ------------------------------------------------------------------------------------


@dataclass
class Entry:
    """One stored original and what the gardener knows about it (one row of ``entries``)."""

    id: str
    session_id: str
    created: float
    cls: str
    role: str | None
    command: str | None
    tool: str | None
    path: str | None
    original: str
    raw: bytes | None
    summary: str
    tokens_original: int
    tokens_summary: int
    ratio: float
    priority: float
    pinned: bool
    last_access: float
    ttl: float | None
    active: bool
    resolved: bool
    resolved_at: float | None = None
    refs: int = 0
    last_ref: float | None = None
    seen: int = 1
    deleted_at: float | None = None
    deleted_reason: str | None = None
    stored: bool = True  # not a column: False when the store could not keep this entry
    # Not a column either: why it was not kept. "busy" (another process held the lock: kept in
    # memory and written by ``flush_unwritten``), "full" (disk full or I/O error), "read-only",
    # "closed" or "error".
    not_stored: str | None = None

    @property
    def source(self) -> Source:
        return Source(role=self.role, command=self.command, path=self.path)

    @property
    def data(self) -> str | bytes:
        """What was ingested: the original bytes for binary or undecodable input, else text."""
        return self.raw if self.raw is not None else self.original


ENTRY_COLUMNS: tuple[str, ...] = tuple(
    f.name for f in fields(Entry) if f.name not in ("stored", "not_stored")
)
_SELECT_ENTRY = "SELECT " + ", ".join(ENTRY_COLUMNS) + " FROM entries"
_BOOL_COLUMNS = {"pinned", "active", "resolved"}


def _entry(row: Sequence[Any]) -> Entry:
    values = dict(zip(ENTRY_COLUMNS, row))
    for name in _BOOL_COLUMNS:
        values[name] = bool(values[name])
    return Entry(**values)


# --- Locations --------------------------------------------------------------------------------


def find_git_root(start: Path | str | None = None) -> Path | None:
    path = Path(start or Path.cwd()).resolve()
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def resolve_location(
    location: str | Path | None = None, root: str | Path | None = None
) -> tuple[Path, Path]:
    """(folder, sqlite file) for ``--gardener-store PATH`` (a folder, or a file ending in
    ``.sqlite``/``.db``) or, by default, ``.aider.gardener/`` under the git root of ``root``
    (the current directory when not given; the directory itself outside a repository)."""
    if location is not None:
        p = Path(location).expanduser()
        if p.suffix in (".sqlite", ".sqlite3", ".db") or p.is_file():
            return p.parent.resolve(), p.resolve()
        return p.resolve(), p.resolve() / STORE_FILENAME
    base = Path(root).expanduser() if root is not None else None
    top = find_git_root(base) or (base or Path.cwd()).resolve()
    folder = top / STORE_DIRNAME
    return folder, folder / STORE_FILENAME


def new_session_id() -> str:
    """Sortable by start time and printable: ``20250101-120000-a1b2``."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def _tool_name(command: str | None) -> str | None:
    """``/run python -m pytest -x`` -> ``pytest``; ``npm test`` -> ``npm``."""
    if not command:
        return None
    words = [w for w in command.strip().lstrip("/").split() if "=" not in w]
    if words and words[0] in ("run", "test", "sudo", "env", "time", "exec"):
        words = words[1:]
    if len(words) >= 3 and words[1] == "-m" and Path(words[0]).name.startswith("python"):
        return words[2]
    return Path(words[0]).name if words else None


def _is_busy(err: BaseException) -> bool:
    msg = str(err).lower()
    return "locked" in msg or "busy" in msg


def _is_corrupt(err: BaseException) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    # the attribute and the constants are Python 3.11's (on 3.10 code is None)
    if (
        sys.version_info >= (3, 11)
        and code is not None
        and code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    ):
        return True
    msg = str(err).lower()
    return "not a database" in msg or "malformed" in msg or "corrupt" in msg


_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EIO}
_READ_ONLY_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS}


def write_problem(err: BaseException) -> str | None:
    """ "full" (disk full or I/O error: SQLite says "disk I/O error" when a full disk will not
    let it grow the -shm file), "read-only", or None when ``err`` is about something else."""
    if isinstance(err, StoreReadOnly):
        return "read-only"
    if isinstance(err, OSError):
        if err.errno in _FULL_ERRNOS:
            return "full"
        if err.errno in _READ_ONLY_ERRNOS:
            return "read-only"
        return None
    if not isinstance(err, sqlite3.Error):
        return None
    name = getattr(err, "sqlite_errorname", "") or ""
    msg = str(err).lower()
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or "disk is full" in msg:
        return "full"
    if "disk i/o error" in msg:
        return "full"
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
        return "read-only"
    if "readonly" in msg or "read-only" in msg or "unable to open database file" in msg:
        return "read-only"
    return None


def describe_problem(kind: str | None, path: Path | None, err: BaseException) -> str:
    """The cause as a user should read it, naming the file: "disk full or I/O error: PATH (…)"
    rather than SQLite's bare "disk I/O error"."""
    detail = f"{type(err).__name__}: {err}"
    if kind == "full":
        return f"disk full or I/O error: {path} ({detail})"
    if kind == "read-only":
        return f"{path} is read-only ({detail})"
    return f"{path} ({detail})"


def protect_folder(folder: Path, created: bool = False) -> bool:
    """Put a ``.gitignore`` of ``*`` in the store folder, so ``git add -A`` never stages the
    store, its checkpoints or the outputs it holds, whatever the project's own ignore rules
    (Aider adds ``.aider*`` only when its offer is accepted, never under ``--no-gitignore``).
    Only in a folder that is the gardener's: one it just made, one named ``.aider.gardener``,
    or one holding nothing but the gardener's files (``--gardener-store x.sqlite`` in the
    project root must not hide the project). True when it wrote one; never raises."""
    try:
        folder = Path(folder)
        target = folder / GITIGNORE
        if target.exists() or not folder.is_dir():
            return False
        if not created and folder.name != STORE_DIRNAME:
            if any(not OWN_NAMES.match(p.name) for p in folder.iterdir()):
                return False
        tmp = folder / f".gitignore.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, GITIGNORE_TEXT.encode("ascii"))
        finally:
            os.close(fd)
        os.replace(tmp, target)
        return True
    except OSError as err:  # a read-only or full folder: nothing can be committed from it now
        log.debug("gardener: no .gitignore in %s: %s", folder, err)
        return False


def _search_terms(original: str) -> str:
    """What ``entries.terms`` indexes besides the text: the words of camelCase identifiers and
    the character pairs of CJK runs (``query.cjk_pairs``), which unicode61 cannot split."""
    return "\n".join(t for t in (priority.camel_terms(original), cjk_pairs(original)) if t)


def _storable(text: str) -> tuple[str, bytes | None]:
    """SQLite text must be valid UTF-8; lone surrogates (from surrogateescape decoding) are kept
    exactly in the returned bytes and replaced in the text."""
    try:
        text.encode("utf-8")
        return text, None
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
        return text.encode("utf-8", "replace").decode("utf-8"), raw


class _Gist(str):
    """An entry's gist among its chunks: stored as chunk -1, so the embedding policy's head and
    tail (``worker.py``) count the output's own chunks and the gist is always embedded."""


def _numbered(chunks: list[str]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    n = 0
    for text in chunks:
        if isinstance(text, _Gist):
            out.append((-1, text))
        else:
            out.append((n, text))
            n += 1
    return out


def _batched(items: Sequence[T], size: int = 500) -> Iterable[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# --- The store --------------------------------------------------------------------------------


class Store:
    """One project's store, used by one Aider process (one session).

    Thread safe: one connection guarded by a lock, shared by the caller, the maintenance thread
    and the embedding worker; transactions are a few milliseconds, so serializing them costs less
    than juggling per-thread connections. Process safe through SQLite's WAL locking.

    ``location``: a folder or sqlite file (``--gardener-store``); default ``.aider.gardener``
    under the git root of ``root``. ``":memory:"`` gives a private store (tests, degraded mode).
    ``scope``: what recall and the pressure report see, this ``"session"`` or the whole
    ``"project"`` (earlier sessions included). ``vectors``: open the vector index and embedding
    worker (False for the store core alone). Background maintenance is started by its caller
    (``maintenance.start``), which attaches it so that ``close`` stops it.
    """

    def __init__(
        self,
        location: str | Path | None = None,
        *,
        root: str | Path | None = None,
        session_id: str | None = None,
        scope: str = "project",
        vectors: bool = True,
        chroma_url: str | None = None,
        model: str = "gpt-4o",
        project_root: str | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        if scope not in ("session", "project"):
            raise ValueError(f"scope must be 'session' or 'project', not {scope!r}")
        preload()  # before this store starts its threads (see aider_gardener.preload)
        self.scope = scope
        self.model = model
        self.busy_timeout = float(busy_timeout)
        self.session_id = session_id or new_session_id()
        self.degraded: str | None = None
        self.read_only: str | None = None  # why, when the file could only be opened read-only
        self.salvaged: Any = None  # salvage.Salvaged, when a corrupt file was salvaged at open
        # Waits for another process's lock, per thread name: what a turn paid for a busy store.
        self.busy_waits: Counter[str] = Counter()
        self._busy_turn = False  # gave up waiting this turn: try once, never wait again
        self._busy_said = False  # the busy line was logged; cleared by a write that succeeds
        self._unwritten: OrderedDict[str, tuple] = OrderedDict()
        self._unwritten_bytes = 0
        self._unwritten_dropped: list[str] = []
        self._unwritten_lock = threading.Lock()
        self.vectors: Any = None
        # Only a process that embeds learns the language (``_note_language``): a hook process
        # (no vectors) would pay py3langid's 0.5 s load for every prompt.
        self._detect_language = vectors
        self._worker: Any = None
        self._attached: list[Any] = []  # helpers close() stops first (maintenance)
        self._checkpointer: _Checkpointer | None = None
        self._warned: set[str] = set()
        self._hidden: frozenset[str] | None = None  # hidden_ids() cache
        self._lock = threading.RLock()
        self._closed = False
        self._conn: sqlite3.Connection | None = None
        if location is not None and str(location) == ":memory:":
            self.dir = Path(project_root or Path.cwd()).resolve() / STORE_DIRNAME
            self.path: Path | None = None
        else:
            self.dir, self.path = resolve_location(location, root)
        self.project_root = project_root or str(self.dir.parent)
        self._open()
        self._register_session()
        if vectors and self.path is not None and self.degraded is None:
            self._open_vectors(chroma_url)
        if self.path is not None and self.degraded is None:
            self._checkpointer = _Checkpointer(self.path, self.busy_timeout)
            self._checkpointer.start()
            self.guard(
                "open",
                None,
                lambda: self._read(
                    lambda c: c.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
                ),
            )

    # -- opening -------------------------------------------------------------------------------

    def _connect(self, target: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            target, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        priority.register(conn)
        return conn

    def _open(self) -> None:
        """Open (creating or migrating) the file; on any failure degrade, never raise."""
        if self.path is None:
            self._open_memory(None)
            return
        locked = (
            f"gardener: store {self.path} is locked by another process; using a temporary "
            "in-memory store for this session (nothing will be kept)"
        )
        aside: tuple[Path | None, BaseException] | None = None
        for attempt in range(2):
            conn = None
            try:
                existed = self.dir.is_dir()
                self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
                protect_folder(self.dir, created=not existed)
                _create_private(self.path)
                conn = self._connect(str(self.path))
                self._prepare(conn, check=True)
                conn.execute(f"PRAGMA busy_timeout = {int(SQLITE_SLICE * 1000)}")
                self._conn = conn
                if aside is not None:
                    self._salvage(*aside)
                return
            except Exception as err:  # noqa: BLE001 - sorted below; opening must not raise
                if conn is not None:
                    conn.close()
                corrupt = isinstance(err, StoreCorrupt) or (
                    isinstance(err, sqlite3.DatabaseError) and _is_corrupt(err)
                )
                if corrupt and attempt == 0:
                    try:
                        aside = (self._move_aside(), err)
                        continue
                    except OSError as move_err:
                        err = move_err
                if aside is not None and aside[0] is not None:
                    log.warning(
                        "gardener: store %s was corrupt (%s); moved it to %s",
                        self.path,
                        aside[1],
                        aside[0].name,
                    )
                problem = write_problem(err)
                if isinstance(err, StoreBusy) or (
                    isinstance(err, sqlite3.OperationalError) and _is_busy(err)
                ):
                    self._open_memory(locked)
                elif isinstance(err, StoreTooNew):
                    self._open_memory(f"gardener: {err}; using a temporary in-memory store")
                elif problem is not None and self._open_read_only(problem, err):
                    pass
                else:
                    what = describe_problem(problem, self.path, err)
                    self._open_memory(
                        f"gardener: cannot open store {what}; using a temporary in-memory store"
                        " for this session"
                        if problem is None
                        else f"gardener: {what}: cannot open the store; using a temporary"
                        " in-memory store for this session"
                    )
                return

    def _open_read_only(self, problem: str, err: BaseException) -> bool:
        """A store that cannot be written (read-only file or folder, disk full) is still read:
        recall keeps finding what earlier sessions stored (it used to open an empty in-memory
        store instead). ``mode=ro`` needs the -shm file to exist or be creatable; where it is
        not, ``immutable=1`` reads the main file alone, which is only right while no -wal file
        holds committed pages. False when neither can read it (the caller degrades further)."""
        assert self.path is not None
        if not self.path.is_file():
            return False
        wal = self.path.with_name(self.path.name + "-wal")
        uris = [self.path.as_uri() + "?mode=ro"]
        if not wal.exists() or wal.stat().st_size == 0:
            uris.append(self.path.as_uri() + "?immutable=1")
        for uri in uris:
            conn = None
            try:
                conn = sqlite3.connect(
                    uri,
                    uri=True,
                    timeout=self.busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                priority.register(conn)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version != SCHEMA_VERSION:  # an older schema cannot be migrated read-only
                    raise StoreError(f"schema version {version}, not {SCHEMA_VERSION}")
                conn.execute("SELECT count(*) FROM entries").fetchone()
                conn.execute("PRAGMA temp_store = MEMORY")
            except Exception as ro_err:  # noqa: BLE001 - try the next way, then degrade
                log.debug("gardener: read-only open %s failed: %s", uri, ro_err)
                if conn is not None:
                    conn.close()
                continue
            reason = describe_problem(problem, self.path, err)
            message = (
                f"gardener: {reason}: store opened read-only; recall still finds what it"
                " holds, but new output is not kept (it enters the chat compressed)"
            )
            log.warning(message)
            self.read_only = self.degraded = message
            self._conn = conn
            return True
        return False

    def _open_memory(self, reason: str | None) -> None:
        if reason:
            log.warning(reason)
            self.degraded = reason
        conn = self._connect(":memory:")
        self._prepare(conn, check=False)
        self._conn = conn

    def _prepare(self, conn: sqlite3.Connection, check: bool) -> None:
        fresh = conn.execute("PRAGMA page_count").fetchone()[0] == 0
        if fresh:
            # Must precede the first table; lets maintenance give freed pages back cheaply.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        conn.execute("PRAGMA temp_store = MEMORY")
        if check and not fresh and self.path is not None:
            if self.path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
                rows = conn.execute("PRAGMA quick_check(1)").fetchall()
                if not rows or rows[0][0] != "ok":
                    raise StoreCorrupt(f"quick_check: {rows[0][0] if rows else 'no answer'}")
        self._migrate(conn)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current > SCHEMA_VERSION:
            raise StoreTooNew(
                f"store {self.path} has schema version {current}, newer than this "
                f"aider-gardener understands ({SCHEMA_VERSION})"
            )
        for version, statements in MIGRATIONS:
            if version <= current:
                continue

            def step(c: sqlite3.Connection, version=version, statements=statements) -> None:
                # Another process may have migrated while we waited for the write lock.
                if c.execute("PRAGMA user_version").fetchone()[0] >= version:
                    return
                for sql in statements:
                    c.execute(sql)
                c.execute(f"PRAGMA user_version = {int(version)}")

            self._write(step, conn=conn)
            current = version

    def _move_aside(self) -> Path | None:
        """Move the damaged file (and its -wal) aside, byte for byte; None when another
        process moved it first (that process salvages it)."""
        assert self.path is not None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
            n += 1
        try:
            os.replace(self.path, target)
        except FileNotFoundError:
            return None
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            try:
                if suffix == "-wal":
                    os.replace(side, target.with_name(target.name + suffix))
                else:
                    side.unlink()
            except FileNotFoundError:
                pass
        return target

    def _salvage(self, target: Path | None, err: BaseException) -> None:
        """Copy what the damaged file still holds into the fresh store; one line says how
        much came back and where the damaged file is kept (it used to say only the latter:
        every old entry dropped out of recall for one bad page)."""
        if target is None:
            log.warning(
                "gardener: store %s was corrupt; another process set it aside and salvages it",
                self.path,
            )
            return
        try:
            self.salvaged = salvage(target, self)
            saved = self.salvaged.summary()
        except Exception as salvage_err:  # noqa: BLE001 - a fresh store is still a store
            log.debug("gardener: salvage of %s failed", target, exc_info=True)
            saved = f"salvaging it failed ({type(salvage_err).__name__}: {salvage_err})"
        log.warning(
            "gardener: store %s was corrupt (%s); %s; the damaged file is kept as %s",
            self.path,
            " ".join(str(err).split()),
            saved,
            target.name,
        )

    def _open_vectors(self, chroma_url: str | None) -> None:
        """B's vector index and embedding worker. Any failure leaves FTS5-only recall."""
        try:
            from . import vectors as vectors_mod

            index = vectors_mod.open_index(self.dir, chroma_url)
        except Exception as err:  # noqa: BLE001 - a missing extra must not stop the store
            self.warn_once("vectors", f"gardener: vector search unavailable ({err}); FTS5 only")
            return
        if index is None:
            return
        self.vectors = index
        switched = self.guard("model", None, self._follow_model)
        try:
            from .worker import EmbeddingWorker

            self._worker = EmbeddingWorker(self, index)
            if switched:
                self._worker._note(switched)
            self._worker.start()
        except Exception as err:  # noqa: BLE001
            self.warn_once("worker", f"gardener: embedding worker failed to start ({err})")
            self._worker = None

    def _follow_model(self) -> str | None:
        """Keep the chunks' ``embedded`` flags about the model this process embeds with
        (``model_choice``): after a switch every indexed or failed chunk is queued again, for
        the new model's collection. Returns the line that tells the user, or None."""
        from . import model_choice

        key = model_choice.active()
        before = model_choice.recorded(self.dir)
        if before == key:
            return None
        previous = before or model_choice.DEFAULT  # stores older than the marker: MiniLM
        queued = 0
        if previous != key:

            def step(c: sqlite3.Connection) -> int:
                return c.execute(
                    "UPDATE chunks SET embedded = 0 WHERE embedded IN (1, -1)"
                ).rowcount

            queued = self._write(step)
        model_choice.record(self.dir, key)
        if previous == key or (before is None and not queued):  # a new store: nothing to say
            return None
        return (
            f"gardener: embedding model is now {model_choice.display_name(key)} (was"
            f" {model_choice.display_name(previous)}): re-indexing {queued:,}"
            f" chunk{'' if queued == 1 else 's'} in the background; full-text recall finds"
            f" {'it' if queued == 1 else 'them'} meanwhile"
        )

    def _register_session(self) -> None:
        now = time.time()

        def step(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO sessions(id, started, last_seen, pid, host, cwd) VALUES (?,?,?,?,?,?)"
                " ON CONFLICT(id) DO UPDATE SET last_seen = excluded.last_seen,"
                " pid = excluded.pid",
                (self.session_id, now, now, os.getpid(), socket.gethostname(), os.getcwd()),
            )

        self.guard("session", None, lambda: self._write(step))

    # -- plumbing ------------------------------------------------------------------------------

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    def guard(self, what: str, default: T, fn: Callable[[], T]) -> T:
        """Run a public operation; an internal failure becomes one log line and ``default``. A
        busy or read-only store was said once already (the busy line, the open line): its
        failures are silent here, or every skipped step would add a line of its own."""
        if self._closed:
            return default
        try:
            return fn()
        except (StoreBusy, StoreReadOnly):
            return default
        except Exception as err:  # noqa: BLE001 - the gardener must never crash the host
            self.warn_once(
                what, f"gardener: store {what} failed ({type(err).__name__}: {err}); continuing"
            )
            return default

    def new_turn(self) -> None:
        """The caller's next unit of work began (Aider: the user's next input): a store found
        busy earlier may be waited for once more."""
        self._busy_turn = False

    @property
    def busy(self) -> bool:
        """Another process held the lock past ``busy_timeout`` and no write has succeeded
        since: writes are being skipped (entries queued for ``flush_unwritten``)."""
        return self._busy_said

    def _gave_up(self, started: float, opening: bool = False) -> StoreBusy:
        """Waiting for another process's lock timed out: skip the rest of this turn's waits,
        and say so once until a write gets through again (at open, ``_open`` says it)."""
        if opening:
            return StoreBusy(f"store locked by another process for over {self.busy_timeout:g} s")
        self._busy_turn = True
        if not self._busy_said:
            self._busy_said = True
            waited = time.monotonic() - started
            log.warning(
                "gardener: store %s is locked by another process (waited %s s): store work is"
                " skipped for the rest of this turn; entries that could not be written are kept"
                " and written once it is free",
                self.path,
                f"{waited:.0f}" if waited >= 1 else f"{waited:.1f}",
            )
        return StoreBusy(f"store locked by another process for over {self.busy_timeout:g} s")

    def _got_through(self) -> None:
        if self._busy_turn or self._busy_said:
            if self._busy_said:
                log.info("gardener: store %s is writable again", self.path)
            self._busy_turn = self._busy_said = False

    def _write(
        self, fn: Callable[[sqlite3.Connection], T], conn: sqlite3.Connection | None = None
    ) -> T:
        """Run ``fn`` in one short ``BEGIN IMMEDIATE`` transaction, retrying while another
        process holds the write lock until ``busy_timeout`` has passed, or trying once when
        this turn already waited that long (see the module docstring). The store's lock is
        released between attempts, so other threads' reads and writes go on meanwhile."""
        if self.read_only is not None and conn is None:
            raise StoreReadOnly(self.read_only)
        started = time.monotonic()
        quick = self._busy_turn and conn is None
        deadline = started + (0.0 if quick else self.busy_timeout)
        delay = 0.005
        waited = False
        while True:
            with self._lock:
                c = conn or self._conn
                if c is None:
                    raise StoreError("store is closed")
                try:
                    c.execute("BEGIN IMMEDIATE")
                    try:
                        out = fn(c)
                        c.execute("COMMIT")
                    except BaseException:
                        if c.in_transaction:
                            c.execute("ROLLBACK")
                        raise
                except sqlite3.OperationalError as err:
                    if not _is_busy(err):
                        raise
                    busy_err = err
                else:
                    if conn is None:
                        self._got_through()
                    return out
            now = time.monotonic()
            if now >= deadline:
                raise self._gave_up(started, opening=conn is not None) from busy_err
            if not waited:
                waited = True
                self.busy_waits[threading.current_thread().name] += 1
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 0.1)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the connection; WAL readers are not blocked by a writer, so this
        waits only for the rare lock a reader needs (recovery, another process in exclusive
        locking mode), under the same once-per-turn rule as ``_write``."""
        started = time.monotonic()
        deadline = started + (0.0 if self._busy_turn else self.busy_timeout)
        waited = False
        while True:
            with self._lock:
                if self._conn is None:
                    raise StoreError("store is closed")
                try:
                    return fn(self._conn)
                except sqlite3.OperationalError as err:
                    if not _is_busy(err):
                        raise
                    busy_err = err
            now = time.monotonic()
            if now >= deadline:
                raise self._gave_up(started) from busy_err
            if not waited:
                waited = True
                self.busy_waits[threading.current_thread().name] += 1
            time.sleep(min(0.02, deadline - now))

    # For the store package's own modules (maintenance, pressure): guarded, retried access.
    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._write(fn)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._read(fn)

    def _scope_sql(self, alias: str = "e") -> tuple[str, tuple]:
        if self.scope == "session":
            return (
                f" AND {alias}.id IN (SELECT entry_id FROM entry_sessions WHERE session_id = ?)",
                (self.session_id,),
            )
        return "", ()

    # -- ingest --------------------------------------------------------------------------------

    def ingest(
        self,
        data: str | bytes,
        source: Source | None = None,
        *,
        cls: ContentClass | str | None = None,
        tool: str | None = None,
        opts: CompressOptions | None = None,
        pinned: bool = False,
        ttl: float | None = _MISSING,
        reply_to: str | None = None,
    ) -> Entry:
        """Compress ``data`` (classify + class compressor, ``pipeline.compress``) and store the
        original, its summary and its embedding chunks in one transaction. Never raises.

        ``reply_to``: the turn a conversation turn answers, when the caller knows it better than
        "this session's previous entry" (Claude Code stores a turn's tool outputs between a
        prompt and its reply); indexed as the turn's context exactly as that entry would be.

        ``ttl``: seconds after the last access before maintenance expires the entry; default per
        class (``priority.DEFAULT_TTL``), None keeps it until forgotten."""
        from ..pipeline import compress

        source = source or (opts.source if opts is not None else Source())
        if opts is None:
            opts = CompressOptions(model=self.model, source=source, project_root=self.project_root)
        forced = ContentClass(cls) if cls is not None else None
        try:
            result = compress(data, source, opts, forced)
        except Exception as err:  # noqa: BLE001 - pipeline promises not to raise; belt and braces
            self.warn_once("compress", f"gardener: compression failed ({err}); storing verbatim")
            result = _verbatim(data, forced)
        entry = self._new_entry(result, data, source, tool, pinned, ttl)
        if self._closed:
            entry.stored, entry.not_stored = False, "closed"
            return entry
        if self.read_only is not None:  # said at open; chunking would be work for nothing
            entry.stored, entry.not_stored = False, "read-only"
            return entry
        chunks = self._chunk(entry.original, result.cls)
        chunks += self._gist(entry, chunks)
        keys = priority.extract_keys(entry.summary)
        if entry.path:
            keys = priority.path_keys(entry.path) + keys
        try:
            stored = self._write(lambda c: self._insert(c, entry, chunks, keys, reply_to))
        except Exception as err:  # noqa: BLE001
            entry.stored = False
            if isinstance(err, StoreBusy):
                entry.not_stored = "busy"  # the busy line said so; written once it is free
                self._keep_unwritten(entry, chunks, keys, reply_to)
                return entry
            problem = write_problem(err)
            entry.not_stored = problem or "error"
            self.warn_once(
                "ingest",
                f"gardener: could not store entry {entry.id}"
                f" ({describe_problem(problem, self.path, err)}); its original is not kept",
            )
            return entry
        self._stored_one(bool(chunks))
        turn = source.role == "user" and str(result.cls) in CONVERSATION_CLASSES
        if turn and self._detect_language:
            self.guard("language", None, lambda: self._note_language(entry.original))
        return stored

    def _note_language(self, text: str) -> None:
        """Count the language of a user's turn; once most of the store's are one other than
        English, record it for ``model_choice`` and say so once (``language.py``)."""
        from . import model_choice

        if self.dir is None or language.recorded(self.dir):
            return
        code = language.detect(text)
        if code is None:
            return
        self.bump(f"lang:{code}")
        rows: list[tuple[str, int]] = self.guard(
            "language",
            [],
            lambda: self._read(
                lambda c: c.execute(
                    "SELECT substr(key, 6), sum(value) FROM session_state"
                    " WHERE key LIKE 'lang:%' GROUP BY key"
                ).fetchall()
            ),
        )
        tally = {k: int(v) for k, v in rows}  # every session of the project's store
        decided = language.decide(tally)
        if decided is None or decided == language.ENGLISH:
            return
        language.record(self.dir, decided)
        if model_choice.by_language(self.dir) and model_choice.active() != model_choice.E5:
            self.warn_once(
                "language",
                f"gardener: this project's sessions are in {language.name(decided)}: from the"
                f" next session on, recall by meaning uses {model_choice.MODELS[model_choice.E5]}"
                " (--gardener-embedder minilm keeps MiniLM)",
            )

    def _stored_one(self, chunks: bool) -> None:
        if self._checkpointer is not None:
            self._checkpointer.poke()
        if self._worker is not None and chunks:
            self._worker.notify()  # embed now rather than at the worker's next poll

    # -- entries a busy store could not write ----------------------------------------------------

    def _keep_unwritten(self, entry: Entry, chunks: list[str], keys: list[str], reply_to) -> None:
        size = len(entry.original) + len(entry.raw or b"") + sum(len(t) for t in chunks)
        with self._unwritten_lock:
            if entry.id in self._unwritten:
                return
            self._unwritten[entry.id] = (entry, chunks, keys, reply_to, size)
            self._unwritten_bytes += size
            while self._unwritten_bytes > MAX_UNWRITTEN_BYTES and len(self._unwritten) > 1:
                eid, item = self._unwritten.popitem(last=False)
                self._unwritten_bytes -= item[-1]
                self._unwritten_dropped.append(eid)
                self.warn_once(
                    "unwritten",
                    f"gardener: the store stayed locked while over {MAX_UNWRITTEN_BYTES >> 20} MB"
                    " waited to be written; the oldest entries are given up (their summaries"
                    " stay in the chat)",
                )

    def unwritten_count(self) -> int:
        """Entries kept in memory because the store was busy, waiting for ``flush_unwritten``."""
        return len(self._unwritten) + len(self._unwritten_dropped)

    def flush_unwritten(self) -> tuple[list[Entry], list[str]]:
        """Write the entries a busy store could not take, oldest first, stopping at the first
        that still finds it busy. Returns (entries written now, ids given up for good: over
        ``MAX_UNWRITTEN_BYTES``, or failing for another reason)."""
        with self._unwritten_lock:
            items = list(self._unwritten.values())
            dropped, self._unwritten_dropped = self._unwritten_dropped, []
        written: list[Entry] = []
        for entry, chunks, keys, reply_to, size in items:
            try:
                row = self._write(lambda c: self._insert(c, entry, chunks, keys, reply_to))
            except StoreBusy:
                break
            except Exception as err:  # noqa: BLE001 - e.g. the disk filled meanwhile
                problem = write_problem(err)
                self.warn_once(
                    "ingest",
                    f"gardener: could not store entry {entry.id}"
                    f" ({describe_problem(problem, self.path, err)}); its original is not kept",
                )
                dropped.append(entry.id)
            else:
                written.append(replace(row, stored=True, not_stored=None))
                self._stored_one(bool(chunks))
            with self._unwritten_lock:
                if self._unwritten.pop(entry.id, None) is not None:
                    self._unwritten_bytes -= size
        return written, dropped

    def _new_entry(self, result, data, source, tool, pinned, ttl) -> Entry:
        now = time.time()
        original, raw = _storable(result.original)
        raw = getattr(result, "raw", None) or raw
        if raw is None and isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            if original.encode("utf-8") != data:
                raw = data  # binary, UTF-16 or invalid UTF-8: the text is not the whole story
        summary, _ = _storable(result.summary)
        cls = result.cls.value if isinstance(result.cls, ContentClass) else str(result.cls)
        if ttl is _MISSING:
            ttl = priority.DEFAULT_TTL.get(cls)
        return Entry(
            id=result.entry_id,
            session_id=self.session_id,
            created=now,
            cls=cls,
            role=source.role,
            command=source.command,
            tool=tool or _tool_name(source.command),
            path=source.path,
            original=original,
            raw=raw,
            summary=summary,
            tokens_original=result.tokens_original,
            tokens_summary=result.tokens_summary,
            ratio=result.ratio,
            priority=priority.score(cls, created=now, last_access=now, now=now, pinned=pinned),
            pinned=bool(pinned),
            last_access=now,
            ttl=ttl,
            active=True,
            resolved=False,
        )

    def _gist(self, entry: Entry, chunks: list[str]) -> list[str]:
        """The entry's gist as one more chunk to embed (``gist.py``); none for an entry with
        no chunk (nothing to embed) or when making it fails."""
        if not chunks:
            return []
        try:
            text = gist(entry.original, str(entry.cls), entry.role, entry.command)
        except Exception as err:  # noqa: BLE001 - the chunks alone still find the entry
            self.warn_once("gist", f"gardener: no gist for recall by meaning ({err})")
            return []
        return [_Gist(text)] if text and text not in chunks else []

    def _chunk(self, text: str, cls: ContentClass) -> list[str]:
        try:
            from .chunking import chunk

            return chunk(text, cls)
        except Exception as err:  # noqa: BLE001 - B's chunker missing or failing: one chunk
            self.warn_once("chunking", f"gardener: chunking failed ({err}); one chunk per entry")
            return [text] if text.strip() else []

    def _insert(
        self,
        c: sqlite3.Connection,
        e: Entry,
        chunks: list[str],
        keys: list[str],
        reply_to: str | None = None,
    ) -> Entry:
        now = e.created
        row = c.execute("SELECT raw FROM entries WHERE id = ?", (e.id,)).fetchone()
        if row is not None:
            if e.raw is not None and row[0] != e.raw:
                # Undecodable bytes all become U+FFFD in the text the id is computed from, so
                # two inputs differing only there share an id: the newest bytes win.
                c.execute("UPDATE entries SET raw = ? WHERE id = ?", (e.raw, e.id))
            # An expired entry revives (its text is live again, so its handle must resolve);
            # one the user forgot stays forgotten: ``/forget`` must stick.
            c.execute(
                "UPDATE entries SET seen = seen + 1, last_access = ?, pinned = max(pinned, ?)"
                " WHERE id = ?",
                (now, int(e.pinned), e.id),
            )
            c.execute(
                "UPDATE entries SET active = 1, deleted_at = NULL, deleted_reason = NULL"
                " WHERE id = ? AND active = 0 AND coalesce(deleted_reason, '') != ?"
                " AND coalesce(deleted_reason, '') NOT LIKE ?",
                (e.id, FORGOTTEN, COPY_OF + "%"),
            )
            self._rescore(c, now, "id = ?", (e.id,))
            self._bump(c, "duplicates", 1, now)
        else:
            context = self._context(c, e.cls, reply_to)
            c.execute(
                "INSERT INTO entries(id, seq, session_id, created, cls, role, command, tool, path,"
                " original, raw, summary, terms, tokens_original, tokens_summary, ratio,"
                " priority, pinned, last_access, ttl, active, resolved, context)"
                " VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM entries),"
                " ?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,1,0,?)",
                (
                    e.id,
                    e.session_id,
                    e.created,
                    e.cls,
                    e.role,
                    e.command,
                    e.tool,
                    e.path,
                    e.original,
                    e.raw,
                    e.summary,
                    _search_terms(e.original),
                    e.tokens_original,
                    e.tokens_summary,
                    e.ratio,
                    e.priority,
                    int(e.pinned),
                    e.last_access,
                    e.ttl,
                    context,
                ),
            )
            c.executemany(
                "INSERT OR IGNORE INTO chunks(chunk_id, entry_id, n, text, embedded, context)"
                " VALUES (?,?,?,?,0,?)",
                [
                    (f"{e.id}:{n}", e.id, n, _storable(t)[0], "" if n else context)
                    for n, t in _numbered(chunks)
                ],
            )
            c.executemany(
                "INSERT OR IGNORE INTO entry_keys(key, entry_id) VALUES (?, ?)",
                [(k, e.id) for k in keys],
            )
            self._bump(c, "ingested", 1, now)
            self._bump(c, "tokens_original", e.tokens_original, now)
            self._bump(c, "tokens_summary", e.tokens_summary, now)
        c.execute(
            "INSERT OR IGNORE INTO entry_sessions(session_id, entry_id, first_seen) VALUES (?,?,?)",
            (self.session_id, e.id, now),
        )
        if row is None:
            return e  # exactly what was inserted; reading a large original back costs time
        return _entry(c.execute(_SELECT_ENTRY + " WHERE id = ?", (e.id,)).fetchone())

    def _context(self, c: sqlite3.Connection, cls: str, reply_to: str | None = None) -> str:
        """The turn this conversation turn answers: this session's previous entry, when both
        are conversation turns (a test run ingested just before a reply is not what it answers),
        as ``(in reply to: …)``; '' otherwise. See ``CONVERSATION_CLASSES``."""
        if cls not in CONVERSATION_CLASSES:
            return ""
        if reply_to is not None:
            said = reply_to[:CONTEXT_CHARS].strip()
            return f"(in reply to: {said})" if said else ""
        row = c.execute(
            "SELECT cls, substr(original, 1, ?) FROM entries"
            " WHERE session_id = ? AND seq > (SELECT coalesce(max(seq), 0) FROM entries) - ?"
            " ORDER BY seq DESC LIMIT 1",
            (CONTEXT_CHARS, self.session_id, PREVIOUS_TURN_WINDOW),
        ).fetchone()
        if row is None or row[0] not in CONVERSATION_CLASSES or not (row[1] or "").strip():
            return ""
        return f"(in reply to: {row[1].strip()})"

    def _rescore(self, c: sqlite3.Connection, now: float, where: str, args: tuple) -> int:
        cur = c.execute(
            f"UPDATE entries SET priority = {priority.SQL_FUNCTION}(cls, created, last_access, ?,"
            f" pinned, refs, last_ref, resolved_at) WHERE {where}",
            (now, *args),
        )
        return cur.rowcount

    # -- lookups -------------------------------------------------------------------------------

    def get(self, entry_id: str) -> Entry | None:
        """Any entry by id, forgotten or from another session included (a handle the user
        pastes must always resolve)."""

        def q(c: sqlite3.Connection) -> Entry | None:
            row = c.execute(_SELECT_ENTRY + " WHERE id = ?", (entry_id,)).fetchone()
            return _entry(row) if row else None

        return self.guard("lookup", None, lambda: self._read(q))

    def get_entries(self, ids: Sequence[str]) -> dict[str, Entry]:
        """Entries recall may show: active and within scope. Ids not returned were forgotten,
        expired, or belong to another session under ``scope="session"``."""
        ids = list(dict.fromkeys(ids))
        scope_sql, scope_args = self._scope_sql("entries")

        # "+active": without the unary plus SQLite may pick the (active, priority) index and
        # scan every active row instead of looking up the ids (decision 081).

        def q(c: sqlite3.Connection) -> dict[str, Entry]:
            out: dict[str, Entry] = {}
            for batch in _batched(ids):
                marks = ",".join("?" * len(batch))
                rows = c.execute(
                    _SELECT_ENTRY + f" WHERE id IN ({marks}) AND +active = 1" + scope_sql,
                    (*batch, *scope_args),
                )
                for row in rows:
                    out[row[0]] = _entry(row)
            return out

        return self.guard("lookup", {}, lambda: self._read(q)) if ids else {}

    def list_entries(
        self,
        limit: int = 50,
        classes: Sequence[str] | None = None,
        include_inactive: bool = False,
        order: str = "created",
    ) -> list[Entry]:
        """Newest (``order="created"``) or lowest priority first (``order="priority"``)."""
        where = ["1"] if include_inactive else ["active = 1"]
        args: list[Any] = []
        if classes:
            where.append(f"cls IN ({','.join('?' * len(classes))})")
            args.extend(str(c) for c in classes)
        scope_sql, scope_args = self._scope_sql("entries")
        order_sql = "priority ASC, created ASC" if order == "priority" else "created DESC, seq DESC"
        sql = (
            _SELECT_ENTRY
            + " WHERE "
            + " AND ".join(where)
            + scope_sql
            + f" ORDER BY {order_sql} LIMIT ?"
        )
        args = [*args, *scope_args, int(limit)]
        return self.guard(
            "lookup", [], lambda: [_entry(r) for r in self._read(lambda c: c.execute(sql, args))]
        )

    def fts_search(
        self, query: str, limit: int, classes: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """Entry ids best first with their BM25 score, negated so that larger is better.

        Respects scope and ``active``; never raises on any query string (see ``build_match``).

        Two steps: the best ``2 * limit + 10`` rows from the FTS5 index alone, then the filters
        on just those; only when the filters drop too many (a class filter, session scope) is
        the index joined to the entries in full: joining every match first doubled the cost
        (decision 081)."""
        match = build_match(query)
        if match is None or limit <= 0:
            return []
        weights = ", ".join(str(w) for w in FTS_WEIGHTS)
        filters = " AND +e.active = 1"
        filter_args: list[Any] = []
        if classes:
            filters += f" AND +e.cls IN ({','.join('?' * len(classes))})"
            filter_args.extend(str(c) for c in classes)
        scope_sql, scope_args = self._scope_sql("e")
        filters += scope_sql
        filter_args.extend(scope_args)
        over = 2 * int(limit) + 10
        top_sql = (
            f"SELECT rowid, bm25(entries_fts, {weights}) AS s FROM entries_fts"
            " WHERE entries_fts MATCH ? ORDER BY s LIMIT ?"
        )
        full_sql = (
            f"SELECT e.id, bm25(entries_fts, {weights}) AS s FROM entries_fts"
            " JOIN entries e ON e.seq = entries_fts.rowid WHERE entries_fts MATCH ?"
            + filters
            + " ORDER BY s LIMIT ?"
        )

        def q(c: sqlite3.Connection) -> list[tuple[str, float]]:
            top = c.execute(top_sql, (match, over)).fetchall()
            if not top:
                return []
            score = dict(top)
            marks = ",".join("?" * len(top))
            kept = dict(
                c.execute(
                    f"SELECT e.seq, e.id FROM entries e WHERE e.seq IN ({marks})" + filters,
                    (*score, *filter_args),
                ).fetchall()
            )
            if len(kept) >= limit or len(top) < over:
                ranked = [(kept[seq], -s) for seq, s in top if seq in kept]
                return ranked[:limit]
            return [(i, -s) for i, s in c.execute(full_sql, (match, *filter_args, int(limit)))]

        return self.guard("search", [], lambda: self._read(q))

    def touch(self, ids: Sequence[str]) -> None:
        """Refresh last access (a full recall): the entry counts as fresh again."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return
        now = time.time()

        def step(c: sqlite3.Connection) -> None:
            for batch in _batched(ids):
                marks = ",".join("?" * len(batch))
                c.execute(
                    f"UPDATE entries SET last_access = ? WHERE id IN ({marks})", (now, *batch)
                )
                self._rescore(c, now, f"id IN ({marks})", tuple(batch))

        self.guard("touch", None, lambda: self._write(step))

    # -- embedding queue (for the worker) ------------------------------------------------------

    def pending_chunks(self, limit: int) -> list[tuple[str, str, str]]:
        """Chunks waiting for an embedding, oldest first: (chunk_id, entry_id, text to embed:
        the chunk, and for a conversation turn's first chunk the turn it answers). Chunks of
        forgotten entries wait too (``restore`` must not need re-embedding)."""

        def q(c: sqlite3.Connection) -> list[tuple[str, str, str]]:
            return list(
                c.execute(
                    "SELECT chunk_id, entry_id, CASE context WHEN '' THEN text"
                    " ELSE text || char(10) || substr(context, 1, ?) END FROM chunks"
                    " WHERE embedded = 0 ORDER BY rowid LIMIT ?",
                    (EMBED_CONTEXT_CHARS, int(limit)),
                )
            )

        return self.guard("queue", [], lambda: self._read(q))

    def chunks_without_states(self, limit: int) -> list[tuple[str, str, str]]:
        """Indexed first chunks and gists (``token_states.LEADING``) the reranker has no token
        states for yet (a store from before they were kept, or chunks indexed by a model that
        does not rerank), newest first (the ones a recall is likeliest to read), in the queue's
        row shape."""

        def q(c: sqlite3.Connection) -> list[tuple[str, str, str]]:
            kept = (
                f" AND NOT EXISTS (SELECT 1 FROM {token_states.TABLE} s"
                " WHERE s.chunk_id = c.chunk_id)"
                if token_states.exists(c)
                else ""  # no states kept yet: the table comes with them
            )
            sql = (
                f"SELECT c.chunk_id, c.entry_id, {token_states.EMBED_TEXT_SQL} FROM chunks c"
                f" WHERE c.embedded = 1 AND c.n <= {int(token_states.LEADING)}{kept}"
                " ORDER BY c.rowid DESC LIMIT ?"
            )
            return list(c.execute(sql, (EMBED_CONTEXT_CHARS, int(limit))))

        return self.guard("queue", [], lambda: self._read(q))

    def mark_chunks(self, chunk_ids: Sequence[str], state: int) -> None:
        """1 = indexed, -1 = failed (not retried), 0 = pending again."""
        ids = list(chunk_ids)

        def step(c: sqlite3.Connection) -> None:
            for batch in _batched(ids):
                marks = ",".join("?" * len(batch))
                c.execute(
                    f"UPDATE chunks SET embedded = ? WHERE chunk_id IN ({marks})",
                    (int(state), *batch),
                )

        if ids:
            self.guard("queue", None, lambda: self._write(step))

    def pending_count(self) -> int:
        return self.guard(
            "queue",
            0,
            lambda: self._read(
                lambda c: c.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
            ),
        )

    def drain(self, timeout: float | None = None) -> int:
        """Embed every pending chunk now (tests, benchmarks); 0 without a vector worker."""
        if self._worker is None:
            return 0
        return self.guard("drain", 0, lambda: self._worker.drain(timeout))

    # -- lifecycle of entries ------------------------------------------------------------------

    def _set(self, what: str, entry_id: str, sql: str, args: tuple) -> bool:
        now = time.time()

        def step(c: sqlite3.Connection) -> bool:
            changed = c.execute(sql, (*args, entry_id)).rowcount > 0
            if changed:
                self._rescore(c, now, "id = ?", (entry_id,))
            return changed

        return self.guard(what, False, lambda: self._write(step))

    def forget(self, entry_id: str) -> bool:
        """Soft delete the entry and every copy of it (see ``copies_of``): recall, and with them
        its chunks in the full-text and vector rankings, stop showing them. ``restore`` undoes
        it until maintenance purges them (``maintenance.PURGE_AFTER``); re-ingesting the same
        text does not undo it (the user's decision stands, see ``_insert``). False when the
        entry is unknown or already inactive."""
        now = time.time()

        def step(c: sqlite3.Connection) -> bool:
            changed = (
                c.execute(
                    "UPDATE entries SET active = 0, deleted_at = ?, deleted_reason = ?"
                    " WHERE id = ? AND active = 1",
                    (now, FORGOTTEN, entry_id),
                ).rowcount
                > 0
            )
            if not changed:
                return False
            copies = self._copies(c, entry_id)
            for batch in _batched(copies):
                marks = ",".join("?" * len(batch))
                c.execute(
                    "UPDATE entries SET active = 0, deleted_at = ?, deleted_reason = ?"
                    f" WHERE id IN ({marks}) AND active = 1",
                    (now, COPY_OF + entry_id, *batch),
                )
            self._rescore(c, now, "id = ?", (entry_id,))
            self._hidden = None
            return True

        return self.guard("forget", False, lambda: self._write(step))

    def restore(self, entry_id: str) -> bool:
        """Undo ``forget`` (the copies it hid come back with it) or TTL expiry; the entry counts
        as just accessed. False when the entry is unknown or not inactive."""
        now = time.time()

        def step(c: sqlite3.Connection) -> bool:
            changed = (
                c.execute(
                    "UPDATE entries SET active = 1, deleted_at = NULL, deleted_reason = NULL,"
                    " last_access = ? WHERE id = ? AND active = 0",
                    (now, entry_id),
                ).rowcount
                > 0
            )
            if changed:
                c.execute(
                    "UPDATE entries SET active = 1, deleted_at = NULL, deleted_reason = NULL"
                    " WHERE deleted_reason = ? AND active = 0",
                    (COPY_OF + entry_id,),
                )
                self._rescore(c, now, "id = ?", (entry_id,))
                self._hidden = None
            return changed

        return self.guard("restore", False, lambda: self._write(step))

    def copies_of(self, entry_id: str) -> list[str]:
        """Ids ``forget(entry_id)`` hid along with it."""
        return self.guard(
            "lookup",
            [],
            lambda: [
                r[0]
                for r in self._read(
                    lambda c: c.execute(
                        "SELECT id FROM entries WHERE deleted_reason = ? ORDER BY seq",
                        (COPY_OF + entry_id,),
                    ).fetchall()
                )
            ],
        )

    def hidden_ids(self) -> frozenset[str]:
        """Entries the user forgot, and their copies: what the vector index is asked to leave
        out (their chunks stay embedded so that ``restore`` needs no re-embedding). Cached
        until this store forgets or restores; another process's ``forget`` reaches the vector
        ranking when this one next does, and ``get_entries`` filters those meanwhile."""
        hidden = self._hidden
        if hidden is None:
            hidden = self.guard(
                "lookup",
                frozenset(),
                lambda: frozenset(
                    r[0]
                    for r in self._read(
                        lambda c: c.execute(
                            "SELECT id FROM entries WHERE active = 0 AND (deleted_reason = ?"
                            " OR deleted_reason LIKE ?)",
                            (FORGOTTEN, COPY_OF + "%"),
                        ).fetchall()
                    )
                ),
            )
            self._hidden = hidden
        return hidden

    def _copies(self, c: sqlite3.Connection, entry_id: str) -> list[str]:
        """Active entries whose original contains this entry's whole original (stripped): the
        text pasted or recalled into a later message that was stored as an entry of its own.
        Found by full text first (every term of the original must be in a copy), then checked
        with ``instr``. Originals shorter than ``MIN_COPY_CHARS`` have no copies: a short line
        ("run the tests") recurs in unrelated entries."""
        row = c.execute("SELECT original FROM entries WHERE id = ?", (entry_id,)).fetchone()
        needle = (row[0] if row else "").strip()
        if len(needle) < MIN_COPY_CHARS:
            return []
        terms = query_terms(needle)
        if not terms:
            return []
        match = " AND ".join(quote_term(t) for t in terms)
        return [
            r[0]
            for r in c.execute(
                "SELECT e.id FROM entries_fts JOIN entries e ON e.seq = entries_fts.rowid"
                " WHERE entries_fts MATCH ? AND e.id != ? AND +e.active = 1"
                " AND instr(e.original, ?) > 0",
                (match, entry_id, needle),
            )
        ]

    def pin(self, entry_id: str) -> bool:
        """Pinned entries never decay, never expire and are never eviction candidates."""
        return self._set("pin", entry_id, "UPDATE entries SET pinned = 1 WHERE id = ?", ())

    def unpin(self, entry_id: str) -> bool:
        return self._set(
            "pin",
            entry_id,
            "UPDATE entries SET pinned = 0, last_access = ? WHERE id = ?",
            (time.time(),),
        )

    def note_reference(self, text: str, exclude: Sequence[str] = ()) -> int:
        """Call with each new message: entries whose paths, identifiers, error codes or id it
        names get a reference bonus. ``exclude``: the message's own entry id(s). Returns how
        many entries were referenced."""
        keys = priority.extract_keys(text)
        if not keys:
            return 0
        now = time.time()
        skip = set(exclude)

        def step(c: sqlite3.Connection) -> int:
            ids: set[str] = set()
            for batch in _batched(keys):
                marks = ",".join("?" * len(batch))
                ids.update(
                    r[0]
                    for r in c.execute(
                        f"SELECT entry_id FROM entry_keys WHERE key IN ({marks})", tuple(batch)
                    )
                )
                ids.update(
                    r[0]
                    for r in c.execute(
                        f"SELECT id FROM entries WHERE id IN ({marks})", tuple(batch)
                    )
                )
            hit = sorted(ids - skip)
            for batch in _batched(hit):
                marks = ",".join("?" * len(batch))
                c.execute(
                    f"UPDATE entries SET refs = refs + 1, last_ref = ? WHERE id IN ({marks})"
                    " AND +active = 1",
                    (now, *batch),
                )
                self._rescore(c, now, f"id IN ({marks})", tuple(batch))
            return len(hit)

        return self.guard("reference", 0, lambda: self._write(step))

    def mark_file_edited(self, path: str) -> int:
        """Call after an edit to ``path`` was applied successfully: earlier errors that name
        that file are probably fixed, so they decay ``RESOLVED_DECAY`` times faster from now.
        Returns how many errors were marked resolved."""
        wanted = priority.path_keys(path)
        if not wanted:
            return 0
        now = time.time()

        def step(c: sqlite3.Connection) -> int:
            marks = ",".join("?" * len(wanted))
            candidates = c.execute(
                f"SELECT DISTINCT k.entry_id FROM entry_keys k JOIN entries e ON e.id = k.entry_id"
                f" WHERE k.key IN ({marks}) AND e.cls = 'error' AND e.resolved = 0"
                " AND +e.active = 1 AND e.created <= ?",
                (*wanted, now),
            ).fetchall()
            hit = []
            for (eid,) in candidates:
                keys = [
                    r[0] for r in c.execute("SELECT key FROM entry_keys WHERE entry_id = ?", (eid,))
                ]
                if any(priority.paths_match(k, path) for k in keys if "." in k or "/" in k):
                    hit.append(eid)
            for eid in hit:
                c.execute(
                    "UPDATE entries SET resolved = 1, resolved_at = ? WHERE id = ?", (now, eid)
                )
                self._rescore(c, now, "id = ?", (eid,))
            return len(hit)

        return self.guard("resolve", 0, lambda: self._write(step))

    # -- counters and sessions -----------------------------------------------------------------

    def _bump(self, c: sqlite3.Connection, key: str, n: float, now: float) -> None:
        c.execute(
            "INSERT INTO session_state(session_id, key, value, updated) VALUES (?,?,?,?)"
            " ON CONFLICT(session_id, key) DO UPDATE SET value = value + excluded.value,"
            " updated = excluded.updated",
            (self.session_id, key, n, now),
        )

    def bump(self, key: str, n: float = 1) -> None:
        """Add ``n`` to this session's counter ``key`` (e.g. recalls, tokens saved)."""
        now = time.time()
        self.guard("counter", None, lambda: self._write(lambda c: self._bump(c, key, n, now)))

    def counters(self, session_id: str | None = None) -> dict[str, float]:
        sid = session_id or self.session_id
        return self.guard(
            "counter",
            {},
            lambda: dict(
                self._read(
                    lambda c: c.execute(
                        "SELECT key, value FROM session_state WHERE session_id = ?", (sid,)
                    ).fetchall()
                )
            ),
        )

    def sessions(self) -> list[dict[str, Any]]:
        """Every session of this project, newest first."""

        def q(c: sqlite3.Connection) -> list[dict[str, Any]]:
            cur = c.execute(
                "SELECT s.id, s.started, s.last_seen, s.pid, s.host, s.cwd,"
                " (SELECT count(*) FROM entry_sessions x WHERE x.session_id = s.id)"
                " FROM sessions s ORDER BY s.started DESC"
            )
            names = ("id", "started", "last_seen", "pid", "host", "cwd", "entries")
            return [dict(zip(names, row)) for row in cur]

        return self.guard("sessions", [], lambda: self._read(q))

    def heartbeat(self) -> None:
        now = time.time()
        self.guard(
            "session",
            None,
            lambda: self._write(
                lambda c: c.execute(
                    "UPDATE sessions SET last_seen = ? WHERE id = ?", (now, self.session_id)
                )
            ),
        )

    def attach(self, helper: Any) -> None:
        """Stop ``helper`` (its ``stop()``) when the store closes, before the store's own threads:
        background work started on this store by a layer above it (maintenance)."""
        self._attached.append(helper)

    def close(self) -> None:
        if self._closed:
            return
        if self._unwritten or self._unwritten_dropped:
            self._close_unwritten()
        helpers = [*reversed(self._attached), self._worker, self.vectors, self._checkpointer]
        for helper in helpers:
            if helper is not None:
                try:
                    (helper.stop if hasattr(helper, "stop") else helper.close)()
                except Exception as err:  # noqa: BLE001
                    log.debug("gardener: stopping %r failed: %s", helper, err)
        with self._lock:
            self._closed = True
            if self._conn is not None:
                try:
                    self._conn.execute("PRAGMA optimize")
                except sqlite3.Error:
                    pass
                self._conn.close()
                self._conn = None

    def _close_unwritten(self) -> None:
        """Last chance for entries a busy store could not take: one more wait (none when this
        turn already waited), then one line for what is still unwritten."""
        try:
            self.flush_unwritten()
        except Exception as err:  # noqa: BLE001
            log.debug("gardener: flushing unwritten entries failed: %s", err)
        left = len(self._unwritten)
        if left:
            log.warning(
                "gardener: %d entr%s could not be stored before exit: store %s is still locked by"
                " another process",
                left,
                "y" if left == 1 else "ies",
                self.path,
            )

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path or ":memory:"
        return f"Store({where}, session={self.session_id}, scope={self.scope})"


class _Checkpointer:
    """Runs ``wal_checkpoint(PASSIVE)`` shortly after writes, from its own thread and
    connection, so the copy and fsync happen beside ingestion rather than inside it."""

    def __init__(self, path: Path, busy_timeout: float) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._wake = threading.Event()
        self._halt = threading.Event()  # stop() ends the coalescing wait: exit must not wait
        self._stopping = False
        self.checkpoints = 0
        self._thread = threading.Thread(target=self._run, name="gardener-checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        self._halt.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._wake.wait()
                if self._stopping:
                    return
                self._halt.wait(CHECKPOINT_COALESCE)
                self._wake.clear()
                if self._stopping:  # stop() may have set the event just cleared
                    return
                try:
                    if conn is None:
                        conn = sqlite3.connect(
                            str(self._path),
                            timeout=self._busy_timeout,
                            isolation_level=None,
                            check_same_thread=False,
                        )
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as err:  # busy or gone: the next poke tries again
                    log.debug("gardener: background checkpoint failed: %s", err)
        finally:
            if conn is not None:
                conn.close()


def _create_private(path: Path) -> None:
    """Create the file 0600 before SQLite does (it would use the umask) and tighten an existing
    one; SQLite gives its -wal and -shm files the main file's mode."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o600)


def _verbatim(data: str | bytes, cls: ContentClass | None) -> CompressionResult:
    from ..pipeline import entry_id
    from ..sanitize import decode
    from ..tokens import count_tokens

    text = data if isinstance(data, str) else decode(data).text
    n = count_tokens(text)
    return CompressionResult(entry_id(text), cls or ContentClass.LOG, text, text, n, n, [])
