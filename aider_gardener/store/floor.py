"""The relevance floor: is a recall hit a close match, or only the nearest of what is stored?

Recall ranks by fused ranks (``recall.py``), and a rank says nothing about relevance: the vector
ranker returns the nearest entries whatever they are, so ``/recall checksum`` in a session that
never mentioned one listed five unrelated prompts, and per-turn recall injected a big log's
summary on unrelated questions. A hit is close when it holds at least ``MIN_TERM_SHARE`` of the
query's search terms (the words themselves are there: the user can see why it matched), or when
its best chunk's cosine similarity to the query is at least ``SIMILARITY_FLOOR`` (found by
meaning). Anything else (a vector neighbour below the floor, an entry credited by its reply
alone, a full-text hit sharing one common word of a long query) is not shown and not injected.

The floor is measured, not guessed (``python -m bench.recall_floor``, true hits against the best
hits of queries whose answer is not stored): the table and the choice are in docs/benchmarks.md,
"The relevance floor", and the method in docs/decisions/059-recall-floor-measurement.md.
"""

from __future__ import annotations

from typing import Any

from .query import query_stems, query_terms

SIMILARITY_FLOOR = 0.40
MIN_TERM_SHARE = 0.5
SCAN_CHARS = 4_000_000  # of an original searched for the terms (as /recall's preview)


def term_share(query: str, text: str) -> float:
    """The share of the query's search terms (crudely stemmed, ``query.query_stems``) that occur
    in ``text``, case-insensitively; 0.0 for a query with no searchable word. A term and its
    stem count once."""
    terms = [t.lower() for t in query_terms(query)]
    if not terms:
        return 0.0
    stems = query_stems(query)
    low = text[:SCAN_CHARS].lower()
    found = 0
    for term in dict.fromkeys(terms):
        forms = [term] + [s for s in stems if s != term and term.startswith(s)]
        found += any(f in low for f in forms)
    return found / len(dict.fromkeys(terms))


def close(hit: Any, query: str, text: str, floor: float = SIMILARITY_FLOOR) -> bool:
    """Whether ``hit`` (a ``RecallHit``) is a close match for ``query``; ``text`` is the text
    the terms are looked for in (the entry's original)."""
    if float(getattr(hit, "similarity", 0.0) or 0.0) >= floor:
        return True
    return term_share(query, text) >= MIN_TERM_SHARE
