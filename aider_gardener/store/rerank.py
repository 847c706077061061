"""Second-stage ranking for explicit recalls: late interaction (MaxSim) over MiniLM's token states.

Fusion of BM25 and the sentence vectors is at a plateau: both compress a turn to one number per
query. Reading the query against each candidate token by token is what a cross-encoder does, and
none ships with its weights for offline use, so this reuses the model the store already loaded:
each candidate (a turn's first chunk with the turn it answers, another entry's gist, else its
first chunk) goes through MiniLM once, and scores the mean over the query's content tokens of
their best cosine against its word pieces (ColBERT's MaxSim). That rank is fused with the first
stage's (RRF, the same ``K``).

Encoding twenty candidates costs about a second on two busy cores, so the embedding worker
keeps the states of each entry's first chunk and gist in the store (``token_states``) and a
recall encodes only the query and the candidates missing there. Per-turn RAG still does not
rerank; an explicit ``/recall`` does. ``GARDENER_RERANK``: ``off`` never, ``on`` (default) for
explicit recalls, ``always`` for every recall. Without the model (missing, still loading,
vectors off) recall keeps the first stage's order: this never blocks, raises or loads.
Measurements and the packages surveyed: docs/decisions/087-recall-rerank.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from typing import Any, Sequence

from .query import RRF_K, STOPWORDS, reorder_head

log = logging.getLogger(__name__)

RERANK_ENV = "GARDENER_RERANK"
SETTINGS = ("off", "on", "always")
DEPTH = 20  # fused candidates read again; LoCoMo hybrid R@10 is 0.855, R@20 ~0.92
WEIGHT = 1.0  # MaxSim's rank weight against the first stage's (RRF with recall.RRF_K)
MAX_TOKENS = 128  # word pieces per candidate: a turn and the turn it answers fit
_SPECIAL = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")

# Token states of candidates read before, by text: at most this many bytes (float16, 768
# bytes a word piece: ~330 candidates of MAX_TOKENS pieces), least recently read dropped first.
CACHE_BYTES = 32 << 20

_tokenizer: Any = None
_warned = False
_cache: OrderedDict[str, Any] = OrderedDict()
_cache_lock = threading.Lock()
_cache_bytes = 0


def setting() -> str:
    """``GARDENER_RERANK`` as one of ``SETTINGS``; anything else reads as the default."""
    value = os.environ.get(RERANK_ENV, "on").strip().lower()
    if value in ("0", "false", "no", "none"):
        return "off"
    if value in ("1", "true", "yes"):
        return "on"
    return value if value in SETTINGS else "on"


def wanted(explicit: bool | None) -> bool:
    """Whether a recall reranks: ``explicit`` True for /recall and tools a person or an agent
    calls on purpose, None for the per-turn path (reranks only under ``always``), False never
    (the evaluation's first-stage rows)."""
    if explicit is False:
        return False
    mode = setting()
    if mode == "off":
        return False
    return mode == "always" or explicit is True


def available() -> bool:
    """True when the store's embedder is MiniLM and loaded; never loads it (seconds) from here.
    (The multilingual E5 engine exposes pooled vectors only, no token states: no rerank.)"""
    try:
        from . import embeddings, model_choice
    except Exception:  # noqa: BLE001 - numpy or the model package missing
        return False
    return embeddings.loaded() and model_choice.active() == model_choice.DEFAULT


def maxsim_scores(
    query: str, texts: Sequence[str], known: Sequence[Any] | None = None
) -> list[float] | None:
    """MaxSim of ``query`` against each text, or None when the model is not ready or fails.
    ``known[i]``, when given and not None, is text i's token states (``doc_states``), read from
    the store instead of encoding the text again."""
    global _warned
    if not texts or not available():
        return None
    try:
        query_vecs = _query_states(query)
        if query_vecs is None:
            return None
        found = list(known) if known is not None else [None] * len(texts)
        cold = [i for i, doc in enumerate(found) if doc is None]
        for i, doc in zip(cold, _states_of([texts[i] for i in cold])):
            found[i] = doc
        scores = []
        for doc in found:
            if doc is None or not len(doc):
                scores.append(0.0)
                continue
            sims = query_vecs @ doc.astype("float32").T  # (q, d)
            scores.append(float(sims.max(axis=1).mean()))
        return scores
    except Exception as err:  # noqa: BLE001 - a failed rerank keeps the first stage's order
        if not _warned:
            log.warning("gardener: rerank unavailable (%s); keeping the fused order", err)
            _warned = True
        return None


def doc_states(texts: Sequence[str]) -> list[Any]:
    """Each text's unit token states (word pieces, punctuation left out; float32), as the
    reranker reads a candidate: for the worker and recall to keep in the store
    (``token_states``). Needs the model loaded; raises what the encoder raises."""
    from . import embeddings

    if not texts:
        return []
    tokenizer = _get_tokenizer(embeddings)
    docs = tokenizer.encode_batch([t or " " for t in texts])
    states = _token_states(embeddings, embeddings.load(), [d.ids for d in docs])
    return [s[_words(d.tokens)] for s, d in zip(states, docs)]


def _query_states(query: str) -> Any:
    from . import embeddings

    tokenizer = _get_tokenizer(embeddings)
    q = tokenizer.encode(query)
    words = _words(q.tokens)
    keep = [i for i in words if q.tokens[i] not in STOPWORDS] or words
    keep = keep or [i for i, t in enumerate(q.tokens) if t not in _SPECIAL]
    if not keep:
        return None
    return _token_states(embeddings, embeddings.load(), [q.ids])[0][keep]  # (q, 384)


def _words(tokens: Sequence[str]) -> list[int]:
    """The word pieces MaxSim reads of a candidate: not special, not punctuation. The query
    reads these less its stopwords; a candidate keeps them, which ranked better on LoCoMo (R@5
    0.786 against 0.778, decision 095)."""
    return [
        i for i, t in enumerate(tokens) if t not in _SPECIAL and (t.isalnum() or t.startswith("##"))
    ]


def _states_of(texts: list[str]) -> list[Any]:
    """``doc_states`` of texts through the process's LRU (float16), encoding only the misses."""
    keys = [_key(t) for t in texts]
    with _cache_lock:
        missing = [i for i, k in enumerate(keys) if k not in _cache]
    if missing:
        for i, states in zip(missing, doc_states([texts[i] for i in missing])):
            _remember(keys[i], states.astype("float16"))
    with _cache_lock:
        for k in keys:
            if k in _cache:
                _cache.move_to_end(k)
        return [_cache.get(k) for k in keys]


def rerank(
    query: str,
    ranked: list[str],
    texts: dict[str, str],
    known: dict[str, Any] | None = None,
) -> list[str]:
    """``ranked`` (best first) with its first ``DEPTH`` ids reordered by the fused rank plus
    MaxSim's rank; the rest keep their order. Unchanged when MaxSim is unavailable. ``known``:
    id -> token states read from the store, for the candidates that have them."""
    head = ranked[:DEPTH]
    known = known or {}
    scores = maxsim_scores(
        query, [texts.get(eid, "") for eid in head], [known.get(eid) for eid in head]
    )
    if scores is None:
        return ranked

    by_maxsim = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    maxsim_rank = {i: r for r, i in enumerate(by_maxsim, start=1)}
    return reorder_head(ranked, [WEIGHT / (RRF_K + maxsim_rank[i]) for i in range(len(head))])


def _key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()


def _remember(key: str, states: Any) -> None:
    """Keep a candidate's token states (float16) for the next recall that reads it again: the
    same entries come back for related questions, and encoding them is the reranker's cost."""
    global _cache_bytes
    with _cache_lock:
        if key in _cache:
            return
        _cache[key] = states
        _cache_bytes += states.nbytes
        while _cache_bytes > CACHE_BYTES and len(_cache) > 1:
            _, old = _cache.popitem(last=False)
            _cache_bytes -= old.nbytes


def _token_states(embeddings: Any, encoder: Any, rows: list[list[int]]) -> list[Any]:
    """Each row's unit-length token states (tokens, 384), in passes planned as the embedder
    plans its own (``embeddings.plan_batches``: similar lengths, the backend's token budget),
    which is faster than one pass padding every row to the longest (decision 087)."""
    import numpy as np

    lengths = [len(r) for r in rows]
    out: list[Any] = [None] * len(rows)
    plan = embeddings.plan_batches(
        lengths, encoder.batch_tokens(), embeddings.BATCH_SIZE, embeddings.PADDING_SLACK
    )
    for idx in plan:
        width = max(lengths[i] for i in idx)
        ids = np.zeros((len(idx), width), dtype=np.int64)
        mask = np.zeros((len(idx), width), dtype=np.int64)
        for row, i in enumerate(idx):
            ids[row, : lengths[i]] = rows[i]
            mask[row, : lengths[i]] = 1
        hidden = np.asarray(encoder.forward(ids, mask), dtype=np.float32)
        for row, i in enumerate(idx):
            h = hidden[row, : lengths[i]]
            out[i] = h / np.clip(np.linalg.norm(h, axis=1, keepdims=True), 1e-12, None)
    return out


def _get_tokenizer(embeddings: Any) -> Any:
    """Our own instance of the model's tokenizer, truncating each candidate to ``MAX_TOKENS``."""
    global _tokenizer
    if _tokenizer is None:
        tok = embeddings.load_tokenizer()
        tok.no_padding()
        tok.enable_truncation(max_length=MAX_TOKENS)
        _tokenizer = tok
    return _tokenizer


def _reset_for_tests() -> None:
    global _tokenizer, _warned, _cache_bytes
    _tokenizer = None
    _warned = False
    _cache.clear()
    _cache_bytes = 0
