"""Recall quality on real long conversations: LoCoMo (Maharana et al., ACL 2024).

Each of the three LoCoMo conversations in ``memory_bench/locomo_dev3.json`` goes turn by turn
into its own real store (SQLite + FTS5 + embedded chromadb, in a temporary folder): one entry per
turn, ``[<session date>] <speaker>: <text>`` plus the BLIP caption of a shared photo, class forced
to prose (this measures retrieval, not the classifier). Every question that names evidence turns
is asked verbatim through ``recall`` with FTS5 only, vectors only, hybrid and reranked; it counts
as recalled at k when an evidence turn is in the top k. Turns go in alone, as Aider's messages
do, so reply context and query handling are the store's own, the same for every query; nothing
about the evidence is used at query time. ``--longmemeval`` runs the same over the LongMemEval
derivative in ``memory_bench``, a check that a change loses nothing easy.

    python -m bench.locomo_recall [--longmemeval] [--json OUT]

Turn formats tried, rerank and int8 figures: docs/decisions/051-locomo-turn-text.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = (
    Path(os.environ.get("GARDENER_SHARED_DATA", ROOT.parent / "shared" / "data"))
    / "memory_bench"
    / "locomo_dev3.json"
)
KS = (1, 5, 10)
MODES = ("fts", "vector", "hybrid", "rerank")  # rerank: hybrid + rerank.py, as /recall runs
LONGMEMEVAL = DEFAULT_DATA.with_name("longmemeval_s_derived_3haystacks.json")
_SESSION = re.compile(r"^session_(\d+)$")
_DIA = re.compile(r"D\d+:\d+")


@dataclass
class Turn:
    dia_id: str
    text: str


@dataclass
class Question:
    question: str
    evidence: list[str]
    category: Any = None


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int = 0  # questions without evidence that exists in the conversation


@dataclass
class Result:
    questions: int = 0
    hits: dict[str, dict[int, int]] = field(default_factory=dict)  # mode -> k -> recalled
    seconds: dict[str, float] = field(default_factory=dict)

    def recall_at(self, mode: str, k: int) -> float:
        return self.hits[mode][k] / self.questions if self.questions else 0.0


def turn_text(turn: dict[str, Any], date: str, previous: list[dict[str, Any]] = ()) -> str:
    """The text one LoCoMo turn is stored as (see the module docstring); ``previous`` are the
    turns before it in its session to add as context, oldest first."""
    text = f"[{date}] {turn.get('speaker', '?')}: {turn.get('text', '')}".strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f"\n[{turn.get('speaker', '?')} shared a photo: {caption}]"
    for prev in previous:
        text += f"\n(in reply to {prev.get('speaker', '?')}: {prev.get('text', '')})"
    return text


def load(path: Path = DEFAULT_DATA, context: int = 0) -> list[Conversation]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data and isinstance(data[0], dict) and "haystack_sessions" in data[0]:
        return load_longmemeval(data)
    out = []
    for sample in data:
        conv = sample["conversation"]
        turns: list[Turn] = []
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.match(key)))
        for _, key in sessions:
            date = conv.get(f"{key}_date_time", "")
            session = conv[key] or []
            for j, turn in enumerate(session):
                previous = session[max(0, j - context) : j] if context > 0 else []
                turns.append(Turn(turn["dia_id"], turn_text(turn, date, previous)))
        known = {t.dia_id for t in turns}
        questions, skipped = [], 0
        for qa in sample.get("qa", []):
            # A few evidence lists hold "D8:6; D9:17" in one string: take every id in them.
            evidence = [d for e in qa.get("evidence") or [] for d in _DIA.findall(str(e))]
            evidence = [d for d in evidence if d in known]
            if evidence:
                questions.append(Question(qa["question"], evidence, qa.get("category")))
            else:
                skipped += 1
        out.append(Conversation(str(sample.get("sample_id", len(out))), turns, questions, skipped))
    return out


def load_longmemeval(data: list[dict[str, Any]]) -> list[Conversation]:
    """LongMemEval haystacks (the derived subset's layout, see
    ``bench/replay/importers/longmemeval.py``) as conversations: every non-empty turn, sessions
    in date order, written ``[<date>] <role>: <text>``; a question's evidence is every turn of
    its answer sessions (the subset marks answer turns only for its original questions)."""
    from bench.replay.importers.longmemeval import _date_key, _questions

    out = []
    for n, entry in enumerate(data):
        sessions = entry["haystack_sessions"]
        order = sorted(range(len(sessions)), key=lambda i: _date_key(entry["haystack_dates"][i]))
        turns: list[Turn] = []
        turns_of: dict[str, list[str]] = {}
        for i in order:
            sid, date = entry["haystack_session_ids"][i], entry["haystack_dates"][i]
            for k, turn in enumerate(sessions[i]):
                if not str(turn.get("content", "")).strip():
                    continue
                dia = f"{sid}#{k}"
                turns.append(Turn(dia, f"[{date}] {turn.get('role', '?')}: {turn['content']}"))
                turns_of.setdefault(sid, []).append(dia)
        questions, skipped = [], 0
        for question, _answer, answer_sessions in _questions(entry):
            evidence = [d for sid in answer_sessions for d in turns_of.get(sid, [])]
            if evidence and not str(entry.get("question_id", "")).endswith("_abs"):
                questions.append(Question(question, evidence, entry.get("question_type")))
            else:
                skipped += 1
        out.append(Conversation(str(entry.get("question_id", n)), turns, questions, skipped))
    return out


def build_store(conv: Conversation, folder: Path):
    """A real store holding the conversation, embeddings drained; and dia_id -> entry id."""
    from aider_gardener.store import Store
    from aider_gardener.types import ContentClass, Source

    store = Store(folder, vectors=True)
    entry_of: dict[str, str] = {}
    for turn in conv.turns:
        entry = store.ingest(turn.text, Source(role="user"), cls=ContentClass.PROSE)
        entry_of[turn.dia_id] = entry.id
    store.drain()
    return store, entry_of


def evaluate(store, conv: Conversation, entry_of: dict[str, str], result: Result) -> None:
    from aider_gardener.store.recall import recall

    depth = max(KS)
    for mode in MODES:
        hits = result.hits.setdefault(mode, {k: 0 for k in KS})
        start = time.perf_counter()
        for q in conv.questions:
            wanted = {entry_of[d] for d in q.evidence}
            got = [
                h.entry_id
                for h in recall(
                    store,
                    q.question,
                    limit=depth,
                    mode="hybrid" if mode == "rerank" else mode,
                    rerank=mode == "rerank",
                )
            ]
            for k in KS:
                if wanted.intersection(got[:k]):
                    hits[k] += 1
        result.seconds[mode] = result.seconds.get(mode, 0.0) + time.perf_counter() - start
    result.questions += len(conv.questions)


def run(
    path: Path = DEFAULT_DATA, conversations: Iterable[int] | None = None, context: int = 0
) -> dict[str, Any]:
    import aider_gardener  # noqa: F401  (offline switches before anything loads)

    convs = load(path, context)
    if conversations is not None:
        convs = [convs[i] for i in conversations]
    total = Result()
    per_conv = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gardener-locomo-") as tmp:
        for i, conv in enumerate(convs):
            t = time.perf_counter()
            store, entry_of = build_store(conv, Path(tmp) / f"conv{i}")
            built = time.perf_counter() - t
            try:
                if store.vectors is None or not store.vectors.healthy:
                    raise RuntimeError("vectors unavailable: the evaluation needs the model")
                one = Result()
                evaluate(store, conv, entry_of, one)
                _merge(total, one)
            finally:
                store.close()
            per_conv.append(
                {
                    "sample_id": conv.sample_id,
                    "turns": len(conv.turns),
                    "questions": one.questions,
                    "skipped_no_evidence": conv.skipped,
                    "build_seconds": round(built, 1),
                    "recall": _table(one),
                }
            )
    return {
        "data": str(path),
        "context_turns": context,
        "questions": total.questions,
        "recall": _table(total),
        "query_ms": {m: round(1000 * total.seconds[m] / max(1, total.questions), 2) for m in MODES},
        "conversations": per_conv,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _merge(total: Result, one: Result) -> None:
    total.questions += one.questions
    for mode, ks in one.hits.items():
        mine = total.hits.setdefault(mode, {k: 0 for k in KS})
        for k, n in ks.items():
            mine[k] += n
    for mode, s in one.seconds.items():
        total.seconds[mode] = total.seconds.get(mode, 0.0) + s


def _table(result: Result) -> dict[str, dict[str, float]]:
    return {m: {f"@{k}": round(result.recall_at(m, k), 4) for k in KS} for m in MODES}


def format_table(report: dict[str, Any]) -> str:
    lines = [
        f"Recall, {report['questions']} questions with evidence, previous turns written"
        f" into each turn: {report['context_turns']} (the store adds the one it answers)"
        f" ({report['data']})"
    ]
    lines.append(f"{'mode':<8} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'ms/query':>9}")
    for mode in MODES:
        r = report["recall"][mode]
        lines.append(
            f"{mode:<8} {r['@1']:>6.3f} {r['@5']:>6.3f} {r['@10']:>6.3f}"
            f" {report['query_ms'][mode]:>9.1f}"
        )
    for c in report["conversations"]:
        h = c["recall"]["hybrid"]
        lines.append(
            f"  {c['sample_id']}: {c['turns']} turns, {c['questions']} questions,"
            f" hybrid R@5 {h['@5']:.3f} (store built in {c['build_seconds']} s)"
        )
    lines.append(f"total {report['seconds']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data", type=Path, help="LoCoMo or LongMemEval JSON (default: LoCoMo's dev3)"
    )
    parser.add_argument(
        "--longmemeval", action="store_true", help=f"use {LONGMEMEVAL.name} (session-level)"
    )
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--conversation", type=int, action="append", help="index (repeatable)")
    parser.add_argument(
        "--context",
        type=int,
        default=0,
        help="previous turns written into each turn's text (default 0: the store adds its own)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args.data = args.data or (LONGMEMEVAL if args.longmemeval else DEFAULT_DATA)
    if not args.data.is_file():
        print(f"LoCoMo data not found at {args.data}", file=sys.stderr)
        return 2
    report = run(args.data, args.conversation, args.context)
    print(format_table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
