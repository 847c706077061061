"""The store under real trouble: concurrent processes, SIGKILL, a corrupt file, a held lock, a
full disk, a read-only file or folder.

Every test uses real processes on a real SQLite file; nothing is mocked. Full disks and
read-only files are real where mount rights allow (``mounts.py``).
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from aider_gardener.store import Store, maintenance, salvage
from aider_gardener.store.db import SCHEMA_VERSION, STORE_FILENAME
from aider_gardener.store.recall import recall
from aider_gardener.types import Source
from tests.store.mounts import read_only, small_disk

ROOT = Path(__file__).resolve().parents[2]
PER_PROCESS = 300


def _text(tag: str, i: int) -> str:
    return (
        f"$ pytest tests/test_{tag}.py -k case_{i}\n"
        f"FAILED tests/test_{tag}.py::test_case_{i} - AssertionError: {tag} {i}\n"
        + "".join(f"INFO worker {tag} step {j} of item {i}\n" for j in range(8))
    )


def _writer(
    folder: str, tag: str, n: int, start, results, open_first: bool = True, ready=None, meet=None
) -> None:
    """Child process: ingest ``n`` entries as fast as possible, report ids and store warnings.
    ``open_first=False`` opens the store only once the start signal fires (a creation race).
    ``ready`` (a queue) hears ``tag`` once the child waits for the start signal; ``meet`` (a
    barrier) is passed after the first entry, so the writers overlap whatever the scheduler."""
    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name.startswith("aider_gardener.store"):
                warnings.append(record.getMessage())

    logging.getLogger("aider_gardener").addHandler(Collect(logging.WARNING))
    if open_first:
        store = Store(folder, vectors=False)
    if ready is not None:
        ready.put(tag)
    start.wait(300)
    if not open_first:
        store = Store(folder, vectors=False)
    ids, not_stored = [], 0
    for i in range(n):
        e = store.ingest(_text(tag, i), Source(role="tool", command=f"pytest -k {tag}"))
        ids.append(e.id)
        not_stored += not e.stored
        if i == 0 and meet is not None:
            meet.wait(300)
    store.close()
    results.put((tag, ids, not_stored, warnings, store.degraded))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    folder = tmp_path / "gs"
    Store(folder, vectors=False).close()  # both children open an existing store
    ctx = mp.get_context("spawn")
    start, ready, meet = ctx.Event(), ctx.Queue(), ctx.Barrier(2)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_writer,
            args=(str(folder), tag, PER_PROCESS, start, results),
            kwargs={"ready": ready, "meet": meet},
        )
        for tag in ("alpha", "beta")
    ]
    for p in procs:
        p.start()
    for _ in procs:  # both imported and opened the store before the race starts
        ready.get(timeout=300)
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
    start, ready = ctx.Event(), ctx.Queue()
    results = ctx.Queue()
    tags = ["p0", "p1", "p2"]
    procs = [
        ctx.Process(
            target=_writer,
            args=(str(folder), tag, 20, start, results, False),
            kwargs={"ready": ready},
        )
        for tag in tags
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every child imported and waits: they open the store at once
        ready.get(timeout=300)
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
        assert "no entry could be saved" in msgs[0]  # nothing of these two can be read
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
    time.sleep(600)  # killed by the test; long enough for a slow machine
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


def test_lock_held_during_session_queues_writes_with_one_line(tmp_path, caplog):
    """A lock held past ``busy_timeout``: one wait, one line, then every write tries once
    without waiting; the entries that could not be written are written once it is free."""
    folder = tmp_path / "gs"
    s = Store(folder, vectors=False, busy_timeout=0.3)
    before = s.ingest("written before the lock " * 10)
    holder = _hold_lock(s.path, "IMMEDIATE", exclusive_mode=False)
    try:
        with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
            blocked = [s.ingest(f"blocked write number {i} " * 10) for i in range(3)]
            assert s.forget(before.id) is False
            s.new_turn()  # the next turn waits once more, and says nothing new
            blocked.append(s.ingest("blocked in the next turn " * 10))
            s.bump("recalls")
        assert all(not e.stored and e.not_stored == "busy" for e in blocked)
        assert all(e.summary for e in blocked)  # the caller still gets a usable result
        assert s.busy and s.unwritten_count() == 4
        assert s.busy_waits["MainThread"] == 2  # one per turn, not one per call
        # WAL: reading goes on while another process writes
        assert [i for i, _ in s.fts_search("written before", 5)] == [before.id]
        msgs = [r.getMessage() for r in caplog.records if r.name.startswith("aider_gardener.store")]
        assert len(msgs) == 1 and "locked by another process" in msgs[0]  # said once
    finally:
        holder.kill()
        holder.wait()
    written, dropped = s.flush_unwritten()
    assert [e.id for e in written] == [e.id for e in blocked] and dropped == []
    assert all(e.stored for e in written) and not s.busy
    assert set(s.get_entries([e.id for e in blocked])) == {e.id for e in blocked}
    assert s.fts_search("blocked in the next turn", 1)[0][0] == blocked[-1].id
    after = s.ingest("written after the lock " * 10)
    assert after.stored and s.get(after.id) is not None
    assert s.forget(before.id)
    s.close()


def test_entries_still_unwritten_at_close_are_written_then(tmp_path):
    folder = tmp_path / "gs"
    s = Store(folder, vectors=False, busy_timeout=0.3)
    holder = _hold_lock(s.path, "IMMEDIATE", exclusive_mode=False)
    try:
        queued = s.ingest("queued while locked " * 10)
        assert queued.not_stored == "busy"
    finally:
        holder.kill()
        holder.wait()
    s.close()
    with Store(folder, vectors=False) as again:
        assert again.get(queued.id).original == queued.original


# --- one bad page: salvage --------------------------------------------------------------------


def _fill_store(folder: Path, n: int) -> tuple[Path, list[str]]:
    with Store(folder, vectors=False) as s:
        ids = [
            s.ingest(_text("salvage", i), Source(role="tool", command="pytest")).id
            for i in range(n)
        ]
        assert s.read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone()[0]) == n
        return s.path, ids


def _garbage_mid_file(path: Path) -> bytes:
    """4 KB of random bytes over the middle of the file, as a bad sector or a stray write."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 4096] = os.urandom(4096)
    path.write_bytes(bytes(data))
    return bytes(data)


def _store_messages(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("aider_gardener.store") and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize("cli", ["default", "none"], ids=["sqlite3-cli-if-it-works", "rows-only"])
def test_one_corrupt_page_keeps_the_rest_of_the_store(tmp_path, caplog, monkeypatch, cli):
    if cli == "none":
        monkeypatch.setattr(salvage, "SQLITE_CLI", None)
    folder = tmp_path / "gs"
    path, ids = _fill_store(folder, 300)
    damaged = _garbage_mid_file(path)
    probe = sqlite3.connect(path.as_uri() + "?immutable=1", uri=True)
    try:
        verdict = probe.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.DatabaseError as err:
        verdict = str(err)
    probe.close()
    assert verdict != [("ok",)]  # really damaged: SQLite itself says so
    with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
        s = Store(folder, vectors=False)
    try:
        back = s.get_entries(ids)
        assert len(back) >= 0.9 * len(ids)  # one page of 4 KB holds a few entries at most
        msgs = _store_messages(caplog)
        assert len(msgs) == 1
        said = re.search(r"saved (\d+) of (\d+) entries", msgs[0])
        assert said, msgs[0]
        assert int(said[1]) == len(back) and len(back) <= int(said[2]) <= len(ids)
        moved = [p for p in folder.glob(f"{STORE_FILENAME}.corrupt-*")]
        assert len(moved) == 1 and moved[0].read_bytes() == damaged  # kept, byte for byte
        assert moved[0].name in msgs[0]
        for i in range(0, len(ids), 25):
            if ids[i] not in back:
                continue
            assert back[ids[i]].original == _text("salvage", i)  # the original, exactly
            query = f"FAILED tests/test_salvage.py::test_case_{i}"
            assert recall(s, query, limit=1)[0].entry_id == ids[i]  # recall finds it again
        # the fresh store is whole: full-text index, chunks and session links for every entry
        s.read(
            lambda c: c.execute("INSERT INTO entries_fts(entries_fts) VALUES ('integrity-check')")
        )
        assert s.read(lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"
        lacking = s.read(
            lambda c: c.execute(
                "SELECT count(*) FROM entries e WHERE NOT EXISTS (SELECT 1 FROM chunks k"
                " WHERE k.entry_id = e.id) OR NOT EXISTS (SELECT 1 FROM entry_sessions x"
                " WHERE x.entry_id = e.id) OR NOT EXISTS (SELECT 1 FROM entry_keys y"
                " WHERE y.entry_id = e.id)"
            ).fetchone()[0]
        )
        assert lacking == 0
        assert len(s.sessions()) == 2  # the salvaged one and this one
        assert s.ingest("written after the salvage " * 20).stored
    finally:
        s.close()


def test_a_lost_table_page_is_made_again_from_the_entries(tmp_path, caplog):
    """The pages of chunks and keys are lost, the entries are not: chunks are made again and
    wait for the embedding worker; keys and session links are made again."""
    folder = tmp_path / "gs"
    path, ids = _fill_store(folder, 40)
    with sqlite3.connect(path) as c:
        roots = dict(c.execute("SELECT name, rootpage FROM sqlite_master").fetchall())
    data = bytearray(path.read_bytes())
    for table in ("chunks", "entry_keys", "entry_sessions"):
        at = (roots[table] - 1) * 4096
        data[at : at + 4096] = os.urandom(4096)
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
        s = Store(folder, vectors=False)
    try:
        assert set(s.get_entries(ids)) == set(ids)
        assert "saved 40 of 40 entries" in _store_messages(caplog)[0]
        assert s.pending_count() > 0  # remade chunks are queued for their vectors
        assert s.pending_count() == s.read(
            lambda c: c.execute("SELECT count(*) FROM chunks").fetchone()[0]
        )
        assert s.fts_search("test_case_7", 5)[0][0] == ids[7]
        scoped = Store(folder, vectors=False, scope="session", session_id=s.get(ids[0]).session_id)
        try:
            assert set(scoped.get_entries(ids)) == set(ids)  # session links made again
        finally:
            scoped.close()
    finally:
        s.close()


def test_salvage_copies_every_kind_of_entry_exactly(tmp_path):
    """What the store keeps in odd forms (bytes, invalid UTF-8, lone surrogates, a long log)
    survives the id check salvage makes on every entry."""
    inputs = [
        b"\x00\x01binary\xff\xfe" * 40,
        "Gr\xfc\xdfe latin-1 text ".encode("latin-1") * 10,
        "lone \udcff surrogate " * 10,
        "".join(f"INFO step {i} done\n" for i in range(3000)),
        "plain prose about the parser and its tests " * 5,
    ]
    with Store(tmp_path / "a", vectors=False) as a:
        entries = [a.ingest(x) for x in inputs]
        source = a.path
    with Store(tmp_path / "b", vectors=False) as b:
        report = salvage.salvage(source, b)
        assert report.entries == len(inputs) and report.unreadable == 0
        for e in entries:
            got = b.get(e.id)
            assert got is not None and got.original == e.original and got.raw == e.raw
    assert sqlite3.connect(source).execute("PRAGMA quick_check").fetchone()[0] == "ok"


# --- a full disk, a read-only store -----------------------------------------------------------


BIG = "".join(f"INFO job {i} wrote block {i * 7919 % 100003} of the archive\n" for i in range(8000))


def test_a_full_disk_fails_ingest_softly_and_recall_goes_on(tmp_path, caplog):
    folder = tmp_path / "gs"
    with small_disk(folder, 1024) as fill:
        s = Store(folder, vectors=False)
        try:
            kept = [s.ingest(_text("kept", i)) for i in range(5)]
            assert all(e.stored for e in kept)
            how = fill(s)
            with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
                lost = [
                    s.ingest(BIG + f"run {i}\n", Source(role="tool", command="tar"))
                    for i in range(3)
                ]
            assert not any(e.stored for e in lost), how
            assert all(e.tokens_summary < e.tokens_original / 10 for e in lost)  # still compressed
            msgs = _store_messages(caplog)
            assert len(msgs) == 1, msgs  # said once, not per entry
            assert "disk full or I/O error" in msgs[0] and str(s.path) in msgs[0]
            assert all(e.not_stored == "full" for e in lost)
            assert set(s.get_entries([e.id for e in kept])) == {e.id for e in kept}
            assert s.fts_search("test_case_3", 1)[0][0] == kept[3].id
            assert s.unwritten_count() == 0  # not queued: a full disk is not a lock
        finally:
            s.close()


def test_a_full_disk_at_open_names_the_disk_and_still_reads_the_store(tmp_path, caplog):
    folder = tmp_path / "gs"
    with small_disk(folder, 1024) as fill:
        with Store(folder, vectors=False) as s:
            kept = [s.ingest(_text("kept", i)) for i in range(5)]
            path = s.path
        if fill(None) != "tmpfs":
            pytest.skip("needs a real full disk (mount rights)")
        with caplog.at_level(logging.WARNING, logger="aider_gardener.store"):
            s = Store(folder, vectors=False)
        try:
            assert set(s.get_entries([e.id for e in kept])) == {e.id for e in kept}
            assert recall(s, "test_case_2 AssertionError", limit=1)[0].entry_id == kept[2].id
            msgs = _store_messages(caplog)
            assert len(msgs) == 1 and msgs[0] == s.degraded
            assert msgs[0].startswith(f"gardener: disk full or I/O error: {path} (")
            assert s.read_only and s.path == path
            e = s.ingest(BIG)
            assert not e.stored and e.not_stored == "read-only"
        finally:
            s.close()
        assert len(_store_messages(caplog)) == 1


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_store_is_still_recalled(tmp_path, caplog, what):
    """A read-only file opens with ``mode=ro`` (its folder still takes the -shm file); a
    read-only folder with ``immutable=1``. Either way recall finds every earlier entry (it
    used to open an empty in-memory store) and nothing else is said after the open line."""
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as s:
        kept = [
            s.ingest(_text("kept", i), Source(role="tool", command="pytest")) for i in range(20)
        ]
        path = s.path
    before = path.read_bytes()
    with read_only(path if what == "file" else folder):
        with caplog.at_level(logging.WARNING, logger="aider_gardener"):
            s = Store(folder, vectors=False)
            try:
                assert set(s.get_entries([e.id for e in kept])) == {e.id for e in kept}
                assert recall(s, "test_case_13 AssertionError", limit=1)[0].entry_id == kept[13].id
                assert s.get(kept[4].id).original == kept[4].original
                assert s.read_only and s.degraded == s.read_only and s.path == path
                assert "read-only" in s.read_only and str(path) in s.read_only
                e = s.ingest(BIG, Source(role="tool", command="tar"))
                assert not e.stored and e.not_stored == "read-only"
                assert e.tokens_summary < e.tokens_original / 10
                s.bump("recalls")
                s.touch([kept[0].id])
                assert s.forget(kept[1].id) is False
                maintenance.run_once(s)
            finally:
                s.close()
        msgs = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert msgs == [s.read_only]  # one line, at open
    assert path.read_bytes() == before
