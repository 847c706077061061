"""The phrases a query shares with a candidate: a user who remembers a message quotes it.

Someone who recalls an error or a decision by its words writes them in order ("ON CONFLICT DO
UPDATE cannot affect row a second time", "test_multiply_numbers PASSED"). Full text and vectors
read a text as a bag, so a reply that uses the same words apart, or the turn next to the target,
can come first. An explicit recall also counts how many of the query's adjacent word pairs a
candidate has adjacent too, and that share counts as much as a ranker's first place. A pair
that many candidates have (common words of the session's language) counts less than one that
few have (a quoted error line): weighted by its idf among the candidates.

A pair is two neighbouring words, not both stopwords; in CJK text, where words are not
separated, three neighbouring characters (two characters are already full text's terms). A
paraphrase shares few pairs with anything, so it is left almost as it was. It runs where the
reranker may (``GARDENER_RERANK``), with or without the model. Measured on the probes:
docs/decisions/095-recall-by-meaning.md.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from .query import CJK_CHARS, CJK_RUN, RRF_K, STOPWORDS, reorder_head
from .rerank import DEPTH  # the candidates an explicit recall reads again

SCAN_CHARS = 100_000  # of a candidate's original: a quoted line can sit deep in a long log
WEIGHT = 1.0 / (RRF_K + 1)  # a candidate with every pair gains what a first place is worth
MAX_PAIRS = 32  # of a query (a pasted page would cost a scan per pair for nothing)

_SEPARATORS = re.compile(r"[\W_]+")
# Between two words: anything not a letter or digit, and CJK text (its words are not spaced).
_WORD_BREAKS = re.compile(f"[\\W_{CJK_CHARS}]+")


def promote(query: str, ranked: list[str], originals: dict[str, str]) -> list[str]:
    """``ranked`` (best first) with its first ``DEPTH`` ids reordered by their rank plus the
    weighted share of the query's pairs each has; unchanged when the query has no pair or no
    candidate has one. ``originals``: id -> the text searched."""
    pairs = query_pairs(query)
    head = ranked[:DEPTH]
    if not pairs or len(head) < 2:
        return ranked
    found = [found_pairs(pairs, originals.get(eid) or "") for eid in head]
    shares = _shares(pairs, found)
    if not any(shares):
        return ranked
    return reorder_head(ranked, [WEIGHT * share for share in shares])


def _shares(pairs: Sequence[str], found: list[set[str]]) -> list[float]:
    """Each candidate's share of the query's pairs, a pair weighted by how few of the
    candidates have it (idf among them): a pair of a language's common words ("para que",
    "kdy jsem") is in many and says little; a quoted error line is in one."""
    n = len(found)
    df = {p: sum(1 for f in found if p in f) for p in pairs}
    weight = {p: math.log(1 + n / d) for p, d in df.items() if d}
    most = math.log(1 + n) * len(pairs)
    return [sum(weight[p] for p in f) / most for f in found]


def query_pairs(query: str) -> list[str]:
    """The query's pairs: two words joined by a space, or three CJK characters."""
    low = query[:4000].lower()
    words = _WORD_BREAKS.sub(" ", low).split()
    out: dict[str, None] = {}
    for a, b in zip(words, words[1:]):
        if not (a in STOPWORDS and b in STOPWORDS):
            out.setdefault(f"{a} {b}", None)
    for run in CJK_RUN.findall(_SEPARATORS.sub("", low)):
        for i in range(len(run) - 2):
            out.setdefault(run[i : i + 3], None)
    return list(out)[:MAX_PAIRS]


def found_pairs(pairs: Sequence[str], text: str) -> set[str]:
    """The ``pairs`` found in ``text`` (its first ``SCAN_CHARS``)."""
    if not pairs:
        return set()
    low = text[:SCAN_CHARS].lower()
    found: set[str] = set()
    if any(" " in p for p in pairs):
        words = f" {_WORD_BREAKS.sub(' ', low)} "
        found.update(p for p in pairs if " " in p and f" {p} " in words)
    if any(" " not in p for p in pairs):
        cjk = _SEPARATORS.sub("", low)
        found.update(p for p in pairs if " " not in p and p in cjk)
    return found
