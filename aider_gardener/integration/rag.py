"""Session RAG: before each request, recall stored context relevant to the new user message.

Eviction keeps the prompt small by taking things out; recall puts back the few that matter for
*this* request: an error from twenty turns ago, a log from yesterday's session. Hits the chat
already holds, in full or as their summary, are skipped (a big log's summary in the history was
recalled again as 742 tokens on three unrelated questions: issue 23), and so are hits below the
relevance floor. The result is one user/assistant pair at
the end of the history chunk, in a *new* list: the shared ``done_messages`` is never appended to.
"""

from __future__ import annotations

import os
from typing import Any

from ..redact import redact
from ..store.floor import close
from ..tokens import count_tokens
from .ingest import model_name
from .session import GardenerSession

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
# measured side by side with two other jobs on the 2 cores (load ~4; ``bench run replays/`` + 10
# real sessions, two alternating runs each), gardener ms p50/p95 were 26.9/158 and 19.7/133 with
# it, 23.3/129 and 25.3/125 without: with no idle core, a second thread only competes.
PREFETCH_ENV = "GARDENER_QUERY_PREFETCH"
# The vector half of a request's recall waits at most this long for the query's embedding (run
# in a thread of its own), then the request goes with full-text recall alone; the vector still
# lands in the query cache when it comes. 0 waits as long as it takes. Measured: ``_mode_in_time``.
VECTOR_BUDGET_ENV = "GARDENER_VECTOR_BUDGET_MS"
VECTOR_BUDGET_MS = 30.0


def _mode(store: Any = None) -> str:
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


def _mode_in_time(session: GardenerSession, store: Any, query: str) -> str:
    """``_mode``, but "fts" for this request when its query's embedding is not ready within
    ``VECTOR_BUDGET_MS``.

    Why (issue 15, goal: per-turn gardener p95 <= 50 ms with vectors on while the embedder is
    busy): profiled per turn on the replay bench, the query embedding was 5-15 ms on an idle
    core but 50-180 ms on a loaded machine, the largest part of most slow turns (the vector
    search itself 2-9 ms, full-text search 0.2-20 ms, reading entries 0.1-2 ms).

    Measured with ``python -m bench run replays/ R --modes gardener`` (4 bundled replays + 10
    real sessions, R = ``bench import aider-history`` of AFI-Protocol__afi-core and
    AndreasDebel__HaaV-CatalogService; the bench now runs a busy background embedder, see
    ``bench/replay/runner.py``), runs alternated in one window, gardener ms p50 / p95:

    ===============================  ==================================  ====================
    machine load (other jobs)        4-7                                 12-16
    before (551a72d)                 20.7/140, 21.0/120, 21.7/138,       48.3/328, 68.2/326
                                     39.9/189
    upsert pause only (budget 0)                                         67.2/258, 59.2/313
    30 ms budget (this)              25.6/60.4, 39.9/112, 36.2/107,      55.9/166, 60.3/171
                                     35.0/107
    30 ms budget + query prefetch    28.0/84.8, 33.0/105, 29.1/95.7
    ===============================  ==================================  ====================

    p95 falls by a third to a half; p50 rose (median 21 -> 35 ms at load 4-7): handing the
    embedding to a thread and waking up again costs scheduler latency on an oversubscribed
    CPU. The goal is not met there: ``--no-vectors`` gives 11.2/48.3 at load ~6, and the
    slowest turns left are ingest (100-240 ms when a big output is stored).

    What it costs: 17-25 % of the hybrid requests were late at load 4-7 (27/163, 38/148,
    35/153, 38/159), a third at 12-16 (48/150, 52/152). A late request's recall is full text,
    and on these replays full text injects the same entries as hybrid in 112 of 142 requests
    (the other 30: hybrid adds an entry, mostly a summarized one's vector excerpt, where full
    text adds none), so a quarter late changes about one request in 20. ``/recall``, the
    bench's probes, LoCoMo and ``bench.tool_probes`` go through ``store.recall``, which waits
    as before: their recall is unchanged (probe recall@5 35/37 in every run above; with no
    vectors at all 32/37; LoCoMo full text alone R@5 0.739 vs hybrid 0.751, tool probes 20/20
    either way, per ``store/recall.py`` and ``store/worker.py``).

    Rejected by the same data: skipping vectors when the full-text hits are strong (of the 80
    requests with three or more full-text hits sharing half the query's terms, vectors changed
    the injection in 24), loading only scored fields (0.1-2 ms), and prefetch on by default
    (neither p95 nor the late share clearly lower: 28/151, 32/156, 37/153 late; off, see
    ``PREFETCH_ENV``). "before" is 551a72d with this bench's busy embedder added."""
    mode = _mode(store)
    budget = _budget_ms()
    index = getattr(store, "vectors", None)
    if mode != "hybrid" or budget <= 0 or not hasattr(index, "wait_query_vector"):
        return mode
    if index.wait_query_vector(query, budget / 1000.0):
        return mode
    session.stats["recall_vectors_late"] += 1
    return "fts"


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


def recall_pair(session: GardenerSession, coder: Any, query: str) -> tuple[list[dict], list[str]]:
    """The (user, assistant) pair to add, and the entry ids it contains; ([], []) for none."""
    store = session.store
    budget = session.config.rag_tokens
    if store is None or not query.strip() or budget <= 0:
        return [], []
    # FTS5 takes the first MAX_QUERY_TERMS terms and the embedder the first 256 word pieces: the
    # head of a long message is the whole query either way (and scanning a 100 kB paste is not)
    query = query[:QUERY_CHARS]
    hits = store.recall(query, limit=CANDIDATES, mode=_mode_in_time(session, store, query))
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


def _chat_text(coder: Any) -> str:
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


def preview_recall(session: GardenerSession, coder: Any, chunks: Any, query: str) -> list[str]:
    """The pair ``inject`` would add, added to ``chunks`` without recording it anywhere (no
    ``rag_ids``, events or stats; recall of summaries only reads the store): what ``/tokens``
    and ``/context-pressure`` count. Returns its entry ids."""
    if not _fits(chunks):
        return []
    pair, ids = recall_pair(session, coder, query)
    if pair:
        chunks.done = list(chunks.done) + pair
    return ids


def inject(session: GardenerSession, coder: Any, chunks: Any, query: str) -> int:
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
