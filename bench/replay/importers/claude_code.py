"""A Claude Code session transcript (``~/.claude/projects/*/SESSION.jsonl``) into one replay.

The transcript is one JSON record per line, in the order things happened. A typed prompt becomes
a ``user`` event, each tool call with its result a ``run`` event (command: the shell command for
Bash/PowerShell, else ``Tool argument``; output: the result text the model saw; ``exit_code`` 1
for an error result), assistant text an ``assistant`` event. Meta, subagent (``isSidechain``)
and bookkeeping records are left out; a call's prompt size is counted once per message id, as
every content block repeats its ``usage``. Compactions cannot be replay events, so the replay's
``notes`` say where they were, and ``parse`` keeps everything for ``bench/claude_code.py``.
Probes are those of Aider histories (``aider_history.make_probes``) plus the file an
``Edit``/``Write`` call changed for a prompt and the critical facts of a command's output.

Record formats across Claude Code versions: docs/decisions/054-claude-code-replay.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..format import Replay, ReplayFormatError
from .aider_history import MAX_PROBES as AIDER_MAX_PROBES
from .aider_history import PROBE_DISTANCE, _with_probes, make_probes

MODEL = "gpt-4o"  # one tokenizer for every replay (Claude's is not public); the real one is noted
WINDOW = 200000  # Claude's context window
COMMAND_TOOLS = {"Bash", "PowerShell", "BashOutput"}
EDIT_TOOLS = {"Edit", "MultiEdit", "Write", "NotebookEdit"}
CONTINUED = "This session is being continued from a previous conversation"
COMMAND_TAG = re.compile(r"<command-(name|args)>(.*?)</command-\1>", re.DOTALL)
SKIPPED_PROMPT = ("<local-command-", "<command-message>", "[Request interrupted")
MAX_COMMAND = 200
MAX_PROBES = 20
PER_COMPACTION = 6
FACT_KINDS = ("failing_tests", "exceptions", "error_codes", "path_lines")


@dataclass
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]
    output: str = ""
    is_error: bool = False
    answered: bool = False
    response: Any = None  # the record's ``toolUseResult``: what a PostToolUse hook is given

    @property
    def command(self) -> str:
        return tool_command(self.name, self.input)

    @property
    def path(self) -> str | None:
        value = self.input.get("file_path") or self.input.get("notebook_path")
        return value if isinstance(value, str) and value else None


@dataclass
class Compaction:
    """One real compaction: where it happened (index into ``Transcript.items``), what Claude
    Code said about it, and the summary the model continued from."""

    at: int
    summary: str = ""
    trigger: str = ""
    pre_tokens: int | None = None
    post_tokens: int | None = None
    calls_before: int = 0  # API calls (message ids with usage) before it
    line: int = 0  # the file's line where it starts: lines before it are the prefix


@dataclass
class Transcript:
    """The main conversation in order. ``items`` are ``("user", text)``, ``("assistant",
    text)``, ``("tool", ToolCall)`` and ``("compaction", Compaction)``; ``usage`` is the real
    context size of every API call, in order."""

    name: str
    cwd: str = ""
    models: list[str] = field(default_factory=list)
    version: str = ""
    items: list[tuple[str, Any]] = field(default_factory=list)
    usage: list[int] = field(default_factory=list)
    microcompactions: int = 0
    # tool_use id -> index into ``items`` where a microcompaction cleared its result
    cleared: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0
    titles: list[str] = field(default_factory=list)

    @property
    def compactions(self) -> list[Compaction]:
        return [value for kind, value in self.items if kind == "compaction"]

    @property
    def tools(self) -> list[ToolCall]:
        return [value for kind, value in self.items if kind == "tool"]


def tool_command(name: str, args: dict[str, Any]) -> str:
    """One line naming a tool call the way a person would: the shell command itself for shell
    tools, else the tool and its main argument."""
    if not isinstance(args, dict):
        args = {}
    if name in COMMAND_TOOLS and isinstance(args.get("command"), str):
        text = args["command"]
    else:
        main = ""
        for key in ("file_path", "notebook_path", "pattern", "path", "url", "query", "description"):
            if isinstance(args.get(key), str) and args[key]:
                main = args[key]
                break
        if not main and args:
            main = json.dumps(args, ensure_ascii=False, sort_keys=True)
        text = f"{name} {main}".strip()
    text = " ".join(text.split())
    return text if len(text) <= MAX_COMMAND else text[: MAX_COMMAND - 1] + "…"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def _prompt(text: str) -> str | None:
    """What the user typed, or None for Claude Code's own wrappers. A slash command is kept
    as typed (``/model opus``)."""
    text = text.strip()
    if not text or text.startswith(SKIPPED_PROMPT):
        return None
    if text.startswith("<command-"):
        found = dict(COMMAND_TAG.findall(text))
        if not found.get("name"):
            return None
        return f"{found['name'].strip()} {found.get('args', '').strip()}".strip()
    return text


def _usage_tokens(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    total = 0
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total += int(value)
    return total or None


def parse(path: str | Path) -> Transcript:
    """The main conversation of one transcript file. Lines that are not JSON objects are
    counted in ``bad_lines`` and skipped; a file with no conversation at all raises
    ``ReplayFormatError``."""
    path = Path(path)
    name = path.stem
    t = Transcript(name=name)
    calls: dict[str, ToolCall] = {}
    usage_of: dict[str, int] = {}  # message id -> index in t.usage
    pending_boundary: Compaction | None = None
    with path.open(encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                t.bad_lines += 1
                continue
            if not isinstance(rec, dict):
                t.bad_lines += 1
                continue
            kind = rec.get("type")
            if kind == "summary" and isinstance(rec.get("summary"), str):
                t.titles.append(rec["summary"])
                continue
            if rec.get("isSidechain"):
                continue
            if kind == "system":
                sub = rec.get("subtype")
                if sub == "compact_boundary":
                    meta = rec.get("compactMetadata") or {}
                    pending_boundary = Compaction(
                        at=len(t.items),
                        trigger=str(meta.get("trigger") or ""),
                        pre_tokens=meta.get("preTokens"),
                        post_tokens=meta.get("postTokens"),
                        calls_before=len(t.usage),
                        line=number,
                    )
                    t.items.append(("compaction", pending_boundary))
                elif sub == "microcompact_boundary":
                    t.microcompactions += 1
                    meta = rec.get("microcompactMetadata")
                    ids = meta.get("compactedToolIds") if isinstance(meta, dict) else None
                    for tool_id in ids if isinstance(ids, list) else []:
                        t.cleared.setdefault(str(tool_id), len(t.items))
                continue
            message = rec.get("message")
            if not isinstance(message, dict):
                continue
            t.cwd = t.cwd or str(rec.get("cwd") or "")
            t.version = t.version or str(rec.get("version") or "")
            content = message.get("content")
            if kind == "user":
                text = _text_of(content)
                if rec.get("isCompactSummary") or text.lstrip().startswith(CONTINUED):
                    if pending_boundary is not None and not pending_boundary.summary:
                        pending_boundary.summary = text
                    else:  # Claude Code 1.0.x: the summary record alone
                        t.items.append(
                            (
                                "compaction",
                                Compaction(
                                    at=len(t.items),
                                    summary=text,
                                    calls_before=len(t.usage),
                                    line=number,
                                ),
                            )
                        )
                    pending_boundary = None
                    continue
                if isinstance(content, list):
                    results = [
                        b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                    ]
                    for block in results:
                        call = calls.get(str(block.get("tool_use_id")))
                        if call is None or call.answered:
                            continue
                        call.output = _text_of(block.get("content"))
                        call.is_error = bool(block.get("is_error"))
                        call.answered = True
                        if len(results) == 1:
                            call.response = rec.get("toolUseResult")
                if rec.get("isMeta"):
                    continue
                typed = _prompt(text)
                if typed:
                    t.items.append(("user", typed))
                continue
            if kind != "assistant":
                continue
            model = message.get("model")
            if isinstance(model, str) and model not in t.models and not model.startswith("<"):
                t.models.append(model)
            tokens = _usage_tokens(message.get("usage"))
            msg_id = str(message.get("id") or rec.get("uuid") or "")
            if tokens is not None and msg_id:
                if msg_id in usage_of:
                    t.usage[usage_of[msg_id]] = tokens
                else:
                    usage_of[msg_id] = len(t.usage)
                    t.usage.append(tokens)
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    text = str(block["text"])
                    if t.items and t.items[-1][0] == "assistant":
                        t.items[-1] = ("assistant", t.items[-1][1] + "\n\n" + text)
                    else:
                        t.items.append(("assistant", text))
                elif block.get("type") == "tool_use" and block.get("id"):
                    call = ToolCall(
                        str(block["id"]), str(block.get("name") or "tool"), block.get("input") or {}
                    )
                    if not isinstance(call.input, dict):
                        call.input = {}
                    calls[call.id] = call
                    t.items.append(("tool", call))
    if not any(kind in ("user", "assistant", "tool") for kind, _ in t.items):
        raise ReplayFormatError(str(path), ["no Claude Code conversation records found"])
    return t


def events_of(t: Transcript) -> list[dict[str, Any]]:
    """Replay events (no probes), and for each event the index of its transcript item."""
    events: list[dict[str, Any]] = []
    for kind, value in t.items:
        if kind == "user":
            events.append({"type": "user", "content": value})
        elif kind == "assistant":
            if events:  # a reply before any turn has no request to answer
                events.append({"type": "assistant", "content": value})
        elif kind == "tool":
            event = {"type": "run", "command": value.command, "output": value.output}
            if value.is_error:
                event["exit_code"] = 1
            events.append(event)
    return events


def turn_of_items(t: Transcript) -> list[int]:
    """The replay turn each transcript item belongs to (turns counted as the runner counts
    them: every prompt and every tool call is one)."""
    out, turn = [], 0
    for kind, _ in t.items:
        if kind in ("user", "tool"):
            turn += 1
        out.append(turn)
    return out


def _candidates(t: Transcript, turn_items: list[int]) -> list[tuple[int, str, str, str]]:
    """(turn, question, answer, kind) of every fact a probe could ask about: the file an edit
    changed for a prompt, the error lines and critical facts of command outputs."""
    from aider_gardener import critical

    from .aider_history import ERROR_LINE

    out: list[tuple[int, str, str, str]] = []
    prompt = ""
    for (kind, value), turn in zip(t.items, turn_items):
        if kind == "user":
            prompt = " ".join(value.split())[:80]
        if kind != "tool" or not value.output:
            continue
        if value.name in EDIT_TOOLS and value.path and not value.is_error and prompt:
            rel = relative(value.path, t.cwd)
            out.append((turn, f"Which file was edited for: {prompt}", rel, "edit"))
        if value.name in COMMAND_TOOLS or value.is_error:
            cmd = value.command[:60]
            for m in list(ERROR_LINE.finditer(value.output))[:3]:
                out.append((turn, f"What error did `{cmd}` report?", m.group(0), "error"))
            found = critical.extract(value.output)
            for fact_kind in FACT_KINDS:
                what = fact_kind.replace("_", " ")[:-1]
                for fact in sorted(found[fact_kind])[:3]:
                    out.append((turn, f"Which {what} did `{cmd}` report?", fact, "fact"))
    return out


def claude_probes(t: Transcript, events: list[dict], turns: int) -> list[tuple[int, dict]]:
    """``aider_history.make_probes`` plus the files edited for a prompt and the critical facts
    of command outputs (at most ``MAX_PROBES``, asked ``PROBE_DISTANCE`` turns later or at the
    end), plus up to ``PER_COMPACTION`` *compaction probes* per real compaction: facts said
    since the previous compaction (the latest mention is the source), asked right after it
    (kind ``compaction:KIND``): everything before it is then gone from Claude Code's context
    but its summary, which is where the summary and the gardener's store differ."""
    probes = make_probes(events, turns)[:AIDER_MAX_PROBES]
    seen = {a for _, p in probes for a in p["answers"]}
    by_turn: dict[int, str] = {}
    turn_items = turn_of_items(t)
    for (kind, value), turn in zip(t.items, turn_items):
        if kind == "tool":
            text = f"{value.command}\n{value.output}"
        elif kind in ("user", "assistant"):
            text = value
        else:
            continue
        by_turn[turn] = by_turn.get(turn, "") + "\n" + text
    early = max(1, turns // 2)
    candidates = _candidates(t, turn_items)

    def said(answer: str, lo: int, hi: int) -> bool:
        """In some turn in ``(lo, hi]`` (as a substring: a relative path said again inside an
        absolute one counts)."""
        return any(answer in x for k, x in by_turn.items() if lo < k <= hi)

    def usable(turn: int, question: str, answer: str, taken: set[str]) -> bool:
        return (
            len(answer) >= 6
            and answer not in taken
            and answer not in question
            and answer in by_turn.get(turn, "")
        )

    extra: list[tuple[int, dict]] = []
    for turn, question, answer, kind in candidates:
        answer = answer.strip()
        at = min(turns, turn + PROBE_DISTANCE)
        if turn > early or at <= turn or not usable(turn, question, answer, seen):
            continue
        if said(answer, turn, turns):
            continue  # said again later: not an old fact when asked
        seen.add(answer)
        probe = {"type": "probe", "question": question, "answers": [answer]}
        extra.append((at, dict(probe, source_turn=turn, kind=kind)))
    out = probes + extra
    out.sort(key=lambda p: (p[1]["source_turn"], p[0]))
    out = out[:MAX_PROBES]
    previous = 0
    asked: set[str] = set()  # answers of compaction probes (a regular probe may ask one later)
    for c in t.compactions:
        at = turn_items[c.at] if c.at < len(turn_items) else turns
        chosen: dict[str, list[tuple[int, dict]]] = {}
        latest: dict[str, tuple[int, str, str]] = {}  # answer -> its latest mention before
        for turn, question, answer, kind in candidates:
            answer = answer.strip()
            if previous < turn <= at and usable(turn, question, answer, asked):
                latest[answer] = (turn, question, kind)
        for answer, (turn, question, kind) in sorted(latest.items(), key=lambda x: x[1][0]):
            probe = {"type": "probe", "question": question, "answers": [answer]}
            chosen.setdefault(kind, []).append(
                (at, dict(probe, source_turn=turn, kind=f"compaction:{kind}"))
            )
        picked: list[tuple[int, dict]] = []
        while len(picked) < PER_COMPACTION and any(chosen.values()):
            for kind in sorted(chosen):  # one of each kind in turn, the latest first
                if chosen[kind] and len(picked) < PER_COMPACTION:
                    picked.append(chosen[kind].pop())
        out += picked
        asked.update(p["answers"][0] for _, p in picked)
        previous = at
    out.sort(key=lambda p: (p[0], p[1]["source_turn"]))
    return out


def relative(path: str, cwd: str) -> str:
    """``path`` relative to the session's folder when it is inside it, with the separators
    it was written with (a Windows session's paths keep their backslashes)."""
    p = path.replace("\\", "/")
    base = cwd.replace("\\", "/").rstrip("/")
    if base and p.lower().startswith(base.lower() + "/"):
        p = p[len(base) + 1 :]
        return p.replace("/", "\\") if "\\" in path else p
    return path


def to_replay(t: Transcript) -> Replay:
    events = events_of(t)
    turns = sum(1 for e in events if e["type"] in ("user", "run"))
    comp = t.compactions
    where = ", ".join(
        f"turn {turn_of_items(t)[c.at] if c.at < len(t.items) else turns}"
        + (f" ({c.pre_tokens} tokens)" if c.pre_tokens else "")
        for c in comp
    )
    notes = (
        f"recorded with {', '.join(t.models) or 'an unknown model'} in Claude Code "
        f"{t.version or '?'}; {len(comp)} compactions" + (f" at {where}" if where else "")
    )
    meta = {
        "name": t.name,
        "source": f"{t.name} (Claude Code transcript)",
        "model": MODEL,
        "max_input_tokens": WINDOW,
        "notes": notes,
    }
    events = _with_probes(events, claude_probes(t, events, turns))
    return Replay(meta=meta, events=events)


def import_path(src: Path) -> list[Replay]:
    """One replay per transcript: ``src`` is a ``.jsonl`` file or a folder of them."""
    src = Path(src)
    files = sorted(src.glob("*.jsonl")) if src.is_dir() else [src]
    return [to_replay(parse(f)) for f in files]
