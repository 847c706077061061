"""Session RAG: before each request, recall stored context relevant to the new user message.

Eviction keeps the prompt small by taking things out; recall puts back the few that matter for
*this* request: an error from twenty turns ago, a log from yesterday's session. Hits the chat
already holds, in full or as their summary, are skipped (a big log's summary in the history was
otherwise recalled again on unrelated questions), and so are hits below the relevance floor. The
result is one user/assistant pair at the end of the history chunk, in a *new* list: the shared
``done_messages`` is never appended to. Its time budget:
docs/decisions/090-per-turn-recall-latency.md; the incident: 092-big-outputs-in-the-chat.md.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ..redact import redact
from ..store.floor import close
from ..store.recall import RecallHit, recall
from ..tokens import count_tokens
from .session import GardenerSession, model_name

if TYPE_CHECKING:
    from ..store.db import Store
    from .seams import CoderLike


CANDIDATES = 8
MAX_HITS = 3
# Recall returns the nearest entries, relevant or not; injecting one costs tokens and distracts
# the model. A hit must pass the relevance floor (``store/floor.py``: half the query's search
# terms, or a best chunk this similar by meaning), the one ``/recall`` lists by.
# A hit whose text the chat holds verbatim (at least this long, so a one-word prompt that happens
# to occur somewhere does not count) is not injected again.
HELD_MIN_CHARS = 40

HEADER = (
    "Context recalled by aider-gardener for this request (stored earlier; it may or may not be"
    " relevant):"
)
REPLY = "Ok, I will use that context if it is relevant."


QUERY_CHARS = 4000
# "1": embed the query in a thread of its own at the start of the request (``prefetch``). Off:
# with no idle core, a second thread only competes (decision 090).
PREFETCH_ENV = "GARDENER_QUERY_PREFETCH"
# A request's recall takes at most about this long: its vector half (the query's embedding,
# then the search, on another thread) is waited for until ``VECTOR_BUDGET_MS - AFTER_MS``, then
# the request goes with full-text recall alone; the vector still lands in the query cache when
# it comes. 0 waits as long as it takes (decision 090).
VECTOR_BUDGET_ENV = "GARDENER_VECTOR_BUDGET_MS"
VECTOR_BUDGET_MS = 30.0
# What recall does after the vector half: fusing, reading the candidates' rows, folding copies
# (4-7 ms at p95 on the probe stores, bench.probes).
AFTER_MS = 7.0


def _mode(store: Store | None = None) -> str:
    """Before a request, never wait for the embedding model: until the store's worker has loaded
    it and opened the vector collection (seconds, in the background), recall is full-text
    only."""
    from ..store import embeddings

    index = getattr(store, "vectors", None)
    if index is not None and not getattr(index, "ready", True):
        return "fts"
    return "hybrid" if embeddings.loaded() else "fts"


def _budget_ms() -> float:
    raw = os.environ.get(VECTOR_BUDGET_ENV, "").strip()
    if not raw:
        return VECTOR_BUDGET_MS
    try:
        return max(0.0, float(raw))
    except ValueError:
        return VECTOR_BUDGET_MS


def vector_deadline(start: float) -> float | None:
    """The ``time.monotonic()`` by which a request's vector half must be done, for a recall
    started at ``start``; None when the budget is 0 (wait as long as it takes)."""
    budget = _budget_ms()
    if budget <= 0:
        return None
    return start + max(0.0, budget - AFTER_MS) / 1000.0


def _recall_in_time(session: GardenerSession, store: Store, query: str) -> list[RecallHit]:
    """Recall for a request within ``VECTOR_BUDGET_MS``: the query's embedding and then the
    vector search start first, full-text search runs meanwhile, and a vector half not done by
    ``vector_deadline`` leaves this request to full text (the vector still lands in the query
    cache for the next one).

    On a loaded machine the query embedding was the largest part of most slow turns (50-180 ms
    against 5-15 ms on an idle core), so a request waits for it only this long and otherwise
    recalls by full text alone, which injects the same entries most of the time. ``/recall``
    and the evaluations go through ``store.recall`` without a deadline, which waits.
    Measurements and what was rejected: docs/decisions/090-per-turn-recall-latency.md."""
    mode = _mode(store)
    deadline = vector_deadline(time.monotonic())
    index = getattr(store, "vectors", None)
    if mode != "hybrid" or deadline is None or index is None:
        return recall(store, query, limit=CANDIDATES, mode=mode)
    hits = recall(store, query, limit=CANDIDATES, mode=mode, vector_by=deadline)
    if hits and not any("vector" in h.via for h in hits):
        session.stats["recall_vectors_late"] += 1
    return hits


def prefetch(session: GardenerSession, query: str) -> bool:
    """At the start of a request: embed its query on the other core while the gardener ingests
    and evicts (the query embedding is 12-70 ms of a turn in rag mode). Off unless
    ``GARDENER_QUERY_PREFETCH=1`` (see there). Nothing when the model is not ready yet: recall is
    full text then."""
    store = session.store
    index = getattr(store, "vectors", None)
    if index is None or not query.strip() or session.config.rag_tokens <= 0:
        return False
    if os.environ.get(PREFETCH_ENV, "0") != "1":
        return False
    return bool(index.prefetch(query[:QUERY_CHARS]))


def recall_pair(
    session: GardenerSession, coder: CoderLike, query: str
) -> tuple[list[dict], list[str]]:
    """The (user, assistant) pair to add, and the entry ids it contains; ([], []) for none."""
    store = session.store
    budget = session.config.rag_tokens
    if store is None or not query.strip() or budget <= 0:
        return [], []
    # FTS5 takes the first MAX_QUERY_TERMS terms and the embedder the first 256 word pieces: the
    # head of a long message is the whole query either way (and scanning a 100 kB paste is not)
    query = query[:QUERY_CHARS]
    hits = _recall_in_time(session, store, query)
    if not hits:
        return [], []
    in_history = session.entries_in_history()
    held = _chat_text(coder)
    originals = {
        e_id: e.original for e_id, e in store.get_entries([h.entry_id for h in hits]).items()
    }
    model = model_name(coder)
    used = count_tokens(HEADER, model) + count_tokens(REPLY, model)
    blocks: list[str] = []
    ids: list[str] = []
    for hit in hits:
        if len(ids) >= MAX_HITS:
            break
        if in_history.get(hit.entry_id) in ("full", "summary") or _held(hit.text, held):
            continue  # the chat holds it (a summary names its /show handle): not again
        if not close(hit, query, originals.get(hit.entry_id, hit.text)):
            continue
        text = hit.text
        where = f" {hit.source_path}" if getattr(hit, "source_path", None) else ""
        block = f"--- id={hit.entry_id} ({hit.cls}{where})\n{redact(text.strip())}"
        cost = count_tokens(block, model)
        if used + cost > budget:
            continue
        used += cost
        blocks.append(block)
        ids.append(hit.entry_id)
    if not blocks:
        return [], []
    user = HEADER + "\n\n" + "\n\n".join(blocks)
    return [dict(role="user", content=user), dict(role="assistant", content=REPLY)], ids


def _chat_text(coder: CoderLike) -> str:
    """The text of the chat's messages now, to find entries it holds without a record (a
    summary pasted back, history the table lost)."""
    parts = []
    for lst in (getattr(coder, "done_messages", []), getattr(coder, "cur_messages", [])):
        parts += [m["content"] for m in lst if isinstance(m.get("content"), str)]
    return "\n".join(parts)


def _held(text: str, chat: str) -> bool:
    text = (text or "").strip()
    return len(text) >= HELD_MIN_CHARS and text in chat


def _fits(chunks: Any) -> bool:
    done = chunks.done
    return not done or done[-1].get("role") == "assistant"  # else alternation would break


def preview_recall(
    session: GardenerSession, coder: CoderLike, chunks: Any, query: str
) -> list[str]:
    """The pair ``inject`` would add, added to ``chunks`` without recording it anywhere (no
    ``rag_ids``, events or stats; recall of summaries only reads the store): what ``/tokens``
    and ``/context-pressure`` count. Returns its entry ids."""
    if not _fits(chunks):
        return []
    pair, ids = recall_pair(session, coder, query)
    if pair:
        chunks.done = list(chunks.done) + pair
    return ids


def inject(session: GardenerSession, coder: CoderLike, chunks: Any, query: str) -> int:
    """Append the recall pair to ``chunks.done`` as a new list; returns the entries added."""
    if not _fits(chunks):
        return 0
    done = chunks.done
    pair, ids = recall_pair(session, coder, query)
    if not pair:
        session.rag_ids = []
        return 0
    chunks.done = list(done) + pair
    session.rag_ids = ids
    session.events.recalled += len(ids)
    session.stats["recalled"] += len(ids)
    return len(ids)
