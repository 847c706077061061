"""Hybrid recall on a real store (SQLite + FTS5 + embedded chromadb + MiniLM)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.store import RecallHit, Store
from aider_gardener.store import recall as recall_mod
from aider_gardener.store.recall import recall, recall_fts_only, recall_vectors_only
from aider_gardener.store.worker import EmbeddingWorker
from aider_gardener.types import ContentClass, Source

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CODE = '''"""Configuration loading."""

import json


class ConfigLoader:
    def __init__(self, path):
        self.path = path


def parse_config(text):
    data = json.loads(text)
    return data["settings"]
'''
RUST = """error[E0432]: unresolved import `crate::utils::helpers`
 --> src/main.rs:3:5
  |
3 | use crate::utils::helpers;
  |     ^^^^^^^^^^^^^^^^^^^^^ no `helpers` in `utils`
"""
PYTEST = """============================= test session starts ==============================
collected 12 items

tests/test_api.py ..F.........                                           [100%]

FAILED tests/test_api.py::test_login - AssertionError: expected 200, got 401
========================= 1 failed, 11 passed in 0.42s =========================
"""
NOTE = "Every night the release pipeline pushes container images to our registry."
PROMPT = "Please make the settings page remember the chosen colour theme."
LOG = "".join(
    f"2024-05-01 10:{i // 60:02d}:{i % 60:02d} INFO replication batch {i} applied\n"
    for i in range(900)
)
LOG = LOG.replace(
    "batch 700 applied\n",
    "batch 700 applied\n2024-05-01 10:11:41 ERROR could not extend file: disk quota exceeded "
    "on /var/lib/postgres\n",
)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("recall") / "gs")
    ids = {
        "code": store.ingest(CODE, Source(path="src/app/config.py"), cls=ContentClass.CODE).id,
        "rust": store.ingest(RUST, Source(role="tool", command="cargo build")).id,
        "pytest": store.ingest(PYTEST, Source(role="tool", command="pytest")).id,
        "note": store.ingest(NOTE, Source(role="assistant"), cls=ContentClass.PROSE).id,
        "prompt": store.ingest(PROMPT, Source(role="user")).id,
        "log": store.ingest(LOG, Source(role="tool", command="tail db.log"), cls="log").id,
    }
    store.drain()
    assert store.pending_count() == 0
    yield store, ids
    store.close()


def top(hits: list[RecallHit]) -> str | None:
    return hits[0].entry_id if hits else None


@pytest.mark.parametrize(
    "query, want",
    [
        ("parse_config", "code"),
        ("where is ConfigLoader defined", "code"),
        ("src/app/config.py", "code"),
        ("E0432", "rust"),
        ("src/main.rs:3", "rust"),
        ("unresolved import crate::utils::helpers", "rust"),
        ("tests/test_api.py::test_login", "pytest"),
        ("AssertionError: expected 200, got 401", "pytest"),
        ("colour theme on the settings page", "prompt"),
    ],
)
def test_identifiers_paths_and_error_strings(loaded, query, want):
    store, ids = loaded
    hits = recall(store, query)
    assert top(hits) == ids[want], [(h.entry_id, h.via) for h in hits]


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_a_deadline_that_leaves_time_finds_what_waiting_finds(loaded, mode):
    """Per-turn recall's deadline (``vector_by``) bounds the vector half; given time, it finds
    the same by meaning as a recall that waits, in either mode that has vectors."""
    import time

    store, ids = loaded
    query = "how are docker builds shipped?"
    timed = recall(store, query, mode=mode, vector_by=time.monotonic() + 60.0)
    assert top(timed) == ids["note"] == top(recall(store, query, mode=mode))
    assert "vector" in timed[0].via


def test_a_paraphrase_is_found_by_vectors_only(loaded):
    store, ids = loaded
    query = "how are docker builds shipped?"  # no word in common with the note
    assert ids["note"] not in [h.entry_id for h in recall_fts_only(store, query)]
    hits = recall(store, query)
    assert top(hits) == ids["note"]
    assert hits[0].via == "vector"


def test_a_long_entry_is_found_by_the_chunk_that_matches(loaded):
    store, ids = loaded
    hits = recall_vectors_only(store, "the database server ran out of storage space")
    log_hit = next(h for h in hits if h.entry_id == ids["log"])
    assert "disk quota exceeded" in log_hit.excerpt
    assert len(log_hit.excerpt) < len(LOG) / 5


def test_results_are_unique_limited_and_ordered(loaded):
    store, _ = loaded
    for limit in (1, 3, 10):
        hits = recall(store, "replication batch applied error", limit=limit)
        assert 0 < len(hits) <= limit
        assert len({h.entry_id for h in hits}) == len(hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_summary_by_default_original_and_touch_with_full(loaded):
    store, ids = loaded
    before = store.get(ids["log"]).last_access
    hit = next(h for h in recall(store, "disk quota exceeded postgres") if h.entry_id == ids["log"])
    assert hit.text == store.get(ids["log"]).summary
    assert store.get(ids["log"]).last_access == before  # looking is not using
    time.sleep(0.01)
    hits = recall(store, "disk quota exceeded postgres", full=True)
    hit = next(h for h in hits if h.entry_id == ids["log"])
    assert hit.text == LOG
    assert store.get(ids["log"]).last_access > before


def test_class_filter_applies_to_both_rankers(loaded):
    store, ids = loaded
    hits = recall(store, "parse_config docker registry container images", classes=["prose"])
    assert hits and {h.cls for h in hits} == {"prose"}
    assert top(hits) == ids["note"]


def test_modes(loaded):
    store, _ = loaded
    assert {h.via for h in recall_fts_only(store, "E0432 parse_config")} == {"fts"}
    assert {h.via for h in recall_vectors_only(store, "E0432 parse_config")} == {"vector"}
    with pytest.raises(ValueError):
        recall(store, "x", mode="telepathy")


@pytest.mark.parametrize("query", ["", "   ", "\n"])
def test_blank_queries_return_nothing(loaded, query):
    assert recall(loaded[0], query) == []


def test_zero_limit(loaded):
    assert recall(loaded[0], "E0432", limit=0) == []


NASTY = [
    'NEAR("a" "b")',
    '"unbalanced',
    "a AND OR NOT b",
    "col:value",
    "* ^ - + ( ) { } [ ]",
    "'; DROP TABLE entries; --",
    "\x00\x1b[31mred\x1b[0m",
    "ü" * 5000,
]


@pytest.mark.parametrize("query", NASTY)
def test_fts5_syntax_in_a_query_never_raises(loaded, query):
    hits = recall(loaded[0], query)  # the module function: no store guard to hide an error
    assert isinstance(hits, list)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=300))
def test_any_query_string_is_safe(loaded, query):
    hits = recall(loaded[0], query, limit=3)
    assert len(hits) <= 3


def test_forgotten_entries_are_not_recalled_even_by_vectors(loaded):
    store, ids = loaded
    assert store.forget(ids["note"])
    try:
        assert ids["note"] not in [h.entry_id for h in recall_vectors_only(store, NOTE)]
        assert ids["note"] not in [h.entry_id for h in recall(store, NOTE)]
    finally:
        assert store.restore(ids["note"])
    assert top(recall(store, NOTE)) == ids["note"]


def test_forgotten_entries_are_left_out_by_the_vector_index_itself(loaded):
    """Their chunks stay embedded (restore needs no re-embedding) but chromadb is asked to skip
    them, so they cannot take the k nearest slots from live entries."""
    store, ids = loaded
    near = [h[1] for h in store.vectors.query(NOTE, 3)]
    assert ids["note"] in near
    assert store.forget(ids["note"])
    try:
        assert ids["note"] in store.hidden_ids()
        assert ids["note"] not in [
            h[1] for h in store.vectors.query(NOTE, 3, exclude=[ids["note"]])
        ]
        assert len(store.vectors.query(NOTE, 3, exclude=[ids["note"]])) == 3
        seen = []
        real = store.vectors.query
        store.vectors.query = lambda *a, **kw: seen.append(kw) or real(*a, **kw)
        try:
            recall_vectors_only(store, NOTE)
        finally:
            del store.vectors.query
        assert seen and seen[0]["exclude"] == [ids["note"]]
    finally:
        assert store.restore(ids["note"])
    assert ids["note"] not in store.hidden_ids()


def test_session_scope_hides_other_sessions_from_both_rankers(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder) as old:
        old_id = old.ingest(NOTE, Source(role="assistant")).id
        old.drain()
    with Store(folder, scope="session") as new:
        new_id = new.ingest(PROMPT, Source(role="user")).id
        new.drain()
        assert old_id not in [h.entry_id for h in recall_vectors_only(new, NOTE, limit=10)]
        assert old_id not in [h.entry_id for h in recall(new, NOTE, limit=10)]
        assert top(recall(new, PROMPT)) == new_id
    with Store(folder, scope="project") as proj:
        assert top(recall(proj, NOTE)) == old_id


def test_without_vectors_recall_is_full_text(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        eid = store.ingest(RUST, Source(role="tool", command="cargo build")).id
        hits = recall(store, "E0432")
        assert top(hits) == eid and hits[0].via == "fts"
        assert recall_vectors_only(store, "E0432") == []


def test_not_yet_embedded_entries_are_found_by_full_text(tmp_path, monkeypatch):
    monkeypatch.setattr(EmbeddingWorker, "start", lambda self: None)  # keep chunks pending
    with Store(tmp_path / "gs") as store:
        assert store.vectors is not None
        eid = store.ingest(PYTEST, Source(role="tool", command="pytest")).id
        assert store.pending_count() == 2  # its one chunk and its gist
        hits = recall(store, "test_login AssertionError")
        assert top(hits) == eid and hits[0].via == "fts"


def test_found_by_both_rankers_beats_found_by_one():
    """The fusion rule itself, on the real function with a store-shaped stand-in."""

    now = time.time()
    entries = {
        e: SimpleNamespace(
            id=e, cls="log", priority=20.0, created=now, summary=e, original=e, path=None
        )
        for e in "abc"
    }

    class Index:
        healthy = True

        def query(self, text, k, entry_filter=None):
            return [("b:0", "b", 0.9), ("c:0", "c", 0.8)]

    fake = SimpleNamespace(
        vectors=Index(),
        fts_search=lambda q, n, classes=None: [("a", 9.0), ("b", 8.0)],
        get_entries=lambda ids: {i: entries[i] for i in ids if i in entries},
        guard=lambda what, default, fn: fn(),
    )
    assert [h.entry_id for h in recall(fake, "q")] == ["b", "a", "c"]


def test_priority_and_recency_only_nudge():
    now = time.time()
    fresh_error = SimpleNamespace(priority=100.0, created=now)
    old_log = SimpleNamespace(priority=0.0, created=now - 30 * 86400)
    high, low = recall_mod._boost(fresh_error, now), recall_mod._boost(old_log, now)
    assert high > low >= 1.0
    assert high / low <= 1.0 + recall_mod.PRIORITY_WEIGHT * 1.5 + recall_mod.RECENCY_WEIGHT + 0.01


def test_a_reply_credits_the_message_it_answers(tmp_path):
    """The reply holds the query's words; the message before it gets a share of its score."""
    with Store(tmp_path / "gs", vectors=False) as store:
        question = store.ingest("How was the trip to Lisbon?", Source(role="user")).id
        answer = store.ingest(
            "Wonderful! We walked the old town and ate pastel de nata every day.",
            Source(role="assistant"),
        ).id
        unrelated = store.ingest("Unrelated: the build is green again.", Source(role="tool")).id
        hits = {h.entry_id: h for h in recall_fts_only(store, "pastel de nata", limit=5)}
        assert hits[answer].via == "fts"
        assert hits[question].via == "reply"  # shares no word with the query
        assert hits[question].score == pytest.approx(
            recall_mod.REPLY_CREDIT * hits[answer].score, rel=0.2  # boosts differ a little
        )
        assert unrelated not in hits  # nothing flows forward: it follows no match


def test_reply_credit_stays_within_a_session(tmp_path):
    folder = tmp_path / "gs"
    with Store(folder, vectors=False) as first:
        earlier = first.ingest("Deploy the staging cluster.", Source(role="user")).id
    with Store(folder, vectors=False) as second:
        reply = second.ingest("The kubernetes rollout finished.", Source(role="assistant")).id
        got = [h.entry_id for h in recall_fts_only(second, "kubernetes rollout")]
        assert got == [reply] and earlier not in got


def test_reply_credit_respects_the_class_filter(tmp_path):
    with Store(tmp_path / "gs", vectors=False) as store:
        store.ingest("How was the trip to Lisbon?", Source(role="user"), cls=ContentClass.PROMPT)
        answer = store.ingest(
            "We ate pastel de nata every day.", Source(role="assistant"), cls=ContentClass.PROSE
        ).id
        got = recall_fts_only(store, "pastel de nata", classes=["prose"])
        assert [h.entry_id for h in got] == [answer]


def test_reply_credit_is_only_between_conversation_turns(tmp_path):
    """A file read into the chat just before a build log is not what the log answers."""
    with Store(tmp_path / "gs", vectors=False) as store:
        code = store.ingest(CODE, Source(path="src/app/config.py"), cls=ContentClass.CODE).id
        rust = store.ingest(RUST, Source(role="tool", command="cargo build")).id
        hits = recall_fts_only(store, "unresolved helpers", limit=5)
        assert [h.entry_id for h in hits] == [rust] and code not in [h.entry_id for h in hits]


def test_a_reply_credits_the_output_it_answers_whatever_its_class(tmp_path):
    """The reply that explains a failed run holds the question's words; the run is what was
    asked about. An edit (not prose) credits the output before it; a build log does not
    credit a prompt after it (a prompt answers nothing)."""
    with Store(tmp_path / "gs", vectors=False) as store:
        run = store.ingest(
            "E: Could not open lock file /var/lib/dpkg/lock-frontend\n",
            Source(role="tool", command="apt-get install lz4"),
        ).id
        reply = store.ingest(
            "The package manager needs root: I reran the install with sudo.\n\n"
            "install.sh\n```\n<<<<<<< SEARCH\napt-get install lz4\n=======\n"
            "sudo apt-get install lz4\n>>>>>>> REPLACE\n```\n",
            Source(role="assistant"),
            cls=ContentClass.EDIT,
        ).id
        after = store.ingest("ok what next with the package manager root", Source(role="user")).id
        hits = {h.entry_id: h for h in recall_fts_only(store, "sudo reran", limit=5)}
        assert hits[run].via == "reply" and reply in hits
        assert after not in hits


@pytest.mark.parametrize(
    "query, question",
    [
        ("why did the login check fail after the upgrade?", True),
        ("when did Caroline go to the support group?", True),
        ("the parse_config error", False),
        ("src/app.py keeps failing", False),
        ("E0432 in the build", False),
        ('why "foo" fails', False),
        ("getUser is undefined", False),
        ("login failed", False),  # two words: the old weights
        ("为什么部署脚本一直失败", True),  # written without spaces
        ("部署失败", False),  # about two words
    ],
)
def test_a_question_in_words_leans_on_the_vectors(query, question):
    assert recall_mod.is_question(query) is question
    weights = recall_mod.fusion_weights(query)
    if question:
        assert weights["vector"] == recall_mod.QUESTION_VECTOR_WEIGHT
    else:
        assert weights == {"fts": recall_mod.FTS_WEIGHT, "vector": recall_mod.VECTOR_WEIGHT}
    assert recall_mod.QUESTION_VECTOR_WEIGHT > recall_mod.VECTOR_WEIGHT


@pytest.mark.parametrize(
    "query, own",
    [
        ("when I asked to scaffold the pipeline folder", True),
        ("what did I ask about the mobile menu?", True),
        ("cuando le pedí revisar el script de despliegue", True),
        ("na co jsem se ptal u přihlášení", True),
        ("我让你修的那个弹窗问题", True),
        ("what did it suggest when I asked about CORS?", False),
        ("¿qué me contestó cuando le pregunté qué modelo era?", False),
        ("why did the login check fail?", False),
    ],
)
def test_questions_about_the_users_own_words(query, own):
    assert recall_mod.asks_own_words(query) is own


def _pair_store(tmp_path):
    store = Store(tmp_path / "gs", vectors=False)
    prompt = store.ingest(
        "The checkout page crashes when the cart is empty, please look into it.",
        Source(role="user"),
    ).id
    reply = store.ingest(
        "The crash comes from dividing the total by the item count, which is zero for an"
        " empty cart. I guarded the division in cart.py and show a friendly notice instead.",
        Source(role="assistant"),
    ).id
    return store, prompt, reply


def test_a_question_about_the_answer_ranks_the_reply_over_the_turn_it_answers(tmp_path):
    store, prompt, reply = _pair_store(tmp_path)
    with store:
        hits = recall_fts_only(store, "what did it suggest for the crash on the empty cart?")
        assert [h.entry_id for h in hits[:2]] == [reply, prompt]


def test_a_question_about_my_own_request_ranks_my_turn_first(tmp_path):
    store, prompt, reply = _pair_store(tmp_path)
    with store:
        hits = recall_fts_only(store, "when I asked about the crash on the empty cart")
        assert [h.entry_id for h in hits[:2]] == [prompt, reply]


def test_otherwise_the_turn_whose_own_words_match_goes_first(tmp_path):
    store, prompt, reply = _pair_store(tmp_path)
    with store:
        hits = recall_fts_only(store, "guarded division item count zero")
        assert hits[0].entry_id == reply
        hits = recall_fts_only(store, "checkout page crashes, look into it")
        assert hits[0].entry_id == prompt


def test_a_chinese_question_finds_the_message_sharing_its_words(tmp_path):
    """unicode61 reads a CJK run as one token: without the character pairs a question shares
    no token with a message unless it repeats a whole run verbatim."""
    with Store(tmp_path / "gs", vectors=False) as store:
        target = store.ingest(
            "部署脚本在服务器上一直失败，日志里说权限不够。", Source(role="user")
        ).id
        store.ingest("我们把登录页面的颜色改成蓝色了。", Source(role="user"))
        hits = recall_fts_only(store, "为什么部署一直失败？", limit=5)
        assert hits and hits[0].entry_id == target


def test_an_explicit_recall_shows_an_exchange_as_one_hit(tmp_path):
    """``/recall`` and the MCP tool fold the prompt and its reply into one hit, so the next
    slot goes to something else; per-turn recall keeps both (``store/exchanges.py``)."""
    store, prompt, reply = _pair_store(tmp_path)
    with store:
        other = store.ingest(
            "The cart total now rounds to cents before tax is added.", Source(role="user")
        ).id
        query = "crash on the empty cart"
        per_turn = recall(store, query, mode="fts", limit=5)
        assert {prompt, reply} <= {h.entry_id for h in per_turn}
        assert all(not h.exchange for h in per_turn)
        explicit = recall(store, query, mode="fts", limit=5, rerank=True)
        ids = [h.entry_id for h in explicit]
        assert len({prompt, reply} & set(ids)) == 1
        first = explicit[0]
        assert {first.entry_id, *first.exchange} == {prompt, reply}
        assert other in ids
