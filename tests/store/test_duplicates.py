"""Near-duplicate entries collapse into one recall hit (store/duplicates.py, store/recall.py)."""

from __future__ import annotations

from aider_gardener.store import Store
from aider_gardener.store.duplicates import collapse, signature, similar
from aider_gardener.store.recall import recall
from aider_gardener.types import Source

NO_MATCH = (
    "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in {path}\n"
    "<<<<<<< SEARCH\n    return render(request, 'index.html')\n=======\n"
    "    return render(request, 'home.html')\n>>>>>>> REPLACE\n"
    "Did you mean to match some of these actual lines from {path}?\n"
    "The SEARCH section must exactly match an existing block of lines including all white space,"
    " comments, indentation, docstrings, etc\n# The other {n} SEARCH/REPLACE blocks were applied\n"
)


def test_texts_that_differ_in_numbers_and_a_word_are_near_copies():
    a = NO_MATCH.format(path="app/views.py", n=2)
    b = NO_MATCH.format(path="app/views.py", n=3)
    assert similar(signature(a), signature(b), len(a), len(b))
    other = "Authentication failed: the token for user admin expired at 10:02 (401)."
    assert not similar(signature(a), signature(other), len(a), len(other))


def test_a_short_text_is_not_a_copy_of_a_long_one_that_contains_it():
    short = "error: build failed"
    long = short + "\n" + "\n".join(f"line {i} of a long and different log" for i in range(50))
    assert not similar(signature(short), signature(long), len(short), len(long))


def test_collapse_keeps_the_first_of_each_group_and_lists_the_rest():
    texts = {
        "a": NO_MATCH.format(path="x.py", n=1),
        "b": NO_MATCH.format(path="x.py", n=2),
        "c": "The login check failed because the session cookie was missing.",
        "d": NO_MATCH.format(path="x.py", n=3),
        "e": "Deployed version 2.1 to staging; smoke tests green.",
    }
    kept, groups = collapse(["a", "b", "c", "d", "e"], texts, keep=2)
    assert kept == ["a", "c"]
    assert groups == {"a": ["b", "d"]}
    kept, _ = collapse(["a", "b", "c", "d", "e"], texts, keep=5)
    assert kept == ["a", "c", "e"]


def test_recall_shows_one_hit_for_a_repeated_failure_and_room_for_the_rest(tmp_path):
    store = Store(tmp_path / "s", vectors=False)
    try:
        for n in range(4):
            store.ingest(NO_MATCH.format(path="app/views.py", n=n), Source(role="user"))
        auth = store.ingest(
            "The SEARCH for the token refresh failed: authentication returned 401 for admin.",
            Source(role="assistant"),
        )
        hits = recall(store, "SEARCH block failed", limit=2, mode="fts")
        assert len(hits) == 2
        assert len(hits[0].duplicates) == 3
        assert hits[1].entry_id == auth.id
    finally:
        store.close()
