"""What UserPromptSubmit recall injects on real Claude Code sessions, and the errors left open.

Each transcript of ``../shared/data/claude_code_transcripts`` is replayed through the gardener's
hooks in process (``claude_hooks.handle``) as Claude Code runs them, compactions included; one
project's transcripts share a store, oldest first, as one user's sessions would. For every prompt
it records what the hook injected, the full-text candidates it chose from, and which injected
entries the model already had in context (from the replay, not the hook's own bookkeeping).
Relevance is a person's judgement, kept in ``bench/labels/prompt_recall.tsv`` by position and
hash, never the text: ``--review FILE`` writes what there is to judge to a file outside the
repository; ``--labels`` reports precision, prompts served and tokens injected, ``--floors`` the
same for other floors, ``--errors`` the errors each transcript opens and closes.

    python -m bench.prompt_recall [--errors] [--review FILE] [--floors SHARE:EVIDENCE,...]

Method in full: docs/decisions/058-prompt-recall-labels.md; results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aider_gardener  # noqa: F401  (offline switches first)
from aider_gardener.store.recall import recall

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = (
    Path(os.environ.get("GARDENER_SHARED_DATA") or ROOT.parent / "shared" / "data")
    / "claude_code_transcripts"
)
LABELS = ROOT / "bench" / "labels" / "prompt_recall.tsv"
STORE_ENV = "AIDER_GARDENER_STORE"
CURRENT_CC = "2.1.332"
CANDIDATES = 8  # full-text candidates recorded per prompt (the hook injects at most 3)
_BLOCK_ID = re.compile(r"^--- id=([a-z2-7]{10}) ", re.M)


@dataclass
class Candidate:
    entry_id: str
    cls: str
    path: str | None
    rank: int
    tokens: int
    text: str = ""
    bm25: float | None = None  # the store's full-text score
    share: float | None = None  # ``clients.prompt_recall.Scored``'s, when that module exists
    evidence: float | None = None


@dataclass
class PromptRun:
    transcript: str
    line: int  # 1-based line of the prompt's record in the transcript file
    uuid: str
    sha: str  # first 8 hex digits of the sha1 of the prompt's text
    prompt: str
    before: str  # the assistant's last reply before the prompt (for judging; never saved)
    injected: list[str] = field(default_factory=list)
    tokens: int = 0
    message: str | None = None
    in_context: list[str] = field(default_factory=list)  # injected though already in context
    candidates: list[Candidate] = field(default_factory=list)


def prompt_sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:8]


def project_of(path: Path) -> str:
    parts = path.stem.split("__")
    return parts[1] if len(parts) >= 3 else path.stem


def _first_time(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                stamp = json.loads(line).get("timestamp")
            except (ValueError, AttributeError):
                continue
            if stamp:
                return str(stamp)
    return ""


def groups(paths: list[Path]) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for p in sorted(paths, key=lambda p: (project_of(p), _first_time(p))):
        out.setdefault(project_of(p), []).append(p)
    return out


def prompt_of(record: dict) -> str | None:
    """What the user typed in this record, as the hook is given it; None otherwise."""
    from aider_gardener.clients.claude_hooks import is_prompt

    if record.get("type") != "user" or record.get("isSidechain") or record.get("isMeta"):
        return None
    if record.get("isCompactSummary"):
        return None
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return content if is_prompt(content) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text" and is_prompt(block.get("text")):
            return block["text"]
    return None


class Replayer:
    """One project's store, its transcripts replayed through the hooks in order."""

    def __init__(self, folder: Path):
        from aider_gardener.clients import claude_hooks
        from aider_gardener.store.db import Store

        self.hooks = claude_hooks
        self.folder = folder
        self.cwd = folder / "project"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.saved_env = os.environ.get(STORE_ENV)
        os.environ[STORE_ENV] = str(folder / "store")
        self.store = Store(folder / "store", vectors=False, scope="project", model="gpt-4o")
        self.runs: list[PromptRun] = []
        self.starts: list[tuple[str, dict]] = []  # (transcript, SessionStart(startup) answer)

    def close(self) -> None:
        self.store.close()
        if self.saved_env is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = self.saved_env

    def _touched(self, since: float) -> set[str]:
        rows = self.store.read(
            lambda c: c.execute("SELECT id FROM entries WHERE last_access >= ?", (since,))
        )
        return {r[0] for r in rows}

    def _call(self, event: str, payload: dict, seen: set[str]) -> dict:
        import time

        t0 = time.time()
        answer = self.hooks.handle(event, payload)
        seen |= self._touched(t0)  # what this call stored or stored again: now in context
        return answer

    def replay(self, path: Path) -> None:
        from aider_gardener.clients.transcript import _reply_of

        name = path.name
        sid = path.stem.rsplit("__", 1)[-1]
        # as Claude Code keeps them: one folder of the project's transcripts, one per session
        live = self.folder / "transcripts" / f"{sid}.jsonl"
        live.parent.mkdir(exist_ok=True)
        live.write_text(json.dumps({"type": "system", "version": CURRENT_CC}) + "\n")
        base = {"session_id": sid, "cwd": str(self.cwd), "transcript_path": str(live)}
        seen: set[str] = set()  # entries in the model's context: since the last compaction
        start = self._call("SessionStart", dict(base, source="startup"), seen)
        self.starts.append((name, start))
        uses: dict[str, tuple[str, dict]] = {}
        last_reply: str | None = None
        with path.open(encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                self._append(live, line)
                continue
            if record.get("cwd"):  # recorded in this project, wherever it really was
                record["cwd"] = str(self.cwd)
                line = json.dumps(record) + "\n"
            if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
                self._call("PreCompact", dict(base, trigger="auto"), seen)
                seen.clear()
                self._call("SessionStart", dict(base, source="compact"), seen)
                self._append(live, line)
                continue
            prompt = prompt_of(record)
            if prompt is not None:
                if last_reply is not None:
                    self._call("Stop", dict(base, last_assistant_message=last_reply), seen)
                run = PromptRun(
                    name,
                    number,
                    str(record.get("uuid") or ""),
                    prompt_sha(prompt),
                    prompt,
                    last_reply or "",
                )
                run.candidates = self._candidates(base, prompt)
                answer = self._call("UserPromptSubmit", dict(base, prompt=prompt), seen)
                self._record(run, answer, seen)
                self.runs.append(run)
                last_reply = None
            reply = _reply_of(record)
            if reply is not None:
                last_reply = reply.text
            message = record.get("message") if isinstance(record.get("message"), dict) else {}
            content = message.get("content")
            blocks = (
                [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            )
            if record.get("type") == "assistant" and not record.get("isSidechain"):
                for b in blocks:
                    if b.get("type") == "tool_use":
                        args = b.get("input") if isinstance(b.get("input"), dict) else {}
                        uses[str(b.get("id"))] = (str(b.get("name") or ""), args)
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if record.get("type") == "user" and not record.get("isSidechain"):
                for b in results:
                    use = uses.pop(str(b.get("tool_use_id")), None)
                    if use is None:
                        continue
                    response = record.get("toolUseResult") if len(results) == 1 else None
                    if not isinstance(response, (dict, list)):
                        response = b.get("content")
                    payload = dict(
                        base,
                        tool_name=use[0],
                        tool_input=use[1],
                        tool_response=response,
                        tool_use_id=b.get("tool_use_id"),
                    )
                    self._call("PostToolUse", payload, seen)
            self._append(live, line)
        if last_reply is not None:
            self._call("Stop", dict(base, last_assistant_message=last_reply), seen)

    @staticmethod
    def _append(live: Path, line: str) -> None:
        with live.open("a", encoding="utf-8") as fh:
            fh.write(line if line.endswith("\n") else line + "\n")

    def _candidates(self, base: dict, prompt: str) -> list[Candidate]:
        """The hook's full-text candidates for ``prompt``, what it would skip left out."""
        from aider_gardener.clients.project import client_session_id
        from aider_gardener.tokens import count_tokens

        hooks = self.hooks
        if len(prompt.strip()) < hooks.RAG_MIN_CHARS or prompt.lstrip().startswith("/"):
            return []
        state = hooks._load_state(hooks._state_path(self.folder / "store", base))
        sid = client_session_id(hooks.CLIENT, base["session_id"])
        skip = hooks._in_context(self.store, sid, float(state.get("compacted_at") or 0.0))
        skip |= set(state.get("recalled") or [])
        hits = recall(self.store, prompt, limit=CANDIDATES + len(skip), mode="fts")
        hits = [h for h in hits if h.entry_id not in skip][:CANDIDATES]
        try:
            from aider_gardener.clients import prompt_recall
        except ImportError:  # the code before the relevance floor: no scores
            prompt_recall = None
        scored = prompt_recall.score(self.store, prompt, hits) if prompt_recall else None
        out = []
        for rank, hit in enumerate(hits, 1):
            c = Candidate(
                hit.entry_id, hit.cls, hit.source_path, rank, count_tokens(hit.text or "")
            )
            c.text = hit.text or ""
            if scored is not None:
                s = scored[rank - 1]
                c.bm25, c.share, c.evidence = s.bm25, s.share, s.evidence
            out.append(c)
        return out

    def _record(self, run: PromptRun, answer: dict, seen: set[str]) -> None:
        from aider_gardener.tokens import count_tokens

        ctx = ((answer or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""
        recalled = ctx[ctx.find("[gardener: stored context") :] if "--- id=" in ctx else ""
        run.injected = _BLOCK_ID.findall(recalled)
        run.tokens = count_tokens(recalled) if recalled else 0
        run.message = (answer or {}).get("systemMessage")
        run.in_context = [i for i in run.injected if i in seen]
        seen.update(run.injected)


def replay_all(paths: list[Path]) -> tuple[list[PromptRun], list[tuple[str, dict]]]:
    runs: list[PromptRun] = []
    starts: list[tuple[str, dict]] = []
    for project, files in groups(paths).items():
        folder = Path(tempfile.mkdtemp(prefix=f"bench-pr-{project[:20]}-"))
        r = Replayer(folder)
        try:
            for f in files:
                r.replay(f)
        finally:
            r.close()
            shutil.rmtree(folder, ignore_errors=True)
        runs += r.runs
        starts += r.starts
        print(f"{project}: {len(files)} transcripts, {len(r.runs)} prompts", file=sys.stderr)
    return runs, starts


# ------------------------------------------------------------------------------ labels


def load_labels(path: Path) -> dict[tuple[str, int, str], dict[str, Any]]:
    """(transcript, line, entry id) -> row. Rows: transcript, line, uuid, sha1_8, entry_id,
    relevant (1/0), note (a few words, never the text)."""
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    if not path.is_file():
        return out
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        cols = raw.split("\t")
        if cols[0] == "transcript":
            continue
        row = dict(
            zip(("transcript", "line", "uuid", "sha1_8", "entry_id", "relevant", "note"), cols)
        )
        out[(row["transcript"], int(row["line"]), row["entry_id"])] = row
    return out


def check_labels(runs: list[PromptRun], labels: dict) -> list[str]:
    """Labels whose prompt is not where they say (the transcript changed): listed, not used."""
    by_line = {(r.transcript, r.line): r for r in runs}
    stale = []
    for key, row in labels.items():
        run = by_line.get(key[:2])
        if run is None or run.sha != row["sha1_8"]:
            stale.append(f"{key[0]}:{key[1]} {row['sha1_8']}")
    return stale


def figures(runs: list[PromptRun], labels: dict, chosen: dict[tuple[str, int], list[str]]) -> dict:
    """Precision and volume of one policy: ``chosen`` maps each prompt to its injected ids."""
    judged = hits = unjudged = 0
    tokens: list[int] = []
    got = 0
    judged_prompts = 0
    for r in runs:
        ids = chosen.get((r.transcript, r.line), [])
        if not ids:
            continue
        got += 1
        labelled = [labels.get((r.transcript, r.line, i)) for i in ids]
        if all(row is not None for row in labelled):
            judged_prompts += 1
        for row in labelled:
            if row is None:
                unjudged += 1
                continue
            judged += 1
            hits += row["relevant"] == "1"
        cands = {c.entry_id: c.tokens for c in r.candidates}
        tokens.append(sum(cands.get(i, 0) for i in ids))
    return {
        "prompts": len(runs),
        "with_injection": got,
        "judged_prompts": judged_prompts,
        "injections": judged + unjudged,
        "judged": judged,
        "relevant": hits,
        "precision": hits / judged if judged else None,
        "unjudged": unjudged,
        "tokens_median": statistics.median(tokens) if tokens else 0,
        "tokens_max": max(tokens, default=0),
    }


def _policy(runs: list[PromptRun], share: float, evidence: float, hits: int = 3) -> dict:
    """Offline: the first ``hits`` candidates at or above both floors."""
    out = {}
    for r in runs:
        ids = [
            c.entry_id
            for c in r.candidates
            if (c.share or 0.0) >= share and (c.evidence is None or c.evidence >= evidence)
        ]
        out[(r.transcript, r.line)] = ids[:hits]
    return out


def write_review(runs: list[PromptRun], path: Path, floor: float = 0.0) -> None:
    """What a person needs to judge relevance, outside the repository (it holds the texts): each
    prompt that got something or has a candidate at or above ``floor``, with the reply before
    it and those candidates."""
    with path.open("w", encoding="utf-8") as fh:
        for r in runs:
            shown = [
                c
                for c in r.candidates
                if c.entry_id in r.injected or (c.share is not None and c.share >= floor)
            ]
            if not shown:
                continue
            fh.write(f"\n{'=' * 100}\n{r.transcript}\t{r.line}\t{r.uuid}\t{r.sha}\n")
            fh.write(f"INJECTED: {r.injected} tokens={r.tokens} msg={r.message!r}\n")
            fh.write(f"--- reply before:\n{r.before[-400:]}\n--- PROMPT:\n{r.prompt[:1000]}\n")
            for c in shown:
                fh.write(
                    f"\n  @@ {c.entry_id} rank={c.rank} cls={c.cls} path={c.path}"
                    f" tokens={c.tokens} share={c.share} evidence={c.evidence}\n"
                )
                fh.write("  " + c.text[:500].replace("\n", "\n  ") + "\n")


def error_figures(paths: list[Path]) -> list[dict]:
    """Per transcript, the errors its facts open and how many are closed by its end (the
    tracker fed by ``claude_hooks.facts_from_transcript``, as PreCompact feeds it)."""
    from aider_gardener.clients.claude_hooks import facts_from_transcript

    out = []
    for path in paths:
        book = facts_from_transcript(str(path), Path("/nonexistent")).book
        errors = book.find("error")
        closed = [f for f in errors if f.status == "resolved"]
        out.append(
            {
                "transcript": path.name,
                "opened": len(errors),
                "closed": len(closed),
                "closed_by_saying": sum(1 for f in closed if f.detail.get("resolved_said")),
            }
        )
    return out


def carried_open_errors(starts: list[tuple[str, dict]]) -> list[tuple[str, int]]:
    """Open errors each session's start context carried (SessionStart(startup) in the replay)."""
    out = []
    for name, answer in starts:
        ctx = ((answer or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""
        section = ctx.split("Open errors:", 1)[1] if "Open errors:" in ctx else ""
        lines = []
        for line in section.splitlines()[1:]:
            if not line.startswith("- "):
                break
            lines.append(line)
        out.append((name, len(lines)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.prompt_recall", description=__doc__)
    p.add_argument("paths", nargs="*", help=f"transcripts or folders (default {DEFAULT_DIR})")
    p.add_argument("--labels", default=str(LABELS))
    p.add_argument("--review", help="write prompts and candidates to judge to this file")
    p.add_argument(
        "--review-floor", type=float, default=0.0, help="share of candidates shown in --review"
    )
    p.add_argument("--dump", help="write every prompt's figures (no texts) as JSON lines")
    p.add_argument(
        "--floors", help="SHARE:EVIDENCE,... floors to compare offline on the same candidates"
    )
    p.add_argument(
        "--errors",
        action="store_true",
        help="also: errors each transcript opens and closes, open errors carried at each start",
    )
    args = p.parse_args(argv)
    sources = [Path(x) for x in args.paths] or [DEFAULT_DIR]
    paths = [f for s in sources for f in (sorted(s.glob("*.jsonl")) if s.is_dir() else [s])]
    if not paths:
        print(f"no transcripts found in {sources}", file=sys.stderr)
        return 2
    runs, starts = replay_all(paths)
    labels = load_labels(Path(args.labels))
    stale = check_labels(runs, labels)
    if stale:
        print(f"labels whose prompt changed or is gone: {stale}", file=sys.stderr)
    if args.review:
        write_review(runs, Path(args.review), args.review_floor)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as fh:
            for r in runs:
                row = {k: v for k, v in r.__dict__.items() if k not in ("prompt", "before")}
                row["candidates"] = [
                    {k: v for k, v in c.__dict__.items() if k != "text"} for c in r.candidates
                ]
                fh.write(json.dumps(row) + "\n")
    actual = {(r.transcript, r.line): r.injected for r in runs}
    report = {"hook": figures(runs, labels, actual)}
    report["hook"]["already_in_context"] = sum(len(r.in_context) for r in runs)
    report["hook"]["one_line_messages"] = sum(1 for r in runs if r.injected and r.message)
    report["hook"]["messages_without_injection"] = sum(
        1 for r in runs if not r.injected and r.message and "recalled" in r.message
    )
    if args.floors:
        for spec in args.floors.split(","):
            share, _, evidence = spec.partition(":")
            policy = _policy(runs, float(share), float(evidence or 0))
            report[f"share>={share},evidence>={evidence or 0}"] = figures(runs, labels, policy)
    for name, fig in report.items():
        print(name, json.dumps(fig))
    if args.errors:
        figs = error_figures(paths)
        for row in figs:
            print("errors", json.dumps(row))
        total = {k: sum(r[k] for r in figs) for k in ("opened", "closed", "closed_by_saying")}
        print("errors total", json.dumps(total))
        for name, n in carried_open_errors(starts):
            print("start", json.dumps({"transcript": name, "open_errors_carried": n}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
