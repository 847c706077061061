"""The background thread that turns pending chunks into vectors.

Ingest only writes chunk rows (``embedded = 0``) in the same SQLite transaction as their entry, so
it never waits for the model; this worker drains that queue in small batches. Because the queue
is a table, a crash or a restart loses nothing: the next session's worker finds the rows still
pending. Chunks whose text makes the model fail are marked -1 and never retried; chunks that
could not be written because the vector backend is down stay pending until ``probe`` finds it
back.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Sequence

from .vectors import VectorIndex

log = logging.getLogger(__name__)

# Rows per call into the index (one embed + one upsert + one mark). A group of full-size chunks
# is ~2 s of one core, which bounds how long stop() can take.
BATCH_SIZE = 48
# Pending rows read per step and sorted by length before they are cut into groups: the model
# pads a batch to its longest text, and chat messages range from one line to full-size chunks,
# so 48 rows in ingest order split into many small batches or pad a lot. Measured side by side
# on real chat chunks: 40.8 -> 41.9/s (and 35.9 -> 40.5/s before batches capped their padding).
WINDOW = 8 * BATCH_SIZE
IDLE_POLL = 2.0  # other processes enqueue chunks too; look again this often when idle
PROBE_INTERVAL = 30.0  # how often to knock on a vector server that went away
WRITER_RETRY = 15.0  # how often a read-only session checks whether the writer has exited

PENDING, INDEXED, FAILED = 0, 1, -1
# A queue this long is worth a word to the user (~25-40 chunks/s on one core: seconds of work).
ANNOUNCE_CHUNKS = 40


class EmbeddingWorker:
    def __init__(
        self, store: Any, index: VectorIndex, batch_size: int = BATCH_SIZE, window: int = 0
    ) -> None:
        self.store = store
        self.index = index
        self.batch_size = max(1, batch_size)
        self.window = max(self.batch_size, window or WINDOW)
        self.embedded = 0  # chunks indexed by this worker, for stats and tests
        self.failed = 0
        self._thread: threading.Thread | None = None
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

    # --- control --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gardener-embed", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """New chunks are pending: start on them now instead of at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stops after the group in progress (at most about two seconds of work)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
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
        return total

    # --- work -------------------------------------------------------------------------------

    def step(self, deadline: float | None = None) -> int:
        """One window of pending rows, embedded in groups of similar length: returns chunks
        indexed (or marked failed), 0 when nothing is pending or nothing could be done. Stops
        between groups when asked to or past ``deadline`` (monotonic), leaving the rest
        pending."""
        with self._batch_lock:
            rows = self.store.pending_chunks(self.window)
            if not rows:
                return 0
            rows = sorted(rows, key=lambda r: len(r[2]))
            done = 0
            for start in range(0, len(rows), self.batch_size):
                group = rows[start : start + self.batch_size]
                ok, bad = self._embed(group)
                if not self.index.healthy:
                    break  # backend down mid-window: leave the rows pending for later
                if bad:
                    self.store.mark_chunks(bad, FAILED)
                    self.failed += len(bad)
                if ok:
                    self.store.mark_chunks(ok, INDEXED)
                    self.embedded += len(ok)
                done += len(ok) + len(bad)
                if self._stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                    break
            return done

    def _embed(self, rows: Sequence[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
        try:
            self.index.add([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            return [r[0] for r in rows], []
        except Exception as err:  # noqa: BLE001 - find the chunk that breaks the batch
            self._log_once("embed", f"embedding a batch failed ({type(err).__name__}: {err})")
        ok, bad = [], []
        for cid, eid, text in rows:
            try:
                self.index.add([cid], [eid], [text])
                ok.append(cid)
            except Exception:  # noqa: BLE001
                bad.append(cid)
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
        from . import embeddings

        if embeddings.loaded():
            self.model_state = "ready"
            self.index.warm()
            return
        self.model_state = "loading"
        self._note(
            "gardener: loading the embedding model in the background; /recall uses full-text"
            " search until it is ready"
        )
        start = time.monotonic()
        ok = self.index.warm()
        self.model_state = "ready" if ok else "failed"
        if ok:
            self._note(
                f"gardener: embedding model ready ({embeddings.backend() or 'loaded'},"
                f" {time.monotonic() - start:.1f} s); /recall searches by meaning too"
            )
        else:
            self._note(
                "gardener: the embedding model could not be loaded"
                f" ({self.index.permanent_failure or 'vector store unavailable'});"
                " /recall uses full-text search only"
            )

    def _run(self) -> None:
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
                    self._wake.wait(IDLE_POLL)
                    self._wake.clear()
            except Exception as err:  # noqa: BLE001 - e.g. the store was closed under us
                self._log_once(type(err).__name__, f"embedding worker: {type(err).__name__}: {err}")
                self._stop.wait(IDLE_POLL)

    def _log_once(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning("gardener: %s", message)


def take_notes(store: Any) -> list[str]:
    """The background notes of ``store``'s worker (none without a store or vectors)."""
    worker = getattr(store, "_worker", None)
    return worker.take_notes() if isinstance(worker, EmbeddingWorker) else []


def announce(store: Any, tokens: int) -> str | None:
    """``EmbeddingWorker.announce`` for ``store``'s worker; None without one."""
    worker = getattr(store, "_worker", None)
    return worker.announce(tokens) if isinstance(worker, EmbeddingWorker) else None


def _fmt_k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)
