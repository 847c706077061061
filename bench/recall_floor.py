"""Where recall's relevance floor goes (``store/floor.py``): true hits against unrelated queries.

Recall ranks by fused ranks, so every query gets its five nearest entries. This measures the two
signals a floor can use on real data: the best chunk's cosine similarity to the query (MiniLM, as
the store embeds) and the share of the query's search terms the entry holds. Positives: LoCoMo
questions against their conversation's store, the probes ``bench import aider-history`` makes
from real Aider histories against that history's store, and ``bench.tool_probes``' questions on
real tool outputs. Negatives: the same questions against another conversation's or history's
store, and single technical words (``WORDS``) no store contains. A query "keeps" its positive
when a target is in the top 5 and passes the floor; a negative is "quiet" when none of its top 5
passes. Data are read in place, nothing is copied.

    python -m bench.recall_floor [--conversations N] [--histories N] [--json OUT]

Defaults 2 and 2 (~25 min on 2 busy cores). Method: docs/decisions/059-recall-floor-measurement.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from aider_gardener.store.recall import recall

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
HISTORIES = DATA / "aider_histories"
FLOORS = (0.0, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 1.01)
WORDS = [
    "checksum",
    "kubernetes ingress",
    "quaternion rotation",
    "oauth refresh token",
    "memory leak in the websocket handler",
    "sha256 digest mismatch",
    "cron schedule for backups",
    "dark mode toggle",
]
EVENTS_PER_HISTORY = 150


def _hits(store, query: str, targets, answer: str | None = None) -> list[dict]:
    from aider_gardener.store.floor import term_share

    hits = recall(store, query, limit=5)
    entries = store.get_entries([h.entry_id for h in hits])
    out = []
    for rank, h in enumerate(hits, 1):
        text = entries[h.entry_id].original if h.entry_id in entries else h.text
        if answer is not None:
            target = answer.lower() in text.lower()
        else:
            target = h.entry_id in targets
        out.append(
            {
                "rank": rank,
                "sim": round(h.similarity, 4),
                "share": round(term_share(query, text), 3),
                "via": h.via,
                "target": target,
            }
        )
    return out


def _locomo(tmp: Path, rows: list[dict], n: int) -> list:
    from bench.locomo_recall import build_store, load

    convs = load(DATA / "memory_bench" / "locomo_dev3.json")[:n]
    built = []
    for i, conv in enumerate(convs):
        store, entry_of = build_store(conv, tmp / f"locomo{i}")
        built.append((conv, store, entry_of))
    for i, (conv, store, entry_of) in enumerate(built):
        other = built[(i + 1) % len(built)][1]
        for q in conv.questions:
            wanted = {entry_of[d] for d in q.evidence}
            rows.append({"set": "locomo", "pos": True, "hits": _hits(store, q.question, wanted)})
            rows.append({"set": "locomo", "pos": False, "hits": _hits(other, q.question, set())})
    return [s for _, s, _ in built]


def _aider(tmp: Path, rows: list[dict], n: int) -> list:
    from aider_gardener.store import Store
    from aider_gardener.types import Source
    from bench.replay.importers.aider_history import import_path

    stores, probe_sets = [], []
    for src in sorted(HISTORIES.glob("*.md")):
        if len(stores) >= n:
            break
        replays = import_path(src)
        events = [e for r in replays for e in r.events]
        probes = [e for e in events if e["type"] == "probe"]
        if not probes:
            continue
        store = Store(tmp / f"aider{len(stores)}", vectors=True)
        kept = 0
        for e in events:
            if kept >= EVENTS_PER_HISTORY:
                break
            if e["type"] in ("user", "assistant"):
                store.ingest(e["content"], Source(role=e["type"]))
            elif e["type"] == "run":
                store.ingest(e["output"], Source(role="tool", command=e["command"]))
            else:
                continue
            kept += 1
        store.drain()
        stores.append(store)
        probe_sets.append(probes)
    for i, (store, probes) in enumerate(zip(stores, probe_sets)):
        other = stores[(i + 1) % len(stores)]
        for p in probes:
            answer = p["answers"][0]
            rows.append(
                {"set": "aider", "pos": True, "hits": _hits(store, p["question"], (), answer)}
            )
            rows.append(
                {"set": "aider", "pos": False, "hits": _hits(other, p["question"], (), "\0")}
            )
        for w in WORDS:
            rows.append({"set": "words", "pos": False, "hits": _hits(store, w, set())})
    return stores


def _tools(tmp: Path, rows: list[dict]) -> list:
    from aider_gardener.store import Store
    from aider_gardener.types import Source
    from bench.tool_probes import PROBES, _session

    store = Store(tmp / "tools", vectors=True)
    for role, text, command in _session():
        store.ingest(text, Source(role=role, command=command))
    store.drain()
    for question, answer, _name in PROBES:
        rows.append({"set": "tools", "pos": True, "hits": _hits(store, question, (), answer)})
    for w in WORDS:
        rows.append({"set": "words", "pos": False, "hits": _hits(store, w, set())})
    return [store]


def passes(hit: dict, floor: float, share: float) -> bool:
    return hit["sim"] >= floor or hit["share"] >= share


def table(rows: list[dict], share: float) -> list[str]:
    sets = sorted({r["set"] for r in rows})
    lines = [f"term share >= {share}: kept positives / quiet negatives (hits listed per negative)"]
    head = f"{'floor':>6}"
    for s in sets:
        head += f" {s + ' pos':>16} {s + ' neg':>22}"
    lines.append(head)
    for f in FLOORS:
        line = f"{f:>6.2f}"
        for s in sets:
            pos = [r for r in rows if r["set"] == s and r["pos"]]
            neg = [r for r in rows if r["set"] == s and not r["pos"]]
            kept = sum(any(h["target"] and passes(h, f, share) for h in r["hits"]) for r in pos)
            quiet = sum(not any(passes(h, f, share) for h in r["hits"]) for r in neg)
            listed = sum(sum(passes(h, f, share) for h in r["hits"]) for r in neg)
            p = f"{kept}/{len(pos)}" if pos else "-"
            n = f"{quiet}/{len(neg)} ({listed / max(1, len(neg)):.1f})" if neg else "-"
            line += f" {p:>16} {n:>22}"
        lines.append(line)
    return lines


def quantiles(rows: list[dict]) -> list[str]:
    """Similarity of the targets found, and of the best hit of each negative query."""
    out = []
    for s in sorted({r["set"] for r in rows}):
        tgt = sorted(
            max(h["sim"] for h in r["hits"] if h["target"])
            for r in rows
            if r["set"] == s and r["pos"] and any(h["target"] for h in r["hits"])
        )
        top = sorted(
            max((h["sim"] for h in r["hits"]), default=0.0)
            for r in rows
            if r["set"] == s and not r["pos"]
        )
        for name, xs in (("target", tgt), ("best negative", top)):
            if xs:
                q = [xs[min(len(xs) - 1, int(p * len(xs)))] for p in (0.05, 0.25, 0.5, 0.75, 0.95)]
                out.append(
                    f"{s:<7} {name:<14} n={len(xs):<4} p5/25/50/75/95 "
                    + " ".join(f"{v:.2f}" for v in q)
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_floor", description=__doc__)
    parser.add_argument("--histories", type=int, default=2, help="aider histories with probes")
    parser.add_argument("--conversations", type=int, default=2, help="LoCoMo conversations")
    parser.add_argument("--json", type=Path, help="also write every hit here")
    args = parser.parse_args(argv)
    import aider_gardener  # noqa: F401  (offline switches before anything loads)

    rows: list[dict] = []
    stores: list = []
    with tempfile.TemporaryDirectory(prefix="gardener-floor-") as tmp:
        try:
            stores += _tools(Path(tmp), rows)
            stores += _locomo(Path(tmp), rows, args.conversations)
            stores += _aider(Path(tmp), rows, args.histories)
        finally:
            for s in stores:
                s.close()
    print("\n".join(quantiles(rows)))
    for share in (0.5, 1.01):
        print("\n".join(table(rows, share)))
    if args.json:
        args.json.write_text(json.dumps(rows) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
