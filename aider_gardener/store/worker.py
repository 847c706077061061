"""The background thread that turns pending chunks into vectors.

Ingest only writes chunk rows (``embedded = 0``) in the same SQLite transaction as their entry, so
it never waits for the model; this worker drains that queue in small batches. Because the queue
is a table, a crash or a restart loses nothing: the next session's worker finds the rows still
pending. Chunks whose text makes the model fail are marked -1 and never retried; chunks that
could not be written because the vector backend is down stay pending until ``probe`` finds it
back.

The worker is a guest on the user's cores: it pauses while a request is prepared and sent
(``foreground()``, checked between forward passes and before each chromadb upsert, which holds
the GIL), runs at a lower OS priority, and embeds only the head, tail and error chunks of logs
and structured outputs (``embed_policy``). ``stop()`` does not wait for a batch: the next
forward pass ends the worker, leaving the group pending. With MiniLM it also keeps the token
states of each entry's first chunk and gist for the reranker (``token_states``), and catches up
on chunks indexed without them when the queue is empty.
Measurements: docs/decisions/089-background-embedder.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import threading
import time
from typing import Callable, Iterator, Protocol, Sequence, TypeVar

from . import embeddings, model_choice
from . import rerank as reranking
from . import token_states
from .runtime import lower_thread_priority
from .vectors import VectorIndex

T = TypeVar("T")


class ChunkQueue(Protocol):
    """What the worker uses of the store that starts it (``db.Store``, which imports this
    module: the worker sits below it)."""

    def pending_chunks(self, limit: int) -> list[tuple[str, str, str]]:
        """Up to ``limit`` chunks waiting for a vector: (chunk id, entry id, text)."""

    def mark_chunks(self, chunk_ids: Sequence[str], state: int) -> None:
        """Record what became of these chunks (indexed, skipped, failed)."""

    def pending_count(self) -> int:
        """Chunks still waiting."""

    def chunks_without_states(self, limit: int) -> list[tuple[str, str, str]]:
        """Indexed chunks the reranker has no token states for: (chunk id, entry id, text)."""

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a write transaction."""

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in a read transaction."""


log = logging.getLogger(__name__)

# Rows per call into the index (one embed + one upsert + one mark). A group of full-size chunks
# is ~2 s of one core, which bounds how long stop() can take.
BATCH_SIZE = 48
# Pending rows read per step and sorted by length before they are cut into groups: the model
# pads a batch to its longest text, and chat messages range from one line to full-size chunks,
# so 48 rows in ingest order split into many small batches or pad a lot (decision 089).
WINDOW = 8 * BATCH_SIZE
IDLE_POLL = 2.0  # other processes enqueue chunks too; look again this often when idle
PROBE_INTERVAL = 30.0  # how often to knock on a vector server that went away
WRITER_RETRY = 15.0  # how often a read-only session checks whether the writer has exited

PENDING, INDEXED, FAILED = 0, 1, -1
# Chunks the policy leaves to full-text search: never embedded (but kept, like every chunk).
SKIPPED = 2
# Which chunks get a vector. Log and structured outputs are found by their identifiers, which
# FTS5 indexes in full anyway, so only their first HEAD and last TAIL chunks and the first
# MAX_ERROR_CHUNKS chunks with an error word are embedded; every other class is embedded whole.
# ``GARDENER_EMBED_POLICY``: ``all``, or ``HEAD,TAIL`` (``,noerrors``). Measured: decision 089.
SPARSE_CLASSES = ("log", "structured")
# A middle chunk holding one of these words is embedded anyway: "the database ran out of disk"
# should find the one ERROR line in a long INFO log by meaning, not only by its words. Whole
# words only (``-DHAVE_STRERROR`` is not an error).
_ERROR_RE = re.compile(
    r"\b(?:error|errors|fatal|exception|panic|panicked|traceback|failed|failure|critical)\b",
    re.IGNORECASE,
)
EMBED_HEAD, EMBED_TAIL = 8, 2
# System logs carry an error word on every other line (HDFS "Got exception", sshd "error:"): the
# first this many error chunks of an entry are embedded, the rest are left to full text, which
# bounds a log's embedding at 26 chunks (~1 s of one core) whatever its size.
MAX_ERROR_CHUNKS = 16
POLICY_ENV = "GARDENER_EMBED_POLICY"
MAX_PAUSE = 60.0  # a request that takes longer (a long streamed reply) no longer holds it back
# A queue this long is worth a word to the user (~25-40 chunks/s on one core: seconds of work).
ANNOUNCE_CHUNKS = 40


def embed_policy() -> tuple[int, int, bool] | None:
    """(head, tail, keep_errors) for log/structured entries, or None to embed every chunk."""
    raw = os.environ.get(POLICY_ENV, "").strip().lower()
    if raw == "all":
        return None
    if raw:
        try:
            parts = raw.split(",")
            head, tail = int(parts[0]), int(parts[1] if len(parts) > 1 else 0)
            keep = not (len(parts) > 2 and parts[2].strip() == "noerrors")
            return max(0, head), max(0, tail), keep
        except ValueError:
            log.warning(
                "gardener: %s=%r is not 'all' or 'HEAD,TAIL[,noerrors]'; using the default",
                POLICY_ENV,
                raw,
            )
    return EMBED_HEAD, EMBED_TAIL, True


class _Stopped(Exception):
    """Raised at a forward-pass boundary when the worker is told to stop."""


class Foreground:
    """Process-wide: is a request being prepared or sent right now? The worker waits while it
    is (at most ``MAX_PAUSE`` per wait); nested and concurrent ``busy()`` blocks count."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = 0
        self.pauses = 0  # times a worker waited, for tests and benchmarks

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        with self._cond:
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                if self._busy <= 0:
                    self._busy = 0
                    self._cond.notify_all()

    @property
    def is_busy(self) -> bool:
        return self._busy > 0

    def wait_idle(self, stop: threading.Event, limit: float = MAX_PAUSE) -> None:
        """Block while busy, until ``stop`` is set or ``limit`` seconds have passed."""
        if not self._busy:
            return
        deadline = time.monotonic() + limit
        with self._cond:
            if self._busy:
                self.pauses += 1
            while self._busy and not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(min(0.05, left))  # short: stop() does not notify this


FOREGROUND = Foreground()


def foreground() -> "contextlib.AbstractContextManager[None]":
    """``with foreground():`` around work the user waits for: background embedding pauses."""
    return FOREGROUND.busy()


class EmbeddingWorker:
    def __init__(
        self, store: ChunkQueue, index: VectorIndex, batch_size: int = BATCH_SIZE, window: int = 0
    ) -> None:
        self.store = store
        self.index = index
        self.batch_size = max(1, batch_size)
        self.window = max(self.batch_size, window or WINDOW)
        self.embedded = 0  # chunks indexed by this worker, for stats and tests
        self.failed = 0
        self._thread: threading.Thread | None = None
        self._runner: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._batch_lock = threading.Lock()  # the thread and drain() never take the same rows
        self._logged: set[str] = set()
        # What the user is told happens in the background (model load, a long indexing job) is
        # queued here by this thread and printed by the session in the foreground, between
        # Aider's own lines: a write from this thread would land inside the input prompt.
        self._notes: list[str] = []
        self._notes_lock = threading.Lock()
        self._watching: tuple[float, int] | None = None  # announced queue: (start, indexed then)
        self.model_state = "idle"  # idle, loading, ready, failed
        # A catch-up that kept none of the states it encoded (the store would not take them, or
        # encoding failed) is not tried again until new chunks are indexed: the idle loop would
        # otherwise encode the same window every IDLE_POLL for nothing.
        self._states_stuck = False

    # --- control --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gardener-embed", daemon=True)
        self._runner = self._thread  # kept after stop(): _between() must still know its thread
        self._thread.start()

    def notify(self) -> None:
        """New chunks are pending: start on them now instead of at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stops at the next forward-pass boundary (a fraction of a second; it used to finish
        its group of 48 chunks, up to ~2 s), leaving the group pending. A thread still loading
        the model (seconds, not interruptible) is not waited for: it is a daemon."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(0.2 if self.model_state == "loading" else timeout)
        self.index.release_writer()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def drain(self, timeout: float | None = None) -> int:
        """Embed every pending chunk now, in the calling thread; returns how many were indexed.
        For tests and benchmarks, and for a CLI that wants vectors before it exits."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.index.healthy:
            self.index.probe()  # a server may be back; the thread would only knock every 30 s
        if not self.index.warm() or not self.index.can_write():
            return 0
        total = 0
        while deadline is None or time.monotonic() < deadline:
            done = self.step(deadline)
            if done <= 0:
                break
            total += done
        while deadline is None or time.monotonic() < deadline:
            if self.catch_up_states() <= 0:
                break
        return total

    # --- work -------------------------------------------------------------------------------

    def step(self, deadline: float | None = None) -> int:
        """One window of pending rows, embedded in groups of similar length: returns chunks
        indexed (or marked failed), 0 when nothing is pending or nothing could be done. Stops
        between groups when asked to or past ``deadline`` (monotonic), leaving the rest
        pending."""
        with self._batch_lock:
            rows = self.store.pending_chunks(self.window)
            if rows and self._apply_policy(rows):
                rows = self.store.pending_chunks(self.window)
            if not rows:
                return 0
            rows = sorted(rows, key=lambda r: len(r[2]))
            done = 0
            for start in range(0, len(rows), self.batch_size):
                group = rows[start : start + self.batch_size]
                try:
                    ok, bad = self._embed(group)
                except _Stopped:
                    break  # the group stays pending
                if not self.index.healthy:
                    break  # backend down mid-window: leave the rows pending for later
                if bad:
                    self.store.mark_chunks(bad, FAILED)
                    self.failed += len(bad)
                if ok:
                    self.store.mark_chunks(ok, INDEXED)
                    self.embedded += len(ok)
                    self._states_stuck = False
                    done_ids = set(ok)
                    leading = [
                        r
                        for r in group
                        if r[0] in done_ids and _chunk_n(r[0]) <= token_states.LEADING
                    ]
                    try:
                        self._keep_states(leading)
                    except _Stopped:
                        break  # indexed already; the states are caught up later
                done += len(ok) + len(bad)
                if self._stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                    break
            return done

    def catch_up_states(self) -> int:
        """Token states for one window of indexed chunks that have none (``token_states``),
        newest first; returns how many were kept, 0 when none are missing, the table is full,
        the model does not rerank or the last catch-up kept nothing (``_states_stuck``)."""
        if not reranking.available() or not hasattr(self.store, "chunks_without_states"):
            return 0
        if token_states.full(self.store):
            return 0
        with self._batch_lock:
            if self._states_stuck:  # read under the lock: another thread may have just set it
                return 0
            rows = self.store.chunks_without_states(self.window)
            kept = 0
            for start in range(0, len(rows), self.batch_size):
                try:
                    kept += self._keep_states(rows[start : start + self.batch_size])
                except _Stopped:
                    return kept  # stopped, not stuck
                if self._stop.is_set():
                    break
            self._states_stuck = bool(rows) and kept == 0
            return kept

    def _keep_states(self, rows: Sequence[tuple[str, str, str]]) -> int:
        """Encode the reranker's token states of just-indexed first chunks and gists and keep
        them in the store, so an explicit recall reads them instead of encoding its candidates
        (~1 s on 2 cores); another chunk is kept when a recall first reads it.
        A failure costs only that: the recall encodes them itself."""
        if not rows or not reranking.available() or not hasattr(self.store, "write"):
            return 0
        self._between()
        try:
            states = reranking.doc_states([r[2] for r in rows])
        except _Stopped:
            raise
        except Exception as err:  # noqa: BLE001 - the recall encodes them itself
            self._log_once("states", f"keeping rerank states failed ({type(err).__name__}: {err})")
            return 0
        packed = [(r[0], token_states.pack(s)) for r, s in zip(rows, states)]
        return len(packed) if token_states.save(self.store, packed) else 0

    def _apply_policy(self, rows: Sequence[tuple[str, str, str]]) -> int:
        """Mark the pending chunks ``EMBED_POLICY`` leaves to full-text search as SKIPPED;
        returns how many. Looks only when a row of ``rows`` could be one (n >= head)."""
        policy = embed_policy()
        if policy is None:
            return 0
        head, tail, keep_errors = policy
        if not any(_chunk_n(r[0]) >= head for r in rows):
            return 0
        classes = ",".join("?" * len(SPARSE_CLASSES))
        sql = (
            "SELECT chunk_id, text FROM chunks WHERE embedded = 0 AND n >= ?"
            f" AND entry_id IN (SELECT id FROM entries WHERE cls IN ({classes}))"
            " AND n < (SELECT max(c2.n) FROM chunks c2 WHERE c2.entry_id = chunks.entry_id) + 1 - ?"
        )
        try:
            middle = self.store.read(
                lambda c: c.execute(sql, (head, *SPARSE_CLASSES, tail)).fetchall()
            )
            kept: dict[str, int] = {}  # entry id -> error chunks kept
            skip = []
            for cid, text in sorted(middle, key=lambda r: (r[0].rsplit(":", 1)[0], _chunk_n(r[0]))):
                eid = cid.rsplit(":", 1)[0]
                if keep_errors and kept.get(eid, 0) < MAX_ERROR_CHUNKS and _ERROR_RE.search(text):
                    kept[eid] = kept.get(eid, 0) + 1
                else:
                    skip.append(cid)
            self.store.mark_chunks(skip, SKIPPED)
            return len(skip)
        except Exception as err:  # noqa: BLE001 - without the policy everything is embedded
            self._log_once("policy", f"embedding policy not applied ({type(err).__name__}: {err})")
            return 0

    def _between(self) -> None:
        """Called by the encoder between forward passes: stop, or wait out a foreground turn.
        Only in the worker's own thread: ``drain()`` runs in the caller's, which is the
        foreground."""
        if threading.current_thread() is not self._runner:
            return
        if self._stop.is_set():
            raise _Stopped()
        FOREGROUND.wait_idle(self._stop)
        if self._stop.is_set():
            raise _Stopped()

    def _add(self, rows: Sequence[tuple[str, str, str]]) -> None:
        ids, eids, texts = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
        try:
            self.index.add(ids, eids, texts, between=self._between)
        except TypeError as err:  # an index without ``between`` (a test double)
            if "between" not in str(err):
                raise
            self.index.add(ids, eids, texts)

    def _embed(self, rows: Sequence[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
        self._between()
        try:
            self._add(rows)
            return [r[0] for r in rows], []
        except _Stopped:
            raise
        except Exception as err:  # noqa: BLE001 - find the chunk that breaks the batch
            self._log_once("embed", f"embedding a batch failed ({type(err).__name__}: {err})")
        ok, bad = [], []
        for row in rows:
            try:
                self._add([row])
                ok.append(row[0])
            except _Stopped:
                raise
            except Exception:  # noqa: BLE001
                bad.append(row[0])
        return ok, bad

    # --- what the user sees ------------------------------------------------------------------

    def take_notes(self) -> list[str]:
        """Notes for the user since the last call, for the foreground to print."""
        with self._notes_lock:
            notes, self._notes = self._notes, []
        return notes

    def _note(self, text: str) -> None:
        with self._notes_lock:
            self._notes.append(text)

    def announce(self, tokens: int) -> str | None:
        """A big output was just stored: the line to print now if its chunks are a queue worth
        mentioning, and the worker notes when the queue has drained. None when not."""
        if not self.alive or self.index.permanent_failure:
            return None
        self._apply_policy([("x:%d" % (1 << 30), "", "")])  # what will not be embedded is not news
        pending = self.store.pending_count()
        if pending < ANNOUNCE_CHUNKS:
            return None
        self._watching = (time.monotonic(), self.embedded)
        if self.model_state == "loading":
            eta = "after the embedding model has loaded"
        else:
            eta = f"about {max(1, round(pending / 25))} s"
        return (
            f"gardener: indexing {_fmt_k(tokens)} tokens in the background ({pending} chunks,"
            f" {eta}); until then /recall finds it by full-text search"
        )

    def _queue_drained(self) -> None:
        watching, self._watching = self._watching, None
        if watching is not None:
            start, before = watching
            self._note(
                f"gardener: background indexing done ({self.embedded - before} chunks in"
                f" {time.monotonic() - start:.0f} s); /recall searches them by meaning too"
            )

    def _warm(self) -> None:
        if embeddings.loaded():
            self.model_state = "ready"
            if not self.index.warm():
                self._note_failure()
            elif embeddings.preloading() and embeddings.claim_ready_note():
                self._note_ready(embeddings.load_seconds())
            return
        self.model_state = "loading"
        if not embeddings.preloading():  # else the start-up line said so already
            self._note(
                "gardener: loading the embedding model in the background; /recall uses"
                " full-text search until it is ready"
            )
        start = time.monotonic()
        ok = self.index.warm()
        self.model_state = "ready" if ok else "failed"
        if not ok:
            self._note_failure()
        elif embeddings.claim_ready_note():
            self._note_ready(embeddings.load_seconds() or time.monotonic() - start)

    def _note_failure(self) -> None:
        """Name what failed: a dead ``--gardener-chroma-url`` was reported as an embedding
        model that could not be loaded."""
        index = self.index
        server = getattr(index, "server", False) and not index.permanent_failure
        describe = getattr(index, "describe_failure", None)
        why = describe() if describe else "the vector index is unavailable"
        until = " until it answers" if server else " only"
        self._note(f"gardener: no search by meaning: {why}; /recall uses full-text search{until}")

    def _note_ready(self, seconds: float) -> None:
        how = embeddings.backend() or "loaded"
        if model_choice.active() != model_choice.DEFAULT:  # say which, when it was chosen
            how = f"{model_choice.active_name()} via {how}"
        took = f"{seconds:.1f} s" if seconds >= 0.1 else "<0.1 s"
        self._note(
            f"gardener: embedding model ready ({how}, {took}); /recall searches by meaning too"
        )

    def _run(self) -> None:
        lower_thread_priority()
        try:
            self._warm()
        except Exception as err:  # noqa: BLE001 - warm() should not raise; never kill the host
            self.model_state = "failed"
            self._log_once("warm", f"loading the embedding model failed: {err}")
        while not self._stop.is_set():
            try:
                if self.index.permanent_failure:
                    return
                if not self.index.healthy:
                    if self._stop.wait(PROBE_INTERVAL):
                        return
                    self.index.probe()
                    continue
                if not self.index.can_write():
                    self._stop.wait(WRITER_RETRY)
                    continue
                if self.step() == 0:
                    if self._watching is not None:
                        self._queue_drained()
                    if self.catch_up_states() == 0:
                        self._wake.wait(IDLE_POLL)
                        self._wake.clear()
            except Exception as err:  # noqa: BLE001 - e.g. the store was closed under us
                self._log_once(type(err).__name__, f"embedding worker: {type(err).__name__}: {err}")
                self._stop.wait(IDLE_POLL)

    def _log_once(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning("gardener: %s", message)


def take_notes(store: ChunkQueue | None) -> list[str]:
    """The background notes of ``store``'s worker (none without a store or vectors)."""
    worker = getattr(store, "_worker", None)
    return worker.take_notes() if isinstance(worker, EmbeddingWorker) else []


def announce(store: ChunkQueue | None, tokens: int) -> str | None:
    """``EmbeddingWorker.announce`` for ``store``'s worker; None without one."""
    worker = getattr(store, "_worker", None)
    return worker.announce(tokens) if isinstance(worker, EmbeddingWorker) else None


def _chunk_n(chunk_id: str) -> int:
    try:
        return int(chunk_id.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return 0


def _fmt_k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
