"""Background maintenance: TTL expiry, purge, re-scoring, vacuum, and the thread itself."""

from __future__ import annotations

import logging
import os
import time

import pytest

from aider_gardener.store import Store, maintenance, token_states
from aider_gardener.store.maintenance import (
    PURGE_AFTER,
    Maintenance,
    expire,
    free_space,
    purge,
    rescore,
    run_once,
    vacuum_if_large,
)
from aider_gardener.store.priority import DAY
from tests.store.mounts import read_only

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "gs", vectors=False)
    yield s
    s.close()


def count(s: Store, sql: str, args=()) -> int:
    return s.read(lambda c: c.execute(sql, args).fetchone()[0])


def test_expire_soft_deletes_only_unpinned_entries_past_their_ttl(store):
    short = store.ingest("INFO short lived\n" * 20, cls="log", ttl=60)
    pinned = store.ingest("INFO pinned one\n" * 20, cls="log", ttl=60, pinned=True)
    keep = store.ingest("a prompt to keep", cls="prompt")  # ttl None
    later = store.ingest("INFO longer ttl\n" * 20, cls="log", ttl=3600)
    assert keep.ttl is None
    assert expire(store, now=time.time() + 30) == 0
    assert expire(store, now=time.time() + 120) == 1
    got = store.get(short.id)
    assert not got.active and got.deleted_reason == "ttl" and got.deleted_at
    for e in (pinned, keep, later):
        assert store.get(e.id).active
    assert store.restore(short.id) and store.get(short.id).active
    # restore counts as access: the TTL starts again
    assert expire(store, now=time.time() + 30) == 0


def test_ttl_counts_from_last_access(store):
    e = store.ingest("INFO accessed later\n" * 20, cls="log", ttl=100)
    store.write(
        lambda c: c.execute(
            "UPDATE entries SET last_access = last_access + 1000 WHERE id = ?", (e.id,)
        )
    )
    assert expire(store, now=time.time() + 500) == 0
    assert expire(store, now=time.time() + 1200) == 1


def test_purge_removes_old_soft_deletes_for_good(store):
    gone = store.ingest("ERROR to be purged soon\n" * 30, cls="log")
    recent = store.ingest("ERROR forgotten just now\n" * 30, cls="log")
    alive = store.ingest("ERROR still active\n" * 30, cls="log")
    store.forget(gone.id)
    store.write(
        lambda c: c.execute(
            "UPDATE entries SET deleted_at = deleted_at - ? WHERE id = ?",
            (PURGE_AFTER + 10, gone.id),
        )
    )
    store.forget(recent.id)
    kept = [(f"{e.id}:0", b"states") for e in (gone, alive)]  # the reranker's, as if kept
    assert token_states.save(store, kept)
    assert purge(store) == [gone.id]
    assert store.get(gone.id) is None
    assert store.get(recent.id) is not None and store.get(alive.id).active
    for table, col in (
        ("chunks", "entry_id"),
        ("entry_keys", "entry_id"),
        ("entry_sessions", "entry_id"),
        ("token_states", "entry_id"),
    ):
        assert count(store, f"SELECT count(*) FROM {table} WHERE {col} = ?", (gone.id,)) == 0
    assert count(store, "SELECT count(*) FROM token_states WHERE entry_id = ?", (alive.id,)) == 1
    store.read(
        lambda c: c.execute("INSERT INTO entries_fts(entries_fts) VALUES('integrity-check')")
    )
    assert [i for i, _ in store.fts_search("purged", 5)] == []
    assert store.restore(gone.id) is False


def test_purge_deletes_vectors_when_an_index_is_present(store):
    deleted: list[list[str]] = []

    class Recorder:  # stands in for B's VectorIndex: only delete_entries is exercised here
        def delete_entries(self, ids):
            deleted.append(list(ids))

    store.vectors = Recorder()
    e = store.ingest("WARN vector purge\n" * 10, cls="log")
    store.forget(e.id)
    assert purge(store, now=time.time() + PURGE_AFTER + 1) == [e.id]
    assert deleted == [[e.id]]
    store.vectors = None


def test_rescore_decays_priorities_but_not_pinned(store):
    a = store.ingest("INFO decays\n" * 20, cls="log")
    b = store.ingest("INFO pinned\n" * 20, cls="log", pinned=True)
    assert rescore(store, now=time.time() + 3 * DAY) == 2
    assert store.get(a.id).priority < a.priority
    assert store.get(b.id).priority == pytest.approx(b.priority)


def test_vacuum_gives_space_back(store):
    blobs = [store.ingest(os.urandom(100_000).hex() + f"\n{i}", cls="log").id for i in range(8)]
    store.read(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    for eid in blobs:
        store.forget(eid)
    purge(store, now=time.time() + PURGE_AFTER + 1)
    free, total = free_space(store)
    assert free > 1 << 20
    assert vacuum_if_large(store, min_free_bytes=free * 2) is False  # below the threshold
    assert vacuum_if_large(store, min_free_bytes=1 << 20, min_free_share=0.1) is True
    free_after, total_after = free_space(store)
    assert free_after == 0 and total_after < total
    assert os.path.getsize(store.path) < total
    assert vacuum_if_large(store, min_free_bytes=1, min_free_share=0.0) is False


def test_run_once_reports_each_step(store):
    store.ingest("INFO expiring\n" * 20, cls="log", ttl=1)
    report = run_once(store, now=time.time() + 10)
    assert report["expired"] == 1 and report["purged"] == 0
    assert report["rescored"] == 0  # nothing active is left
    assert report["vacuumed"] is False and report["heartbeat"] is True


def test_run_once_survives_a_failing_step(store, caplog, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(maintenance, "expire", broken)
    store.ingest("INFO still rescored\n" * 20, cls="log")
    with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
        report = run_once(store)
        run_once(store)
    assert report["expired"] is None and report["rescored"] == 1
    msgs = [r.getMessage() for r in caplog.records if "disk on fire" in r.getMessage()]
    assert len(msgs) == 1  # logged once, not on every run


def test_thread_runs_repeatedly_and_stops(store):
    e = store.ingest("INFO thread expiry\n" * 20, cls="log", ttl=0.01)
    worker = Maintenance(store, interval=0.05, first_delay=0.0)
    worker.start()
    deadline = time.monotonic() + 120  # a bound on a wait, not a speed test
    while worker.runs < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    worker.stop()
    assert worker.runs >= 3 and not worker.alive
    assert worker.last["heartbeat"] is True
    assert not store.get(e.id).active


def test_started_maintenance_stops_when_its_store_closes(tmp_path):
    s = Store(tmp_path / "gs", vectors=False)
    thread = maintenance.start(s, 0.05)
    assert thread is not None and thread.alive
    s.close()
    assert not thread.alive


def test_no_maintenance_for_a_store_that_cannot_be_written(tmp_path):
    folder = tmp_path / "gs"
    Store(folder, vectors=False).close()
    with read_only(folder):
        with Store(folder, vectors=False) as s:
            assert s.read_only is not None
            assert maintenance.start(s, 0.05) is None


def test_thread_outlives_a_closed_store_without_raising(tmp_path, caplog):
    s = Store(tmp_path / "gs", vectors=False)
    worker = Maintenance(s, interval=0.02, first_delay=0.0)
    s.close()  # closed under the thread: every step fails, the thread keeps going quietly
    worker.start()
    deadline = time.monotonic() + 120  # two runs, however busy the machine
    while worker.runs < 2 and worker.alive and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.alive and worker.runs >= 2
    worker.stop()
