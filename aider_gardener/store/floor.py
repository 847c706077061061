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

from .query import CJK_RUN, query_stems, query_terms

SIMILARITY_FLOOR = 0.40
MIN_TERM_SHARE = 0.5
SCAN_CHARS = 4_000_000  # of an original searched for the terms (as /recall's preview)
# Characters that carry grammar, not the subject, in Chinese and Japanese questions (why, what,
# is, of, particles): a CJK run is found as far as the others are.
CJK_FUNCTION_CHARS = frozenset(
    "的了是在我你他她它们這这那有和与與就都也还還吗嗎呢吧啊么麼什为為怎哪谁誰把被给給让讓请請"
    "一个個不没沒要会會能可以对對从從到过過着而且但或如果因所又很再已经經"
    "のはがをにでともへやかなよねだですますた"
)


def term_share(query: str, text: str) -> float:
    """The share of the query's search terms (crudely stemmed, ``query.query_stems``) that occur
    in ``text``, case-insensitively; 0.0 for a query with no searchable word. A term and its
    stem count once. A CJK run counts as one term (as unicode61 reads it), found in the share of
    its content characters that a matching character pair holds (``query.cjk_pairs``)."""
    low = text[:SCAN_CHARS].lower()
    runs = [m.group(0) for m in CJK_RUN.finditer(query or "")]
    terms = [t.lower() for t in query_terms(query) if not CJK_RUN.search(t)]
    stems = query_stems(query)
    found = 0.0
    for term in dict.fromkeys(terms):
        forms = [term] + [s for s in stems if s != term and term.startswith(s)]
        found += any(f in low for f in forms)
    total = float(len(dict.fromkeys(terms)))
    for run in runs:
        content = [i for i, ch in enumerate(run) if ch not in CJK_FUNCTION_CHARS]
        seen: set[int] = set()
        for i in range(len(run) - 1):
            if run[i : i + 2] in low:
                seen.update((i, i + 1))
        if content:  # a run is one term, found as far as its content characters are
            total += 1
            found += len(seen.intersection(content)) / len(content)
    return found / total if total else 0.0


def close(hit: Any, query: str, text: str, floor: float = SIMILARITY_FLOOR) -> bool:
    """Whether ``hit`` (a ``RecallHit``) is a close match for ``query``; ``text`` is the text
    the terms are looked for in (the entry's original)."""
    if float(getattr(hit, "similarity", 0.0) or 0.0) >= floor:
        return True
    return term_share(query, text) >= MIN_TERM_SHARE
