"""Hybrid recall: full-text (FTS5 BM25) and vector (cosine) rankings fused into one.

The two rankers fail differently: BM25 finds the exact identifiers, paths and error strings an
embedding blurs (``E0432``, ``parse_config``), vectors find the paraphrase. Reciprocal rank
fusion uses ranks only: an entry scores ``sum(w / (K + rank))``, the vectors weighted below BM25
for a query with an identifier and equal to it for a question in plain words (``is_question``).
The entry a turn answers gets ``REPLY_CREDIT`` of its score (``via == "reply"``, ``_answers``);
priority and recency break near-ties; an explicit recall (``rerank=True``) reads the fused top
again token by token (``rerank.py``) and then for the query's phrases (``phrases.py``: a user
who remembers a message quotes it). A user's turn and its reply are then put in the order the
query asks for (``_order_pairs``), and near-copies fold into one hit (``duplicates.py``); in an
explicit recall so does an exchange: a request, its reply and the output after it
(``exchanges.py``).

Vectors are searched per chunk; an entry ranks by its best chunk, returned as ``excerpt``.
Entries not embedded yet are still found by FTS5; with no vector index recall is FTS5 alone.
Measurements: docs/decisions/080-hybrid-recall-fusion.md, 095-recall-by-meaning.md.
"""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Sequence

from . import duplicates, exchanges, phrases
from . import rerank as reranking
from . import token_states
from .db import EMBED_CONTEXT_CHARS, Store
from .query import CONVERSATION_CLASSES, PREVIOUS_TURN_WINDOW, RRF_K, cjk_pairs, query_stems

log = logging.getLogger(__name__)


FTS_WEIGHT = 1.0
VECTOR_WEIGHT = 0.6
# A question in words ("why did the login check fail?") shares only common words with what it
# asks about, which match dozens of entries in a coding session, while its meaning is what the
# vectors find; a query with an identifier, a path or a quoted string is found by its words.
QUESTION_FTS_WEIGHT = 1.0
QUESTION_VECTOR_WEIGHT = 1.0
PRIORITY_WEIGHT = 0.1
PRIORITY_CAP = 150.0
RECENCY_WEIGHT = 0.05
RECENCY_HALF_LIFE = 86400.0  # a day
CANDIDATES = 50  # per ranker, before fusion; also the floor for large limits
CHUNKS_PER_CANDIDATE = 2  # several chunks of one entry can crowd the vector list
RERANK_CHARS = 2000  # of an original read by the reranker (it keeps rerank.MAX_TOKENS of them)
COLLAPSE_SCAN = 15  # candidates past the limit looked at for copies of the hits
REPLY_CREDIT = 0.3  # share of an entry's fused score credited to the entry before it
# Credit flows to what a turn answers, and "the turn before" is found within the window the
# store uses to index each turn with the turn it answers: one definition of both, in the store.

MODES = ("hybrid", "fts", "vector")


@dataclass
class RecallHit:
    """One recalled entry. ``text`` is the summary, or the original when recalled with
    ``full=True``; ``excerpt`` is the best-matching chunk when vectors found the entry."""

    entry_id: str
    cls: str
    score: float
    text: str
    source_path: str | None
    created: float
    excerpt: str = ""
    via: str = ""  # "fts", "vector", "fts+vector", or "reply" (credited by its reply)
    similarity: float = 0.0  # cosine of the best chunk to the query; 0.0 when vectors missed it
    duplicates: tuple[str, ...] = ()  # near-copies this hit stands for (``duplicates.py``)
    exchange: tuple[str, ...] = ()  # the rest of its exchange, folded into it (``exchanges.py``)


def recall(
    store: Store,
    query: str,
    classes: Sequence[str] | None = None,
    limit: int = 5,
    full: bool = False,
    mode: str = "hybrid",
    rerank: bool | None = None,
    vector_by: float | None = None,
) -> list[RecallHit]:
    """The ``limit`` entries best matching ``query``, best first (see the module docstring).

    ``classes`` restricts to those content classes; ``mode`` "fts" or "vector" uses one ranker
    (the evaluation compares them). ``full=True`` returns originals and refreshes the entries'
    last access, since the user is using them again. ``rerank=True`` marks an explicit recall
    (``/recall``, a tool call), which reads the fused top candidates again with ``rerank.py``
    and ``phrases.py`` unless ``GARDENER_RERANK=off``; the per-turn path leaves it None (see
    ``rerank.py``).
    ``vector_by`` (a ``time.monotonic()`` deadline, per-turn recall): the query's embedding
    and then the vector search start off this thread and full-text search runs meanwhile; a
    vector search not done by then leaves this recall to full text (decision 090). An internal
    failure is one log line and no hits (``Store.guard``): recall never stops a turn."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if limit <= 0 or not query or not query.strip():
        return []
    return store.guard(
        "recall",
        [],
        lambda: _recall(store, query, classes, limit, full, mode, rerank, vector_by),
    )


def _recall(
    store: Store,
    query: str,
    classes: Sequence[str] | None,
    limit: int,
    full: bool,
    mode: str,
    rerank: bool | None,
    vector_by: float | None = None,
) -> list[RecallHit]:
    wanted = [str(c) for c in classes] if classes else None
    n = max(CANDIDATES, 2 * limit)
    rankings: dict[str, list[str]] = {}
    excerpt_chunk: dict[str, str] = {}
    similarity: dict[str, float] = {}
    timed = vector_by is not None and mode in ("hybrid", "vector")
    soon = _vector_soon(store, query, n) if timed else None
    if mode in ("hybrid", "fts"):
        rankings["fts"] = [eid for eid, _ in store.fts_search(query, n, wanted)]
    if mode in ("hybrid", "vector"):
        if vector_by is None:
            chunks = _vector_search(store, query, n, rerank is True)
        else:
            chunks = _in_time(soon, vector_by)
        if chunks:
            rankings["vector"], excerpt_chunk, similarity = _ranked(chunks)

    candidates = list(dict.fromkeys(eid for ranked in rankings.values() for eid in ranked))
    if not candidates:
        return []
    entries = store.get_entries(candidates)  # active and in scope only
    if wanted:
        entries = {k: e for k, e in entries.items() if str(e.cls) in wanted}

    now = time.time()
    scores: dict[str, float] = {}
    found_by: dict[str, list[str]] = {}
    weights = fusion_weights(query)
    for name, ranked in rankings.items():
        weight = weights[name]
        rank = 0
        for eid in ranked:
            if eid not in entries:
                continue  # filtered ids do not use up a rank
            rank += 1
            scores[eid] = scores.get(eid, 0.0) + weight / (RRF_K + rank)
            found_by.setdefault(eid, []).append(name)
    previous = _credit_previous(store, scores, entries, found_by, wanted)
    for eid in scores:
        scores[eid] *= _boost(entries[eid], now)

    ordered = sorted(scores, key=lambda eid: (-scores[eid], eid))
    excerpts: dict[str, str] = {}
    if len(ordered) > 1 and reranking.wanted(rerank):
        if reranking.available():
            ordered, excerpts = _reranked(store, query, ordered, entries, excerpt_chunk)
        head = ordered[: phrases.DEPTH]
        ordered = phrases.promote(query, ordered, {e: entries[e].original or "" for e in head})
    head = _order_pairs(ordered[: limit + COLLAPSE_SCAN], previous, entries, query)
    originals = {eid: entries[eid].original or "" for eid in head}
    best, copies = duplicates.collapse(head, originals, len(head))
    rest: dict[str, list[str]] = {}
    if rerank is True:  # an explicit recall shows an exchange as one hit
        best, rest = exchanges.fold(best, _exchanges(store, best, entries, previous))
    best = best[:limit]
    missing = [
        excerpt_chunk[e] for e in best if e in excerpt_chunk and excerpt_chunk[e] not in excerpts
    ]
    excerpts.update(_chunk_texts(store, missing))
    hits = []
    for eid in best:
        e = entries[eid]
        hits.append(
            RecallHit(
                entry_id=eid,
                cls=str(e.cls),
                score=scores[eid],
                text=e.original if full else e.summary,
                source_path=e.path,
                created=e.created,
                excerpt=excerpts.get(excerpt_chunk.get(eid, ""), ""),
                via="+".join(found_by[eid]),
                similarity=similarity.get(eid, 0.0),
                # the exchange stands for its parts' near-copies too
                duplicates=tuple(c for e in (eid, *rest.get(eid, ())) for c in copies.get(e, ())),
                exchange=tuple(rest.get(eid, ())),
            )
        )
    if full and hits:
        store.touch([h.entry_id for h in hits])
    return hits


def fusion_weights(query: str) -> dict[str, float]:
    """How much each ranker counts for this query (see ``QUESTION_VECTOR_WEIGHT``)."""
    if is_question(query):
        return {"fts": QUESTION_FTS_WEIGHT, "vector": QUESTION_VECTOR_WEIGHT}
    return {"fts": FTS_WEIGHT, "vector": VECTOR_WEIGHT}


_IDENTIFIER = re.compile(r"`|^[\"']|[\"']$|\w[./:\\]\w|\w_\w|[a-z][A-Z]|[A-Za-z]\d|\d[A-Za-z]|\(\)")


def is_question(query: str) -> bool:
    """A query of plain words (several, no identifier, path, quote, digits-in-words or call).
    CJK is written without spaces: a run counts a word per two characters."""
    words = query.split()
    size = len(words) + len(cjk_pairs(query).split()) // 2
    return size >= 3 and not any(_IDENTIFIER.search(w) for w in words)


def recall_fts_only(store: Store, query: str, classes=None, limit: int = 5, full: bool = False):
    return recall(store, query, classes, limit, full, mode="fts")


def recall_vectors_only(store: Store, query: str, classes=None, limit: int = 5, full: bool = False):
    return recall(store, query, classes, limit, full, mode="vector")


def _vector_soon(store: Store, query: str, n: int) -> Future | None:
    """The vector search started off this thread (``VectorIndex.query_soon``): the query's
    embedding, then the search, on the other core while full text searches on this one."""
    index = _vector_index(store, explicit=False)
    if index is None or not hasattr(index, "query_soon"):
        return None
    return index.query_soon(query, n * CHUNKS_PER_CANDIDATE, exclude=_excluded(store))


def _in_time(soon: Future | None, vector_by: float) -> list[tuple[str, str, float]]:
    """The started search's chunks if they come by the deadline; else none, and this recall is
    full text alone (the query's vector still lands in the cache for the next one)."""
    if soon is None:
        return []
    try:
        return soon.result(timeout=max(0.0, vector_by - time.monotonic()))
    except Exception:  # noqa: BLE001 - late, or failed (the index logged why)
        return []


def _vector_index(store: Store, explicit: bool) -> Any:
    """The store's vector index when a query may use it now, else None."""
    index = getattr(store, "vectors", None)
    if index is None or not index.healthy:
        return None
    worker = getattr(store, "_worker", None)
    if worker is not None and getattr(worker, "alive", False) and not index.ready:
        # The worker is still loading the model or opening chromadb (seconds): a query now
        # would wait for it. Full text answers meanwhile (a first /recall answers within 1 s).
        # Except when the model is loaded already (the session preloads it at start) and a
        # person asked: then only the collection is missing, because the store opened just now
        # (a /recall before the first message), and opening it here costs a fraction of a
        # second instead of a first /recall that finds nothing by meaning.
        if not (explicit and _model_loaded() and index.warm()):
            return None
    return index


def _excluded(store: Store) -> list[str]:
    hidden = getattr(store, "hidden_ids", None)
    return sorted(hidden()) if hidden is not None else []


def _vector_search(
    store: Store, query: str, n: int, explicit: bool = False
) -> list[tuple[str, str, float]]:
    """The chunks nearest the query, waited for: (chunk id, entry id, cosine), best first."""
    index = _vector_index(store, explicit)
    if index is None:
        return []
    exclude = _excluded(store)
    try:
        if exclude:
            return index.query(query, n * CHUNKS_PER_CANDIDATE, exclude=exclude)
        return index.query(query, n * CHUNKS_PER_CANDIDATE)
    except Exception as err:  # noqa: BLE001 - the index promises not to raise; never crash recall
        log.warning("gardener: vector query failed (%s); using full-text search only", err)
        return []


def _ranked(
    hits: list[tuple[str, str, float]],
) -> tuple[list[str], dict[str, str], dict[str, float]]:
    """Entries in order of their best chunk's similarity, that chunk's id per entry, and its
    cosine similarity per entry (what ``floor.close`` judges a hit by)."""
    ranked: list[str] = []
    best_chunk: dict[str, str] = {}
    best: dict[str, float] = {}
    for chunk_id, entry_id, sim in hits:  # best first
        if entry_id not in best_chunk:
            best_chunk[entry_id] = chunk_id
            best[entry_id] = float(sim)
            ranked.append(entry_id)
    return ranked, best_chunk, best


def _model_loaded() -> bool:
    from . import embeddings

    return embeddings.loaded()


def _credit_previous(
    store: Store,
    scores: dict[str, float],
    entries: dict[str, Any],
    found_by: dict[str, list[str]],
    wanted: list[str] | None,
) -> dict[str, str]:
    """Add ``REPLY_CREDIT`` of each entry's score to the entry before it in its session (see
    the module docstring); in place. Without the store's ``read`` (a stand-in) nothing changes.
    Returns the entry before each turn scored (``_order_pairs`` and ``_exchanges`` read it)."""
    if not scores:
        return {}
    turns = [eid for eid in scores if _is_turn(entries[eid])]
    previous = _previous_entries(store, turns) if turns else {}
    if not previous or REPLY_CREDIT <= 0:
        return previous
    missing = [p for p in set(previous.values()) if p not in entries]
    if missing:
        more = store.get_entries(missing)  # active and in scope only
        if wanted:
            more = {k: e for k, e in more.items() if str(e.cls) in wanted}
        entries.update(more)
    credit: dict[str, float] = {}
    for eid, prev in previous.items():
        if prev in entries and _answers(entries[eid], entries[prev]):
            credit[prev] = credit.get(prev, 0.0) + REPLY_CREDIT * scores[eid]
    for eid, extra in credit.items():
        scores[eid] = scores.get(eid, 0.0) + extra
        found_by.setdefault(eid, ["reply"])
    return previous


def _is_turn(entry: Any) -> bool:
    """A prompt or a reply, whatever the reply's class (an edit, code)."""
    return str(entry.cls) in CONVERSATION_CLASSES or getattr(entry, "role", None) == "assistant"


def _answers(turn: Any, prev: Any) -> bool:
    """Whether ``turn`` vouches for ``prev``, the entry before it: a turn for the conversation
    turn it follows, and the assistant's reply for the output it answers too (the reply that
    explains a failed run shares a question's words; the run is what was asked about).
    Folded into one hit with it in an explicit recall (``exchanges.py``), so the two do not
    take two slots. Measured: docs/decisions/095-recall-by-meaning.md ("Fourth pass")."""
    if str(prev.cls) in CONVERSATION_CLASSES:
        return True
    return getattr(turn, "role", None) == "assistant" and getattr(prev, "role", None) == "tool"


def _order_pairs(
    ordered: list[str], previous: dict[str, str], entries: dict[str, Any], query: str
) -> list[str]:
    """A user's turn and the reply to it both ranked: the reply first (what was answered,
    decided or done is what a question looks for), unless the query asks about the user's
    own words ("when I asked…", ``asks_own_words``). The pair keeps its two places."""
    if not previous:
        return ordered
    answer = asks_answer(query)
    own = not answer and bool(_OWN_WORDS.search(query))  # asks_own_words, searched once
    stems = [t for t in query_stems(query) if len(t) >= 3]
    out = list(ordered)
    where = {eid: i for i, eid in enumerate(out)}
    for reply, prompt in previous.items():
        if reply not in where or prompt not in where or prompt not in entries:
            continue
        if entries[reply].role != "assistant" or entries[prompt].role != "user":
            continue
        if own or answer:
            prompt_first = own
        else:  # the one whose own words the query shares (each is indexed with the other)
            prompt_first = _shared(stems, entries[prompt]) > _shared(stems, entries[reply])
        i, j = where[reply], where[prompt]
        if (i > j) != prompt_first:  # the wrong one of the two is ahead
            out[i], out[j] = out[j], out[i]
            where[reply], where[prompt] = j, i
    return out


# A question about what the user said or asked, in the languages sessions were seen in.
_OWN_WORDS = re.compile(
    r"\b(?:I|we)\s+(?:had\s+)?(?:asked|said|wanted|requested|told|typed|wrote|mentioned"
    r"|described|reported|pasted)\b|\bmy\s+(?:own\s+)?(?:request|question|prompt|message|ask)"
    r"|\b(?:did|do)\s+I\s+(?:ask|say|want|request|tell|type|write)"
    r"|\b(?:le\s+)?(?:ped[ií]|pregunt[ée]|dije|quer[ií]a|escrib[ií])\b|\bperguntei\b"
    r"|\bj'ai\s+(?:demand[ée]|dit|[ée]crit)|\bich\s+(?:habe\s+)?(?:gefragt|gebeten|gesagt)"
    r"|\b(?:jsem|sem)\s+(?:se\s+)?(?:ptal|chtěl|psal|žádal|napsal|zeptal)"
    r"|\b(?:ptal|chtěl|psal|žádal|zeptal)\s+(?:jsem|sem)\b"
    r"|\bя\s+(?:спрашивал|просил|писал|сказал|хотел)|\b(?:sordum|istedim|dedim|yazdım)\b"
    r"|我(?:问|問|要求|让|讓|叫|说|說|请|請|想)",
    re.IGNORECASE,
)


# ... unless it asks what came back ("what did it answer when I asked…").
_ANSWER_WORDS = re.compile(
    r"\b(?:it|he|she|they|you|aider|claude|the\s+(?:model|assistant|ai))\s+(?:had\s+)?"
    r"(?:said|answered|replied|suggested|proposed|recommended|explained|told|say|answer|reply"
    r"|suggest|propose|recommend|explain)\b|\b(?:contest[óo]|respondi[óo]|me\s+dijo|sugiri[óo]"
    r"|propuso|explic[óo]|respondeu|sugeriu|odpověděl|navrhl|řekl|poradil|ответил|предложил"
    r"|cevap\s+verdi|önerdi)\b|回答|回复|回覆|建议|建議|说了什么|說了什麼",
    re.IGNORECASE,
)


def asks_own_words(query: str) -> bool:
    return bool(_OWN_WORDS.search(query)) and not _ANSWER_WORDS.search(query)


def asks_answer(query: str) -> bool:
    return bool(_ANSWER_WORDS.search(query))


def _shared(stems: list[str], entry: Any) -> int:
    text = (entry.original or "")[:RERANK_CHARS].lower()
    return sum(1 for t in stems if t in text)


def _reranked(
    store: Store,
    query: str,
    ordered: list[str],
    entries: dict[str, Any],
    excerpt_chunk: dict[str, str],
) -> tuple[list[str], dict[str, str]]:
    """``ordered`` after ``rerank.rerank``, and the chunk texts read on the way (the excerpts).

    Each candidate is read as the store embedded it: a conversation turn by its first chunk
    (with the turn it answers), another entry by its gist, else its first chunk. Their token
    states come from the store (``token_states``, kept by the embedding worker); the ones
    missing are encoded here once and kept for the next recall."""
    head = ordered[: reranking.DEPTH]
    chunks = _chunk_texts(store, [excerpt_chunk[e] for e in head if e in excerpt_chunk])
    # An output is read by its gist (what it is about: command, failures, files) else its first
    # chunk, not by the chunk its vector matched: those are the chunks the worker keeps states
    # for, and on the probes they ranked better too (decision 095).
    leading = {eid: f"{eid}:0" for eid in head}
    gists = [f"{eid}:-1" for eid in head if str(entries[eid].cls) not in CONVERSATION_CLASSES]
    stored = token_states.load(store, list(leading.values()) + gists, EMBED_CONTEXT_CHARS)
    chunk_of = {eid: f"{eid}:-1" if f"{eid}:-1" in stored else cid for eid, cid in leading.items()}
    texts: dict[str, str] = {}
    known: dict[str, Any] = {}
    for eid, cid in chunk_of.items():
        text, data = stored.get(cid, ("", None))
        texts[eid] = text or (entries[eid].original or "")[:RERANK_CHARS]
        if data is not None:
            known[eid] = token_states.unpack(data)
    cold = [eid for eid in head if eid not in known and chunk_of[eid] in stored]
    try:
        packed = [token_states.pack(s) for s in reranking.doc_states([texts[e] for e in cold])]
    except Exception as err:  # noqa: BLE001 - rerank encodes them itself, or keeps the order
        log.debug("gardener: encoding rerank candidates failed: %s", err)
        packed = []
    # read back as the worker's would be: a candidate scores the same kept or encoded just now
    known.update((eid, token_states.unpack(data)) for eid, data in zip(cold, packed))
    token_states.save(store, [(chunk_of[eid], data) for eid, data in zip(cold, packed)])
    return reranking.rerank(query, ordered, texts, known), chunks


def _exchanges(
    store: Store, head: list[str], entries: dict[str, Any], previous: dict[str, str]
) -> dict[str, str]:
    """The exchanges among ``head`` (``exchanges.exchanges``). ``previous`` covers the turns
    scored; the outputs among ``head`` are looked up."""
    parts = [e for e in head if getattr(entries.get(e), "role", None) in ("assistant", "tool")]
    missing = [e for e in parts if e not in previous]
    before = {**previous, **(_previous_entries(store, missing) if missing else {})}
    return exchanges.exchanges(head, entries, before)


def _previous_entries(store: Store, ids: list[str]) -> dict[str, str]:
    """Entry id -> the id of the entry ingested just before it in the same session."""
    if not hasattr(store, "read"):
        return {}
    marks = ",".join("?" * len(ids))
    sql = (
        "SELECT e.id, (SELECT p.id FROM entries p WHERE p.seq < e.seq AND p.seq >= e.seq - ?"
        " AND p.session_id = e.session_id ORDER BY p.seq DESC LIMIT 1)"
        f" FROM entries e WHERE e.id IN ({marks})"
    )
    try:
        rows = store.read(lambda c: c.execute(sql, (PREVIOUS_TURN_WINDOW, *ids)).fetchall())
    except Exception as err:  # noqa: BLE001 - a missing credit only loses a nudge
        log.debug("gardener: reading neighbour entries failed: %s", err)
        return {}
    return {eid: prev for eid, prev in rows if prev}


def _boost(entry: Any, now: float) -> float:
    prio = min(max(float(entry.priority or 0.0), 0.0), PRIORITY_CAP) / 100.0
    age = max(0.0, now - float(entry.created or now))
    return (1.0 + PRIORITY_WEIGHT * prio) * (
        1.0 + RECENCY_WEIGHT * 0.5 ** (age / RECENCY_HALF_LIFE)
    )


def _chunk_texts(store: Store, chunk_ids: list[str]) -> dict[str, str]:
    """The text of the best chunks, read from the store's queue table (chromadb keeps no text);
    an excerpt is a nicety, so a failed read gives none."""
    return _texts_by_id(
        store, "SELECT chunk_id, text FROM chunks WHERE chunk_id IN ({})", chunk_ids
    )


def _texts_by_id(store: Store, sql: str, ids: list[str]) -> dict[str, str]:
    if not ids or not hasattr(store, "read"):
        return {}
    query = sql.format(",".join("?" * len(ids)))
    try:
        return dict(store.read(lambda c: c.execute(query, ids).fetchall()))
    except Exception as err:  # noqa: BLE001 - callers treat a missing text as optional
        log.debug("gardener: reading %s failed: %s", sql.split()[1:3], err)
        return {}
