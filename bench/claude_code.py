"""Real Claude Code sessions replayed through the gardener: ``python -m bench claude-code PATH...``.

Claude Code's transcripts record what the model really saw and what Claude Code really did when
the window filled (every API call's context size, each compaction with its summary), so the
gardener is measured against Claude Code's own behaviour. Per session and in total:

(a) tool output: tokens of every result as the model saw it, and after the gardener's hooks
    (gpt-4o's tokenizer: Claude's is not public, so ratios mean more than absolute figures);
(b) what survives each real compaction: the open critical facts, edited files and decisions of
    the transcript before it, looked for in Claude Code's summary and in the gardener's state
    block and checkpoint body; and how much of what it summarized was tool output already
    stale (``stale_tool_output``);
(c) probe recall: what Claude Code had in context when a probe was asked against the store's
    recall@k; probes said before a compaction and asked after it tell the two apart.

Method and the choices behind each figure: docs/decisions/054-claude-code-replay.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aider_gardener  # noqa: F401  (offline switches first)
from aider_gardener.store.recall import recall
from aider_gardener.tokens import count_tokens

from .replay.importers.claude_code import (
    COMMAND_TOOLS,
    EDIT_TOOLS,
    Compaction,
    ToolCall,
    Transcript,
    claude_probes,
    events_of,
    parse,
    relative,
    turn_of_items,
)
from .replay.matching import loose, verbatim

MODEL = "gpt-4o"
MAX_OUTPUT = 1024  # --gardener-max-output's default
STATE_TOKENS = 800  # --gardener-state-tokens's default
DEFAULT_K = 5
DEFAULT_DIR = (
    Path(
        os.environ.get("GARDENER_SHARED_DATA")
        or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "claude_code_transcripts"
)
SURVIVAL = ("facts", "files", "decisions")
STORE_ENV = "AIDER_GARDENER_STORE"
CURRENT_CC = "2.1.332"  # the CLI ``dev`` pins; PostToolUse replaces any tool's output since 2.1.121
# what the PostToolUse hook does not store (edits, task lists, …: claude_hooks.SKIPPED)
NOT_STORED = frozenset(
    "Edit MultiEdit Write NotebookEdit TodoWrite TaskCreate TaskUpdate TaskStop KillShell"
    " ExitPlanMode EnterPlanMode AskUserQuestion Skill SlashCommand ToolSearch".split()
)
HOLDERS = ("summary", "state", "checkpoint")


@dataclass
class CompactionFigures:
    at_call: int
    pre_tokens: int | None
    summary_tokens: int
    state_tokens: int
    checkpoint_tokens: int
    found: dict[str, int] = field(default_factory=dict)  # what -> n before the compaction
    kept: dict[str, dict[str, int]] = field(default_factory=dict)  # holder -> what -> n kept
    facts_by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    no_summary: bool = False
    pre_estimated: bool = False  # no preTokens recorded: the last call's real usage before it
    next_call_tokens: int | None = None  # real context of the first call after it
    # facts missing from the state block, with why (``diagnose``): "kind: fact -> reason"
    missing: list[str] = field(default_factory=list)
    # the tool results it compacted and the stale ones among them (``stale_tool_output``)
    stale: dict[str, int] = field(default_factory=dict)


@dataclass
class ProbeFigures:
    question: str
    kind: str
    source_turn: int
    turn: int
    across_compaction: bool
    in_context: bool
    in_context_verbatim: bool
    in_recall: bool
    in_recall_verbatim: bool
    in_state: bool = False  # in the gardener's state block of the latest compaction before it


@dataclass
class SessionFigures:
    name: str
    turns: int = 0
    calls: int = 0
    context_peak: int = 0
    context_curve: list[int] = field(default_factory=list)
    microcompactions: int = 0
    microcompacted: int = 0  # tool results Claude Code's microcompactions cleared
    tool_outputs: int = 0
    tool_tokens_before: int = 0
    tool_tokens_after: int = 0
    tool_tokens_all_summaries: int = 0
    throttled: int = 0
    noted: int = 0  # outputs left whole with a "stored as id=…" note added
    by_tool: dict[str, list[int]] = field(default_factory=dict)  # name -> [n, before, after]
    ingest_ms: list[float] = field(default_factory=list)
    compactions: list[CompactionFigures] = field(default_factory=list)
    probes: list[ProbeFigures] = field(default_factory=list)
    via: str = "pipeline"
    wall_s: float = 0.0
    # facts (``aider_gardener.critical``) of the tool outputs as Claude Code showed them, and of
    # those the model still sees with the gardener; examples of the lost ones
    facts_found: int = 0
    facts_kept: int = 0
    facts_lost: list[str] = field(default_factory=list)
    saved_at: dict[int, int] = field(default_factory=dict)  # API call -> tool tokens saved
    # ids and paths a tool call used from the result just before it, those the model still saw
    # with the gardener (``bench/next_refs.py``), the same for results the hooks replaced, and
    # examples of the missing ones
    next_used: int = 0
    next_kept: int = 0
    next_used_replaced: int = 0
    next_kept_replaced: int = 0
    next_lost: list[str] = field(default_factory=list)
    to_compaction: dict[str, Any] = field(default_factory=dict)  # see ``until_compaction``

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


# ------------------------------------------------------------------------------ matching


def file_kept(rel: str, text: str) -> bool:
    """A file counts as kept when its path relative to the project, or its file name as a
    word, is in ``text`` (summaries and state blocks both shorten paths)."""
    flat = text.replace("\\", "/")
    rel = rel.replace("\\", "/")
    if rel in flat:
        return True
    name = rel.rsplit("/", 1)[-1]
    return bool(re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", flat))


def survival(
    holder: str, facts_found: dict[str, set[str]], files: set[str], decisions: list[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """(kept per SURVIVAL, facts kept per kind) in ``holder``'s text."""
    from aider_gardener import critical

    s = critical.Summary(holder)
    by_kind = {kind: sum(s.has(kind, f) for f in found) for kind, found in facts_found.items()}
    lines = [ln for ln in holder.splitlines() if ln.strip()]
    kept = {
        "facts": sum(by_kind.values()),
        "files": sum(file_kept(f, holder) for f in files),
        "decisions": sum(loose([d], lines) for d in decisions),
    }
    return kept, by_kind


# ------------------------------------------------------------------------------ ingesting


class PipelineIngest:
    """Tool results and prompts into a temp store, as the hooks would: ``Store.ingest`` (the
    pipeline) with the Aider integration's size rule for what the model would then see."""

    via = "pipeline"
    seen_text: str | None = None  # what the model sees of the last result, when not as it was

    def __init__(self, folder: Path, vectors: bool):
        from aider_gardener.store.db import Store

        self.vectors = vectors
        self.store = Store(folder, vectors=vectors, scope="session", model=MODEL)

    def tool(self, call: Any, output: str) -> tuple[int, int, Any] | None:
        """(tokens the model would see, summary tokens, entry); None when nothing is stored."""
        from aider_gardener.types import Source

        name = call.name
        if name in NOT_STORED:
            return None
        path = call.path if name == "Read" else None
        source = Source(role="tool", command=call.command, path=path)
        entry = self.store.ingest(output, source, tool=name)
        seen = entry.tokens_original
        if entry.tokens_original > MAX_OUTPUT:
            seen = min(entry.tokens_original, entry.tokens_summary, MAX_OUTPUT)
        return seen, entry.tokens_summary, entry

    def holders(self, c: Compaction, tracker: Any) -> tuple[str, str]:
        """(state block, checkpoint body) from the bench's own tracker fed the same prefix."""
        from aider_gardener.continuity.checkpoint import render_body
        from aider_gardener.continuity.state import render_state

        return render_state(tracker.book, max_tokens=STATE_TOKENS, model=MODEL), render_body(
            tracker.book
        )

    def book(self, c: Compaction, tracker: Any) -> Any:
        """The facts the state block was rendered from (for ``diagnose``)."""
        return tracker.book

    def recall(self, question: str, k: int) -> list[str]:
        """The texts (original, summary, excerpt) of the top ``k`` hits."""
        import contextlib

        if self.vectors:
            with contextlib.suppress(Exception):
                self.store.drain(timeout=120)
        hits = recall(self.store, question, limit=k, mode="hybrid" if self.vectors else "fts")
        entries = self.store.get_entries([h.entry_id for h in hits])
        out = []
        for h in hits:
            entry = entries.get(h.entry_id)
            original = entry.original if entry is not None else ""
            # recall shows where an entry came from (a Read's file) beside its text
            out.append(f"{h.source_path or ''}\n{original}\n{h.text}\n{h.excerpt}")
        return out

    def close(self) -> None:
        self.store.close()


class HookIngest(PipelineIngest):
    """The same through the Claude Code hooks themselves (``claude_hooks.handle``): each tool
    call a PostToolUse payload (the result text the model saw as ``tool_response``), each
    compaction a PreCompact payload whose transcript is the file's lines before it. The hooks
    are told the session runs Claude Code ``CURRENT_CC`` (whose PostToolUse may replace any
    tool's output); the store is a temp folder (``AIDER_GARDENER_STORE``)."""

    via = "hooks"

    def __init__(self, folder: Path, vectors: bool, t: Transcript, source: Path):
        from aider_gardener.clients import claude_hooks
        from aider_gardener.store.db import Store

        self.hooks = claude_hooks
        self.vectors = vectors
        self.folder = folder
        self.lines = source.read_text(encoding="utf-8", errors="replace").splitlines(True)
        self.saved_env = os.environ.get(STORE_ENV)
        os.environ[STORE_ENV] = str(folder / "store")
        version = folder / "version.jsonl"
        version.write_text(json.dumps({"type": "system", "version": CURRENT_CC}) + "\n")
        self.base = {
            "session_id": f"bench-{t.name}"[:60],
            "cwd": t.cwd or str(folder),
            "transcript_path": str(version),
        }
        self.store = Store(folder / "store", vectors=vectors, scope="project", model=MODEL)

    def tool(self, call: Any, output: str) -> tuple[int, int, Any] | None:
        """The recorded ``toolUseResult`` is the hook's ``tool_response`` (the result text the
        model saw when the transcript has none). A result the transcript marks as an error is a
        failure, which Claude Code ``CURRENT_CC`` sends to PostToolUseFailure with the text the
        model saw as ``error``. ``seen_text``: what the model would see with the hooks (None:
        the output as it was)."""
        from aider_gardener.pipeline import entry_id

        self.seen_text = self.replaced = None
        if call.is_error:
            event = "PostToolUseFailure"
            stored = self.hooks.tool_output(call.name, call.input, output)
            payload = dict(self.base, tool_name=call.name, tool_input=call.input, error=output)
        else:
            event = "PostToolUse"
            response = call.response if isinstance(call.response, (dict, list)) else output
            stored = self.hooks.tool_output(call.name, call.input, response)
            payload = dict(
                self.base, tool_name=call.name, tool_input=call.input, tool_response=response
            )
        payload["hook_event_name"] = event
        answer = self.hooks.handle(event, payload).get("hookSpecificOutput") or {}
        if stored is None:
            return None
        entry = self.store.get(entry_id(stored.text))
        if entry is None:
            return None
        seen = entry.tokens_original
        replaced = _shown_text(answer.get("updatedToolOutput"), call.name)
        self.replaced = replaced
        if replaced is not None:
            seen = count_tokens(replaced, MODEL)
            self.seen_text = replaced
        elif isinstance(answer.get("additionalContext"), str):
            seen += count_tokens(answer["additionalContext"], MODEL)
            self.seen_text = output + "\n" + answer["additionalContext"]
        return seen, entry.tokens_summary, entry

    def holders(self, c: Compaction, tracker: Any) -> tuple[str, str]:
        """(the PreCompact hook's text: the state block it asks the compaction to keep, the
        verified checkpoint it wrote)."""
        prefix = self.folder / "prefix.jsonl"
        prefix.write_text("".join(self.lines[: c.line]), encoding="utf-8")
        payload = dict(
            self.base, hook_event_name="PreCompact", transcript_path=str(prefix), trigger="auto"
        )
        answer = self.hooks.handle("PreCompact", payload)
        ckpt = Path(str(answer.get("checkpoint") or ""))
        body = ckpt.read_text(encoding="utf-8") if ckpt.is_file() else ""
        return str(answer.get("text") or ""), body

    def book(self, c: Compaction, tracker: Any) -> Any:
        """The hook's own facts from the same prefix (``holders`` wrote it)."""
        from aider_gardener.clients.project import project_dir

        root = project_dir(self.base.get("cwd") or None)
        prefix = self.folder / "prefix.jsonl"
        return self.hooks.facts_from_transcript(prefix, root, None, self.store.get).book

    def close(self) -> None:
        super().close()
        if self.saved_env is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = self.saved_env


def _shown_text(value: Any, tool: str = "") -> str | None:
    """The text the model sees of a replaced tool output: the hook answers a string, or the
    tool's own result shape (Bash ``{stdout, stderr, …}``, content blocks) with text in it; a
    Read's content with the line numbers Claude Code puts before each line."""
    if tool == "Read" and isinstance(value, dict) and isinstance(value.get("file"), dict):
        content = str(value["file"].get("content") or "")
        start = int(value["file"].get("startLine") or 1)
        return "\n".join(f"{start + i}\t{x}" for i, x in enumerate(content.split("\n")))
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_shown_text(v) or "" for v in value)
    if isinstance(value, dict):
        if value.get("type") == "text" and isinstance(value.get("text"), str):
            return value["text"]
        parts = [_shown_text(v) for k, v in value.items() if isinstance(v, (str, list, dict))]
        return "\n".join(p for p in parts if p and p not in ("text",))
    return None


def hooks_available() -> bool:
    try:
        from aider_gardener.clients import claude_hooks
    except ImportError:
        return False
    return callable(getattr(claude_hooks, "handle", None))


# ------------------------------------------------------------------------------ measuring


def _text(kind: str, value: Any) -> str:
    if kind == "tool":
        return f"{value.command}\n{value.output}"
    if kind == "compaction":
        return value.summary
    return str(value)


def measure(
    path: str | Path,
    *,
    vectors: bool = False,
    k: int = DEFAULT_K,
    keep: Path | None = None,
    via: str = "auto",
    show_missing: bool = False,
) -> SessionFigures:
    """Every figure of one transcript (see the module docstring); with ``show_missing``, each
    compaction says why the facts its state block lacks are missing (``diagnose``)."""
    from aider_gardener import critical
    from aider_gardener.continuity import extract
    from aider_gardener.continuity.tracker import FactTracker

    start = time.perf_counter()
    t: Transcript = parse(path)
    t.result_calls = result_calls(Path(path))  # type: ignore[attr-defined]
    fig = SessionFigures(
        name=t.name, microcompactions=t.microcompactions, microcompacted=len(t.cleared)
    )
    fig.calls = len(t.usage)
    fig.context_curve = list(t.usage)
    fig.context_peak = max(t.usage, default=0)
    events = events_of(t)
    turns = sum(1 for e in events if e["type"] in ("user", "run"))
    fig.turns = turns
    probes = sorted(claude_probes(t, events, turns), key=lambda p: p[0])
    turn_items = turn_of_items(t)
    folder = Path(tempfile.mkdtemp(prefix="bench-cc-")) if keep is None else keep
    if via == "auto":
        via = "hooks" if hooks_available() else "pipeline"
    if via == "hooks":
        ingest: PipelineIngest = HookIngest(folder, vectors, t, Path(path))
    else:
        ingest = PipelineIngest(folder / "store", vectors)
    fig.via = ingest.via
    tracker = FactTracker()
    found: dict[str, set[str]] = {kind: set() for kind in critical.KINDS}
    files: set[str] = set()
    origin: dict[tuple[str, str], str] = {}  # (kind, fact) -> the output it was first seen in
    by_command: dict[str, dict[str, set[str]]] = {}  # command -> facts of its latest output
    decisions: list[str] = []
    window: list[str] = []  # what Claude Code had in context: since the latest compaction
    compaction_turns: list[int] = []
    state_now: list[str] = []  # the state block the latest compaction was given
    pending = list(probes)

    def ask(upto: int) -> None:
        while pending and pending[0][0] <= upto:
            at, probe = pending.pop(0)
            answers = probe["answers"]
            ctx_strict = verbatim(answers, "\n".join(window))
            ctx_loose = ctx_strict or loose(answers, window)
            hits = ingest.recall(probe["question"], k)
            rec_strict = any(verbatim(answers, h) for h in hits)
            rec_loose = rec_strict or any(loose(answers, [h]) for h in hits)
            across = any(probe["source_turn"] <= c <= at for c in compaction_turns)
            in_state = bool(state_now) and (
                verbatim(answers, state_now[0]) or loose(answers, state_now[0].splitlines())
            )
            fig.probes.append(
                ProbeFigures(
                    probe["question"],
                    probe.get("kind", ""),
                    probe["source_turn"],
                    at,
                    across,
                    ctx_loose,
                    ctx_strict,
                    rec_loose,
                    rec_strict,
                    in_state,
                )
            )

    try:
        for (kind, value), turn in zip(t.items, turn_items):
            if kind in ("user", "tool"):
                ask(turn - 1)  # probes asked after turn N come before turn N+1 starts
            if kind == "compaction":
                state, body = ingest.holders(value, tracker)
                state_now[:] = [state]
                fig.compactions.append(_compaction(value, t, found, files, decisions, state, body))
                if show_missing:
                    book = ingest.book(value, tracker)
                    fig.compactions[-1].missing = diagnose(found, state, book, origin)
                compaction_turns.append(turn)
                window = [value.summary] if value.summary else []
                continue
            window.append(_text(kind, value))
            if kind == "user":
                tracker.on_prompt(value, turn)
                decisions += [line for _, _, line in extract.decisions_in(value, "user")]
            elif kind == "assistant":
                tracker.on_reply(value, turn)
                decisions += [line for _, _, line in extract.decisions_in(value, "assistant")]
            elif kind == "tool":
                _tool(value, t, turn, ingest, tracker, found, files, fig, origin, by_command)
        ask(turns)
    finally:
        ingest.close()
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    for figures, stale in zip(fig.compactions, stale_tool_output(t)):
        figures.stale = stale
    boundaries = {c.calls_before for c in t.compactions}
    fig.to_compaction = until_compaction(t.usage, boundaries, fig.saved_at)
    fig.wall_s = time.perf_counter() - start
    return fig


def _tool(call, t, turn, ingest, tracker, found, files, fig, origin, by_command) -> None:  # noqa
    from aider_gardener import critical
    from aider_gardener.continuity.tracker import command_key

    if not call.answered:
        return
    _next_refs(fig, call, getattr(t, "last_replaced", None))
    t.last_replaced = None
    rel = relative(call.path, t.cwd) if call.path else None
    if call.output.strip():
        t0 = time.perf_counter()
        done = ingest.tool(call, call.output)
        fig.ingest_ms.append((time.perf_counter() - t0) * 1000)
        _facts_seen(fig, call, ingest.seen_text)
        t.last_replaced = (call, getattr(ingest, "replaced", None))
        before = count_tokens(call.output, MODEL)
        fig.tool_outputs += 1
        fig.tool_tokens_before += before
        row = fig.by_tool.setdefault(call.name, [0, 0, 0])
        after_before = fig.tool_tokens_after
        if done is None:  # not stored: the model sees it as it was
            fig.tool_tokens_after += before
            fig.tool_tokens_all_summaries += before
            entry = None
        else:  # differences in the store's own counts (it strips ANSI codes first)
            seen, summary, entry = done
            full = entry.tokens_original
            fig.tool_tokens_after += max(0, before + seen - full)
            fig.tool_tokens_all_summaries += max(0, before + min(summary, full) - full)
            fig.throttled += seen < full
            fig.noted += seen > full
        row[0] += 1
        row[1] += before
        row[2] += fig.tool_tokens_after - after_before
        at = getattr(t, "result_calls", {}).get(call.id)
        if at is not None:
            saved = before - (fig.tool_tokens_after - after_before)
            fig.saved_at[at] = fig.saved_at.get(at, 0) + saved
        entry_id = entry.id if getattr(entry, "stored", False) else None
    else:
        entry_id = None
    if call.name in COMMAND_TOOLS or call.is_error:
        tracker.on_output(call.command, call.output, turn, entry_id, 1 if call.is_error else 0)
        code = "error" if call.is_error else "ok"
        latest = critical.extract(call.output)
        by_command[command_key(call.command)] = latest
        for kind in found:  # open: shown by the latest run of a command (module docstring, b)
            found[kind] = set().union(*(f[kind] for f in by_command.values()))
        for kind, values in latest.items():
            for v in values:
                origin.setdefault((kind, v), f"turn {turn} {code} `{call.command[:70]}`")
    if call.name in EDIT_TOOLS and rel and not call.is_error:
        tracker.on_edit_applied([rel], turn)
        files.add(rel)


def _next_refs(fig: SessionFigures, call: Any, last: tuple[Any, str | None] | None) -> None:
    """The ids and paths ``call`` used from the result just before it, and how many of them the
    model still saw: all of them unless the hooks replaced the result, then those the
    replacement names (``next_refs``)."""
    from . import next_refs

    if last is None:
        return
    before, seen = last
    refs = next_refs.used(call.input, before.output)
    fig.next_used += len(refs)
    if seen is None:
        fig.next_kept += len(refs)
        return
    fig.next_used_replaced += len(refs)
    for ref in refs:
        if next_refs.kept(ref, seen):
            fig.next_kept += 1
            fig.next_kept_replaced += 1
        elif len(fig.next_lost) < 20:
            fig.next_lost.append(f"{ref} ({before.name} `{before.command[:50]}` -> {call.name})")


def _facts_seen(fig: SessionFigures, call: Any, seen: str | None) -> None:
    """Count the facts of a tool output as Claude Code showed it, and those still in what the
    model sees with the gardener (``seen``: None when that is the output itself)."""
    from aider_gardener import critical

    found = critical.extract(call.output)
    n = sum(len(v) for v in found.values())
    fig.facts_found += n
    if seen is None or not n:
        fig.facts_kept += n
        return
    gone = critical.missing(call.output, seen, found)
    fig.facts_kept += n - sum(len(v) for v in gone.values())
    for kind, values in gone.items():
        for v in sorted(values)[: max(0, 20 - len(fig.facts_lost))]:
            fig.facts_lost.append(f"{kind}: {v} ({call.name} `{call.command[:60]}`)")


# Claude Code 2.1.332 compacts at its window less min(max output tokens, 20,000) less 13,000
# (found in its bundled JavaScript): 167,000 tokens for a 200,000-token model.
AUTO_COMPACT = 200_000 - 20_000 - 13_000


def result_calls(path: Path) -> dict[str, int]:
    """tool_use id -> the API call (as ``parse`` counts them: main-thread message ids with usage)
    whose context first holds its result: the one after the call that asked for it."""
    from .replay.importers.claude_code import _usage_tokens

    order: dict[str, int] = {}
    out: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if (
                not isinstance(rec, dict)
                or rec.get("isSidechain")
                or rec.get("type") != "assistant"
            ):
                continue
            msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
            mid = str(msg.get("id") or rec.get("uuid") or "")
            if _usage_tokens(msg.get("usage")) is not None and mid and mid not in order:
                order[mid] = len(order)
            for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id"):
                    out[str(block["id"])] = order.get(mid, len(order) - 1) + 1
    return out


def until_compaction(usage: list[int], boundaries: set[int], saved: dict[int, int]) -> dict:
    """API calls until the context reaches ``AUTO_COMPACT``, with and without the gardener.

    The session's context as if it never compacted: its first call's context (system prompt,
    tools) plus what each call added to the one before (real usage; nothing at a real
    compaction, where the context dropped to its summary). The gardener's context is that less
    the tool-output tokens it saved before each call (gpt-4o tokens: Claude's tokenizer is not
    public). A session that ends before the threshold is extrapolated at its mean growth per
    call (``projected``). ``grown_*``: what the whole session added to the context."""
    if len(usage) < 2:
        return {}
    base = usage[0]
    steps = [0 if i in boundaries else usage[i] - usage[i - 1] for i in range(1, len(usage))]

    def calls(minus: dict[int, int]) -> tuple[float, bool]:
        ctx = base
        for i, step in enumerate(steps, start=1):
            ctx += step - minus.get(i, 0)
            if ctx >= AUTO_COMPACT:
                return float(i), False
        rate = (ctx - base) / len(steps)
        if rate <= 0:
            return float("inf"), True
        return len(steps) + (AUTO_COMPACT - ctx) / rate, True

    plain, plain_projected = calls({})
    with_gardener, projected = calls(saved)
    plain_grown = sum(steps)
    grown = plain_grown - sum(v for i, v in saved.items() if 1 <= i <= len(steps))
    return {
        "base": base,
        "grown_without": plain_grown,
        "grown_with": grown,
        "calls_without": plain,
        "calls_with": with_gardener,
        "projected_without": plain_projected,
        "projected_with": projected,
    }


# ------------------------------------------------------------------------------ stale output

STALE_KINDS = ("changed", "reread", "rerun")
STALE_KEYS = ("results", "tokens", "stale", "stale_tokens") + tuple(
    k for kind in STALE_KINDS for k in (kind, f"{kind}_tokens")
)


def stale_tool_output(t: Transcript) -> list[dict[str, int]]:
    """Per real compaction, the tool results in the context it compacted and the stale ones.

    In the context: answered results with text since the previous compaction, less those a
    microcompaction cleared before it. Stale: a later call before the compaction makes the
    result out of date or shows it again, judged from the transcript alone, never from age, so
    a gardener could swap it for a one-line reference without losing what is current. Three
    reasons, each result counted under the first that applies:

    * ``changed``: a later successful Edit/MultiEdit/Write/NotebookEdit of the file the result
      shows (a Read, or an edit's echo of the file): its text no longer matches the file;
    * ``reread``: the same file read again, whole or the same lines, with no edit between
      (Claude Code 2.1.332 answers such a re-read with a stub; the older versions that wrote
      these transcripts sent the file again);
    * ``rerun``: the same command run again (``tracker.command_key``), or any other tool called
      again with the same input.

    Keys: ``results``/``tokens`` in context, ``<kind>``/``<kind>_tokens`` per reason,
    ``stale``/``stale_tokens`` in all; gpt-4o tokens of the result text (not the call's
    input)."""
    out: list[dict[str, int]] = []
    span: list[tuple[int, ToolCall]] = []  # answered calls since the previous compaction
    for at, (kind, value) in enumerate(t.items):
        if kind == "tool" and value.answered:
            span.append((at, value))
        if kind != "compaction":
            continue
        row = dict.fromkeys(STALE_KEYS, 0)
        for n, (_, call) in enumerate(span):
            cleared = t.cleared.get(call.id)  # the next item's index when one cleared it
            if not call.output.strip() or (cleared is not None and cleared <= at):
                continue
            tokens = count_tokens(call.output, MODEL)
            row["results"] += 1
            row["tokens"] += tokens
            why = _stale_reason(call, [later for _, later in span[n + 1 :]])
            if why:
                row[why] += 1
                row[f"{why}_tokens"] += tokens
                row["stale"] += 1
                row["stale_tokens"] += tokens
        out.append(row)
        span = []
    return out


def _file_key(path: str | None) -> str | None:
    """One spelling per file: forward slashes, and no case on a Windows drive path."""
    if not path:
        return None
    flat = path.replace("\\", "/")
    return flat.casefold() if re.match(r"[A-Za-z]:/", flat) else flat


def _stale_reason(call: ToolCall, later: list[ToolCall]) -> str | None:
    """Why ``call``'s result is stale given the calls after it (``stale_tool_output``), or None."""
    from aider_gardener.continuity.tracker import command_key

    path = _file_key(call.path)
    if path:
        edits = (c for c in later if c.name in EDIT_TOOLS and not c.is_error)
        if any(_file_key(c.path) == path for c in edits):
            return "changed"

        def lines(c: ToolCall) -> tuple[Any, Any]:
            return c.input.get("offset"), c.input.get("limit")

        for c in later:
            if c.name == "Read" and not c.is_error and _file_key(c.path) == path:
                if lines(c) == (None, None) or (call.name == "Read" and lines(c) == lines(call)):
                    return "reread"
        return None
    if call.name in COMMAND_TOOLS:
        key = command_key(call.command)
        return "rerun" if any(command_key(c.command) == key for c in later) else None
    same = json.dumps(call.input, sort_keys=True, default=str)
    for c in later:
        if c.name == call.name and json.dumps(c.input, sort_keys=True, default=str) == same:
            return "rerun"
    return None


def diagnose(
    found: dict[str, set[str]], state: str, book: Any, origin: dict[tuple[str, str], str]
) -> list[str]:
    """Why each fact of ``found`` is missing from ``state``: ``budget`` (in the block the same
    facts render to without a budget), ``resolved`` (only in facts no longer open: fixed or
    superseded errors), or ``not extracted`` (in no fact of ``book``), with the output it came
    from (``origin``)."""
    from aider_gardener import critical
    from aider_gardener.continuity.state import render_state

    s = critical.Summary(state)
    full, fixed = render_state(book, max_tokens=10**7, model=MODEL).splitlines(), False
    shown = []
    for line in full:  # the fixed errors are no open facts
        if not line.startswith("- "):
            fixed = line == "Fixed errors:"
        if not fixed:
            shown.append(line)
    whole = critical.Summary("\n".join(shown))
    lines = []
    for fact in book.find(live=False):
        detail = " ".join(str(fact.detail.get(k) or "") for k in ("line", "command"))
        lines.append(f"{fact.text} {detail}")
    anywhere = critical.Summary("\n".join(lines))
    out = []
    for kind in sorted(found):
        for value in sorted(found[kind]):
            if s.has(kind, value):
                continue
            if whole.has(kind, value):
                why = "budget"
            elif anywhere.has(kind, value):
                why = "resolved"
            else:
                why = "not extracted"
            out.append(f"{kind}: {value} -> {why} (from {origin.get((kind, value), '?')})")
    return out


def _compaction(
    c: Compaction, t, found, files, decisions, state: str, body: str  # noqa: ANN001
) -> CompactionFigures:
    decided = list(dict.fromkeys(decisions))
    estimated = not isinstance(c.pre_tokens, int)
    if estimated and 0 < c.calls_before <= len(t.usage):
        c = Compaction(**{**c.__dict__, "pre_tokens": t.usage[c.calls_before - 1]})
    out = CompactionFigures(
        at_call=c.calls_before,
        pre_tokens=c.pre_tokens if isinstance(c.pre_tokens, int) else None,
        pre_estimated=estimated,
        next_call_tokens=t.usage[c.calls_before] if c.calls_before < len(t.usage) else None,
        summary_tokens=count_tokens(c.summary, MODEL),
        state_tokens=count_tokens(state, MODEL),
        checkpoint_tokens=count_tokens(body, MODEL),
        no_summary=not c.summary,
    )
    out.found = {
        "facts": sum(len(v) for v in found.values()),
        "files": len(files),
        "decisions": len(decided),
    }
    out.facts_by_kind["found"] = {kind: len(v) for kind, v in found.items() if v}
    for holder, text in (("summary", c.summary), ("state", state), ("checkpoint", body)):
        kept, by_kind = survival(text, found, files, decided)
        out.kept[holder] = kept
        out.facts_by_kind[holder] = {kind: n for kind, n in by_kind.items() if found[kind]}
    return out


# ------------------------------------------------------------------------------ reporting


def _frac(hit: int, n: int) -> str:
    return f"{hit}/{n} ({100 * hit / n:.0f}%)" if n else "–"


def _probe_cells(probes: list[ProbeFigures]) -> tuple[str, str, str, str]:
    across = [p for p in probes if p.across_compaction]
    return (
        _frac(sum(p.in_context for p in probes), len(probes)),
        _frac(sum(p.in_recall for p in probes), len(probes)),
        _frac(sum(p.in_context for p in across), len(across)),
        _frac(sum(p.in_recall for p in across), len(across)),
    )


def totals(sessions: list[SessionFigures]) -> dict[str, Any]:
    comps = [c for s in sessions for c in s.compactions if not c.no_summary]
    probes = [p for s in sessions for p in s.probes]
    across = [p for p in probes if p.across_compaction]
    before = sum(s.tool_tokens_before for s in sessions)
    ms = sorted(m for s in sessions for m in s.ingest_ms)

    def pct(q: float) -> float:
        return round(ms[min(len(ms) - 1, int(q * len(ms)))], 1) if ms else 0.0

    out: dict[str, Any] = {
        "sessions": len(sessions),
        "calls": sum(s.calls for s in sessions),
        "context_peak": max((s.context_peak for s in sessions), default=0),
        "compactions": len(comps),
        "tool_outputs": sum(s.tool_outputs for s in sessions),
        "tool_tokens_before": before,
        "tool_tokens_after": sum(s.tool_tokens_after for s in sessions),
        "tool_tokens_all_summaries": sum(s.tool_tokens_all_summaries for s in sessions),
        "throttled": sum(s.throttled for s in sessions),
        "noted": sum(s.noted for s in sessions),
        "ingest_ms_p50": pct(0.5),
        "ingest_ms_p95": pct(0.95),
        "probes": len(probes),
        "probe_in_context": sum(p.in_context for p in probes),
        "probe_in_recall": sum(p.in_recall for p in probes),
        "probe_in_recall_verbatim": sum(p.in_recall_verbatim for p in probes),
        "probes_across_compaction": len(across),
        "across_in_context": sum(p.in_context for p in across),
        "across_in_recall": sum(p.in_recall for p in across),
        "across_in_state": sum(p.in_state for p in across),
        "across_in_state_or_recall": sum(p.in_state or p.in_recall for p in across),
        "across_in_summary_or_state": sum(p.in_context or p.in_state for p in across),
        "summary_tokens": sum(c.summary_tokens for c in comps),
        "state_tokens": sum(c.state_tokens for c in comps),
        "checkpoint_tokens": sum(c.checkpoint_tokens for c in comps),
        "output_facts_found": sum(s.facts_found for s in sessions),
        "output_facts_kept": sum(s.facts_kept for s in sessions),
        "next_used": sum(s.next_used for s in sessions),
        "next_kept": sum(s.next_kept for s in sessions),
        "next_used_replaced": sum(s.next_used_replaced for s in sessions),
        "next_kept_replaced": sum(s.next_kept_replaced for s in sessions),
    }
    sims = [s.to_compaction for s in sessions if s.to_compaction]
    out["grown_without"] = sum(x["grown_without"] for x in sims)
    out["grown_with"] = sum(x["grown_with"] for x in sims)
    ratios = sorted(
        x["calls_with"] / x["calls_without"]
        for x in sims
        if 0 < x["calls_without"] < float("inf") and x["calls_with"] < float("inf")
    )
    out["calls_ratio_median"] = ratios[len(ratios) // 2] if ratios else None
    out["calls_ratio_min"] = ratios[0] if ratios else None
    kinds: dict[str, dict[str, int]] = {}
    for p in probes:
        row = kinds.setdefault(p.kind or "?", dict(n=0, context=0, state=0, recall=0, either=0))
        row["n"] += 1
        row["context"] += p.in_context
        row["state"] += p.in_state
        row["recall"] += p.in_recall
        row["either"] += p.in_state or p.in_recall
    out["probe_kinds"] = dict(sorted(kinds.items()))
    out["compacted_context"] = sum(c.pre_tokens or 0 for c in comps)
    for key in STALE_KEYS:
        out[f"compacted_{key}"] = sum(c.stale.get(key, 0) for c in comps)
    for what in SURVIVAL:
        out[f"{what}_found"] = sum(c.found.get(what, 0) for c in comps)
        for holder in HOLDERS:
            out[f"{what}_in_{holder}"] = sum(c.kept.get(holder, {}).get(what, 0) for c in comps)
    return out


def print_report(sessions: list[SessionFigures], k: int, file: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=200)
    per = Table(
        title="Claude Code sessions: real context, tool output, probes", title_justify="left"
    )
    for col in (
        "session",
        "turns",
        "calls",
        "peak ctx",
        "compactions (call#: preTokens)",
        "tool outputs",
        "tool tokens before",
        "after gardener",
        "probes",
        "in real ctx",
        f"recall@{k}",
        "across compaction: ctx",
        f"… recall@{k}",
    ):
        per.add_column(col, justify="left" if col == "session" else "right")
    for s in sessions:
        where = ", ".join(
            (
                f"{c.at_call}: {'~' if c.pre_estimated else ''}{c.pre_tokens:,}"
                if c.pre_tokens
                else f"{c.at_call}: ?"
            )
            for c in s.compactions
        )
        ratio = s.tool_tokens_after / s.tool_tokens_before if s.tool_tokens_before else 1.0
        per.add_row(
            s.name.replace("cc_session__", "")[:48],
            f"{s.turns:,}",
            f"{s.calls:,}",
            f"{s.context_peak:,}",
            where or "–",
            f"{s.tool_outputs:,}",
            f"{s.tool_tokens_before:,}",
            f"{s.tool_tokens_after:,} ({ratio:.2f}×)",
            str(len(s.probes)),
            *_probe_cells(s.probes),
        )
    console.print(per)

    comp = Table(
        title="What survives each real compaction (facts/files/decisions from the transcript "
        "before it; decisions by the gardener's own extractor)",
        title_justify="left",
    )
    comp.add_column("session / compaction", justify="left")
    for what in SURVIVAL:
        comp.add_column(f"{what} n", justify="right")
        for holder in HOLDERS:
            comp.add_column(f"in {holder}", justify="right")
    comp.add_column("tokens summary/state/ckpt", justify="right")
    comp.add_column("real ctx before → next call", justify="right")
    for s in sessions:
        for n, c in enumerate(s.compactions, start=1):
            if c.no_summary:
                continue
            cells = []
            for what in SURVIVAL:
                cells.append(str(c.found[what]))
                cells += [_frac(c.kept[h][what], c.found[what]) for h in HOLDERS]
            tokens = f"{c.summary_tokens:,}/{c.state_tokens:,}/{c.checkpoint_tokens:,}"
            pre = f"{'~' if c.pre_estimated else ''}{c.pre_tokens or 0:,}"
            ctx = f"{pre} → {c.next_call_tokens:,}" if c.next_call_tokens else pre
            comp.add_row(f"{s.name.replace('cc_session__', '')[:40]} #{n}", *cells, tokens, ctx)
    console.print(comp)
    print_stale_table(sessions, console)

    tot = totals(sessions)
    side = Table(
        title=f"all {tot['sessions']} sessions: Claude Code as recorded vs with the gardener",
        title_justify="left",
    )
    side.add_column("")
    side.add_column("Claude Code (real)", justify="right")
    side.add_column("gardener", justify="right")
    before, after = tot["tool_tokens_before"], tot["tool_tokens_after"]
    side.add_row(
        "API calls / peak context (real usage)",
        f"{tot['calls']:,} / " f"{tot['context_peak']:,}",
        "",
    )
    side.add_row(
        f"tool output tokens ({tot['tool_outputs']:,} results)",
        f"{before:,}",
        f"{after:,} ({after / before:.2f}×)" if before else "–",
    )
    side.add_row("  every result as its summary", "", f"{tot['tool_tokens_all_summaries']:,}")
    side.add_row("  results replaced by their summary", "", f"{tot['throttled']:,}")
    side.add_row("  results left whole with a stored-as note", "", f"{tot['noted']:,}")
    side.add_row(
        f"  {sessions[0].via} ms per result p50 / p95",
        "",
        f"{tot['ingest_ms_p50']} / {tot['ingest_ms_p95']}",
    )
    side.add_row(
        f"compactions with a summary: {tot['compactions']}", "summary", "state / checkpoint"
    )
    for what in SURVIVAL:
        n = tot[f"{what}_found"]
        side.add_row(
            f"  {what} kept (of {n:,})",
            _frac(tot[f"{what}_in_summary"], n),
            f"{_frac(tot[f'{what}_in_state'], n)} / {_frac(tot[f'{what}_in_checkpoint'], n)}",
        )
    side.add_row(
        "  tokens",
        f"{tot['summary_tokens']:,}",
        f"{tot['state_tokens']:,} / {tot['checkpoint_tokens']:,}",
    )
    side.add_row(
        f"probes ({tot['probes']}): in real context | recall@{k}",
        _frac(tot["probe_in_context"], tot["probes"]),
        _frac(tot["probe_in_recall"], tot["probes"]),
    )
    side.add_row(
        "  verbatim only (recall)", "", _frac(tot["probe_in_recall_verbatim"], tot["probes"])
    )
    side.add_row(
        f"  said before a compaction, asked after ({tot['probes_across_compaction']})",
        _frac(tot["across_in_context"], tot["probes_across_compaction"]),
        _frac(tot["across_in_recall"], tot["probes_across_compaction"]),
    )
    n = tot["probes_across_compaction"]
    side.add_row("    in the gardener's state block", "", _frac(tot["across_in_state"], n))
    side.add_row(
        f"    in the state block or recall@{k}", "", _frac(tot["across_in_state_or_recall"], n)
    )
    side.add_row(
        "    in the summary had it kept the state block (PreCompact)",
        "",
        _frac(tot["across_in_summary_or_state"], n),
    )
    console.print(side)

    kinds = Table(title="probes by kind (all sessions)", title_justify="left")
    for col in ("kind", "n", "in real context", "in state block", f"recall@{k}", "state|recall"):
        kinds.add_column(col, justify="left" if col == "kind" else "right")
    for kind, row in tot["probe_kinds"].items():
        kinds.add_row(
            kind,
            str(row["n"]),
            *[_frac(row[key], row["n"]) for key in ("context", "state", "recall", "either")],
        )
    console.print(kinds)

    tools: dict[str, list[int]] = {}
    for sess in sessions:
        for name, (n, b, a) in sess.by_tool.items():
            row = tools.setdefault(name, [0, 0, 0])
            row[0], row[1], row[2] = row[0] + n, row[1] + b, row[2] + a
    by = Table(title="tool output tokens by tool (all sessions)", title_justify="left")
    for col in ("tool", "results", "before", "after gardener"):
        by.add_column(col, justify="left" if col == "tool" else "right")
    for name, (n, b, a) in sorted(tools.items(), key=lambda kv: -kv[1][1])[:12]:
        by.add_row(name, f"{n:,}", f"{b:,}", f"{a:,} ({a / b:.2f}×)" if b else f"{a:,}")
    console.print(by)


def print_stale_table(sessions: list[SessionFigures], console: Any) -> None:
    """What each real compaction summarized: its context, the tool results in it and the stale
    ones by reason (``stale_tool_output``). Tool tokens are gpt-4o's and the context Claude's,
    so the last column is approximate."""
    from rich.table import Table

    table = Table(
        title="Tool results in what each real compaction summarized, and the stale ones: a later"
        " call before it changed the file, read it again, or ran the same again; gpt-4o tokens"
        " (results)",
        title_justify="left",
    )
    for col in (
        "session / compaction",
        "context before",
        "tool results",
        "tool tokens",
        "file changed since",
        "read again",
        "run again",
        "stale tokens",
        "of tool tokens",
        "of context (≈)",
    ):
        table.add_column(col, justify="left" if col.startswith("session") else "right")

    def cells(x: dict[str, int], pre: int | None) -> list[str]:
        return [
            f"{x['results']:,}",
            f"{x['tokens']:,}",
            *[f"{x[f'{kind}_tokens']:,} ({x[kind]})" for kind in STALE_KINDS],
            f"{x['stale_tokens']:,}",
            f"{100 * x['stale_tokens'] / x['tokens']:.0f}%" if x["tokens"] else "–",
            f"{100 * x['stale_tokens'] / pre:.0f}%" if pre else "–",
        ]

    for s in sessions:
        for n, c in enumerate(s.compactions, start=1):
            if c.no_summary or not c.stale:
                continue
            pre = f"{'~' if c.pre_estimated else ''}{c.pre_tokens or 0:,}"
            name = f"{s.name.replace('cc_session__', '')[:40]} #{n}"
            table.add_row(name, pre, *cells(c.stale, c.pre_tokens))
    tot = totals(sessions)
    if tot["compactions"]:
        both = {key: tot[f"compacted_{key}"] for key in STALE_KEYS}
        pre = tot["compacted_context"]
        table.add_row(f"all {tot['compactions']}", f"{pre:,}", *cells(both, pre))
    console.print(table)
    micro = sum(s.microcompactions for s in sessions)
    if micro:
        cleared = sum(s.microcompacted for s in sessions)
        console.print(
            f"microcompactions recorded: {micro}, clearing {cleared} tool results in place"
            " (Claude Code's own; not counted above)"
        )


def _calls(n: float, projected: bool) -> str:
    if n == float("inf"):
        return "never"
    return f"{'~' if projected else ''}{n:,.0f}"


def print_compaction_table(sessions: list[SessionFigures], file: Any = None) -> None:
    """Calls until Claude Code's auto-compaction threshold, with and without the gardener, and
    the facts of tool outputs the model still sees."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=200)
    table = Table(
        title=f"API calls until the auto-compaction threshold ({AUTO_COMPACT:,} tokens; ~:"
        " projected at the session's mean growth) and tool-output facts the model sees",
        title_justify="left",
    )
    for col in (
        "session",
        "calls",
        "first call ctx",
        "grown (no plugin)",
        "grown (plugin)",
        "calls to threshold: no plugin",
        "plugin",
        "×",
        "facts kept",
    ):
        table.add_column(col, justify="left" if col == "session" else "right")
    for s in sessions:
        x = s.to_compaction
        if not x:
            continue
        ratio = x["calls_with"] / x["calls_without"] if 0 < x["calls_without"] < 1e18 else 0
        table.add_row(
            s.name.replace("cc_session__", "")[:48],
            f"{s.calls:,}",
            f"{x['base']:,}",
            f"{x['grown_without']:,}",
            f"{x['grown_with']:,}",
            _calls(x["calls_without"], x["projected_without"]),
            _calls(x["calls_with"], x["projected_with"]),
            f"{ratio:.2f}" if ratio and ratio < 1e9 else "–",
            _frac(s.facts_kept, s.facts_found),
        )
    console.print(table)
    tot = totals(sessions)
    grown = tot["grown_without"] / tot["grown_with"] if tot["grown_with"] > 0 else float("inf")
    median = tot["calls_ratio_median"]
    line = f"all sessions: context grown {tot['grown_without']:,} -> {tot['grown_with']:,} tokens"
    line += f" ({grown:.2f}× the calls at the same growth rate)"
    if median:
        line += f"; calls to the threshold, median ratio {median:.2f}×"
    print(line, file=file)
    kept = _frac(tot["output_facts_kept"], tot["output_facts_found"])
    print(f"tool-output facts the model still sees: {kept}", file=file)
    for s in sessions:
        for line in s.facts_lost:
            print(f"  lost in {s.name.replace('cc_session__', '')[:40]}: {line}", file=file)
    kept = _frac(tot["next_kept"], tot["next_used"])
    replaced = _frac(tot["next_kept_replaced"], tot["next_used_replaced"])
    print(
        f"ids/paths the next tool call used from a result, that the model saw: {kept};"
        f" from results the hooks replaced: {replaced}",
        file=file,
    )
    for s in sessions:
        for line in s.next_lost:
            print(f"  missing in {s.name.replace('cc_session__', '')[:40]}: {line}", file=file)


def print_missing(sessions: list[SessionFigures], file: Any = None) -> None:
    for s in sessions:
        for n, c in enumerate(s.compactions, start=1):
            if c.missing and not c.no_summary:
                print(f"missing from the state block: {s.name} #{n}", file=file)
                for line in c.missing:
                    print(f"  {line}", file=file)


def transcript_paths(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        out += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench claude-code", description=__doc__.split("\n")[0]
    )
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help=f"transcripts or folders (default: {DEFAULT_DIR})")
    p.add_argument("-k", type=int, default=DEFAULT_K, help="recall@k (default 5)")
    p.add_argument(
        "--vectors",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="semantic recall with local embeddings (default: off, full-text recall)",
    )
    p.add_argument(
        "--via",
        choices=("auto", "hooks", "pipeline"),
        default="auto",
        help="the Claude Code hooks (claude_hooks.handle; auto: when installed) or the pipeline",
    )
    p.add_argument("--json", metavar="OUT", help="write every figure as JSON")
    p.add_argument(
        "--show-missing",
        action="store_true",
        help="per compaction, each fact the state block lacks and why (budget, resolved, not"
        " extracted)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument(
        "--summary-tokens",
        type=int,
        help="the hooks' summary budget (GARDENER_HOOK_SUMMARY_TOKENS; default 2,000)",
    )
    p.add_argument(
        "--read-outline",
        action="store_true",
        help="Read results of source files as their outline (GARDENER_HOOK_READ_OUTLINE=1)",
    )


def run(args: argparse.Namespace) -> int:
    paths = transcript_paths(args.paths or [str(DEFAULT_DIR)])
    paths = [p for p in paths if p.is_file()]
    if not paths:
        print("bench claude-code: no transcripts found", file=sys.stderr)
        return 2
    start = time.perf_counter()
    summary_tokens = getattr(args, "summary_tokens", None)
    settings = {}  # the hooks read their settings from the environment
    if summary_tokens:
        settings["GARDENER_HOOK_SUMMARY_TOKENS"] = str(summary_tokens)
    if getattr(args, "read_outline", False):
        settings["GARDENER_HOOK_READ_OUTLINE"] = "1"
    saved_env = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        sessions = _measure_all(paths, args)
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not sessions:
        return 1
    print_report(sessions, args.k)
    print_compaction_table(sessions)
    if args.show_missing:
        print_missing(sessions)
    print(f"whole bench: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.json:
        report = {"sessions": [s.to_json() for s in sessions], "totals": totals(sessions)}
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _measure_all(paths: list[Path], args: argparse.Namespace) -> list[SessionFigures]:
    from .replay.format import ReplayFormatError

    sessions = []
    for path in paths:
        if not args.quiet:
            print(f"  replaying {path.name} …", file=sys.stderr, flush=True)
        try:
            sessions.append(
                measure(
                    path,
                    vectors=args.vectors,
                    k=args.k,
                    via=args.via,
                    show_missing=args.show_missing,
                )
            )
        except (ReplayFormatError, OSError) as err:
            print(f"bench claude-code: {path.name}: {err}", file=sys.stderr)
    return sessions


if __name__ == "__main__":
    sys.exit(main())
