"""Phrases a query shares with a candidate (store/phrases.py), alone and in an explicit recall."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.store import Store, phrases
from aider_gardener.store.recall import recall
from aider_gardener.types import Source

ERROR = "ON CONFLICT DO UPDATE command cannot affect row a second time"
QUERY = "ON CONFLICT DO UPDATE cannot affect row a second time"


def test_a_pair_is_two_neighbouring_words_not_both_stopwords():
    assert phrases.query_pairs("reorder the lists in CONVENTIONS.md") == [
        "reorder the",
        "the lists",
        "lists in",
        "in conventions",
        "conventions md",
    ]
    assert phrases.query_pairs("is it on the") == []
    assert phrases.query_pairs("test_multiply_numbers PASSED") == [
        "test multiply",
        "multiply numbers",
        "numbers passed",
    ]


def test_cjk_pairs_are_three_characters_and_words_beside_them_still_pair():
    pairs = phrases.query_pairs("adbd cannot run as root 的报错")
    assert pairs == ["adbd cannot", "cannot run", "run as", "as root", "的报错"]
    assert phrases.found_pairs(pairs, "adbd cannot run as root的报错") == set(pairs)
    # punctuation between CJK characters does not break a pair
    assert phrases.found_pairs(["方案移"], "这个方案：移除") == {"方案移"}


def test_only_adjacent_words_count():
    pairs = phrases.query_pairs(QUERY)
    found = phrases.found_pairs(pairs, f"psycopg2.errors.CardinalityViolation: {ERROR}")
    assert found == set(pairs) - {"update cannot"}
    scattered = "second row; the update was fine; cannot tell; affect time; conflict on"
    assert phrases.found_pairs(pairs, scattered) == set()
    assert phrases.found_pairs([], ERROR) == set()


def test_the_candidate_quoting_the_query_moves_up_and_the_rest_keep_their_order():
    originals = {
        "a": "duplicate ids between the user rows and the manager rows",
        "b": "installed 225 modules",
        "c": "INFO loading\n" * 50 + f"ERROR {ERROR}\n",
        "d": "retrying after the cron job",
    }
    assert phrases.promote(QUERY, ["a", "b", "c", "d"], originals) == ["c", "a", "b", "d"]
    assert phrases.promote("why did the import break", ["a", "b", "c"], originals) == [
        "a",
        "b",
        "c",
    ]


def test_a_long_log_that_quotes_the_error_beats_a_short_turn_with_its_words(tmp_path):
    """Full text ranks the short turn first (its words, little else); an explicit recall
    reads the phrase in the log. The per-turn path keeps full text's order."""
    log = "".join(f"2026-05-05 23:09:{i % 60:02d} INFO module {i} loaded\n" for i in range(300))
    log += f"2026-05-05 23:09:19 ERROR psycopg2.errors.CardinalityViolation: {ERROR}\n"
    with Store(tmp_path / "gs", vectors=False) as store:
        turn = store.ingest(
            "The conflict is a second update of the same row: cannot affect it twice, so the "
            "conflict on the row needs unique ids the second time.",
            Source(role="assistant"),
        ).id
        out = store.ingest(log, Source(role="tool", command="odoo -u search_leads")).id
        per_turn = [h.entry_id for h in recall(store, QUERY, mode="fts", limit=5)]
        assert per_turn[0] == turn and out in per_turn
        explicit = [h.entry_id for h in recall(store, QUERY, mode="fts", limit=5, rerank=True)]
        assert explicit[0] == out


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=200),
    st.lists(st.text(max_size=300), min_size=0, max_size=25),
)
def test_any_query_and_texts_give_the_same_candidates_back(query, texts):
    ranked = [f"e{i}" for i in range(len(texts))]
    out = phrases.promote(query, ranked, dict(zip(ranked, texts)))
    assert sorted(out) == sorted(ranked)
    assert out[phrases.DEPTH :] == ranked[phrases.DEPTH :]
