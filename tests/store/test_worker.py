"""The embedding worker on a real store: drains the SQLite queue, survives restarts and failures."""

from __future__ import annotations

import os
import threading
import time

import pytest

from aider_gardener.store import Store
from aider_gardener.store.recall import recall
from aider_gardener.store.runtime import NICE
from aider_gardener.store.vectors import open_index
from aider_gardener.store.worker import (
    FAILED,
    FOREGROUND,
    INDEXED,
    PENDING,
    POLICY_ENV,
    SKIPPED,
    EmbeddingWorker,
    foreground,
)
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


def test_drain_indexes_every_pending_chunk(tmp_path, monkeypatch):
    monkeypatch.setenv(POLICY_ENV, "all")
    with Store(tmp_path / "gs") as store:
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
    with Store(tmp_path / "gs") as store:
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
    with Store(folder) as second:
        assert wait_for(lambda: second.pending_count() == 0)  # its own thread picks them up
        assert set(chunk_states(second).values()) == {INDEXED}
        hits = recall(second, "session cookie for the login form", limit=1)
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


# --- issue 15: the worker yields to the foreground and embeds what the policy says ---------------


class SlowIndex(FlakyIndex):
    """A stand-in whose ``add`` runs ``passes`` forward passes, calling ``between`` before each,
    as the real encoder does."""

    def __init__(self, passes: int = 1, pause: float = 0.0) -> None:
        super().__init__()
        self.passes, self.pause = passes, pause
        self.started = threading.Event()

    def add(self, chunk_ids, entry_ids, texts, between=None):
        for _ in range(self.passes):
            if between is not None:
                between()
            self.started.set()
            time.sleep(self.pause)
        super().add(chunk_ids, entry_ids, texts)


def test_the_worker_pauses_while_a_request_is_in_the_foreground(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        worker = EmbeddingWorker(store, SlowIndex(), batch_size=4)
        worker.model_state = "ready"
        worker._warm = lambda: None
        worker.start()
        try:
            with foreground():
                paused = FOREGROUND.pauses
                for t in NOTES:
                    store.ingest(t, Source(role="user"))
                worker.notify()
                # the thread has taken the rows and reached its pause point, where it waits
                assert wait_for(lambda: FOREGROUND.pauses > paused)
                assert store.pending_count() == len(NOTES)  # ... for the turn to end
                assert FOREGROUND.is_busy
            assert wait_for(lambda: store.pending_count() == 0)  # and resumes after it
            assert worker.embedded == len(NOTES)
        finally:
            worker.stop()


class GatedIndex(FlakyIndex):
    """A stand-in whose ``add`` runs ``passes`` forward passes, calling ``between`` before
    each (as the real encoder does); a pass counts itself in ``ran`` and then holds until the
    test opens ``gate``, so what runs when is decided by the test, not by the scheduler."""

    def __init__(self, passes: int) -> None:
        super().__init__()
        self.passes, self.ran = passes, 0
        self.running = threading.Event()
        self.gate = threading.Event()

    def add(self, chunk_ids, entry_ids, texts, between=None):
        for _ in range(self.passes):
            if between is not None:
                between()
            self.ran += 1
            self.running.set()
            self.gate.wait(600)
        super().add(chunk_ids, entry_ids, texts)


def test_a_pause_waits_between_forward_passes_not_only_between_groups(tmp_path):
    """A turn that starts while a group is being embedded holds the rest of that group."""
    with Store(tmp_path / "gs", vectors=False) as store:
        index = GatedIndex(passes=50)
        worker = EmbeddingWorker(store, index, batch_size=8)
        worker._warm = lambda: None
        store.ingest(NOTES[0], Source(role="user"))
        worker.start()
        try:
            assert index.running.wait(60)  # the group's first forward pass is under way
            with foreground():
                paused = FOREGROUND.pauses
                index.gate.set()  # that pass ends; the next one waits for the turn
                assert wait_for(lambda: FOREGROUND.pauses > paused)
                assert index.ran == 1 and index.calls == []  # no pass ran during the turn
            assert wait_for(lambda: store.pending_count() == 0)
            assert index.ran == 50 and len(index.calls) == 1
        finally:
            index.gate.set()
            worker.stop()


def test_the_upsert_waits_for_the_foreground_too(tmp_path):
    """chromadb's upsert holds the GIL (~30-65 ms): the worker's pause point (``between``)
    comes once more after the last forward pass, before the upsert, so a turn that starts while
    a group is embedded is not stalled by its write."""
    index = open_index(tmp_path / "vec")
    if index is None or not index.warm():
        pytest.skip("no embedding model or chromadb")
    counts: list[int] = []
    index.add(["a:0"], ["a"], [NOTES[0]], between=lambda: counts.append(index.count()))
    assert counts == [0, 0]  # one short text: one forward pass, then the upsert's own pause
    assert index.count() == 1
    with pytest.raises(RuntimeError):  # a stop raised there leaves nothing written
        index.add(["b:0"], ["b"], [NOTES[1]], between=_raise_on_second_call())
    assert index.count() == 1


def _raise_on_second_call():
    calls = []

    def between():
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("stop")

    return between


def test_stop_ends_the_worker_at_a_forward_pass_and_leaves_the_group_pending(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        index = SlowIndex(passes=10_000, pause=0.01)  # a "group" of minutes
        worker = EmbeddingWorker(store, index, batch_size=8)
        worker._warm = lambda: None
        store.ingest(NOTES[0], Source(role="user"))
        worker.start()
        assert index.started.wait(60)
        thread = worker._thread
        worker.stop(timeout=30)
        assert not thread.is_alive()  # stopped at a pass, long before the group's end
        assert index.calls == [] and store.pending_count() == 1


def test_the_worker_thread_runs_at_a_lower_os_priority(tmp_path):
    if not hasattr(os, "getpriority") or os.uname().sysname != "Linux":
        pytest.skip("per-thread priorities are a Linux feature")
    seen: list[int] = []

    class Probe(FlakyIndex):
        def add(self, chunk_ids, entry_ids, texts, between=None):
            seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            super().add(chunk_ids, entry_ids, texts)

    with Store(tmp_path / "gs", vectors=False) as store:
        worker = EmbeddingWorker(store, Probe())
        worker._warm = lambda: None
        store.ingest(NOTES[0], Source(role="user"))
        worker.start()
        try:
            assert wait_for(lambda: bool(seen))
        finally:
            worker.stop()
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen[0] == min(19, mine + NICE)  # this (the foreground) thread is unchanged


def _log(n: int) -> str:
    return "".join(f"step {i}: compiled module_{i}.c with 0 warnings\n" for i in range(n))


def test_the_policy_embeds_only_the_head_and_tail_of_logs(tmp_path, monkeypatch):
    monkeypatch.setenv(POLICY_ENV, "2,1")
    with Store(tmp_path / "gs", vectors=False) as store:
        big = store.ingest(_log(600), Source(role="tool", command="make"), cls=ContentClass.LOG)
        data = store.ingest(
            '{"items": [' + ",".join(f'{{"id": {i}}}' for i in range(900)) + "]}",
            Source(role="tool", command="curl"),
            cls=ContentClass.STRUCTURED,
        )
        error = store.ingest(
            "Traceback (most recent call last):\n" + _log(300) + "KeyError: 'user_id'\n",
            Source(role="tool"),
            cls=ContentClass.ERROR,
        )
        note = store.ingest(NOTES[0] * 40, Source(role="user"))
        worker = EmbeddingWorker(store, FlakyIndex())
        worker.drain()
        rows = store.read(
            lambda c: c.execute("SELECT entry_id, n, embedded FROM chunks ORDER BY 1, 2").fetchall()
        )
        by_entry: dict[str, list[int]] = {}
        for eid, n, state in rows:
            if n == -1:  # the gist (store/gist.py) is always embedded
                assert state == INDEXED
                continue
            by_entry.setdefault(eid, []).append(state)
        for entry in (big, data):
            states = by_entry[entry.id]
            assert len(states) > 6
            assert states[:2] == [INDEXED, INDEXED] and states[-1] == INDEXED
            assert set(states[2:-1]) == {SKIPPED}
        for entry in (error, note):  # every other class is embedded whole
            assert len(by_entry[entry.id]) > 1 and set(by_entry[entry.id]) == {INDEXED}
        assert store.pending_count() == 0
        embedded = sum(1 for *_, s in rows if s == INDEXED)
        assert worker.embedded == embedded
        # what is not embedded is still found by its identifiers
        hits = recall(store, "module_301.c", limit=3, mode="fts")
        assert hits and hits[0].entry_id == big.id


def test_announce_counts_only_what_the_policy_embeds(tmp_path, monkeypatch):
    monkeypatch.setenv(POLICY_ENV, "2,1")
    with Store(tmp_path / "gs", vectors=False) as store:
        store.ingest(_log(3000), Source(role="tool", command="make"), cls=ContentClass.LOG)
        worker = EmbeddingWorker(store, FlakyIndex())
        worker._thread = threading.current_thread()  # "alive", without a thread embedding
        assert worker.announce(40_000) is None  # 4 chunks to embed: nothing to wait for
        assert store.pending_count() == 4  # head 2, tail 1 and the gist
        monkeypatch.setenv(POLICY_ENV, "all")
        store.ingest(_log(3001), Source(role="tool", command="make"), cls=ContentClass.LOG)
        assert "indexing" in (worker.announce(40_000) or "")


def test_recall_does_not_wait_for_a_model_that_is_still_loading(tmp_path):
    """Until the worker has the model and the collection, recall is full text: a vector query
    would wait for the load (seconds)."""

    class Loading:
        healthy, ready, permanent_failure = True, False, None

        def query(self, *args, **kwargs):
            raise AssertionError("recall waited for the vector index")

    class Alive:
        alive = True

    with Store(tmp_path / "gs", vectors=False) as store:
        entry = store.ingest(NOTES[2], Source(role="tool"))
        store.vectors, store._worker = Loading(), Alive()
        try:
            hits = recall(store, "KeyError user_id profile", limit=3)
        finally:
            store.vectors = store._worker = None
        assert [h.entry_id for h in hits] == [entry.id] and hits[0].via == "fts"


def test_the_policy_embeds_a_middle_chunk_with_an_error_in_it(tmp_path, monkeypatch):
    monkeypatch.setenv(POLICY_ENV, "1,1")
    text = _log(600).replace(
        "step 300: compiled module_300.c with 0 warnings\n",
        "step 300: ERROR could not extend file: disk quota exceeded on /var/lib/postgres\n",
    )
    with Store(tmp_path / "gs", vectors=False) as store:
        entry = store.ingest(text, Source(role="tool", command="make"), cls=ContentClass.LOG)
        EmbeddingWorker(store, FlakyIndex()).drain()
        rows = store.read(
            lambda c: c.execute(
                "SELECT n, embedded, text FROM chunks WHERE entry_id = ? ORDER BY n", (entry.id,)
            ).fetchall()
        )
        embedded = [n for n, state, _ in rows if state == INDEXED]
        with_error = [n for n, _, t in rows if "disk quota exceeded" in t and n >= 0]
        assert embedded == sorted({-1, 0, rows[-1][0], *with_error}) and len(rows) > 4
        monkeypatch.setenv(POLICY_ENV, "1,1,noerrors")
        again = store.ingest(text + "done\n", Source(role="tool"), cls=ContentClass.LOG)
        EmbeddingWorker(store, FlakyIndex()).drain()
        states = store.read(
            lambda c: c.execute(
                "SELECT embedded FROM chunks WHERE entry_id = ? ORDER BY n", (again.id,)
            ).fetchall()
        )
        assert [s for (s,) in states].count(INDEXED) == 3  # head, tail, gist


def test_error_chunks_of_one_entry_are_capped(tmp_path, monkeypatch):
    """A system log with an error word on every line is not embedded whole for it."""
    from aider_gardener.store import worker as worker_mod

    monkeypatch.setenv(POLICY_ENV, "1,1")
    monkeypatch.setattr(worker_mod, "MAX_ERROR_CHUNKS", 3)
    text = "".join(
        f"WARN DataNode: Got exception while serving blk_{i} to /10.0.0.{i % 250}\n"
        for i in range(800)
    )
    with Store(tmp_path / "gs", vectors=False) as store:
        entry = store.ingest(text, Source(role="tool"), cls=ContentClass.LOG)
        EmbeddingWorker(store, FlakyIndex()).drain()
        rows = store.read(
            lambda c: c.execute(
                "SELECT n, embedded FROM chunks WHERE entry_id = ? ORDER BY n", (entry.id,)
            ).fetchall()
        )
        assert len(rows) > 10
        assert [n for n, s in rows if s == INDEXED] == [-1, 0, 1, 2, 3, rows[-1][0]]


def test_the_benchs_busy_embedder_keeps_busy_and_yields_like_the_worker(tmp_path):
    """``bench run`` measures turns against this stand-in backlog: it must really embed, and
    pause for the foreground as the worker does (else the bench would overstate a turn)."""
    from bench.replay.runner import BusyEmbedder

    busy = BusyEmbedder(NOTES * 4, tmp_path / "busy")
    if not busy.start():
        pytest.skip("no embedding model or chromadb")
    try:
        assert wait_for(lambda: busy.chunks > 0)
        with foreground():
            paused = FOREGROUND.pauses
            # a group already past its last pause point still finishes: wait until the thread
            # has reached its next pause point; from then on nothing moves until the turn ends
            assert wait_for(lambda: FOREGROUND.pauses > paused)
            settled = busy.chunks
            time.sleep(1.0)
            assert busy.chunks == settled
        assert wait_for(lambda: busy.chunks > settled)
        assert busy.index.count() > 0
    finally:
        busy.stop()
