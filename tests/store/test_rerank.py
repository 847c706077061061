"""The MaxSim reranker (``store/rerank.py``) on the real MiniLM and a real store."""

from __future__ import annotations

import pytest

from aider_gardener.store import Store, embeddings
from aider_gardener.store import rerank as rr
from aider_gardener.store import token_states
from aider_gardener.store.recall import recall
from aider_gardener.types import ContentClass, Source

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv(rr.RERANK_ENV, raising=False)
    rr._reset_for_tests()
    yield
    rr._reset_for_tests()


@pytest.fixture(scope="module")
def model():
    try:
        return embeddings.load()
    except embeddings.EmbeddingsUnavailable as err:
        pytest.skip(f"embedding model unavailable: {err}")


@pytest.mark.parametrize(
    "value, explicit, per_turn",
    [
        (None, True, False),
        ("on", True, False),
        ("1", True, False),
        ("off", False, False),
        ("0", False, False),
        ("always", True, True),
        ("nonsense", True, False),
    ],
)
def test_the_switch(monkeypatch, value, explicit, per_turn):
    if value is not None:
        monkeypatch.setenv(rr.RERANK_ENV, value)
    assert rr.wanted(True) is explicit
    assert rr.wanted(None) is per_turn
    assert rr.wanted(False) is False  # the evaluation's first-stage rows, whatever the switch


def test_maxsim_prefers_the_text_that_answers_a_paraphrase(model):
    texts = [
        "Melanie: We went camping by the lake last weekend, the kids loved it.",
        "Melanie: I painted a sunrise over the lake last week, it took me two days.",
        "Caroline: The adoption agency called me back about the interview.",
    ]
    scores = rr.maxsim_scores("What did Melanie paint recently?", texts)
    assert scores is not None and len(scores) == 3
    assert max(range(3), key=scores.__getitem__) == 1
    assert all(-1.0 <= s <= 1.0 for s in scores)


def test_maxsim_handles_empty_and_stopword_only_input(model):
    assert rr.maxsim_scores("anything", []) is None
    scores = rr.maxsim_scores("what is the", ["", "the cat sat"])
    assert scores is not None and len(scores) == 2


def test_rerank_fuses_ranks_within_the_head_only(monkeypatch):
    monkeypatch.setattr(rr, "DEPTH", 3)
    monkeypatch.setattr(rr, "WEIGHT", 2.0)
    monkeypatch.setattr(rr, "maxsim_scores", lambda q, texts, known=None: [0.1, 0.2, 0.9])
    # first stage a, b, c; MaxSim c, b, a. With K = 5: a 1/6 + 2/8, b 1/7 + 2/7, c 1/8 + 2/6
    out = rr.rerank("q", ["a", "b", "c", "d", "e"], {})
    assert out == ["c", "b", "a", "d", "e"]


def test_rerank_on_the_real_model_keeps_every_id(model):
    ranked = ["a", "b", "c", "d"]
    texts = {
        "a": "The weather was grey all week.",
        "b": "My cat knocked a glass off the table.",
        "c": "The build failed with error E0432: unresolved import crate::utils::helpers.",
        "d": "",
    }
    out = rr.rerank("why did the build fail with an unresolved import", ranked, texts)
    assert sorted(out) == sorted(ranked)
    scores = rr.maxsim_scores(
        "why did the build fail with an unresolved import", [texts[i] for i in ranked]
    )
    assert max(range(4), key=scores.__getitem__) == 2


def test_without_the_model_rerank_is_a_no_op(monkeypatch):
    monkeypatch.setattr(rr, "available", lambda: False)
    ranked = ["x", "y", "z"]
    assert rr.rerank("query", ranked, {"x": "a", "y": "b", "z": "c"}) == ranked
    assert rr.maxsim_scores("query", ["a"]) is None


def test_a_failing_model_keeps_the_fused_order_and_warns_once(model, monkeypatch, caplog):
    class Broken:
        def forward(self, ids, mask):
            raise RuntimeError("session gone")

    monkeypatch.setattr(embeddings, "load", lambda: Broken())
    ranked = ["x", "y"]
    with caplog.at_level("WARNING"):
        assert rr.rerank("query words", ranked, {"x": "one text", "y": "other text"}) == ranked
        assert rr.rerank("query words", ranked, {"x": "one text", "y": "other text"}) == ranked
    assert sum("rerank unavailable" in r.message for r in caplog.records) == 1


@pytest.fixture(scope="module")
def conversation(tmp_path_factory, model):
    """Turns as Aider sends them: the answer shares no word with the question; the turn it
    replies to does, and the store indexes it with that turn (``entries.context``)."""
    store = Store(tmp_path_factory.mktemp("rerank") / "gs")
    turns = [
        ("user", "Did you ever finish that canvas you started in the spring?"),
        ("assistant", "Yes! A sunrise over the harbour, oil on a big canvas. Took two weeks."),
        ("user", "We should plan the camping trip for August."),
        ("assistant", "Sure, the lake site is free in the second week of August."),
        ("user", "My sister adopted a puppy, a small beagle called Bo."),
        ("assistant", "Bo sounds adorable, beagles are so friendly."),
    ]
    ids = [store.ingest(text, Source(role=role), cls=ContentClass.PROSE).id for role, text in turns]
    store.drain()
    yield store, ids
    store.close()


def test_explicit_recall_reranks_and_keeps_hits_whole(conversation, monkeypatch):
    store, ids = conversation
    calls = []
    real = rr.maxsim_scores

    def spy(query, texts, known=None):
        calls.append(list(texts))
        return real(query, texts, known)

    monkeypatch.setattr(rr, "maxsim_scores", spy)
    plain = recall(store, "what painting did they finish", limit=6, rerank=False)
    assert calls == []
    hits = recall(store, "what painting did they finish", limit=6, rerank=True)
    assert len(calls) == 1
    # the same entries, a turn and its reply folded into one hit (``store/exchanges.py``)
    shown = {h.entry_id for h in hits} | {e for h in hits for e in h.exchange}
    assert {h.entry_id for h in plain} <= shown
    # the reply is read with the turn it answers, as the store indexes it
    reply = [t for t in calls[0] if t.startswith("Yes! A sunrise")]
    assert reply and "(in reply to: Did you ever finish that canvas" in reply[0]
    assert hits[0].entry_id in ids[:2]


def test_per_turn_recall_does_not_rerank_unless_always(conversation, monkeypatch):
    store, _ = conversation
    calls = []
    monkeypatch.setattr(rr, "maxsim_scores", lambda q, t, known=None: calls.append(q) or None)
    recall(store, "camping trip in August", limit=3)
    assert calls == []
    monkeypatch.setenv(rr.RERANK_ENV, "always")
    recall(store, "camping trip in August", limit=3)
    assert calls == ["camping trip in August"]
    monkeypatch.setenv(rr.RERANK_ENV, "off")
    recall(store, "camping trip in August", limit=3, rerank=True)
    assert calls == ["camping trip in August"]


def test_store_recall_passes_the_explicit_flag(conversation, monkeypatch):
    store, _ = conversation
    calls = []
    monkeypatch.setattr(rr, "maxsim_scores", lambda q, t, known=None: calls.append(q) or None)
    recall(store, "adopted puppy", limit=3, rerank=True)
    recall(store, "adopted puppy", limit=3)
    assert calls == ["adopted puppy"]


def test_token_states_are_kept_for_the_next_recall_and_bounded(model, monkeypatch):
    rr._reset_for_tests()
    texts = ["the build failed on the linker step", "deployed the new billing service"]
    first = rr.maxsim_scores("why did the build fail?", texts)
    assert len(rr._cache) == 2 and rr._cache_bytes > 0
    calls = []
    real = rr._token_states
    monkeypatch.setattr(
        rr, "_token_states", lambda e, enc, rows: calls.append(rows) or real(e, enc, rows)
    )
    again = rr.maxsim_scores("why did the build fail?", texts)
    assert again == pytest.approx(first, abs=2e-3)  # float16 states
    assert len(calls[0]) == 1  # only the query was encoded
    monkeypatch.setattr(rr, "CACHE_BYTES", 1)
    rr.maxsim_scores("anything else", ["a third text about databases"])
    assert len(rr._cache) == 1  # the oldest were dropped
    rr._reset_for_tests()


def test_packed_states_score_as_the_encoded_ones(model):
    texts = ["the build failed on the linker step", "deployed the new billing service"]
    states = rr.doc_states(texts)
    packed = [token_states.pack(s) for s in states]
    assert all(len(p) < s.nbytes / 3 for p, s in zip(packed, states))  # int8 against float32
    back = [token_states.unpack(p) for p in packed]
    assert [b.shape for b in back] == [s.shape for s in states]
    fresh = rr.maxsim_scores("why did the build fail?", texts)
    stored = rr.maxsim_scores("why did the build fail?", ["", ""], back)
    assert stored == pytest.approx(fresh, abs=0.01)
    assert stored[0] > stored[1]


def test_the_worker_keeps_states_and_recall_reads_them(model, tmp_path, monkeypatch):
    """A drained store has states for every indexed chunk; an explicit recall reads them and
    encodes only the query; states dropped from the table are encoded once and kept again, and
    the order is the same either way."""
    store = Store(tmp_path / "gs")
    texts = [
        "Did you ever finish that canvas you started in the spring?",
        "Yes! A sunrise over the harbour, oil on a big canvas. Took two weeks.",
        "We should plan the camping trip for August.",
        "Sure, the lake site is free in the second week of August.",
    ]
    for n, text in enumerate(texts):
        store.ingest(text, Source(role="user" if n % 2 == 0 else "assistant"))
    log = "\n".join(f"INFO step {i} of the nightly import finished" for i in range(600))
    store.ingest(log, Source(role="tool", command="make import"))
    store.drain()

    def count(sql):
        return store.read(lambda c: c.execute(sql).fetchone()[0])

    indexed = count("SELECT count(*) FROM chunks WHERE embedded = 1 AND n <= 0")
    assert count("SELECT count(*) FROM chunks WHERE embedded = 1 AND n > 0") > 0  # the log's
    assert indexed >= 5 and count("SELECT count(*) FROM token_states") == indexed
    rr._reset_for_tests()
    rows = []
    real = rr._token_states
    monkeypatch.setattr(
        rr, "_token_states", lambda e, enc, r: rows.append(len(r)) or real(e, enc, r)
    )
    warm = [h.entry_id for h in recall(store, "what painting did they finish", rerank=True)]
    assert sum(rows) - 1 <= count("SELECT count(*) FROM chunks WHERE n > 0")  # the log's, once
    rr._reset_for_tests()
    rows.clear()
    assert [h.entry_id for h in recall(store, "what painting did they finish", rerank=True)] == warm
    assert rows == [1]  # the query alone: every candidate's states were in the store
    store.write(lambda c: c.execute("DELETE FROM token_states"))
    rr._reset_for_tests()
    rows.clear()
    cold = [h.entry_id for h in recall(store, "what painting did they finish", rerank=True)]
    assert cold == warm and sum(rows) > 1
    assert count("SELECT count(*) FROM token_states") > 0  # kept for the next one
    store.write(lambda c: c.execute("DELETE FROM token_states"))
    store.drain()  # nothing pending: the worker catches up on the states
    assert count("SELECT count(*) FROM token_states") == indexed
    store.close()


def test_a_catch_up_that_kept_nothing_waits_for_new_chunks(model, tmp_path, monkeypatch):
    """When the store will not take the states (locked, full disk), the idle worker must not
    encode the same window every poll: it tries again once new chunks are indexed."""
    store = Store(tmp_path / "gs")
    store.ingest("We moved the nightly import to a queue worker.", Source(role="assistant"))
    store.drain()
    worker = store._worker
    assert worker is not None
    encoded = []
    real_states = rr.doc_states
    monkeypatch.setattr(rr, "doc_states", lambda t: encoded.append(len(t)) or real_states(t))
    monkeypatch.setattr(token_states, "save", lambda s, rows: False)
    store.write(lambda c: c.execute("DELETE FROM token_states"))
    # whichever catches up first, the worker's idle loop or this call, encodes the chunk once
    assert worker.catch_up_states() == 0 and encoded == [1]
    assert worker.catch_up_states() == 0 and encoded == [1]  # not encoded again for nothing
    monkeypatch.undo()
    store.ingest("The queue worker retries a failed batch three times.", Source(role="user"))
    store.drain()  # indexed something new: the catch-up runs again and keeps both
    count = store.read(lambda c: c.execute("SELECT count(*) FROM token_states").fetchone()[0])
    sql = "SELECT count(*) FROM chunks WHERE embedded = 1 AND n <= 0"
    assert count == store.read(lambda c: c.execute(sql).fetchone()[0]) == 2
    store.close()
