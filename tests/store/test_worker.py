"""The embedding worker on a real store: drains the SQLite queue, survives restarts and failures."""

from __future__ import annotations

import time

import pytest

from aider_gardener.store import Store
from aider_gardener.store.vectors import open_index
from aider_gardener.store.worker import FAILED, INDEXED, PENDING, EmbeddingWorker
from aider_gardener.types import ContentClass, Source

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

NOTES = [
    "The login form posts to /api/session and stores the token in a cookie.",
    "Retry the upload three times with exponential backoff before giving up.",
    "KeyError: 'user_id' raised in handlers/profile.py line 88",
]


def chunk_states(store: Store) -> dict[str, int]:
    return dict(store.read(lambda c: c.execute("SELECT chunk_id, embedded FROM chunks").fetchall()))


def wait_for(predicate, timeout: float = 120.0) -> bool:
    """Polls a background effect; a correctness wait with a generous bound, not a speed test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_drain_indexes_every_pending_chunk(tmp_path):
    with Store(tmp_path / "gs", maintenance_interval=None) as store:
        log = "".join(f"step {i}: compiled module_{i}.c with 0 warnings\n" for i in range(600))
        entries = [store.ingest(t, Source(role="user")) for t in NOTES]
        big = store.ingest(log, Source(role="tool", command="make"), cls=ContentClass.LOG)
        store.drain()
        states = chunk_states(store)
        assert len(states) > len(NOTES) + 1  # the log became several chunks
        assert set(states.values()) == {INDEXED}
        assert store.pending_count() == 0
        assert store.vectors.count() == len(states)
        found = {eid for _, eid, _ in store.vectors.query("compiled module_77.c", 50)}
        assert big.id in found
        assert {e.id for e in entries} <= {
            eid for _, eid, _ in store.vectors.query("login token retry KeyError", 50)
        }


def test_background_thread_embeds_without_being_asked(tmp_path):
    with Store(tmp_path / "gs", maintenance_interval=None) as store:
        store.ingest(NOTES[0], Source(role="user"))
        store._worker.notify()
        assert wait_for(lambda: store.pending_count() == 0)
        assert store.vectors.count() == 1


def test_pending_chunks_survive_a_restart(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as first:  # ingest with no worker at all
        for t in NOTES:
            first.ingest(t, Source(role="user"))
        assert first.pending_count() == len(NOTES)
    with Store(folder, maintenance_interval=None) as second:
        assert wait_for(lambda: second.pending_count() == 0)  # its own thread picks them up
        assert set(chunk_states(second).values()) == {INDEXED}
        hits = second.recall("session cookie for the login form", limit=1)
        assert hits and "vector" in hits[0].via


class FlakyIndex:
    """A stand-in index that fails on chosen texts, or loses its backend: failure injection."""

    def __init__(self, bad_word: str = "", down: bool = False) -> None:
        self.bad_word, self.down = bad_word, down
        self.healthy = True
        self.permanent_failure = None
        self.added: list[str] = []
        self.calls: list[list[str]] = []  # the texts of each add(), in call order

    def warm(self) -> bool:
        return True

    def can_write(self) -> bool:
        return True

    def probe(self) -> bool:
        return self.healthy

    def release_writer(self) -> None:
        pass

    def add(self, chunk_ids, entry_ids, texts) -> None:
        if self.down:
            self.healthy = False
            return
        if any(self.bad_word and self.bad_word in t for t in texts):
            raise RuntimeError("the model choked on this text")
        self.added.extend(chunk_ids)
        self.calls.append(list(texts))


def test_a_text_that_breaks_the_model_is_marked_failed_alone(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        ids = [store.ingest(t, Source(role="user")).id for t in NOTES]
        worker = EmbeddingWorker(store, FlakyIndex(bad_word="KeyError"))
        assert worker.drain() == len(NOTES)
        states = chunk_states(store)
        assert states[f"{ids[2]}:0"] == FAILED
        assert states[f"{ids[0]}:0"] == states[f"{ids[1]}:0"] == INDEXED
        assert worker.failed == 1 and worker.embedded == 2
        assert worker.drain() == 0  # failed chunks are not retried forever


def test_a_lost_backend_leaves_chunks_pending(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        for t in NOTES:
            store.ingest(t, Source(role="user"))
        index = FlakyIndex(down=True)
        worker = EmbeddingWorker(store, index)
        assert worker.drain() == 0
        assert set(chunk_states(store).values()) == {PENDING}
        index.down, index.healthy = False, True
        assert worker.drain() == len(NOTES)
        assert set(chunk_states(store).values()) == {INDEXED}


def test_stop_is_prompt_and_idempotent(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        index = open_index(tmp_path / "gs")
        worker = EmbeddingWorker(store, index)
        worker.start()
        assert worker.alive
        worker.stop(timeout=30)
        assert not worker.alive
        worker.stop()
        assert index.can_write()  # stop released the writer lock... and this takes it again
        index.close()


def test_drain_respects_its_timeout(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        for i in range(40):
            store.ingest(f"note {i}: " + NOTES[i % 3], Source(role="user"))
        worker = EmbeddingWorker(store, FlakyIndex(), batch_size=4)
        assert worker.drain(timeout=0) == 0
        assert store.pending_count() == 40
        assert worker.drain() == 40


def _varied_notes(store: Store, n: int) -> None:
    """Notes whose lengths are not in ingest order (short, long, medium, ...)."""
    for i in range(n):
        store.ingest(f"note {i}: " + "word " * ((i * 37) % 50 + 1), Source(role="user"))


def test_a_step_embeds_a_window_in_groups_of_similar_length(tmp_path):
    """The model pads a batch to its longest text, so the worker reads a window of pending
    rows and feeds them shortest first, in groups, instead of in ingest order."""
    with Store(tmp_path / "gs", vectors=False) as store:
        _varied_notes(store, 30)
        index = FlakyIndex()
        worker = EmbeddingWorker(store, index, batch_size=4, window=16)
        assert worker.step() == 16
        assert store.pending_count() == 14
        assert [len(c) for c in index.calls] == [4, 4, 4, 4]
        lengths = [[len(t) for t in call] for call in index.calls]
        flat = [n for call in lengths for n in call]
        assert flat == sorted(flat)
        assert worker.drain() == 14 and store.pending_count() == 0


def test_a_stop_request_ends_the_window_after_one_group(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        _varied_notes(store, 20)
        index = FlakyIndex()
        worker = EmbeddingWorker(store, index, batch_size=5, window=20)
        worker._stop.set()  # what stop() does while the thread is inside a step
        assert worker.step() == 5
        assert len(index.calls) == 1
        assert store.pending_count() == 15  # the rest of the window stays queued


def test_a_backend_lost_mid_window_keeps_the_rest_pending(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        _varied_notes(store, 12)
        index = FlakyIndex()
        real_add = index.add

        def add_then_fail(chunk_ids, entry_ids, texts):
            if index.calls:  # the second group finds the backend gone
                index.down = True
            real_add(chunk_ids, entry_ids, texts)

        index.add = add_then_fail
        worker = EmbeddingWorker(store, index, batch_size=4, window=12)
        assert worker.step() == 4
        assert store.pending_count() == 8
        assert worker.embedded == 4
