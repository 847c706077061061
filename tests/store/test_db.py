"""The store core on a real SQLite file: layout, schema, ingest, search, lifecycle, sessions."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.pipeline import compress, entry_id
from aider_gardener.store import Entry, Store, db, open_store
from aider_gardener.store.db import (
    SCHEMA_VERSION,
    STORE_DIRNAME,
    STORE_FILENAME,
    resolve_location,
)
from aider_gardener.store.query import build_match
from aider_gardener.store.recall import recall
from aider_gardener.types import ContentClass, Source
from tests.conftest import tool_output_files

PYTEST_LOG = "pytest_failures_typeerror__X_Ray_LLM.log"


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "gs", vectors=False)
    yield s
    s.close()


def read(tool_outputs_dir, name: str) -> str:
    return (tool_outputs_dir / name).read_text(encoding="utf-8", errors="replace")


def sql(s: Store, query: str, args=()):
    return s.read(lambda c: c.execute(query, args).fetchall())


def store_warnings(caplog) -> list[logging.LogRecord]:
    """The store's own warnings (compressors under construction may log theirs)."""
    return [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("aider_gardener.store")
    ]


def fts_ok(s: Store) -> None:
    """FTS5's own check that the external-content index matches the entries table."""
    s.read(lambda c: c.execute("INSERT INTO entries_fts(entries_fts) VALUES ('integrity-check')"))


# --- location, file, schema -----------------------------------------------------------------


def test_default_location_is_under_the_git_root(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    folder, path = resolve_location()
    assert folder == repo.resolve() / STORE_DIRNAME
    assert path == folder / STORE_FILENAME
    with open_store(vectors=False) as s:
        assert s.dir == folder and s.path == path and path.is_file()


def test_explicit_location_may_be_a_folder_or_a_file(tmp_path):
    assert resolve_location(tmp_path / "x") == (tmp_path / "x", tmp_path / "x" / STORE_FILENAME)
    assert resolve_location(tmp_path / "y" / "my.db") == (tmp_path / "y", tmp_path / "y" / "my.db")


def test_outside_a_repository_the_folder_goes_in_the_directory(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert resolve_location(root=plain)[0] == plain.resolve() / STORE_DIRNAME


def _git(repo, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def _staged_after_add_all(repo) -> list[str]:
    _git(repo, "add", "-A")
    return _git(repo, "diff", "--cached", "--name-only").split()


@pytest.fixture
def git_repo(tmp_path):
    """A real repository without Aider's ``.aider*`` ignore line (``--no-gitignore``)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "app.py").write_text("print('hi')\n")
    return repo


def test_git_add_all_never_stages_the_store(git_repo):
    with Store(root=git_repo, vectors=False) as s:
        assert s.dir == git_repo.resolve() / STORE_DIRNAME
        s.ingest("API_KEY=secret-value printed by a command " * 20, Source(role="tool"))
        (s.dir / "checkpoints").mkdir()
        (s.dir / "checkpoints" / "20250101-120000.md").write_text("---\nsession: x\n---\n")
        (s.dir / "shown").mkdir()
        (s.dir / "shown" / "x.txt").write_text("an original shown in full")
        staged = _staged_after_add_all(git_repo)
    assert staged == ["app.py"]  # the project's file, nothing of .aider.gardener/
    assert (s.dir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert _git(git_repo, "status", "--porcelain", "--ignored").count(STORE_DIRNAME) == 1


def test_an_existing_store_folder_without_gitignore_gets_one(git_repo):
    with Store(root=git_repo, vectors=False) as s:
        folder = s.dir
    (folder / ".gitignore").unlink()  # a folder an older gardener made
    assert any(p.startswith(STORE_DIRNAME) for p in _staged_after_add_all(git_repo))
    _git(git_repo, "reset", "-q")
    with Store(root=git_repo, vectors=False):
        pass
    assert _staged_after_add_all(git_repo) == ["app.py"]


def test_a_store_file_in_the_project_root_never_hides_the_project(git_repo):
    """``--gardener-store x.sqlite`` in the project: its folder is the project's, so no
    ``.gitignore`` of ``*`` is written there (a store folder of its own gets one)."""
    with Store(git_repo / "mine.sqlite", vectors=False):
        pass
    assert not (git_repo / ".gitignore").exists()
    assert "app.py" in _staged_after_add_all(git_repo)
    with Store(git_repo / "stores" / "new", vectors=False) as s:
        assert (s.dir / ".gitignore").is_file()
    assert not [p for p in _staged_after_add_all(git_repo) if p.startswith("stores/")]


def test_file_is_private_and_in_wal_mode(store):
    store.ingest("hello world " * 50, Source(role="tool"))
    mode = stat.S_IMODE(os.stat(store.path).st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(os.stat(store.dir).st_mode) == 0o700
    wal = store.path.with_name(store.path.name + "-wal")
    assert wal.exists() and stat.S_IMODE(os.stat(wal).st_mode) == 0o600
    assert sql(store, "PRAGMA journal_mode")[0][0] == "wal"
    assert sql(store, "PRAGMA auto_vacuum")[0][0] == 2  # incremental


def test_existing_loose_file_is_tightened(tmp_path):
    folder = tmp_path / "gs"
    folder.mkdir()
    path = folder / STORE_FILENAME
    path.touch()
    os.chmod(path, 0o644)
    with Store(folder, vectors=False):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_schema_version_and_tables(store):
    assert sql(store, "PRAGMA user_version")[0][0] == SCHEMA_VERSION
    names = {r[0] for r in sql(store, "SELECT name FROM sqlite_master")}
    for table in ("entries", "entries_fts", "chunks", "sessions", "session_state"):
        assert table in names
    columns = {r[1] for r in sql(store, "PRAGMA table_info(entries)")}
    agreed = {
        "id", "session_id", "created", "cls", "role", "command", "tool", "path", "original",
        "raw", "summary", "tokens_original", "tokens_summary", "ratio", "priority", "pinned",
        "last_access", "ttl", "active", "resolved",
    }  # fmt: skip
    assert agreed <= columns
    chunk_cols = [r[1] for r in sql(store, "PRAGMA table_info(chunks)")]
    assert chunk_cols == ["chunk_id", "entry_id", "n", "text", "embedded", "context"]


def test_migrations_run_once_in_order(tmp_path, monkeypatch):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as s:
        s.ingest("kept across the migration " * 20)
        old_id = s.list_entries()[0].id
    nxt = db.SCHEMA_VERSION + 1
    extra = (nxt, ("ALTER TABLE entries ADD COLUMN note TEXT DEFAULT 'migrated'",))
    monkeypatch.setattr(db, "MIGRATIONS", [*db.MIGRATIONS, extra])
    monkeypatch.setattr(db, "SCHEMA_VERSION", nxt)
    with Store(folder, vectors=False) as s:
        assert sql(s, "PRAGMA user_version")[0][0] == nxt
        assert sql(s, "SELECT note FROM entries WHERE id = ?", (old_id,)) == [("migrated",)]
    with Store(folder, vectors=False) as s:  # already migrated: ALTER must not run again
        assert s.degraded is None
        assert s.get(old_id) is not None


def test_store_from_a_newer_gardener_degrades(tmp_path, caplog):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as s:
        s.write(lambda c: c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}"))
    with caplog.at_level(logging.WARNING):
        s = Store(folder, vectors=False)
    assert s.degraded and "newer" in s.degraded
    assert s.path is not None and s.ingest("still works " * 10).stored
    s.close()
    warnings = store_warnings(caplog)
    assert len(warnings) == 1 and "in-memory" in warnings[0].getMessage()


def test_unwritable_location_degrades(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        s = Store(blocker / "sub", vectors=False)
    assert s.degraded
    assert s.ingest("text " * 30).stored
    s.close()


# --- ingest ---------------------------------------------------------------------------------


def test_ingest_real_output_stores_original_summary_and_chunks(store, tool_outputs_dir):
    text = read(tool_outputs_dir, PYTEST_LOG)
    src = Source(role="tool", command="/run python -m pytest -x tests")
    e = store.ingest(text, src)
    expected = compress(text, src)
    assert isinstance(e, Entry) and e.stored
    assert e.id == entry_id(text) == expected.entry_id
    assert e.original == text and e.raw is None
    assert e.summary == expected.summary
    assert e.tokens_original == expected.tokens_original
    assert e.tokens_summary == expected.tokens_summary
    assert e.ratio == pytest.approx(expected.ratio)
    assert e.cls == expected.cls.value
    assert (e.role, e.command, e.tool) == ("tool", src.command, "pytest")
    assert e.session_id == store.session_id and e.active and not e.pinned
    assert e.priority > 0 and e.ttl is not None
    chunks = sql(
        store, "SELECT chunk_id, n, text, embedded FROM chunks WHERE entry_id = ?", (e.id,)
    )
    assert chunks and all(state == 0 for *_, state in chunks)
    assert [cid for cid, *_ in chunks] == [f"{e.id}:{n}" for _, n, *_ in chunks]
    ordered = [t for _, _, t, _ in sorted(chunks, key=lambda r: r[1])]
    assert "".join(ordered[1:]) == text  # the gist (store/gist.py, chunk -1), then the slices
    assert ordered[0].startswith(f"$ {src.command}\n")
    assert store.get(e.id) == e
    fts_ok(store)


@pytest.mark.parametrize("path", tool_output_files(), ids=lambda p: p.name)
def test_every_real_output_round_trips(store, path):
    data = path.read_bytes()
    e = store.ingest(data, Source(role="tool"))
    assert e.stored
    got = store.get(e.id)
    assert got.data == data or got.original == data.decode("utf-8")
    assert got.tokens_summary <= got.tokens_original


def test_same_original_twice_in_a_session_is_one_entry(store):
    text = "ModuleNotFoundError: No module named 'gardener_x'\n" * 5
    a = store.ingest(text, Source(role="tool"))
    b = store.ingest(text, Source(role="tool"))
    assert a.id == b.id and b.seen == 2
    assert sql(store, "SELECT count(*) FROM entries")[0][0] == 1
    assert sql(store, "SELECT count(*) FROM chunks WHERE entry_id = ?", (a.id,))[0][0] >= 1
    assert store.counters()["ingested"] == 1 and store.counters()["duplicates"] == 1


def test_same_original_in_a_later_session_is_shared_not_copied(tmp_path):
    folder = tmp_path / "gs"
    text = "error TS2339: Property 'foo' does not exist on type 'Bar'.\n" * 3
    with Store(folder, vectors=False) as first:
        a = first.ingest(text)
        first_sid = first.session_id
    with Store(folder, vectors=False, scope="session") as second:
        assert second.session_id != first_sid
        assert second.fts_search("TS2339", 5) == []  # not seen in this session yet
        b = second.ingest(text)
        assert b.id == a.id and b.session_id == first_sid and b.seen == 2
        assert [i for i, _ in second.fts_search("TS2339", 5)] == [a.id]
        assert sql(second, "SELECT count(*) FROM entries")[0][0] == 1
        sessions = {s["id"]: s["entries"] for s in second.sessions()}
        assert sessions == {first_sid: 1, second.session_id: 1}


def test_reingesting_an_expired_entry_revives_it(store):
    from aider_gardener.store.maintenance import expire

    e = store.ingest("a log line about gardening_revival\n" * 10)
    assert expire(store, now=time.time() + 10 * 365 * 86400) == 1
    assert store.fts_search("gardening_revival", 5) == []
    again = store.ingest("a log line about gardening_revival\n" * 10)
    assert again.active and again.deleted_at is None
    assert [i for i, _ in store.fts_search("gardening_revival", 5)] == [e.id]


def test_reingesting_a_forgotten_entry_keeps_it_forgotten(store):
    """The user's /forget must stick: running the command again does not undo it."""
    e = store.ingest("a log line about gardening_revival\n" * 10)
    assert store.forget(e.id)
    again = store.ingest("a log line about gardening_revival\n" * 10)
    assert again.id == e.id and not again.active and again.seen == 2
    assert again.deleted_reason == "forget"
    assert store.fts_search("gardening_revival", 5) == []
    assert store.restore(e.id) and store.get(e.id).active


COPIED = "".join(f"2024-05-01 ERROR E{4400 + i} replica lag on shard {i}\n" for i in range(8))


def test_forget_hides_every_stored_copy_and_restore_brings_them_back(store):
    e = store.ingest(COPIED)
    pasted = store.ingest("Recalled:\n\n" + COPIED + "\nwhat now?", Source(role="user"))
    quoted = store.ingest("The log said:\n" + COPIED.replace("shard 3", "shard 9"))
    other = store.ingest("replica lag E4403 is fixed by raising the shard timeout")
    assert {e.id, pasted.id, quoted.id, other.id} <= {i for i, _ in store.fts_search("E4403", 9)}

    assert store.forget(e.id)
    assert store.copies_of(e.id) == [pasted.id]  # a partial quote is not a copy
    assert store.get(pasted.id).deleted_reason == "copy:" + e.id
    found = {i for i, _ in store.fts_search("E4403", 9)}
    assert e.id not in found and pasted.id not in found and {quoted.id, other.id} <= found
    assert store.hidden_ids() == {e.id, pasted.id}
    assert not store.forget(e.id)  # already forgotten

    assert store.restore(e.id)
    assert {e.id, pasted.id} <= {i for i, _ in store.fts_search("E4403", 9)}
    assert store.copies_of(e.id) == [] and store.hidden_ids() == frozenset()


def test_short_entries_have_no_copies(store):
    e = store.ingest("run the tests")
    longer = store.ingest("please run the tests again after the fix")
    assert store.forget(e.id) and store.copies_of(e.id) == []
    assert store.get(longer.id).active


def test_binary_input_keeps_its_bytes(store):
    blob = bytes(range(256)) * 40
    e = store.ingest(blob, Source(role="tool", command="cat image.png"))
    assert e.stored and e.raw == blob and e.data == blob
    assert "binary" in e.summary
    assert store.get(e.id).raw == blob


def test_invalid_utf8_keeps_its_bytes(store):
    data = "Traceback: r\u00e9sum\u00e9 failed\n".encode("latin-1") * 20
    e = store.ingest(data)
    assert e.raw == data and "\ufffd" in e.original


def test_valid_utf8_bytes_are_stored_as_text_only(store):
    data = "naïve résumé line\n".encode("utf-8") * 20
    e = store.ingest(data)
    assert e.raw is None and e.original == data.decode("utf-8")


def test_lone_surrogates_are_kept_exactly(store):
    text = "bad byte here: \udcff and more text\n" * 10
    e = store.ingest(text)
    assert e.stored
    assert e.raw == text.encode("utf-8", "surrogatepass")
    assert "\udcff" not in e.original


def test_ttl_and_pin_on_ingest(store):
    prompt = store.ingest("please fix the failing test", Source(role="user"), cls="prompt")
    assert prompt.cls == "prompt" and prompt.ttl is None
    log_entry = store.ingest("INFO started\n" * 30, cls=ContentClass.LOG, ttl=60.0, pinned=True)
    assert log_entry.ttl == 60.0 and log_entry.pinned


@pytest.mark.parametrize(
    "data",
    [
        "",
        "x" * 1_000_000,  # one 1 MB line
        "\x1b[31mFAILED\x1b[0m tests/test_a.py::test_b - AssertionError\n" * 50,
        "text with a NUL \x00 inside and more after it\n" * 20,
        b"\xff\xfe" + "UTF-16 text\n".encode("utf-16-le") * 20,
        "\ufffd\ufffd replaced chars \ufffd\n" * 30,
    ],
    ids=["empty", "1mb-line", "ansi", "nul", "utf16", "replacement-chars"],
)
def test_hostile_inputs_are_stored(store, data):
    e = store.ingest(data, Source(role="tool"))
    assert e.stored
    got = store.get(e.id)
    assert got.data == data or got.original == data
    assert got.tokens_summary <= got.tokens_original
    fts_ok(store)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(st.text(max_size=3000), st.binary(max_size=3000)))
def test_ingest_never_raises_and_keeps_the_input(store, data):
    e = store.ingest(data, Source(role="tool"))
    assert e.stored
    got = store.get(e.id)
    if isinstance(data, bytes):
        assert got.data == data or got.original.encode("utf-8") == data
    else:
        assert got.original == data or got.raw == data.encode("utf-8", "surrogatepass")


def test_closed_store_never_raises(tmp_path):
    s = Store(tmp_path / "gs", vectors=False)
    e = s.ingest("x " * 100)
    s.close()
    again = s.ingest("y " * 100)
    assert not again.stored and again.summary
    assert s.fts_search("x", 5) == [] and s.get(e.id) is None and s.get_entries([e.id]) == {}
    assert s.forget(e.id) is False and s.pending_chunks(5) == []
    s.touch([e.id])
    s.close()


# --- search ---------------------------------------------------------------------------------


@pytest.fixture
def searchable(store):
    texts = {
        "py": (
            'Traceback (most recent call last):\n  File "src/gardener/loader.py", line 41, in '
            "load_config\n    return parse_config(raw)\nKeyError: 'model_settings'\n"
        ),
        "rust": (
            "error[E0432]: unresolved import `crate::store::ContextPressure`\n"
            " --> src/lib.rs:3:5\n"
        ),
        "ts": "src/app/page.tsx(12,5): error TS2339: Property 'userName' does not exist.\n",
        "prose": "We painted the garden fence on Sunday and planted tomatoes by the shed.\n",
        "log": "INFO dfs.DataNode: Receiving block blk_-1608999687919862906 src: /10.250.19.102\n",
    }
    ids = {k: store.ingest(v, Source(role="tool")).id for k, v in texts.items()}
    return store, ids


@pytest.mark.parametrize(
    "query,key",
    [
        ("parse_config", "py"),
        ("loader.py:41", "py"),
        ("src/gardener/loader.py", "py"),
        ("KeyError: 'model_settings'", "py"),
        ("E0432", "rust"),
        ("unresolved import", "rust"),
        ("context pressure", "rust"),  # camelCase in the text, words in the query
        ("ContextPressure", "rust"),
        ("TS2339 userName", "ts"),
        ("page.tsx", "ts"),
        ("what did we paint on the fence?", "prose"),  # stopwords dropped, porter stems
        ("blk_-1608999687919862906", "log"),
    ],
)
def test_fts_finds_identifiers_paths_error_strings_and_prose(searchable, query, key):
    store, ids = searchable
    hits = store.fts_search(query, 5)
    assert hits and hits[0][0] == ids[key], (query, hits)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)


NASTY = [
    'AND', 'OR NOT', 'NEAR(a b, 3)', '"', '""', '"unbalanced', "*", "col:term", "-foo",
    "foo -bar", "^start", "a + b", "(", ")", "{x y}", "entries_fts:x", "'", "\\", "\x00",
    ":", "NEAR(", "a*b", "!!!", "   ", "", "rank:1", "🙂", "\ud800",
]  # fmt: skip


@pytest.mark.parametrize("query", NASTY)
def test_fts_query_syntax_never_raises(searchable, query):
    store, _ = searchable
    assert isinstance(store.fts_search(query, 5), list)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=200))
def test_any_query_string_is_safe(searchable, query):
    store, _ = searchable
    match = build_match(query)
    if match is not None:  # also directly: the built expression is always valid FTS5
        store.read(
            lambda c: c.execute(
                "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (match,)
            ).fetchall()
        )
    assert isinstance(store.fts_search(query, 3), list)


def test_fts_filters_classes_and_forgotten(store):
    err = store.ingest("TypeError: cannot add gardenwidget\n" * 3, cls="error")
    lg = store.ingest("INFO gardenwidget ok\n" * 3, cls="log")
    assert {i for i, _ in store.fts_search("gardenwidget", 5)} == {err.id, lg.id}
    assert [i for i, _ in store.fts_search("gardenwidget", 5, ["error"])] == [err.id]
    assert [i for i, _ in store.fts_search("gardenwidget", 5, [ContentClass.LOG])] == [lg.id]
    assert store.forget(err.id)
    assert [i for i, _ in store.fts_search("gardenwidget", 5)] == [lg.id]
    assert store.get_entries([err.id, lg.id]).keys() == {lg.id}
    assert store.get(err.id).deleted_reason == "forget"  # a pasted handle still resolves
    assert store.restore(err.id) and not store.restore(err.id)
    assert {i for i, _ in store.fts_search("gardenwidget", 5)} == {err.id, lg.id}
    assert store.fts_search("gardenwidget", 1) and len(store.fts_search("gardenwidget", 1)) == 1
    fts_ok(store)


def test_project_scope_sees_earlier_sessions(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as old:
        e = old.ingest("ImportError: cannot import name 'trellis'\n" * 3)
    with Store(folder, vectors=False, scope="project") as proj:
        assert [i for i, _ in proj.fts_search("trellis", 5)] == [e.id]
        assert proj.get_entries([e.id]).keys() == {e.id}
    with Store(folder, vectors=False, scope="session") as sess:
        assert sess.fts_search("trellis", 5) == []
        assert sess.get_entries([e.id]) == {}
        assert sess.get(e.id) is not None
    with pytest.raises(ValueError):
        Store(folder, vectors=False, scope="everything")


# --- lifecycle --------------------------------------------------------------------------------


def test_touch_refreshes_and_rescores(store):
    e = store.ingest('some structured output {"a": 1}\n' * 10, cls="structured")
    store.write(
        lambda c: c.execute(
            "UPDATE entries SET last_access = last_access - 86400, priority = 0 WHERE id = ?",
            (e.id,),
        )
    )
    store.touch([e.id])
    got = store.get(e.id)
    assert got.last_access >= e.last_access and got.priority == pytest.approx(e.priority, abs=0.1)


def test_pin_and_unpin(store):
    e = store.ingest("INFO line\n" * 40, cls="log")
    assert store.pin(e.id) and store.get(e.id).pinned
    assert store.unpin(e.id) and not store.get(e.id).pinned
    assert store.pin("nonexistent") is False


def test_forget_unknown_id_is_false(store):
    assert store.forget("zzzzzzzzzz") is False and store.restore("zzzzzzzzzz") is False


def test_embedding_queue(store):
    a = store.ingest("first entry for the queue " * 5)
    b = store.ingest("second entry for the queue " * 5)
    pending = store.pending_chunks(10)
    assert [p[1] for p in pending] == [a.id, b.id]
    assert store.pending_count() == 2
    store.mark_chunks([pending[0][0]], 1)
    assert [p[0] for p in store.pending_chunks(10)] == [pending[1][0]]
    store.mark_chunks([pending[1][0]], -1)
    assert store.pending_chunks(10) == [] and store.pending_count() == 0
    store.mark_chunks([pending[0][0]], 0)
    assert store.pending_count() == 1


def test_note_reference_boosts_named_entries(store):
    err = store.ingest(
        'File "src/garden/hose.py", line 7, in water_plants\nValueError: too much\n', cls="error"
    )
    other = store.ingest("INFO everything fine in module sprinkler_core\n" * 3, cls="log")
    before = store.get(err.id).priority
    assert store.note_reference("can you look at hose.py again?") == 1
    after = store.get(err.id)
    assert after.refs == 1 and after.last_ref is not None and after.priority > before
    assert store.get(other.id).refs == 0
    # by id (a pasted handle), and never the message's own entry
    assert store.note_reference(f"see [full output stored: id={other.id}]") == 1
    assert store.note_reference("water_plants sprinkler_core", exclude=[err.id]) == 1
    assert store.get(err.id).refs == 1 and store.get(other.id).refs == 2
    assert store.note_reference("nothing specific here") == 0


def test_mark_file_edited_resolves_errors_naming_that_file(store):
    hit = store.ingest(
        'Traceback:\n  File "/home/me/proj/src/app/models.py", line 12, in load\n'
        "AttributeError: 'NoneType' object has no attribute 'id'\n",
        cls="error",
    )
    elsewhere = store.ingest("src/app/views.py:3: error: Name 'x' is not defined\n", cls="error")
    log_entry = store.ingest("compiling src/app/models.py ... ok\n" * 3, cls="log")
    assert store.mark_file_edited("src/app/models.py") == 1
    assert store.get(hit.id).resolved and store.get(hit.id).resolved_at
    assert not store.get(elsewhere.id).resolved and not store.get(log_entry.id).resolved
    assert store.mark_file_edited("src/app/models.py") == 0  # already resolved
    assert store.mark_file_edited("src/other/models.py") == 0


def test_counters_and_sessions(store):
    store.ingest("alpha " * 50)
    store.bump("recalls")
    store.bump("recalls", 2)
    c = store.counters()
    assert c["recalls"] == 3 and c["ingested"] == 1 and c["tokens_original"] > 0
    assert store.counters("no-such-session") == {}
    (s,) = store.sessions()
    assert s["id"] == store.session_id and s["pid"] == os.getpid() and s["entries"] == 1
    before = s["last_seen"]
    time.sleep(0.01)
    store.heartbeat()
    assert store.sessions()[0]["last_seen"] > before


def test_list_entries(store):
    a = store.ingest("INFO one\n" * 20, cls="log")
    b = store.ingest("please do the thing", cls="prompt")
    assert [e.id for e in store.list_entries()] == [b.id, a.id]
    assert [e.id for e in store.list_entries(order="priority")] == [a.id, b.id]
    assert [e.id for e in store.list_entries(classes=["prompt"])] == [b.id]
    store.forget(a.id)
    assert [e.id for e in store.list_entries()] == [b.id]
    assert len(store.list_entries(include_inactive=True)) == 2


def test_memory_store(tmp_path):
    with Store(":memory:", vectors=False) as s:
        e = s.ingest("in memory only " * 10)
        assert s.path is None and s.degraded is None
        assert [i for i, _ in s.fts_search("memory", 5)] == [e.id]


def test_tool_name():
    assert db._tool_name("/run python -m pytest -x") == "pytest"
    assert db._tool_name("npm test") == "npm"
    assert db._tool_name("/usr/bin/cargo build") == "cargo"
    assert db._tool_name("FOO=1 make all") == "make"
    assert db._tool_name(None) is None and db._tool_name("") is None


def test_sqlite_file_is_readable_by_plain_sqlite(store):
    e = store.ingest("plain sqlite can read this " * 10)
    conn = sqlite3.connect(store.path)
    assert conn.execute("SELECT summary FROM entries WHERE id = ?", (e.id,)).fetchone()
    conn.close()


def test_filters_reach_past_the_best_unfiltered_matches(store):
    """The class filter must not be applied only to the top few index hits."""
    for i in range(40):
        store.ingest(f"gardenwidget gardenwidget gardenwidget log line {i}\n", cls="log")
    weak = store.ingest(
        "TypeError in module: " + " ".join(f"word{i}" for i in range(200)) + " gardenwidget\n",
        cls="error",
    )
    assert store.fts_search("gardenwidget", 3)[0][0] != weak.id
    assert [i for i, _ in store.fts_search("gardenwidget", 1, ["error"])] == [weak.id]
    assert len(store.fts_search("gardenwidget", 25, ["log"])) == 25


def test_vector_index_and_worker_are_wired_in(tmp_path):
    """With ``vectors=True`` the store opens B's index and worker (real chromadb, real model):
    ingest queues chunks, the worker embeds them, recall uses both rankers, close stops it."""
    s = Store(tmp_path / "gs", vectors=True)
    try:
        assert s.vectors is not None and s._worker is not None
        e = s.ingest("The garden hose leaks near the tomato beds after watering.\n" * 3)
        s.ingest("INFO compiler finished building module alpha_beta\n" * 3)
        assert s.drain(120) >= 1 or s.pending_count() == 0
        assert s.pending_count() == 0
        assert s.read(lambda c: c.execute("SELECT min(embedded) FROM chunks").fetchone()[0]) == 1
        hits = recall(s, "water leaking from a pipe among vegetables", limit=1)
        assert [h.entry_id for h in hits] == [e.id] and "vector" in hits[0].via
        worker = s._worker
    finally:
        s.close()
    assert not worker.alive


def test_checkpoints_run_in_the_background(store):
    for i in range(5):
        store.ingest(f"INFO burst of writes {i}\n" * 30, cls="log")
    deadline = time.monotonic() + 120  # a bound on a wait, not a speed test
    while store._checkpointer.checkpoints == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store._checkpointer.checkpoints >= 1
    while True:
        busy, frames, done = store.read(
            lambda c: c.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        )
        # busy: the background thread was checkpointing right then (a later write's poke)
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert busy == 0 and done == frames  # nothing was left for an inline checkpoint
    assert store.read(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == (
        db.WAL_AUTOCHECKPOINT_PAGES
    )


# --- a conversation turn is indexed with the turn it answers ------------------------------------


def test_reply_is_found_by_the_words_of_the_question_it_answers(store):
    q = store.ingest("How did the quarterly kayaking trip go?", Source(role="user"), cls="prompt")
    a = store.ingest("It was awesome, we loved it!", Source(role="assistant"), cls="prose")
    other = store.ingest("Nothing much happened today.", Source(role="assistant"), cls="prose")
    found = [eid for eid, _ in store.fts_search("kayaking", 10)]
    assert q.id in found and a.id in found  # the reply, by its question's word
    assert other.id not in found  # only the turn right after the question carries it
    # The context is indexed, never shown: summary and original stay the reply itself.
    got = store.get(a.id)
    assert got.original == "It was awesome, we loved it!" and "kayaking" not in got.summary
    fts_ok(store)


def test_context_only_between_conversation_turns(store):
    store.ingest("please run the flaky benchmark suite", Source(role="user"), cls="prompt")
    log_entry = store.ingest("\n".join(f"step {i} ok" for i in range(40)), cls="log")
    reply = store.ingest("All green after the rerun.", Source(role="assistant"), cls="prose")
    contexts = dict(sql(store, "SELECT id, context FROM entries"))
    assert contexts[log_entry.id] == ""  # a tool output is not an answer to the prompt
    assert contexts[reply.id] == ""  # and a reply after a tool output answers no turn here
    assert [eid for eid, _ in store.fts_search("flaky", 10)] != [reply.id]


def test_reply_to_names_the_turn_a_reply_answers(store):
    """A client that stores tool outputs between a prompt and its reply (Claude Code) names the
    prompt; the reply is then found by the prompt's words, the tool output still answers none."""
    store.ingest("why does the kayaking export fail?", Source(role="user"), cls="prompt")
    log_entry = store.ingest("\n".join(f"step {i} ok" for i in range(40)), cls="log")
    reply = store.ingest(
        "The exporter skips empty rows.",
        Source(role="assistant"),
        cls="prose",
        reply_to="why does the kayaking export fail?",
    )
    contexts = dict(sql(store, "SELECT id, context FROM entries"))
    assert contexts[reply.id] == "(in reply to: why does the kayaking export fail?)"
    assert contexts[log_entry.id] == ""
    assert reply.id in [eid for eid, _ in store.fts_search("kayaking", 10)]
    quiet = store.ingest("Done.", Source(role="assistant"), cls="prose", reply_to=" ")
    assert dict(sql(store, "SELECT id, context FROM entries"))[quiet.id] == ""


def test_context_is_embedded_with_the_first_chunk_only(store):
    store.ingest("Which parser handles the legacy config files?", Source(role="user"), cls="prompt")
    long_reply = "\n\n".join(
        f"Paragraph {i}: " + "the parser reads sections " * 40 for i in range(8)
    )
    e = store.ingest(long_reply, Source(role="assistant"), cls="prose")
    texts = {cid: text for cid, eid, text in store.pending_chunks(100) if eid == e.id}
    assert len(texts) > 1
    first = texts[f"{e.id}:0"]
    assert first.endswith("(in reply to: Which parser handles the legacy config files?)")
    assert all("(in reply to:" not in t for cid, t in texts.items() if cid != f"{e.id}:0")
    # the excerpt recall shows is the verbatim slice, without the context
    stored = dict(sql(store, "SELECT chunk_id, text FROM chunks WHERE entry_id = ?", (e.id,)))
    assert "(in reply to:" not in stored[f"{e.id}:0"]


def test_context_is_capped_and_per_session(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False, session_id="s1") as s1:
        s1.ingest("zebra " * 2000, Source(role="user"), cls="prompt")
        with Store(folder, vectors=False, session_id="s2") as s2:
            first = s2.ingest("A reply in a new session.", Source(role="assistant"), cls="prose")
            assert sql(s2, "SELECT context FROM entries WHERE id = ?", (first.id,)) == [("",)]
        reply = s1.ingest("Noted.", Source(role="assistant"), cls="prose")
        (context,) = sql(s1, "SELECT context FROM entries WHERE id = ?", (reply.id,))[0]
        assert context.startswith("(in reply to: zebra")
        assert len(context) <= db.CONTEXT_CHARS + len("(in reply to: )")
        (embedded,) = [t for _, eid, t in s1.pending_chunks(100) if eid == reply.id]
        assert embedded.startswith("Noted.\n(in reply to: zebra")
        assert len(embedded) == len("Noted.\n") + db.EMBED_CONTEXT_CHARS


def test_v2_store_migrates_and_keeps_its_index(tmp_path):
    """A store written by the previous release (schema 2) opens, its entries stay searchable
    (the FTS5 index is rebuilt over the new column set) and new turns get their context."""
    folder = tmp_path / "gs"
    folder.mkdir()
    conn = sqlite3.connect(folder / STORE_FILENAME)
    for version in (1, 2):
        for stmt in dict(db.MIGRATIONS)[version]:
            conn.execute(stmt)
    conn.execute("INSERT INTO sessions(id, started, last_seen) VALUES ('old', 1.0, 1.0)")
    conn.execute(
        "INSERT INTO entries(id, seq, session_id, created, cls, tokens_original, tokens_summary,"
        " ratio, priority, last_access, summary, original)"
        " VALUES ('e_old', 1, 'old', 1.0, 'prose', 5, 5, 1.0, 40, 1.0,"
        " 'the heron migration plan', 'the heron migration plan')"
    )
    conn.execute(
        "INSERT INTO chunks(chunk_id, entry_id, n, text) VALUES ('e_old:0', 'e_old', 0,"
        " 'the heron migration plan')"
    )
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    with Store(folder, vectors=False, session_id="new") as s:
        assert s.degraded is None
        assert sql(s, "PRAGMA user_version")[0][0] == SCHEMA_VERSION == 3
        assert [eid for eid, _ in s.fts_search("heron", 5)] == ["e_old"]
        assert ("e_old:0", "e_old", "the heron migration plan") in s.pending_chunks(10)
        fts_ok(s)
        s.ingest("What about the pelican rollout?", Source(role="user"), cls="prompt")
        r = s.ingest("Scheduled for Friday.", Source(role="assistant"), cls="prose")
        assert r.id in [eid for eid, _ in s.fts_search("pelican", 5)]
        fts_ok(s)
