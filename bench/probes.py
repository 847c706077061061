"""Recall by meaning on real coding sessions: ``/recall`` as a user types it an hour later.

Each probe names one message of a real session (an Aider chat history or a Claude Code
transcript in ``../shared/data``) by position and hash, never by its text, and two questions
about it written by a person: a *paraphrase* that avoids the target's distinctive words, and an
*easy* variant that reuses one or two of them. The source is ingested into a real store as the
gardener stores it (prompts, replies, command output with its command), embeddings drained; a
probe hits at k when the target (or an exact copy of it) is among the first k hits, or listed
under one of them as a part of its exchange (``store/exchanges.py``; the report also gives the
target's rank as a hit's own entry), of:

``fts`` (full text alone), ``turn`` (per-turn recall as a session runs it: full text while the
query is embedded and searched, the vector half only if done by ``rag.vector_deadline``, so the
whole stays within the 30 ms budget; ``integration/rag.py``),
``hybrid`` (``recall``, no rerank, waiting for the vector) and ``recall`` (what ``/recall``
runs: hybrid, then the reranker).

    python -m bench.probes [--stores DIR]      # the table, per language and kind too
    python -m bench.probes --list aider_histories/X.md [--session N]   # what to write probes on

Probes: ``bench/labels/probes.jsonl``; how written: docs/decisions/095-recall-by-meaning.md.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("GARDENER_SHARED_DATA") or ROOT.parent / "shared" / "data")
PROBES = ROOT / "bench" / "labels" / "probes.jsonl"
KS = (1, 5, 10)
MODES = ("fts", "turn", "hybrid", "recall")
VARIANTS = ("paraphrase", "easy")
MAX_SOURCE_CHARS = 1_500_000  # of event text per source: the probes' sessions, then neighbours


@dataclass
class Probe:
    source: str  # relative to DATA: aider_histories/X.md or claude_code_transcripts/X.jsonl
    session: int  # index of the replay the importer makes of the source
    event: int  # index into that replay's events
    sha: str  # first 8 hex of sha1 of the stored text: the target has not moved
    kind: str  # tool, decision, request, reply
    lang: str  # the language the questions are written in
    paraphrase: str
    easy: str

    @property
    def key(self) -> tuple[int, int]:
        return (self.session, self.event)


@dataclass
class Outcome:
    probe: Probe
    variant: str
    ranks: dict[str, int | None] = field(default_factory=dict)  # mode -> 1-based rank or None
    ms: dict[str, float] = field(default_factory=dict)
    model: str = ""  # the embedding model the source's store chose
    first: dict[str, list[int] | None] = field(default_factory=dict)  # mode -> top hit's key
    late: bool = False  # ``turn``: the vector missed the budget, full text answered
    own: dict[str, int | None] = field(default_factory=dict)  # rank as a hit's own entry


def load_probes(path: Path = PROBES) -> list[Probe]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.append(Probe(**json.loads(line)))
        except (TypeError, ValueError) as err:
            raise SystemExit(f"{path}:{n}: not a probe ({err})") from None
    return out


def replays_of(source: str) -> list[Any]:
    from bench.replay.importers import aider_history, claude_code

    path = DATA / source
    if source.startswith("aider_histories/"):
        return aider_history.import_path(path)
    return claude_code.import_path(path)


def stored_text(event: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """(text, role, command) as the gardener stores the event, or None for what it does not."""
    if event["type"] in ("user", "assistant"):
        return event["content"], event["type"], None
    if event["type"] == "run":
        return event["output"], "tool", event["command"]
    return None


def digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:8]


def _chosen_sessions(replays: list[Any], wanted: set[int]) -> list[int]:
    """The probes' sessions, then their neighbours nearest first, within ``MAX_SOURCE_CHARS``."""

    def size(i: int) -> int:
        return sum(len(t[0]) for e in replays[i].events if (t := stored_text(e)))

    chosen = sorted(wanted)
    total = sum(size(i) for i in chosen)
    for d in range(1, len(replays)):
        for i in sorted({s + d for s in wanted} | {s - d for s in wanted}):
            if 0 <= i < len(replays) and i not in chosen and total + size(i) <= MAX_SOURCE_CHARS:
                chosen.append(i)
                total += size(i)
    return sorted(chosen)


def build_store(source: str, probes: list[Probe], folder: Path) -> tuple[Any, dict, list[str]]:
    """A real store of the source's chosen sessions, drained; (session, event) -> entry id;
    and the problems found (a probe whose target moved).

    Built as a project lives: the sessions are ingested first (the store learns the language of
    the user's prompts, ``store/language.py``), then the store is opened again with vectors, so
    it embeds with the model it chose for itself, as the next session would."""
    from aider_gardener.store import Store
    from aider_gardener.types import Source

    replays = replays_of(source)
    problems = []
    for p in probes:
        events = replays[p.session].events if p.session < len(replays) else []
        got = stored_text(events[p.event]) if p.event < len(events) else None
        if got is None or digest(got[0]) != p.sha:
            problems.append(f"{source} {p.key}: the target changed or is gone (sha {p.sha})")
    index = folder / "entry_of.json"
    if not index.exists():
        store = Store(folder, vectors=False)
        entry_of: dict[tuple[int, int], str] = {}
        try:
            for s in _chosen_sessions(replays, {p.session for p in probes}):
                for n, ev in enumerate(replays[s].events):
                    got = stored_text(ev)
                    if got is None or not got[0].strip():
                        continue
                    text, role, command = got
                    entry_of[(s, n)] = store.ingest(text, Source(role=role, command=command)).id
        finally:
            store.close()
        _learn_language(folder, replays, _chosen_sessions(replays, {p.session for p in probes}))
        rows = [[s, n, eid] for (s, n), eid in entry_of.items()]
        index.write_text(json.dumps(rows), encoding="utf-8")
    rows = json.loads(index.read_text(encoding="utf-8"))
    store = Store(folder, vectors=True)
    store.drain()
    return store, {(s, n): eid for s, n, eid in rows}, problems


def _learn_language(folder: Path, replays: list[Any], sessions: list[int]) -> None:
    """What a session with vectors records as it goes (``Store._note_language``), from the same
    prompts: the ingest above runs without vectors, so that nothing is embedded twice."""
    from aider_gardener.store import language

    tally: dict[str, int] = {}
    for e in (e for s in sessions for e in replays[s].events if e["type"] == "user"):
        code = language.detect(e["content"])
        if code is None:
            continue
        tally[code] = tally.get(code, 0) + 1
        decided = language.decide(tally)
        if decided is not None and decided != language.ENGLISH:
            language.record(folder, decided)
            return


def _same_text(store: Any, ids: list[str]) -> dict[str, str]:
    """Entry id -> sha1 of its original, so an exact copy of the target counts as the target."""
    entries = store.get_entries(ids)
    return {eid: digest(e.original or "") for eid, e in entries.items()}


def evaluate(store: Any, probes: list[Probe], entry_of: dict) -> list[Outcome]:
    from aider_gardener.integration import rag  # noqa: F401  (imports Aider: not timed)

    depth = max(KS)
    key_of = {eid: list(key) for key, eid in entry_of.items()}
    out = []
    for p in probes:
        target = entry_of.get(p.key)
        if target is None:
            continue
        for variant in VARIANTS:
            query = getattr(p, variant)
            o = Outcome(p, variant)
            for mode in _modes():
                t = time.perf_counter()
                hits = _ask(store, query, mode, depth)
                o.ms[mode] = 1000 * (time.perf_counter() - t)
                if mode == "turn":
                    o.late = not any("vector" in h.via for h in hits)
                _forget_query_vector(store, query)  # each mode pays for its own query vector
                ids = [h.entry_id for h in hits]
                o.first[mode] = key_of.get(ids[0]) if ids else None
                o.ranks[mode], o.own[mode] = _ranks(store, hits, target, p.sha)
            out.append(o)
    return out


def _ranks(store: Any, hits: list[Any], target: str, sha: str) -> tuple[int | None, int | None]:
    """The target's rank among ``hits``, counting the parts of an exchange folded under a hit
    (shown with it: ``store/exchanges.py``), and its rank as a hit's own entry. A near-copy
    the hit stands for, or an exact copy of the target's text, is the target."""
    parts = [tuple(getattr(h, "exchange", ())) for h in hits]
    copies = _same_text(store, [h.entry_id for h in hits] + [e for p in parts for e in p])

    def same(eid: str) -> bool:
        return eid == target or copies.get(eid) == sha

    own = [same(h.entry_id) or target in getattr(h, "duplicates", ()) for h in hits]
    shown = [mine or any(same(e) for e in rest) for mine, rest in zip(own, parts)]
    return _first(shown), _first(own)


def _first(flags: list[bool]) -> int | None:
    return next((r for r, flag in enumerate(flags, start=1) if flag), None)


def _ask(store: Any, query: str, mode: str, depth: int) -> list[Any]:
    """One recall of ``mode``; ``turn`` as ``rag._recall_in_time`` runs it (a version whose
    recall has no deadline: waited for the vector first, then recalled; for before/after)."""
    from aider_gardener.integration import rag
    from aider_gardener.store.recall import recall

    how = "fts" if mode == "fts" else "hybrid"
    rerank = True if mode == "recall" else (False if mode == "fts" else None)
    wait = rag._budget_ms() / 1000.0 if mode == "turn" else 0.0
    if wait <= 0:  # 0: as long as it takes
        return recall(store, query, limit=depth, mode=how, rerank=rerank)
    if not _takes_deadline(recall):
        index = getattr(store, "vectors", None)
        if not (index is not None and index.wait_query_vector(query, wait)):
            how = "fts"
        return recall(store, query, limit=depth, mode=how, rerank=rerank)
    start = time.monotonic()
    by = rag.vector_deadline(start) if hasattr(rag, "vector_deadline") else start + wait
    return recall(store, query, limit=depth, mode=how, rerank=rerank, vector_by=by)


@functools.lru_cache(maxsize=None)
def _takes_deadline(recall: Any) -> bool:
    """Whether this version's recall takes ``vector_by`` (read once, not in the timed call)."""
    return "vector_by" in inspect.signature(recall).parameters


def _forget_query_vector(store: Any, query: str) -> None:
    """Let a late vector land, then drop it, so the next mode pays for its own embedding as a
    request or a ``/recall`` does (the bench reads the index's query cache; nothing else does)."""
    from aider_gardener.store.vectors import QUERY_EMBED_CHARS

    index = getattr(store, "vectors", None)
    if index is None or not hasattr(index, "_query_cache"):
        return
    key = query[:QUERY_EMBED_CHARS]
    with index._query_lock:
        cached = index._query_cache.get(key)
    if isinstance(cached, Future):  # in flight: let it land rather than race the next mode
        with contextlib.suppress(Exception):
            cached.result(timeout=10.0)
    with index._query_lock:
        index._query_cache.pop(key, None)


def run_source(source: str, probes: list[Probe], folder: Path) -> tuple[list[Outcome], list[str]]:
    """One source in this process: its store chooses its own embedding model, as a project's
    store does, and the model is process-wide, so ``run`` gives every source a process."""
    import aider_gardener  # noqa: F401  (offline switches before anything loads)
    from aider_gardener.store import model_choice

    _apply_settings()
    store, entry_of, problems = build_store(source, probes, folder)
    try:
        if store.vectors is None or not store.vectors.healthy:
            problems.append(f"{source}: no vectors (the model is missing): full text only")
        outcomes = evaluate(store, probes, entry_of)
    finally:
        store.close()
    for o in outcomes:
        o.model = model_choice.active()
    return outcomes, problems


def run(path: Path = PROBES, stores: Path | None = None) -> tuple[list[Outcome], list[str]]:
    probes = load_probes(path)
    by_source: dict[str, list[Probe]] = {}
    for p in probes:
        by_source.setdefault(p.source, []).append(p)
    outcomes: list[Outcome] = []
    problems: list[str] = []
    tmp = tempfile.mkdtemp(prefix="gardener-probes-")
    root = Path(stores) if stores is not None else Path(tmp)
    try:
        for n, (source, group) in enumerate(sorted(by_source.items())):
            if not (DATA / source).exists():
                problems.append(f"{source}: absent, its {len(group)} probes skipped")
                continue
            t = time.perf_counter()
            out = Path(tmp) / f"{n}.json"
            cmd = [sys.executable, "-m", "bench.probes", "--probes", str(path), "--one", source]
            cmd += ["--stores", str(root), "--json", str(out)]
            done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
            if done.returncode not in (0, 1) or not out.exists():
                problems.append(f"{source}: failed (exit {done.returncode})")
                continue
            got = json.loads(out.read_text(encoding="utf-8"))
            problems += got["problems"]
            outcomes += [_outcome(row) for row in got["outcomes"]]
            print(
                f"[{n + 1}/{len(by_source)}] {source}: {len(group)} probes,"
                f" {time.perf_counter() - t:.0f} s",
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return outcomes, problems


SETTINGS_ENV = "PROBES_SET"  # "module.NAME=VALUE;...": a trial of other constants, not a switch


def _apply_settings() -> None:
    """Set constants of ``aider_gardener.store`` modules for a trial (tuning on these probes),
    e.g. ``PROBES_SET="recall.VECTOR_WEIGHT=1.0;rerank.DEPTH=50"``."""
    import importlib

    for item in filter(None, os.environ.get(SETTINGS_ENV, "").split(";")):
        name, _, value = item.partition("=")
        module, _, attr = name.strip().rpartition(".")
        mod = importlib.import_module(f"aider_gardener.store.{module}")
        old = getattr(mod, attr)
        setattr(mod, attr, type(old)(value) if not isinstance(old, bool) else value == "1")


def _modes() -> list[str]:
    """``PROBES_MODES`` (e.g. "fts,hybrid": a quicker trial without the reranker), else all."""
    wanted = [m for m in os.environ.get("PROBES_MODES", "").split(",") if m in MODES]
    return wanted or list(MODES)


def _outcome(row: dict[str, Any]) -> Outcome:
    o = Outcome(Probe(**row["probe"]), row["variant"], row["ranks"], row["ms"])
    o.model = row.get("model", "")
    o.first = row.get("first", {})
    o.late = row.get("late", False)
    o.own = row.get("own", {})
    return o


def _row(outcomes: list[Outcome], mode: str) -> str:
    n = len(outcomes)
    got = [sum(1 for o in outcomes if (r := o.ranks[mode]) is not None and r <= k) for k in KS]
    return " / ".join(f"{g}" for g in got) + f" of {n}"


def _latency(outcomes: list[Outcome], mode: str) -> str:
    ms = sorted(o.ms[mode] for o in outcomes)
    if not ms:
        return "-"
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"{statistics.median(ms):.1f} / {p95:.1f} ms"


def report(outcomes: list[Outcome]) -> str:
    modes = [m for m in MODES if outcomes and m in outcomes[0].ranks]
    lines = [f"| | {' | '.join(modes)} |", "|---|" + "---|" * len(modes)]
    for variant in VARIANTS:
        some = [o for o in outcomes if o.variant == variant]
        cells = [_row(some, m) for m in modes]
        lines.append(f"| {variant}, top-1 / 5 / 10 | {' | '.join(cells)} |")
    lines.append(f"| latency p50 / p95 | {' | '.join(_latency(outcomes, m) for m in modes)} |")
    folded = [m for m in modes if any(o.own.get(m) != o.ranks.get(m) for o in outcomes)]
    own = [Outcome(o.probe, o.variant, ranks=o.own) for o in outcomes if o.own]
    for m in folded:  # how many hits counted the target as the half folded under another
        cells = ", ".join(f"{v} {_row([o for o in own if o.variant == v], m)}" for v in VARIANTS)
        lines.append(f"\n`{m}`, the target as a hit's own entry, not its exchange: {cells}")
    if "turn" in modes:
        late = sum(1 for o in outcomes if o.late)
        lines.append(f"\n`turn`: the vector came too late for {late} of {len(outcomes)} queries")
    for attr in ("lang", "kind"):
        lines.append("")
        lines.append(f"`{modes[-1]}` top-1 / 5 / 10 by {attr}:")
        for value in sorted({getattr(o.probe, attr) for o in outcomes}):
            for variant in VARIANTS:
                some = [o for o in outcomes if getattr(o.probe, attr) == value]
                some = [o for o in some if o.variant == variant]
                models = ", ".join(sorted({o.model for o in some if o.model}))
                lines.append(f"- {value} {variant}: {_row(some, modes[-1])} ({models})")
    return "\n".join(lines)


def list_events(source: str, session: int | None) -> None:
    for s, replay in enumerate(replays_of(source)):
        if session is not None and s != session:
            continue
        print(f"== session {s}: {len(replay.events)} events  {replay.meta.get('source', '')}")
        for n, ev in enumerate(replay.events):
            got = stored_text(ev)
            if got is None:
                continue
            text, role, command = got
            head = " ".join(text.split())[:110]
            cmd = f" $ {command[:40]}" if command else ""
            print(f"{s:3d} {n:4d} {role[:4]} {digest(text)} {len(text):7d}{cmd} | {head}")


def show(source: str, session: int, event: int) -> None:
    got = stored_text(replays_of(source)[session].events[event])
    if got is None:
        raise SystemExit("not a stored event")
    text, role, command = got
    print(f"role={role} command={command!r} sha={digest(text)} chars={len(text)}\n{text}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes", description=__doc__.split("\n")[0])
    ap.add_argument("--probes", type=Path, default=PROBES)
    ap.add_argument("--stores", type=Path, help="build stores here once and reuse them")
    ap.add_argument("--json", type=Path, help="write every outcome here")
    ap.add_argument("--list", metavar="SOURCE")
    ap.add_argument("--session", type=int)
    ap.add_argument("--show", nargs=3, metavar=("SOURCE", "SESSION", "EVENT"))
    ap.add_argument("--one", metavar="SOURCE", help=argparse.SUPPRESS)  # run() per source
    args = ap.parse_args(argv)
    if args.list:
        list_events(args.list, args.session)
        return 0
    if args.show:
        show(args.show[0], int(args.show[1]), int(args.show[2]))
        return 0
    if not DATA.exists():
        print(f"probes: {DATA} is absent; nothing to measure", file=sys.stderr)
        return 0
    if args.one:
        group = [p for p in load_probes(args.probes) if p.source == args.one]
        folder = (args.stores or Path(tempfile.mkdtemp())) / Path(args.one).stem
        outcomes, problems = run_source(args.one, group, folder)
        rows = [asdict(o) for o in outcomes]
        args.json.write_text(json.dumps({"outcomes": rows, "problems": problems}), "utf-8")
        return 0
    outcomes, problems = run(args.probes, args.stores)
    for p in problems:
        print(f"probes: {p}", file=sys.stderr)
    print(report(outcomes))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1), "utf-8")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
