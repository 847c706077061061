"""continuity/sync.py and the v2 migration that adds the ``facts`` table."""

from __future__ import annotations

import sqlite3
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.continuity.facts import Fact, FactBook
from aider_gardener.continuity.sync import FactSync, load_facts, save_facts
from aider_gardener.store import db
from aider_gardener.store.db import SCHEMA_VERSION, STORE_FILENAME, Store, StoreError


def rows(store: Store, sql: str, args: tuple = ()) -> list[tuple]:
    return store.read(lambda c: c.execute(sql, args).fetchall())


def sample_book() -> FactBook:
    book = FactBook()
    book.add("goal", "goal", "Add a config parser", 1, entry_id="p1")
    book.add(
        "error",
        "test:tests/test_app.py::test_parse",
        "`pytest -q`: FAILED tests/test_app.py::test_parse - AssertionError",
        1,
        entry_id="o1",
        detail={"command": "pytest -q", "entries": ["o1"], "first_turn": 1},
    )
    book.add("goal", "goal", "fix the failing tests", 2, entry_id="p2")  # supersedes the first
    return book


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "gs", vectors=False, session_id="s-now") as s:
        yield s


def test_round_trip(store):
    book = sample_book()
    assert save_facts(store, store.session_id, book) == 3
    loaded = load_facts(store, store.session_id)
    assert [f.to_dict() | {"session": None} for f in loaded] == book.to_list()
    assert all(f.session == "s-now" for f in loaded)
    first = loaded[0]
    assert first.status == "superseded" and first.superseded_by == 3
    assert loaded[1].detail == {"command": "pytest -q", "entries": ["o1"], "first_turn": 1}


def test_upsert_writes_only_changed_rows(store):
    book = sample_book()
    save_facts(store, None, book)
    created = dict(rows(store, "SELECT id, created FROM facts"))
    assert save_facts(store, None, book) == 0  # nothing changed: nothing rewritten
    error = book.find("error")[0]
    book.update(error, status="resolved", detail={"resolved_by": "edit of src/app.py"})
    assert save_facts(store, None, [error]) == 1
    status, detail = rows(store, "SELECT status, detail FROM facts WHERE id = ?", (error.id,))[0]
    assert status == "resolved" and "edit of src/app.py" in detail
    assert dict(rows(store, "SELECT id, created FROM facts")) == created  # first write kept


def test_fact_sync_sends_only_what_changed(store):
    book = sample_book()
    sync = FactSync(store)
    assert sync.flush(book) == 3
    assert sync.flush(book) == 0 and sync.changed(book) == []
    book.add("command", "pytest -q", "`pytest -q` -> 1 failed", 3)
    error = book.find("error")[0]
    book.update(error, text=error.text + " [resolved]")
    assert [f.kind for f in sync.changed(book)] == ["error", "command"]
    assert sync.flush(book) == 2
    assert len(load_facts(store, store.session_id)) == 4


def test_load_previous_session(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False, session_id="s-1") as s:
        save_facts(s, None, [Fact(1, "goal", "goal", "first session goal", 1)])
    time.sleep(0.02)
    with Store(folder, vectors=False, session_id="s-2") as s:
        save_facts(s, None, [Fact(1, "goal", "goal", "second session goal", 1)])
    time.sleep(0.02)
    with Store(folder, vectors=False, session_id="s-3") as s:
        assert [f.text for f in load_facts(s)] == ["second session goal"]
        assert load_facts(s)[0].session == "s-2"
        assert [f.text for f in load_facts(s, "s-1")] == ["first session goal"]
        assert load_facts(s, "s-3") == []
        save_facts(s, None, [Fact(1, "goal", "goal", "third", 1)])
        assert load_facts(s)[0].session == "s-2"  # never its own facts
    with Store(folder, vectors=False, session_id="s-0") as s:
        # a session that started before the others does not resume them
        s.write(lambda c: c.execute("UPDATE sessions SET started = 0 WHERE id = 's-0'"))
        assert load_facts(s) == []


def test_nothing_to_resume(store):
    assert load_facts(store) == []
    assert save_facts(store, None, []) == 0


def test_v1_store_opens_and_migrates(tmp_path):
    folder = tmp_path / "gs"
    folder.mkdir()
    conn = sqlite3.connect(folder / STORE_FILENAME)
    for sql in dict(db.MIGRATIONS)[1]:
        conn.execute(sql)
    conn.execute("INSERT INTO sessions(id, started, last_seen) VALUES ('old', 1.0, 1.0)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with Store(folder, vectors=False, session_id="new") as s:
        assert s.degraded is None
        assert rows(s, "PRAGMA user_version")[0][0] == SCHEMA_VERSION >= 2
        columns = [r[1] for r in rows(s, "PRAGMA table_info(facts)")]
        assert columns == [
            "session_id", "id", "kind", "key", "text", "turn", "entry_id", "status",
            "superseded_by", "detail", "created",
        ]  # fmt: skip
        assert ("old",) in rows(s, "SELECT id FROM sessions")
        save_facts(s, None, sample_book())
    with Store(folder, vectors=False, session_id="newer") as s:  # already migrated
        assert s.degraded is None and len(load_facts(s, "new")) == 3


def test_in_memory_store_works(tmp_path):
    with Store(":memory:", vectors=False, project_root=str(tmp_path)) as s:
        assert save_facts(s, None, sample_book()) == 3
        assert len(load_facts(s, s.session_id)) == 3


def test_closed_store_fails_like_the_rest_of_the_store(tmp_path):
    s = Store(tmp_path / "gs", vectors=False)
    s.close()
    with pytest.raises(StoreError):
        save_facts(s, None, sample_book())
    with pytest.raises(StoreError):
        load_facts(s)


def test_odd_values_are_stored(store):
    fact = Fact(
        7,
        "error",
        "k\udcff",
        "lone surrogate \udcff and NUL \x00",
        2**40,
        detail={"set": {1, 2}, "nested": {"a": [1, "x"]}, 3: "int key"},
    )
    assert save_facts(store, None, [fact]) == 1
    (back,) = load_facts(store, store.session_id)
    assert back.text == "lone surrogate ? and NUL \x00" and back.key == "k?"
    assert back.detail["nested"] == {"a": [1, "x"]} and back.detail["3"] == "int key"
    assert back.turn == 2**40


_facts = st.lists(
    st.builds(
        Fact,
        id=st.integers(1, 10**6),
        kind=st.sampled_from(["goal", "file", "error", "failed", "decision"]),
        key=st.text(max_size=30),
        text=st.text(max_size=200),
        turn=st.integers(0, 10**6),
        entry_id=st.one_of(st.none(), st.text(min_size=1, max_size=12)),
        status=st.sampled_from(["open", "resolved", "superseded"]),
        superseded_by=st.one_of(st.none(), st.integers(1, 10**6)),
        detail=st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=20))),
    ),
    max_size=12,
    unique_by=lambda f: f.id,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_facts)
def test_any_facts_round_trip(store, facts):
    sid = f"h-{time.monotonic_ns()}"
    save_facts(store, sid, facts)
    back = {f.id: f for f in load_facts(store, sid)}
    assert set(back) == {f.id for f in facts}
    for fact in facts:
        got = back[fact.id]
        clean = fact.text.encode("utf-8", "replace").decode("utf-8")
        assert (got.kind, got.text, got.status, got.turn) == (
            fact.kind,
            clean,
            fact.status,
            fact.turn,
        )
        assert got.superseded_by == fact.superseded_by
