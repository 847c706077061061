"""Fault injection: whatever part of the gardener breaks, Aider's session carries on with plain
Aider behaviour for that step and one warning. The store's own troubles are real here: a second
process holding the lock, a full disk, a read-only store (``tests/store/mounts.py``)."""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from aider.sendchat import sanity_check_messages

import aider_gardener.integration.mixin as mixin_mod
from aider_gardener.integration.ingest import UNKEPT
from aider_gardener.store.recall import recall
from aider_gardener.types import ContentClass
from tests.integration.helpers import text_of
from tests.store.mounts import read_only, small_disk

LOG = "".join(f"INFO job step {i} finished in {i % 17} ms\n" for i in range(2500))


class Boom(RuntimeError):
    pass


def _raise(*args, **kwargs):
    raise Boom("injected fault")


def _session_survives(coder, llm, repo, capsys):
    """Two turns and a large /run output; returns everything printed."""
    (repo / "big.log").write_text(LOG)
    llm.replies = ["First answer.", "Second answer."]
    coder.run(with_message="what does app.py do?")
    coder.commands.cmd_run("cat big.log")
    coder.run(with_message="anything wrong in big.log?")
    assert len(llm.requests) == 2
    assert coder.cur_messages[-1]["content"] == "Second answer."
    for request in llm.requests:
        assert sanity_check_messages(request)
    out = capsys.readouterr()
    return out.out + out.err


def test_store_ingest_raising(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.store import Store

    monkeypatch.setattr(Store, "ingest", _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("gardener: store failed") == 1
    assert "step 2499 finished" in text_of(llm.last)  # not stored, so kept whole (plain Aider)


def test_store_open_raising(make_coder, llm, repo, capsys, monkeypatch):
    import aider_gardener.store as store_pkg

    monkeypatch.setattr(store_pkg, "open_store", _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("could not open the store") == 1


def test_embedder_raising_leaves_full_text_recall(make_coder, llm, repo, capsys, monkeypatch):
    import aider_gardener.store.vectors as vectors

    monkeypatch.setattr(vectors, "open_index", _raise)
    coder = make_coder(max_output=500, vectors=True)
    _session_survives(coder, llm, repo, capsys)
    store = coder.gardener.store
    assert store is not None and store.vectors is None
    assert recall(store, "step 2499 finished")  # FTS5 still finds it


@pytest.mark.parametrize("cls", [c for c in ContentClass if c is not ContentClass.PROMPT])
def test_each_compressor_raising(make_coder, llm, repo, capsys, monkeypatch, cls):
    from aider_gardener.compress.registry import COMPRESSORS

    if cls in COMPRESSORS:
        monkeypatch.setitem(COMPRESSORS, cls, _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert "Traceback" not in text


def test_all_compressors_raising_fall_back_to_head_tail(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.compress.registry import COMPRESSORS

    for cls in list(COMPRESSORS):
        monkeypatch.setitem(COMPRESSORS, cls, _raise)
    coder = make_coder(max_output=500)
    _session_survives(coder, llm, repo, capsys)
    run = next(m for m in coder.cur_messages if "cat big.log" in m["content"])
    assert "compressor failed" in run["content"]  # head/tail, and it says so
    assert "[full output stored: id=" in run["content"]


@pytest.mark.parametrize("name", ["evict", "sync", "inject", "incremental_view"])
def test_gardener_steps_raising(make_coder, llm, repo, capsys, monkeypatch, name):
    monkeypatch.setattr(mixin_mod, name, _raise)
    coder = make_coder(max_output=500, mode="incremental" if name == "incremental_view" else "rag")
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("injected fault") == 1  # one warning, however many turns


def test_recall_raising(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.integration import rag

    monkeypatch.setattr(rag, "recall", _raise)
    coder = make_coder(max_output=500)
    text = _session_survives(coder, llm, repo, capsys)
    assert text.count("gardener: recall failed") == 1


# --- the store in real trouble ----------------------------------------------------------------

HOLD = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect({path!r}, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO session_state(session_id, key, value) VALUES ('x', 'lock', 1)")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """)


@contextlib.contextmanager
def _locked(path: Path):
    """Another real process holds ``BEGIN EXCLUSIVE`` on the store until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(path=str(path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        if holder.poll() is None:
            holder.stdin.write("\n")
            holder.stdin.flush()
            try:
                holder.wait(10)
            except subprocess.TimeoutExpired:
                holder.kill()
                holder.wait()


STORE_TROUBLE = re.compile(r"\b(?:lock|locked|busy|fail|failed|could not|not kept|read-only)\b")


def _trouble_lines(caplog, printed: str) -> list[str]:
    """Every line about the store's trouble the gardener said, logged (a terminal shows these
    on stderr) or printed; not the status line or the compression note."""
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("aider_gardener") and r.levelno >= logging.WARNING
    ]
    shown = [line for line in printed.splitlines() if line.startswith("gardener:")]
    lines = logged + [line for line in shown if line not in logged]
    return [line for line in lines if STORE_TROUBLE.search(line)]


def _message_with(coder, needle: str) -> dict:
    return next(
        m for m in coder.done_messages + coder.cur_messages if needle in m.get("content", "")
    )


def test_a_locked_store_costs_one_wait_and_one_line_per_turn(make_coder, llm, repo, capsys, caplog):
    """Another process holds the store's lock through two real turns: each turn waits for it
    once (it waited on every store call: 10-35 s and 8-10 "failed" lines per turn), one line
    says so, the big output still enters compressed, and once the lock is gone everything the
    user ran in those turns is stored."""
    coder = make_coder(max_output=500)
    llm.replies = [
        "First answer.",
        "Nothing is wrong: every job step in big.log finished.\nNo errors, no warnings.",
        "The parser calls int(x), so a non-numeric x raises ValueError.\nThat is all.",
        "You are welcome.",
    ]
    coder.run(with_message="what does app.py do?")
    store = coder.gardener.store
    (repo / "big.log").write_text(LOG)
    capsys.readouterr()
    turns = ["/run cat big.log", "anything wrong in big.log?", "and what about the parser?"]
    with caplog.at_level(logging.WARNING), _locked(store.path):
        waits = [store.busy_waits["MainThread"]]
        for typed in turns:  # each a user input, as typed at Aider's prompt
            coder.run(with_message=typed)
            waits.append(store.busy_waits["MainThread"])
        lines = _trouble_lines(caplog, capsys.readouterr().out)
    assert len(lines) == 1, lines  # one line, not one per skipped step
    assert "locked by another process" in lines[0] and "skipped" in lines[0]
    per_turn = [b - a for a, b in zip(waits, waits[1:])]
    # at most one wait a turn, not one per store call (none when the background maintenance
    # thread gave up on the lock first in that turn)
    assert max(per_turn) == 1 and per_turn[0] == 1, per_turn
    assert len(llm.requests) == 3
    for request in llm.requests:
        assert sanity_check_messages(request)
    run = _message_with(coder, "cat big.log")
    assert UNKEPT["busy"] in run["content"] and "[full output stored" not in run["content"]
    assert len(run["content"]) < len(LOG) / 20  # compressed all the same
    # the lock is gone: the next turn writes what the locked turns could not
    coder.run(with_message="thanks, that is all")
    run = _message_with(coder, "cat big.log")
    assert UNKEPT["busy"] not in run["content"]
    meta = coder.gardener.meta(run)
    assert meta.stored and f"[full output stored: id={meta.entry_id}]" in run["content"]
    assert store.get(meta.entry_id).original.strip() == LOG.strip()  # the whole output
    for words in ("anything wrong in big.log", "what about the parser", "non-numeric ValueError"):
        assert store.fts_search(words, 1), words
    assert store.unwritten_count() == 0 and not store.busy


BIG_LOG = "".join(
    f"INFO job {i} wrote block {i * 7919 % 100003} of the archive\n" for i in range(20000)
)


def test_a_full_disk_still_compresses_the_output_and_says_so(
    make_coder, llm, repo, tmp_path, capsys, caplog
):
    """The store cannot write (its disk is full): the 20,000-line output still enters the
    chat compressed, with a line saying its original could not be kept (it entered whole)."""
    folder = tmp_path / "store"  # where make_coder's store lives, on a small disk of its own
    with small_disk(folder, 2048) as fill:
        coder = make_coder(max_output=500)
        llm.replies = ["First answer.", "Second answer."]
        coder.run(with_message="what does app.py do?")
        store = coder.gardener.store
        assert store.path.parent == folder and store.degraded is None
        fill(store)
        (repo / "big.log").write_text(BIG_LOG)
        capsys.readouterr()
        with caplog.at_level(logging.WARNING):
            coder.commands.cmd_run("cat big.log")
            coder.run(with_message="did the archive job finish?")
            lines = _trouble_lines(caplog, capsys.readouterr().out)
        run = _message_with(coder, "cat big.log")
        assert len(text_of(llm.last)) < len(BIG_LOG) / 20  # not the verbatim output
        assert UNKEPT["full"] in run["content"] and "[full output stored" not in run["content"]
        meta = coder.gardener.meta(run)
        assert not meta.stored and meta.unkept == UNKEPT["full"]
        assert meta.tokens_now <= 500 < meta.tokens_full / 100
        assert sanity_check_messages(llm.last)
        said = [line for line in lines if "could not store" in line]
        assert len(said) == 1 and "disk full or I/O error" in said[0] and str(folder) in said[0]
        coder.gardener.close()


def test_a_read_only_store_keeps_recall_and_compresses_new_output(
    make_coder, llm, repo, tmp_path, capsys, caplog
):
    """The next session finds the store read-only: what the last one stored is still
    recalled (it opened an empty in-memory store instead), and new output enters compressed
    with a line saying its original is not kept."""
    first = make_coder(max_output=500)
    llm.replies = ["The parser turns text into ints."]
    first.commands.cmd_run("echo 'ZeroDivisionError in compute_ratio at stats.py:88'")
    first.run(with_message="why does compute_ratio fail?")
    store = first.gardener.store
    folder = store.dir
    kept = store.fts_search("compute_ratio ZeroDivisionError", 1)[0][0]
    first.gardener.close()
    (repo / "big.log").write_text(BIG_LOG)
    with read_only(folder):
        with caplog.at_level(logging.WARNING):
            coder = make_coder(max_output=500)
            llm.replies = ["Second answer."]
            coder.commands.cmd_run("cat big.log")
            coder.run(with_message="and the archive job?")
            lines = _trouble_lines(caplog, capsys.readouterr().out)
        store = coder.gardener.store
        try:
            hits = recall(store, "why does compute_ratio fail with ZeroDivisionError", limit=3)
            assert kept in [h.entry_id for h in hits]
            run = _message_with(coder, "cat big.log")
            assert UNKEPT["read-only"] in run["content"]
            assert len(text_of(llm.last)) < len(BIG_LOG) / 20  # not the verbatim output
            meta = coder.gardener.meta(run)
            assert not meta.stored and meta.tokens_now <= 500
            assert store.read_only and store.path == folder / "store.sqlite"
            assert sanity_check_messages(llm.last)
            assert [line for line in lines if "read-only" in line] == [store.read_only]
            assert not [line for line in lines if "failed" in line]
        finally:
            coder.gardener.close()


def test_run_while_the_store_is_locked_names_the_id_it_will_have(make_coder, llm, repo, capsys):
    """The status line after /run gave "(full text: /show None)" when the original could not
    be stored yet."""
    coder = make_coder(max_output=500)
    llm.replies = ["First answer."]
    coder.run(with_message="what does app.py do?")
    (repo / "big.log").write_text(LOG)
    capsys.readouterr()
    with _locked(coder.gardener.store.path):
        coder.commands.cmd_run("cat big.log")
        out = " ".join(capsys.readouterr().out.split())
    meta = coder.gardener.meta(_message_with(coder, "cat big.log"))
    assert "/show None" not in out
    assert f"(full text stored once the store is free: /show {meta.pending_id})" in out
