"""Vector-side speed and memory: embedding backlog drain rate, peak RSS, hybrid recall at 10k.

Run: ``OMP_NUM_THREADS=1 .venv/bin/pytest tests/store/bench_vectors.py --benchmark-only``.
Goals (issue "The store and recall"): the embedding backlog drains at >= 50 chunks/s on one
thread; recall p95 <= 50 ms with 10,000 entries; report peak RSS with the model loaded. Rates,
percentiles and RSS are stored in ``extra_info``; nothing here asserts a time.

Two backlogs, because chunk length decides the cost (MiniLM reads up to 256 word pieces):
full-size chunks of real tool outputs (~250 tokens each, the worst case), and the chunks of real
Aider chat messages (prompts, replies, tool output), which is what a session actually queues.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap

import pytest

from aider_gardener.store import Store, embeddings
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
    drained: list[int] = []

    def pending_again():
        store.mark_chunks(ids, 0)

    benchmark.pedantic(
        lambda: drained.append(worker.drain()), setup=pending_again, rounds=3, iterations=1
    )
    assert drained and all(n == len(ids) for n in drained)
    median = statistics.median(benchmark.stats.stats.data)
    tokens = [count_tokens(r[1]) for r in rows]
    benchmark.extra_info.update(
        chunks=len(ids),
        chunks_per_s=round(len(ids) / median, 1),
        mean_chunk_tokens=round(sum(tokens) / len(tokens), 1),
    )


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
        store = Store(Path(tmp) / "gs", maintenance_interval=None)
        for i in range(200):
            store.ingest(f"message {i}: the build of module_{i} failed " * 20, Source(role="tool"))
        store.drain()
        hits = store.recall("why did module_7 fail")
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
        hits = store.recall(next(queries), limit=5)
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


def test_embedding_backends_side_by_side(benchmark, tool_outputs_dir, tmp_path):
    """torch float32, torch bfloat16 and ONNX Runtime float32 on the same full-size chunks, in
    alternating rounds so that load from other jobs hits all three alike. (ONNX int8 is not
    measured: ONNX Runtime's quantiser needs the ``onnx`` package, which is not installed.)"""
    import time

    import torch

    from aider_gardener.store.chunking import chunk

    texts: list[str] = []
    for path in tool_output_files():
        text = path.read_text(encoding="utf-8", errors="replace")[:6_000]
        texts.extend(chunk(text, ContentClass.LOG))
    texts = texts[:96]
    onnx = embeddings.OnnxEncoder.open(tmp_path / "models")
    torch_model = embeddings._load_torch()
    runs = {
        "torch_fp32": lambda: embeddings._torch_encode(torch_model, texts, 16, bf16=False),
        "onnx_fp32": lambda: onnx.encode(texts),
    }
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        runs["torch_bf16"] = lambda: embeddings._torch_encode(torch_model, texts, 16, bf16=True)
    best: dict[str, float] = {}
    vectors = {}
    for _ in range(2):
        for name, run in runs.items():
            start = time.perf_counter()
            vectors[name] = run()
            best[name] = min(best.get(name, 1e9), time.perf_counter() - start)
    benchmark.pedantic(runs["onnx_fp32"], rounds=1, iterations=1)
    ref = vectors["torch_fp32"]
    for name, v in vectors.items():
        benchmark.extra_info[f"{name}_chunks_per_s"] = round(len(texts) / best[name], 1)
        benchmark.extra_info[f"{name}_min_cosine"] = round(float((v * ref).sum(axis=1).min()), 5)
    benchmark.extra_info["chunks"] = len(texts)
    benchmark.extra_info["backend_in_use"] = embeddings.backend()
    assert float((vectors["onnx_fp32"] * ref).sum(axis=1).min()) > 0.999
