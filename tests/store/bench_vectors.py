"""Vector-side speed and memory: embedding backlog drain rate, peak RSS, hybrid recall at 10k.

Run: ``OMP_NUM_THREADS=1 .venv/bin/pytest tests/store/bench_vectors.py --benchmark-only``.
Goals (issue "The store and recall"): the embedding backlog drains at >= 50 chunks/s on one
thread; recall p95 <= 50 ms with 10,000 entries; report peak RSS with the model loaded. Rates,
percentiles and RSS are stored in ``extra_info``; nothing here asserts a time.

Two backlogs, because chunk length decides the cost (MiniLM reads up to 256 word pieces):
full-size chunks of real tool outputs (200-254 word pieces each, the worst case), and the chunks
of real Aider chat messages (prompts, replies, tool output), which is what a session actually
queues. ``truncated_share`` is the share of the word pieces the model is given that lie past
its window, which no vector sees; ``chunk_truncated_share`` the same for the chunks alone,
without the turn a reply's first chunk is given with (``Store.pending_chunks``). Chunks sized
in tiktoken tokens: 0.23 / 0.23 (full-size), 0.23 / 0.13 (chat). Sized in the model's own
pieces (``store/chunking.py``): 0 / 0 and 0.13 / 0, the rest being that appended context; the
full-size backlog is 250 chunks instead of 164, as the whole of each is embedded.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap

import pytest

from aider_gardener.store import Store, embeddings
from aider_gardener.store.chunking import WINDOW_PIECES, count_pieces
from aider_gardener.store.recall import recall
from aider_gardener.store.vectors import open_index
from aider_gardener.store.worker import EmbeddingWorker
from aider_gardener.tokens import count_tokens
from aider_gardener.types import ContentClass, Source
from tests.conftest import tool_output_files
from tests.store.bench_store import _messages, _queries

pytestmark = pytest.mark.filterwarnings("ignore")

ENTRIES = 10_000
ROUNDS = 300


def _p95_ms(data: list[float]) -> float:
    data = sorted(data)
    return round(1000 * data[min(len(data) - 1, int(0.95 * len(data)))], 3)


def _backlog(tmp_path, items: list[tuple[str, Source, ContentClass | None]]):
    """A store whose chunks are all pending, and a worker (thread not started) to drain it."""
    store = Store(tmp_path / "gs", vectors=False)
    for text, source, cls in items:
        store.ingest(text, source, cls=cls)
    index = open_index(store.dir)
    assert index is not None and index.warm()
    rows = store.read(lambda c: c.execute("SELECT chunk_id, text FROM chunks").fetchall())
    return store, index, EmbeddingWorker(store, index), rows


def _bench_drain(benchmark, store, worker, rows) -> None:
    ids = [r[0] for r in rows]
    # what the model is given: the chunk, and for a turn's first chunk the turn it answers
    given = [text for _, _, text in store.pending_chunks(len(ids) + 1)]
    drained: list[int] = []

    def pending_again():
        store.mark_chunks(ids, 0)

    benchmark.pedantic(
        lambda: drained.append(worker.drain()), setup=pending_again, rounds=3, iterations=1
    )
    assert drained and all(n == len(ids) for n in drained)
    median = statistics.median(benchmark.stats.stats.data)
    tokens = [count_tokens(r[1]) for r in rows]
    pieces = _word_pieces([r[1] for r in rows])
    benchmark.extra_info.update(
        chunks=len(ids),
        truncated_share=_truncated_share(given),
        chunks_over_window=sum(1 for n in count_pieces(given) if n > WINDOW_PIECES),
        chunk_truncated_share=_truncated_share([r[1] for r in rows]),
        chunks_per_s=round(len(ids) / median, 1),
        mean_chunk_tokens=round(sum(tokens) / len(tokens), 1),
        mean_chunk_word_pieces=round(sum(pieces) / len(pieces), 1),
        word_pieces_per_s=round(sum(pieces) / median),
        backend=embeddings.backend(),
    )


def _truncated_share(texts: list[str]) -> float:
    """Share of the word pieces past the model's window: never part of any vector."""
    whole = count_pieces(texts)  # not truncated, without [CLS]/[SEP]
    past = sum(max(0, n - WINDOW_PIECES) for n in whole)
    return round(past / max(1, sum(whole)), 4)


def _word_pieces(texts: list[str]) -> list[int]:
    """What the model reads per chunk (truncated at its 256), the unit its cost grows with."""
    model = embeddings.load()
    return [len(e.ids) for e in model.tokenizer.encode_batch(texts)]


def test_drain_full_size_chunks(benchmark, tool_outputs_dir, tmp_path):
    items = []
    for path in tool_output_files():
        text = path.read_text(encoding="utf-8", errors="replace")[:12_000]  # ~10 chunks each
        items.append((text, Source(role="tool"), ContentClass.LOG))
    store, index, worker, rows = _backlog(tmp_path, items)
    _bench_drain(benchmark, store, worker, rows)
    index.close()
    store.close()


def test_drain_chat_history_chunks(benchmark, histories_dir, tmp_path):
    msgs = _messages(histories_dir)[:400]
    store, index, worker, rows = _backlog(tmp_path, [(t, Source(role=r), None) for r, t in msgs])
    _bench_drain(benchmark, store, worker, rows)
    index.close()
    store.close()


PEAK_RSS = textwrap.dedent("""
    import json, resource, sys, tempfile
    from pathlib import Path
    import aider_gardener
    from aider_gardener.store import Store, embeddings
    from aider_gardener.types import Source

    def peak_kb():
        # VmHWM, not ru_maxrss: Linux carries the parent's (pytest's) ru_maxrss across exec.
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    before = peak_kb()
    with tempfile.TemporaryDirectory() as tmp:
        embeddings.set_cache_dir(sys.argv[1])  # one ONNX export for all runs of the test
        store = Store(Path(tmp) / "gs")
        for i in range(200):
            store.ingest(f"message {i}: the build of module_{i} failed " * 20, Source(role="tool"))
        store.drain()
        hits = recall(store, "why did module_7 fail")
        store.close()
    peak = peak_kb()
    print(json.dumps({
        "baseline_mb": before / 1024, "peak_mb": peak / 1024, "hits": len(hits),
        "backend": embeddings.backend(), "torch": "torch" in sys.modules,
    }))
    """)


@pytest.mark.parametrize("backend", ["auto", "onnx"])
def test_peak_rss_with_model_loaded(benchmark, backend, tmp_path):
    """A fresh interpreter: store + model + embedded chromadb + a drain and a recall. For
    ONNX, a first process exports the model into the store's folder; the second is measured,
    as every later session of the project would be."""
    import os

    out: list[dict] = []
    env = {**os.environ, embeddings.BACKEND_ENV: backend}

    def run():
        res = subprocess.run(
            [sys.executable, "-c", PEAK_RSS, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))

    if backend == "onnx":
        run()  # the export
    benchmark.pedantic(run, rounds=1, iterations=1)
    assert out[-1]["hits"] > 0
    benchmark.extra_info.update(
        peak_rss_mb=round(out[-1]["peak_mb"], 1),
        baseline_rss_mb=round(out[-1]["baseline_mb"], 1),
        backend=out[-1]["backend"],
        torch_imported=out[-1]["torch"],
    )


@pytest.fixture(scope="module")
def big_hybrid(histories_dir, tmp_path_factory):
    """10,000 real messages, every chunk embedded: the full hybrid ranker at scale.

    The ~12,000 chunks are embedded from their first 32 word pieces only, or the setup alone
    would take ten minutes; a vector's content does not change how long a query takes (the
    query itself is embedded in full)."""
    msgs = _messages(histories_dir)[:ENTRIES]
    if len(msgs) < ENTRIES:
        pytest.skip(f"only {len(msgs)} messages in the shared histories")
    store = Store(tmp_path_factory.mktemp("bigv") / "gs", vectors=False)
    for role, text in msgs:
        store.ingest(text, Source(role=role))
    index = open_index(store.dir)
    model = embeddings.load()
    full = model.max_seq_length
    model.max_seq_length = 32
    try:
        EmbeddingWorker(store, index, batch_size=256).drain()
    finally:
        model.max_seq_length = full
    store.vectors = index  # what Store(vectors=True) would hold, without its thread
    yield store, msgs
    index.close()
    store.close()


def test_hybrid_recall_10k_entries(benchmark, big_hybrid):
    store, msgs = big_hybrid
    queries = iter(_queries(msgs, ROUNDS + 5))
    vias: list[str] = []

    def one():
        hits = recall(store, next(queries), limit=5)
        vias.extend(h.via for h in hits)
        return hits

    benchmark.pedantic(one, rounds=ROUNDS, iterations=1, warmup_rounds=5)
    assert any("vector" in v for v in vias)  # really hybrid, not FTS5 alone
    data = benchmark.stats.stats.data
    chunks = store.read(lambda c: c.execute("SELECT count(*) FROM chunks").fetchone()[0])
    benchmark.extra_info.update(
        p95_ms=_p95_ms(data),
        median_ms=round(1000 * statistics.median(data), 3),
        entries=len(msgs),
        vectors=store.vectors.count(),
        chunks=chunks,
    )


def _old_torch_encode(model, texts: list[str], bf16: bool):
    """The torch path before length-planned batches and bfloat16 weights (kept here to measure
    against): sentence-transformers' tokenizer, 16 texts sorted by characters, autocast."""
    import numpy as np
    import torch

    out = np.zeros((len(texts), embeddings.DIMENSIONS), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), 16):
        idx = order[start : start + 16]
        features = model.preprocess([texts[i] for i in idx])
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            vectors = model(features)["sentence_embedding"]
        out[idx] = torch.nn.functional.normalize(vectors.float(), dim=1).numpy()
    return out


def _side_by_side(texts: list[str], runs: dict, rounds: int = 3):
    """Median seconds per run name, alternating the runs so that load from other jobs hits all
    alike; CPU time of this process, not wall time (the machine is shared)."""
    import time

    times: dict[str, list[float]] = {name: [] for name in runs}
    vectors = {}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.process_time()
            vectors[name] = run()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(t) for name, t in times.items()}, vectors


def _grouped(encode, texts: list[str], group: int, window: int):
    """Encode as the worker feeds the model: windows sorted by length, cut into groups of
    ``group`` texts; vectors come back in the order of ``texts``."""
    import numpy as np

    out = np.zeros((len(texts), embeddings.DIMENSIONS), dtype=np.float32)
    for w in range(0, len(texts), window):
        idx = sorted(range(w, min(w + window, len(texts))), key=lambda i: len(texts[i]))
        for g in range(0, len(idx), group):
            part = idx[g : g + group]
            out[part] = encode([texts[i] for i in part])
    return out


@pytest.mark.parametrize("backlog", ["full_size", "chat"])
def test_embedding_backends_side_by_side(
    benchmark, backlog, tool_outputs_dir, histories_dir, tmp_path
):
    """Every way of embedding on the same chunks in one run: the old torch path, torch float32
    and bfloat16, ONNX Runtime float32; each as the old worker fed it (steps of 48 in ingest
    order, ``_steps``) and as the new one does (windows of 384 sorted by length, groups of 48).
    Vectors are compared with sentence-transformers' own float32 ``encode``. ONNX int8 is not
    here: see the ``embeddings`` docstring for its numbers and why it was rejected."""
    import torch

    from aider_gardener.store.chunking import chunk
    from aider_gardener.store.worker import BATCH_SIZE, WINDOW

    if backlog == "full_size":
        texts: list[str] = []
        for path in tool_output_files():
            text = path.read_text(encoding="utf-8", errors="replace")[:6_000]
            texts.extend(chunk(text, ContentClass.LOG))
        texts = texts[:96]
    else:  # real chat messages as the store chunks them
        texts = [c for _, t in _messages(histories_dir)[:200] for c in chunk(t, "prose")][:192]
    embeddings.load()
    with embeddings._load_lock:
        onnx = embeddings.OnnxEncoder.open(tmp_path / "models")
        fp32 = embeddings._torch_encoder(False)
    st = embeddings._load_torch()

    def steps(encode):
        return lambda: _grouped(encode, texts, BATCH_SIZE, BATCH_SIZE)

    def window(encode):
        return lambda: _grouped(encode, texts, BATCH_SIZE, WINDOW)

    runs = {
        "old_torch_fp32_steps": steps(lambda t: _old_torch_encode(st, t, bf16=False)),
        "torch_fp32": window(fp32.encode),
        "onnx_fp32_steps": steps(onnx.encode),
        "onnx_fp32": window(onnx.encode),
    }
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        with embeddings._load_lock:
            bf16 = embeddings._torch_encoder(True)
        runs["old_torch_bf16_steps"] = steps(lambda t: _old_torch_encode(st, t, bf16=True))
        runs["torch_bf16_steps"] = steps(bf16.encode)
        runs["torch_bf16"] = window(bf16.encode)
    seconds, vectors = _side_by_side(texts, runs)
    benchmark.pedantic(runs["onnx_fp32"], rounds=1, iterations=1)
    ref = embeddings.reference_encode(texts)
    pieces = _word_pieces(texts)
    worst = {name: float((v * ref).sum(axis=1).min()) for name, v in vectors.items()}
    for name in vectors:
        benchmark.extra_info[f"{name}_chunks_per_s"] = round(len(texts) / seconds[name], 1)
        benchmark.extra_info[f"{name}_min_cosine"] = round(worst[name], 5)
    benchmark.extra_info.update(
        chunks=len(texts),
        mean_word_pieces=round(sum(pieces) / len(pieces), 1),
        backend_in_use=embeddings.backend(),
        timing="CPU seconds of this process, median of 3 alternating rounds",
    )
    for name, cos in worst.items():
        assert cos > (0.999 if "fp32" in name else 0.9995), name
