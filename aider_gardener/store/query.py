"""What a search query means to the store: its terms, the FTS5 expression, the fusion constant.

The store (``db.py``) builds MATCH expressions from these terms, and recall, the reranker, the
relevance floor and the chat commands read the same terms to rank and to preview, so they live
below all of them: one tokenizer, one stopword list, one idea of a conversation turn.
"""

from __future__ import annotations

import re
from typing import Sequence

from . import priority

# Reciprocal rank fusion's K: an entry scores ``sum(w / (K + rank))`` over the rankings it is
# in. Small, because two rankers of unequal strength are fused (decision 080 in docs/decisions).
RRF_K = 5
# Conversation turns (classes): indexed together with the turn they answer (``db.py``), and the
# only entries recall's reply credit flows between (``recall.py``).
CONVERSATION_CLASSES = frozenset({"prose", "prompt"})
# How far back (in ingests, all sessions) the previous turn of a session is looked for, here and
# by recall's reply credit: bounds the lookup when other sessions wrote in between, or when an
# entry is its session's first.
PREVIOUS_TURN_WINDOW = 64
MAX_QUERY_TERMS = 24


# A compact English list: scikit-learn's would do, but importing it costs ~0.9 s.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each else ever few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or other
    our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve y also get got let lets may might must shall us one ones much many way
    tell say said like know think really yes yeah oh ok okay""".split()
)
_QUERY_TOKEN = re.compile(r"[^\W_](?:[\w./:\\-]*[^\W_])?")
_PART_SPLIT = re.compile(r"[/:\\]+")
_WORD_SPLIT = re.compile(r"[_.\-]+")
_CAMEL_QUERY = re.compile(r"[a-z0-9][A-Z]")
# Han, kana and hangul: scripts written without spaces, which FTS5's unicode61 tokenizer reads as
# one token per run, so "构建失败" would match only that exact run, never "构建" in "构建一直失败".
CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK_RUN = re.compile(f"[{CJK_CHARS}]{{2,}}")
CJK_TERMS = 2000  # distinct pairs indexed per entry (a CJK page is a few thousand characters)


def reorder_head(ranked: list[str], bonus: Sequence[float]) -> list[str]:
    """``ranked`` (best first) with its first ``len(bonus)`` ids reordered by their rank's
    fusion score, ``1 / (K + rank)``, plus each one's ``bonus``; the rest keep their order. The
    second stages of an explicit recall (``rerank.py``, ``phrases.py``) each add their own."""
    total = [1.0 / (RRF_K + i + 1) + b for i, b in enumerate(bonus)]
    order = sorted(range(len(total)), key=lambda i: (-total[i], i))
    return [ranked[i] for i in order] + ranked[len(total) :]


def cjk_pairs(text: str, limit: int = CJK_TERMS) -> str:
    """Each run of CJK characters as its overlapping character pairs (``构建失败`` -> ``构建 建失
    失败``), space-separated: the store indexes them with an entry (``terms``) and a query adds
    the same pairs, so a CJK question matches the words it shares with a message (bigram
    indexing, as search engines without a CJK dictionary do)."""
    seen: dict[str, None] = {}
    for m in CJK_RUN.finditer(text or ""):
        run = m.group(0)
        for i in range(len(run) - 1):
            seen.setdefault(run[i : i + 2], None)
            if len(seen) >= limit:
                return " ".join(seen)
    return " ".join(seen)


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def query_terms(query: str) -> list[str]:
    """The terms an FTS5 query ORs together: every word of the query that is not a stopword,
    compound tokens (paths, identifiers, ``file.py:12``) whole *and* by their parts (so a
    relative path or half an identifier still matches), camelCase also as separate words."""
    terms: dict[str, None] = {}

    def add(term: str) -> None:
        if len(terms) < MAX_QUERY_TERMS and term and term not in terms:
            terms[term] = None

    for m in _QUERY_TOKEN.finditer(query or ""):
        if len(terms) >= MAX_QUERY_TERMS:
            break  # a pasted 100 kB message: the rest could not add a term
        token = m.group(0)
        low = token.lower()
        plain = token.isalnum()
        if plain:
            if low in STOPWORDS or (len(token) < 2 and not token.isdigit()):
                continue
            add(token)
        else:
            add(token)
            for part in _PART_SPLIT.split(token):
                if part and part != token and len(part) >= 2:
                    add(part)
                for word in _WORD_SPLIT.split(part):
                    if len(word) >= 3 and word.lower() not in STOPWORDS and not word.isdigit():
                        add(word)
        if _CAMEL_QUERY.search(token):
            words = priority.camel_terms(token)
            if words:
                add(words.split("\n")[0])
    for pair in cjk_pairs(query or "").split():  # after every word: they fill what is left
        add(pair)
    return list(terms)


def query_stems(query: str) -> list[str]:
    """``query_terms`` lower-cased, with a crude stem for longer words: FTS5's porter matched
    "failing" for "failed", and a preview of the matching lines should show that line too."""
    out: list[str] = []
    for term in query_terms(query):
        low = term.lower()
        out.append(low)
        if low.isalpha() and len(low) >= 5:
            for suffix in ("ing", "ed", "es", "s"):
                if low.endswith(suffix) and len(low) - len(suffix) >= 4:
                    out.append(low[: -len(suffix)])
                    break
    return list(dict.fromkeys(out))


def build_match(query: str) -> str | None:
    """An FTS5 MATCH expression that cannot raise: each term quoted (FTS5 operators, quotes,
    ``*``, ``:``, ``-``, ``NEAR(`` become plain text), terms ORed so a natural-language question
    matches entries sharing any of its content words, BM25 ranking those sharing most first.
    None when the query has no searchable word."""
    terms = query_terms(query)
    return " OR ".join(quote_term(t) for t in terms) if terms else None
