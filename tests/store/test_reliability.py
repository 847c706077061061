"""The store under real trouble: concurrent processes, SIGKILL, a corrupt file, a held lock.

Every test uses real processes on a real SQLite file; nothing is mocked.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aider_gardener.store import Store
from aider_gardener.store.db import SCHEMA_VERSION, STORE_FILENAME
from aider_gardener.types import Source

ROOT = Path(__file__).resolve().parents[2]
PER_PROCESS = 300


def _text(tag: str, i: int) -> str:
    return (
        f"$ pytest tests/test_{tag}.py -k case_{i}\n"
        f"FAILED tests/test_{tag}.py::test_case_{i} - AssertionError: {tag} {i}\n"
        + "".join(f"INFO worker {tag} step {j} of item {i}\n" for j in range(8))
    )


def _writer(folder: str, tag: str, n: int, start, results, open_first: bool = True) -> None:
    """Child process: ingest ``n`` entries as fast as possible, report ids and store warnings.
    ``open_first=False`` opens the store only once the start signal fires (a creation race)."""
    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name.startswith("aider_gardener.store"):
                warnings.append(record.getMessage())

    logging.getLogger("aider_gardener").addHandler(Collect(logging.WARNING))
    if open_first:
        store = Store(folder, vectors=False)
        start.wait(30)
    else:
        start.wait(30)
        store = Store(folder, vectors=False)
    ids, not_stored = [], 0
    for i in range(n):
        e = store.ingest(_text(tag, i), Source(role="tool", command=f"pytest -k {tag}"))
        ids.append(e.id)
        not_stored += not e.stored
    store.close()
    results.put((tag, ids, not_stored, warnings, store.degraded))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    folder = tmp_path / "gs"
    Store(folder, vectors=False).close()  # both children open an existing store
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(folder), tag, PER_PROCESS, start, results))
        for tag in ("alpha", "beta")
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let both import and open before the race starts
    start.set()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    all_ids = set()
    for tag, ids, not_stored, warnings, degraded in got:
        assert degraded is None, tag
        assert not_stored == 0, (tag, warnings)
        assert warnings == [], tag
        assert len(set(ids)) == PER_PROCESS
        all_ids.update(ids)
    with Store(folder, vectors=False) as s:
        n = s.read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone()[0])
        assert n == 2 * PER_PROCESS
        assert set(s.get_entries(sorted(all_ids))) == all_ids
        seqs = s.read(lambda c: c.execute("SELECT count(DISTINCT seq) FROM entries").fetchone()[0])
        assert seqs == n
        # each entry's chunks and session link were committed with it
        orphans = s.read(
            lambda c: c.execute(
                "SELECT count(*) FROM entries e WHERE NOT EXISTS"
                " (SELECT 1 FROM chunks k WHERE k.entry_id = e.id)"
            ).fetchone()[0]
        )
        assert orphans == 0
        assert sum(x["entries"] for x in s.sessions()) == n
        s.read(
            lambda c: c.execute("INSERT INTO entries_fts(entries_fts) VALUES('integrity-check')")
        )
        spans = dict(
            s.read(
                lambda c: c.execute(
                    "SELECT command, json_array(min(created), max(created)) FROM entries"
                    " WHERE command LIKE 'pytest -k %' GROUP BY command"
                ).fetchall()
            )
        )
        (a0, a1), (b0, b1) = (json.loads(spans[f"pytest -k {t}"]) for t in ("alpha", "beta"))
        assert a0 < b1 and b0 < a1, "the two writers did not overlap in time"
        hits = s.fts_search("test_case_123", 10)
        assert {s.get(i).command for i, _ in hits} == {"pytest -k alpha", "pytest -k beta"}


def test_processes_creating_the_store_at_once_agree_on_it(tmp_path):
    folder = tmp_path / "fresh"  # does not exist: every child races to create and migrate it
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    results = ctx.Queue()
    tags = ["p0", "p1", "p2"]
    procs = [
        ctx.Process(target=_writer, args=(str(folder), tag, 20, start, results, False))
        for tag in tags
    ]
    for p in procs:
        p.start()
    time.sleep(1.5)
    start.set()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for tag, ids, not_stored, warnings, degraded in got:
        assert degraded is None and not_stored == 0 and warnings == [], tag
    with Store(folder, vectors=False) as s:
        assert s.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
        assert s.read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone()[0]) == 60
        assert len(s.sessions()) == 4


CHILD = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {root!r})
    from aider_gardener.store import Store
    from aider_gardener.types import Source
    store = Store({folder!r}, vectors=False)
    fd = os.open({ids!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    i = 0
    while True:
        body = "".join(
            f"line {{j}} of output {{i}}: building module_{{i}}_{{j}}\\n" for j in range(60)
        )
        e = store.ingest(body, Source(role="tool", command="make"))
        if e.stored:
            os.write(fd, (e.id + "\\n").encode())
        i += 1
    """)


def test_sigkill_mid_ingest_keeps_every_committed_entry(tmp_path):
    folder = tmp_path / "gs"
    ids_file = tmp_path / "ids.txt"
    script = CHILD.format(root=str(ROOT), folder=str(folder), ids=str(ids_file))
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if ids_file.exists() and ids_file.read_text().count("\n") >= 150:
                break
            assert child.poll() is None, "child died on its own"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    lines = ids_file.read_text().split("\n")
    committed = [x for x in lines[:-1] if x]  # the last piece may be a torn write
    assert len(committed) >= 150
    with Store(folder, vectors=False) as s:
        assert s.degraded is None
        assert s.read(lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"
        present = s.get_entries(committed)
        assert set(committed) <= set(present)
        # and the store keeps working
        assert s.ingest("after the crash " * 20).stored


def _corrupt_whole(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size or 8192))


def _corrupt_pages(path: Path) -> None:
    """Keep the valid header, smash the b-tree pages behind it."""
    data = bytearray(path.read_bytes())
    assert len(data) > 4 * 4096
    noise = os.urandom(len(data) - 4096)
    data[4096:] = noise
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_corrupt_whole, _corrupt_pages], ids=["garbage", "pages"])
def test_corrupt_file_is_moved_aside_and_a_fresh_store_starts(tmp_path, caplog, damage):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as s:
        for i in range(40):
            s.ingest(_text("corrupt", i))
        path = s.path
    damage(path)
    damaged = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
        s = Store(folder, vectors=False)
    try:
        moved = [
            p for p in folder.glob(f"{STORE_FILENAME}.corrupt-*") if not p.name.endswith("-wal")
        ]
        assert len(moved) == 1
        assert moved[0].read_bytes() == damaged  # kept for inspection, byte for byte
        msgs = [r.getMessage() for r in caplog.records if r.name.startswith("aider_gardener.store")]
        assert len(msgs) == 1 and "corrupt" in msgs[0] and moved[0].name in msgs[0]
        assert s.degraded is None and s.path == path
        assert s.list_entries() == []
        e = s.ingest("a fresh start " * 20)
        assert e.stored and s.get(e.id) is not None
    finally:
        s.close()
    assert sqlite3.connect(path).execute("PRAGMA quick_check").fetchone()[0] == "ok"


HOLD = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect({path!r}, isolation_level=None)
    {setup}
    conn.execute("BEGIN {kind}")
    conn.execute("INSERT INTO session_state(session_id, key, value) VALUES ('x', 'lock', 1)")
    print("locked", flush=True)
    time.sleep(60)
    """)


def _hold_lock(path: Path, kind: str, exclusive_mode: bool) -> subprocess.Popen:
    setup = 'conn.execute("PRAGMA locking_mode = EXCLUSIVE")' if exclusive_mode else ""
    script = HOLD.format(path=str(path), setup=setup, kind=kind)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return child


def test_store_locked_at_open_degrades_with_one_message(tmp_path, caplog):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as s:
        path = s.path
    holder = _hold_lock(path, "EXCLUSIVE", exclusive_mode=True)
    try:
        with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
            s = Store(folder, vectors=False, busy_timeout=0.3)
            e = s.ingest("works in memory " * 10)
            found = s.fts_search("memory", 5)
            s.close()
        assert s.degraded and "locked by another process" in s.degraded
        assert e.stored and [i for i, _ in found] == [e.id]
        msgs = [r.getMessage() for r in caplog.records if r.name.startswith("aider_gardener.store")]
        assert msgs == [s.degraded]
    finally:
        holder.kill()
        holder.wait()
    assert not list(folder.glob("*.corrupt-*"))  # a lock is not corruption


def test_lock_held_during_session_fails_writes_softly(tmp_path, caplog):
    folder = tmp_path / "gs"
    s = Store(folder, vectors=False, busy_timeout=0.3)
    before = s.ingest("written before the lock " * 10)
    holder = _hold_lock(s.path, "IMMEDIATE", exclusive_mode=False)
    try:
        with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
            blocked = [s.ingest(f"blocked write number {i} " * 10) for i in range(3)]
            assert s.forget(before.id) is False
        assert all(not e.stored for e in blocked)
        assert all(e.summary for e in blocked)  # the caller still gets a usable result
        # WAL: reading goes on while another process writes
        assert [i for i, _ in s.fts_search("written before", 5)] == [before.id]
        msgs = [r.getMessage() for r in caplog.records if r.name.startswith("aider_gardener.store")]
        assert len([m for m in msgs if "could not store" in m]) == 1  # said once, not per call
    finally:
        holder.kill()
        holder.wait()
    after = s.ingest("written after the lock " * 10)
    assert after.stored and s.get(after.id) is not None
    assert s.forget(before.id)
    s.close()
