"""Session RAG: recalled context reaches the request as one pair, never the shared history."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from aider_gardener.integration import rag
from aider_gardener.integration.rag import (
    HEADER,
    REPLY,
    VECTOR_BUDGET_ENV,
    _recall_in_time,
    recall_pair,
)
from aider_gardener.store import Store
from aider_gardener.tokens import count_tokens
from aider_gardener.types import Source
from tests.integration.helpers import history_of, text_of

ERROR = (
    "Traceback (most recent call last):\n"
    '  File "app/frobnicate.py", line 42, in frobnicate\n'
    "    wait_for(lock, timeout=30)\n"
    "ZebraTimeout: lock on /var/run/zebra.lock not released after 30s\n"
)


def _earlier_session(store_dir, *texts):
    """Entries a previous aider-gardener session stored in this project."""
    store = Store(store_dir, vectors=False)
    ids = [store.ingest(t, Source(role="tool", command="python -m app")).id for t in texts]
    store.close()
    return ids


def _rag_request(request):
    for i, msg in enumerate(request):
        if msg["role"] == "user" and msg["content"].startswith(HEADER):
            assert request[i + 1] == {"role": "assistant", "content": REPLY}
            return msg["content"]
    return None


def test_recalls_an_earlier_session_into_the_request_only(make_coder, llm, tmp_path, capsys):
    [eid] = _earlier_session(tmp_path / "store", ERROR)
    coder = make_coder()
    done, cur = coder.done_messages, coder.cur_messages
    llm.replies = ["The zebra lock is held by another process."]
    coder.run(with_message="why does frobnicate fail with ZebraTimeout?")
    block = _rag_request(llm.last)
    assert block is not None and f"id={eid}" in block and "ZebraTimeout" in block
    # the pair sits after the history, before the chat files and the new message
    assert history_of(llm.last)[-1]["content"].startswith("why does frobnicate")
    # the shared lists never saw it
    assert coder.done_messages is done and coder.cur_messages is cur
    assert HEADER not in text_of(done + cur)
    assert "1 recalled" in capsys.readouterr().out


def test_skips_what_is_already_in_the_prompt(make_coder, llm, repo):
    (repo / "err.txt").write_text(ERROR)
    coder = make_coder()
    coder.commands.cmd_run("cat err.txt")  # small: enters the chat verbatim
    llm.replies = ["Another process holds the lock."]
    coder.run(with_message="why does frobnicate fail with ZebraTimeout?")
    assert _rag_request(llm.last) is None
    assert text_of(llm.last).count("ZebraTimeout: lock on") == 1


def test_unrelated_entries_are_not_injected(make_coder, llm, tmp_path):
    _earlier_session(tmp_path / "store", "INFO nightly backup of the photo album finished\n" * 3)
    coder = make_coder()
    llm.replies = ["Sure."]
    coder.run(with_message="rename the parse function in app.py to parse_int")
    assert _rag_request(llm.last) is None


def test_respects_rag_token_budget(make_coder, tmp_path):
    texts = [ERROR + f"attempt {i}: " + "retrying zebra lock " * 150 + "\n" for i in range(4)]
    _earlier_session(tmp_path / "store", *texts)
    coder = make_coder(rag_tokens=400)
    coder.gardener.open_store(coder)
    pair, ids = recall_pair(coder.gardener, coder, "ZebraTimeout in frobnicate retrying zebra lock")
    assert ids, "something fits in 400 tokens"
    assert count_tokens(pair[0]["content"]) + count_tokens(pair[1]["content"]) <= 400
    none, no_ids = recall_pair(coder.gardener, coder, "")
    assert none == [] and no_ids == []


def test_evict_mode_does_not_recall(make_coder, llm, tmp_path):
    _earlier_session(tmp_path / "store", ERROR)
    coder = make_coder(mode="evict")
    llm.replies = ["Ok."]
    coder.run(with_message="why does frobnicate fail with ZebraTimeout?")
    assert _rag_request(llm.last) is None


def _ready_store(path):
    store = Store(path)
    store.ingest(ERROR, Source(role="tool", command="python -m app"))
    store.drain()
    if store.vectors is None or not store.vectors.ready:
        store.close()
        pytest.skip("no embedding model or chromadb")
    return store


def test_the_vector_half_waits_for_the_query_embedding_within_its_budget(tmp_path, monkeypatch):
    monkeypatch.setenv(VECTOR_BUDGET_ENV, "60000")
    with _ready_store(tmp_path / "gs") as store:
        session = SimpleNamespace(stats=Counter())
        query = "why is the zebra lock still held?"
        hits = _recall_in_time(session, store, query)
        assert hits and "vector" in hits[0].via
        assert session.stats["recall_vectors_late"] == 0


def test_a_late_query_embedding_leaves_the_request_to_full_text(tmp_path, monkeypatch):
    from aider_gardener.store import embeddings

    monkeypatch.setenv(VECTOR_BUDGET_ENV, "50")
    with _ready_store(tmp_path / "gs") as store:
        session = SimpleNamespace(stats=Counter())
        query = "which process holds the lock on frobnicate?"
        with embeddings._tokenize_lock:  # the query's embedding cannot start meanwhile
            hits = _recall_in_time(session, store, query)
        assert hits and all(h.via == "fts" for h in hits)  # full text found it meanwhile
        assert session.stats["recall_vectors_late"] == 1
        # the embedding still lands in the query cache: the next recall of it has vectors
        assert store.vectors.wait_query_vector(query, 60.0)
        assert any("vector" in h.via for h in _recall_in_time(session, store, query))
        assert session.stats["recall_vectors_late"] == 1


def test_a_late_vector_search_leaves_the_request_to_full_text(tmp_path, monkeypatch):
    """The budget bounds the whole vector half, not only the query's embedding: a vector ready
    in time whose search is slow (a loaded machine, a big index) is not waited for."""
    import threading
    import time

    monkeypatch.setenv(VECTOR_BUDGET_ENV, "50")
    with _ready_store(tmp_path / "gs") as store:
        session = SimpleNamespace(stats=Counter())
        query = "which process holds the lock on frobnicate?"
        assert store.vectors.wait_query_vector(query, 60.0)  # the embedding is done
        searched = threading.Event()
        real = store.vectors.query

        def slow(*args, **kwargs):  # the real search, after a wait longer than the budget
            time.sleep(0.5)
            try:
                return real(*args, **kwargs)
            finally:
                searched.set()

        monkeypatch.setattr(store.vectors, "query", slow)
        hits = _recall_in_time(session, store, query)
        assert not searched.is_set()  # answered before the search came back
        assert hits and all(h.via == "fts" for h in hits)
        assert session.stats["recall_vectors_late"] == 1
        assert searched.wait(60.0)


def test_a_zero_budget_waits_as_long_as_the_embedding_takes(tmp_path, monkeypatch):
    monkeypatch.setenv(VECTOR_BUDGET_ENV, "0")
    with _ready_store(tmp_path / "gs") as store:
        session = SimpleNamespace(stats=Counter())
        hits = _recall_in_time(session, store, "zebra lock timeout")
        assert hits and "vector" in hits[0].via
        assert not session.stats


def test_recalled_context_carries_no_secret(make_coder, llm, tmp_path):
    """An earlier session's output held a key: the recalled block the model gets does not."""
    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz" * 3
    [eid] = _earlier_session(
        tmp_path / "store", ERROR + f"ZebraTimeout config: OPENAI_API_KEY={key}\n"
    )
    coder = make_coder()
    coder.run(with_message="why does frobnicate fail with ZebraTimeout?")
    block = _rag_request(llm.last)
    assert block is not None and f"id={eid}" in block and "ZebraTimeout" in block
    assert key not in text_of(llm.last) and "OPENAI_API_KEY=[redacted: " in block


# --- issue 23: what the chat holds is not recalled again; the floor; the status line names it ---


def test_an_entry_in_the_chat_as_its_summary_is_not_recalled_again(make_coder, repo, monkeypatch):
    """A big log's summary in the history was injected again (its vector excerpt, 742 tokens)
    on three unrelated questions."""
    from aider_gardener.store.recall import RecallHit

    (repo / "big.log").write_text("".join(f"INFO row {i} ZebraTimeout retry\n" for i in range(900)))
    coder = make_coder(max_output=300)
    coder.commands.cmd_run("cat big.log")
    meta = coder.gardener.meta(coder.cur_messages[-2])
    assert meta.state == "summary"
    hit = RecallHit(
        meta.entry_id, "log", 0.2, meta.summary, None, 0.0,
        excerpt="INFO row 512 ZebraTimeout retry", via="fts+vector", similarity=0.9,
    )  # fmt: skip
    monkeypatch.setattr(rag, "recall", lambda *a, **k: [hit])
    assert recall_pair(coder.gardener, coder, "ZebraTimeout retry row 512") == ([], [])


def test_a_nearest_neighbour_below_the_floor_is_not_injected(make_coder, tmp_path, monkeypatch):
    from aider_gardener.store.recall import RecallHit

    [eid] = _earlier_session(tmp_path / "store", ERROR)
    coder = make_coder()
    coder.gardener.open_store(coder)
    far = RecallHit(eid, "error", 0.2, ERROR, None, 0.0, via="vector", similarity=0.05)
    monkeypatch.setattr(rag, "recall", lambda *a, **k: [far])
    assert recall_pair(coder.gardener, coder, "how do I bake sourdough bread?") == ([], [])
    near = RecallHit(eid, "error", 0.2, ERROR, None, 0.0, via="vector", similarity=0.9)
    monkeypatch.setattr(rag, "recall", lambda *a, **k: [near])
    assert recall_pair(coder.gardener, coder, "how do I bake sourdough bread?")[1] == [eid]


def test_the_status_line_names_what_was_recalled(make_coder, llm, tmp_path, capsys):
    [eid] = _earlier_session(tmp_path / "store", ERROR)
    coder = make_coder()
    llm.replies = ["The zebra lock is held by another process."]
    coder.run(with_message="why does frobnicate fail with ZebraTimeout?")
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "recalled from" in ln)
    assert f"1 recalled from the store ({eid} `python -m app`)" in line
