"""``.aider.chat.history.md`` (+ optional ``.aider.input.history``) into one replay per session.

Aider's own ``split_chat_history_markdown`` is not used: it falls into this format's traps, which
the parser below handles from how ``aider/io.py`` writes the file (only the first line of a
multi-line tool message starts with ``> ``; replies have ``####`` headings too; a reply can stop
inside a code fence; newer Aider logs command output without the output; the architect's reply
is logged again as user input). Aider's own lines after a reply are the ground truth of what it
did: each ``assistant`` event keeps its ``Applied edit to`` paths (``applied``) and ``Commit``
lines (``commits``, ``kind`` dirty, lint or failed where so) for ``bench/facts.py``.

Every session is replayed with ``gpt-4o`` (the original model is kept in ``notes``), so every
replay is measured with one tokenizer and window. Probes are facts said once, early (error lines
of command output, commit hashes, edited files, decisions), asked 40 turns later or at the end.

Each trap and how it is handled: docs/decisions/055-replay-importers.md.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..format import Replay

MODEL = "gpt-4o"
WINDOW = 128000
SESSION_START = re.compile(r"^# aider chat started at (.+?)\s*$")
MODEL_LINE = re.compile(r"^(?:Main model|Model): (\S+) with (?:\S+ )?(\S+) edit format")
RUN_COMMAND = re.compile(r"^(?:/(run|test)\s+|!)(.+)$", re.DOTALL)
SHELL_RUNNING = re.compile(r"^Running (.+)$")
ADDED_OUTPUT = re.compile(r"^Added (\d+) lines? of output to the chat\.?$")
COMMIT = re.compile(r"^Commit ([0-9a-f]{7,40}) (.+)$")
APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
DIRTY_COMMIT = re.compile(r"^Committing .+ before applying edits\.?$")
EDIT_FAILURE_FIELDS = ("failed_blocks", "partly_applied")
PARTLY_APPLIED = re.compile(r"^# The other \d+ SEARCH/REPLACE blocks? were applied successfully")
NO_MATCH = re.compile(
    r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in (.+?)\s*$"
)
FAILED_COMMIT_CMD = re.compile(r"^cmdline: git commit -m (.+?)(?: --no-verify)?(?: -- .*)?$")
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b")
EDITED_FILE = re.compile(r"^([\w./@-]+\.\w+)\n```[\w+-]*\n<{5,9} SEARCH", re.MULTILINE)
ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:[\w.]*(?:Error|Exception)\b[:(].{8,160}|error(?:\[\w+\])?: .{8,160}"
    r"|FAILED \S+.*)$",
    re.MULTILINE,
)
DECISION = re.compile(
    r"(?:[^.!?\n]*\b(?:decided|decision|we will|we'll use|let's use|I recommend|chosen)\b"
    r"[^.!?\n]*[.!?])",
    re.IGNORECASE,
)
CHROME = re.compile(
    r"^(?:Tokens: |Add .*tokens of command output|Add command output|Run shell command|"
    r"Running |Added \d+ lines? of output|Applied edit to |Commit [0-9a-f]{7}|"
    r"You can use /undo|Cost: |Aider v|Git repo:|Repo-map:|Weak model:|Main model:|Model:|"
    r"Use /help|Warning: |Newer aider version|Added .* to the chat|Dropping |Removed .* from)"
)
# Lines Aider writes right after a reply; they end it even if it stopped inside a code fence.
REPLY_END = re.compile(
    r"^(?:Tokens: [\d.,]+k? sent|Applied edit to |Commit [0-9a-f]{7}|Removed: [0-9a-f]{7}|"
    r"Did not apply edit|Only \d+ reflections|Model \S+ has hit a token limit|"
    r"The LLM did not conform|\^C )"
)
# Commands whose arguments end with their line: a line after one is a new input.
LINE_COMMANDS = {
    "add",
    "drop",
    "read-only",
    "clear",
    "reset",
    "undo",
    "commit",
    "diff",
    "tokens",
    "ls",
    "map",
    "map-refresh",
    "lint",
    "model",
    "chat-mode",
    "git",
    "copy",
    "paste",
    "settings",
    "exit",
    "quit",
}
EDIT_FORMATS = {"diff", "whole", "udiff", "diff-fenced", "ask", "architect", "editor-diff"}
PROBE_DISTANCE = 40
EARLY_SHARE = 0.5
MAX_PROBES = 12


@dataclass
class Message:
    role: str  # user, assistant, tool
    text: str


@dataclass
class Session:
    started: str
    messages: list[Message] = field(default_factory=list)


def _strip_break(line: str) -> str:
    return line[:-2] if line.endswith("  ") else line


def parse_sessions(text: str, typed: list[str] | None = None) -> list[Session]:
    """The sessions of a chat history file, each a list of user/assistant/tool messages."""
    sessions: list[Session] = [Session("")]
    typed_left = Counter(t.strip() for t in typed or [])
    lines = text.splitlines()
    i = 0
    current: Message | None = None
    in_fence = False

    def push(msg: Message) -> Message:
        sessions[-1].messages.append(msg)
        return msg

    while i < len(lines):
        line = lines[i]
        start = SESSION_START.match(line)
        if start:
            sessions.append(Session(start.group(1)))
            current, in_fence = None, False
            i += 1
            continue
        in_reply = current is not None and current.role == "assistant"
        if in_fence and (
            (line.startswith("> ") and REPLY_END.match(line[2:]))
            or (line.startswith("#### /") and typed_left[_strip_break(line[5:]).strip()] > 0)
        ):
            in_fence = False  # a reply cut off inside a code fence: Aider's own lines end it
        if line.startswith("> ") or line == ">":
            if in_reply and in_fence:
                current.text += line + "\n"
                i += 1
                continue
            # a tool message: this line, plus continuation lines up to the one Aider closed
            body = [line[2:]]
            closed = line.endswith("  ") or line == ">"
            j = i + 1
            while not closed and j < len(lines):
                nxt = lines[j]
                if nxt.startswith(("> ", "#### ")) or SESSION_START.match(nxt):
                    break
                body.append(nxt)
                closed = nxt.endswith("  ") and bool(nxt.strip())  # "    " is an empty line
                j += 1
            if not closed and len(body) > 1 and not body[1] and not line[2:3].isspace():
                body, j = body[:1], i + 1  # an old Aider one-liner (pytest's "> " code lines
                # are indented and stay in the output they belong to)
            text_ = "\n".join(_strip_break(b) for b in body).rstrip()
            if current is not None and current.role == "tool":
                current.text += "\n" + text_
            else:
                current = push(Message("tool", text_))
            in_fence = False
            i = j
            continue
        if line.startswith("#### ") or line == "####":
            content = _strip_break(line[5:])
            if content == "<blank>":
                content = ""
            is_user = not (in_reply and in_fence)
            if is_user and typed is not None and in_reply and not content.startswith(("/", "!")):
                # a heading in a reply, unless the user typed that line (commands are never
                # headings, so they count even when the input history missed them)
                is_user = typed_left[content.strip()] > 0
            if is_user:
                if typed_left[content.strip()] > 0:
                    typed_left[content.strip()] -= 1
                if current is not None and current.role == "user":
                    current.text += "\n" + content
                else:
                    current = push(Message("user", content))
                in_fence = False
                i += 1
                continue
        # reply text
        if current is None or current.role != "assistant":
            if not line.strip():
                i += 1
                continue
            current = push(Message("assistant", ""))
            in_fence = False
        current.text += line + "\n"
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        i += 1
    for s in sessions:
        for m in s.messages:
            m.text = m.text.strip("\n")
    return [s for s in sessions if s.messages]


def parse_input_history(text: str) -> list[str]:
    """Lines the user typed, in order (``+`` lines; multi-line inputs split into lines)."""
    return [line[1:] for line in text.splitlines() if line.startswith("+")]


def _header(session: Session) -> tuple[str | None, str | None]:
    for m in session.messages:
        if m.role != "tool":
            continue
        for line in m.text.splitlines():
            found = MODEL_LINE.match(line.strip())
            if found:
                return found.group(1), found.group(2)
    return None, None


def _tool_output(texts: list[str]) -> tuple[str, int | None]:
    """The recorded output among the tool messages following a command (Aider's chrome lines
    left out), and the line count Aider said it added (None if it did not say)."""
    added = None
    bodies = []
    for text in texts:
        kept = []
        for line in text.splitlines():
            m = ADDED_OUTPUT.match(line.strip())
            if m:
                added = int(m.group(1))
                continue
            if CHROME.match(line.strip()):
                continue
            kept.append(line)
        body = "\n".join(kept).strip("\n")
        if body.strip():
            bodies.append(body)
    return (max(bodies, key=len) if bodies else ""), added


def _gap(added: int | None) -> str:
    said = f"Added {added} lines of output to the chat" if added is not None else "no output"
    return f"[output not recorded in the chat history; Aider logged: {said}]"


def split_inputs(text: str) -> list[str]:
    """One user message of the history as the inputs typed: Aider logs consecutive inputs as
    one run of ``####`` lines. Several commands are one input each, and so is a command that
    takes no more than its own line (``/clear``, ``/add …``) before a prompt."""
    lines = text.split("\n")
    if len(lines) > 1 and all(ln.startswith("/") for ln in lines if ln.strip()):
        return [ln for ln in lines if ln.strip()]  # several commands typed at once
    out: list[str] = []
    rest: list[str] = []
    for line in lines:
        word = line[1:].split(None, 1)[0].lower() if line.startswith("/") and line[1:] else ""
        if word in LINE_COMMANDS and not rest:
            out.append(line)
        else:
            rest.append(line)
    if rest:
        out.append("\n".join(rest))
    return out


def ground_truth(text: str) -> list[tuple[str, ...]]:
    """Aider's own record of what it did, in one tool message, in order: ``("applied", path)``
    and ``("commit", hash, message, how)``; ``how`` is ``dirty`` for the commit of the user's
    own changes that Aider makes before applying an edit (``Committing PATH before applying
    edits.``) and ``failed`` for ``Unable to commit`` (no hash; the message from git's command
    line when Aider printed it)."""
    items: list[tuple[str, ...]] = []
    prev = ""
    dirty_pending = False
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        found = APPLIED.match(line)
        if found:
            items.append(("applied", found.group(1)))
        else:
            found = COMMIT.match(line)
            if found:
                # Aider says ``Committing PATH before applying edits.``, may ask about other
                # files ("Create new file?"), and then makes the dirty commit
                dirty = "dirty" if dirty_pending else ""
                dirty_pending = False
                items.append(("commit", found.group(1), found.group(2).strip(), dirty))
            elif DIRTY_COMMIT.match(line):
                dirty_pending = True
            elif line.startswith("Unable to commit"):
                items.append(("commit", "", "", "failed"))
            elif prev.startswith("Unable to commit") and items:
                found = FAILED_COMMIT_CMD.match(line)
                if found:
                    items[-1] = ("commit", "", found.group(1).strip(), "failed")
        prev = line
    return items


def failed_blocks(text: str) -> list[dict]:
    """The SEARCH blocks Aider said failed to match (``SearchReplaceNoExactMatch``), with the
    SEARCH text it quoted: the replay's files are stand-ins that may hold those lines, so the
    replay needs to know which blocks failed in the recorded session."""
    out: list[dict] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        found = NO_MATCH.match(line.strip())
        if not found or i + 1 >= len(lines) or not re.match(r"^<{5,9} SEARCH", lines[i + 1]):
            continue
        search = []
        for body in lines[i + 2 :]:
            if re.match(r"^={5,9}\s*$", body):
                out.append({"path": found.group(1), "search": "\n".join(search) + "\n"})
                break
            search.append(body)
    return out


def _keep_truth(reply: dict, items: list[tuple[str, ...]]) -> None:
    """Add a tool message's ground truth to the reply event it followed. A commit (or failed
    commit) that follows the reply's edit commit with no edit applied in between is the
    linter's (``kind: lint``); the edit commit that failed is ``kind: failed``."""
    for item in items:
        if item[0] == "applied":
            reply.setdefault("applied", []).append(item[1])
            reply.pop("_committed", None)
            continue
        commit = {"hash": item[1], "message": item[2]}
        if item[3] == "dirty":
            commit["kind"] = "dirty"
        elif reply.get("_committed"):
            commit["kind"] = "lint"
        else:
            reply["_committed"] = True
            if item[3] == "failed":
                commit["kind"] = "failed"
        reply.setdefault("commits", []).append(commit)


def session_events(
    session: Session,
    split_replies: bool = False,
    unattributed: Counter | None = None,
    edit_failures: bool = False,
) -> list[dict]:
    """The events of one session. The replies of one turn (reflections, the architect's editor)
    are one ``assistant`` event unless ``split_replies``; each event keeps the ground truth of
    the replies in it. ``unattributed`` counts Applied/Commit lines that follow no reply.
    ``edit_failures`` also keeps, per reply, the SEARCH blocks Aider said failed to match
    (``failed_blocks``) and whether it said the others applied (``partly_applied``); these
    fields are outside the replay format (``EDIT_FAILURE_FIELDS``)."""
    events: list[dict] = []
    msgs = session.messages
    reply: dict | None = None  # the event the latest reply of this turn went into
    said = ""  # the latest reply's text
    i = 0
    while i < len(msgs):
        m = msgs[i]
        i += 1
        if m.role == "assistant":
            said = m.text
            if events and events[-1]["type"] in ("user", "run", "assistant"):
                if events[-1]["type"] == "assistant" and not split_replies:
                    events[-1]["content"] += "\n\n" + m.text
                else:
                    events.append({"type": "assistant", "content": m.text})
                reply = events[-1]
            else:
                reply = None
            continue
        if m.role == "tool":
            items = ground_truth(m.text)
            if reply is not None:
                _keep_truth(reply, items)
                failed = failed_blocks(m.text)
                if failed and edit_failures:
                    reply.setdefault("failed_blocks", []).extend(failed)
                if edit_failures and any(
                    PARTLY_APPLIED.match(ln.strip()) for ln in m.text.splitlines()
                ):
                    reply["partly_applied"] = True  # Aider prints no ``Applied edit`` then
            elif items and unattributed is not None:
                unattributed["no reply"] += len(items)
            # shell commands the reply suggested and Aider ran
            for line in m.text.splitlines():
                run = SHELL_RUNNING.match(line.strip())
                if run:
                    out, added = _tool_output([m.text.split(line, 1)[1]])
                    if added is not None:
                        event = {"type": "run", "command": run.group(1), "output": out}
                        if not out:
                            event.update(output=_gap(added), gap=True)
                        events.append(event)
            continue
        if reply is not None and " ".join(m.text.split()) == " ".join(said.split()):
            continue  # the architect handing its reply to the editor: not typed, not a turn
        reply = None
        texts = split_inputs(m.text)
        for text in texts:
            if not text.strip():
                continue
            cmd = RUN_COMMAND.match(text.strip())
            if cmd:
                tools = []
                while i < len(msgs) and msgs[i].role == "tool":
                    tools.append(msgs[i].text)
                    if unattributed is not None:
                        unattributed["no reply"] += len(ground_truth(msgs[i].text))
                    i += 1
                out, added = _tool_output(tools)
                via = cmd.group(1) or "run"
                replied = i < len(msgs) and msgs[i].role == "assistant"
                event = {"type": "run", "command": cmd.group(2).strip(), "output": out}
                if via == "test":
                    event["via"] = "test"
                    event["exit_code"] = 1 if replied and out else 0
                if not out:
                    event.update(output=_gap(added), gap=True)
                events.append(event)
            else:
                events.append({"type": "user", "content": text})
    for event in events:
        event.pop("_committed", None)
    return events


def _turn_texts(events: list[dict]) -> list[tuple[int, str, str, str]]:
    """(turn, kind, text, what the turn asked) of everything said, turns counted like the
    runner counts them; what was asked is the prompt or the command, to word questions with."""
    out, turn, asked = [], 0, ""
    for e in events:
        if e["type"] in ("user", "run"):
            turn += 1
            asked = e["content"] if e["type"] == "user" else f"`{e['command']}`"
            asked = " ".join(asked.split())[:80]
        if e["type"] == "run" and not e.get("gap"):
            out.append((turn, "run", e["output"], asked))
        elif e["type"] in ("user", "assistant"):
            out.append((turn, e["type"], e["content"], asked))
    return out


def _context(text: str, start: int, end: int, width: int = 60) -> str:
    """The line around a fact with the fact itself blanked out, so the question does not
    contain its answer."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    line = line.replace(text[start:end], "…")
    return " ".join(line.split())[:width]


def make_probes(events: list[dict], turns: int) -> list[tuple[int, dict]]:
    """(after turn, probe) for facts said in one turn only, in the first half of the session.
    Questions name the turn's prompt or command and never contain the answer."""
    said = _turn_texts(events)
    by_turn: dict[int, str] = {}
    for turn, _, text, _ in said:
        by_turn[turn] = by_turn.get(turn, "") + "\n" + text
    early = max(1, int(turns * EARLY_SHARE))
    probes: list[tuple[int, dict]] = []
    seen: set[str] = set()

    def add(turn: int, question: str, answer: str, kind: str) -> None:
        answer = answer.strip()
        if len(answer) < 6 or answer in seen or turn > early or answer in question:
            return
        pattern = re.compile(r"(?<![\w./-])" + re.escape(answer) + r"(?![\w/-])")
        if sum(bool(pattern.search(t)) for t in by_turn.values()) != 1:
            return  # said in more than one turn: not a fact said once
        seen.add(answer)
        at = min(turns, turn + PROBE_DISTANCE)
        if at <= turn:
            return
        probes.append(
            (
                at,
                {
                    "type": "probe",
                    "question": question,
                    "answers": [answer],
                    "source_turn": turn,
                    "kind": kind,
                },
            )
        )

    for turn, kind, text, asked in said:
        if kind == "run":
            for m in ERROR_LINE.finditer(text):
                add(turn, f"What error did {asked} report?", m.group(0), "error")
        if kind in ("run", "assistant"):
            for m in COMMIT_HASH.finditer(text):
                where = _context(text, m.start(), m.end())
                add(turn, f"Which commit hash was given in: {where}", m.group(0), "commit")
        if kind == "assistant":
            for path in EDITED_FILE.findall(text):
                add(turn, f"Which file was edited for: {asked}", path, "edit")
            for m in DECISION.finditer(text):
                sentence = m.group(0).strip()
                if 30 <= len(sentence) <= 200:
                    add(turn, f"What was decided about: {asked}", sentence, "decision")
    probes.sort(key=lambda p: (p[1]["source_turn"], p[0]))
    return probes[:MAX_PROBES]


def _with_probes(events: list[dict], probes: list[tuple[int, dict]]) -> list[dict]:
    out, turn = [], 0
    pending = sorted(probes, key=lambda p: p[0])
    for e in events:
        if e["type"] in ("user", "run"):
            while pending and pending[0][0] <= turn:
                out.append(pending.pop(0)[1])
            turn += 1
        out.append(e)
    out += [p[1] for p in pending]
    return out


def import_text(
    text: str,
    name: str,
    typed: list[str] | None = None,
    min_turns: int = 2,
    *,
    split_replies: bool = False,
    unattributed: Counter | None = None,
    edit_failures: bool = False,
) -> list[Replay]:
    """One replay per session with at least ``min_turns`` turns and a reply. ``split_replies``
    keeps every reply of a turn as an event of its own (see ``session_events``)."""
    replays = []
    for k, session in enumerate(parse_sessions(text, typed)):
        events = session_events(session, split_replies, unattributed, edit_failures)
        turns = sum(1 for e in events if e["type"] in ("user", "run"))
        replies = sum(1 for e in events if e["type"] == "assistant")
        if turns < min_turns or not replies:
            if unattributed is not None:
                unattributed["skipped"] += sum(
                    len(e.get("applied", ())) + len(e.get("commits", ())) for e in events
                )
            continue
        model, edit_format = _header(session)
        meta = {
            "name": f"{name}--{k:04d}",
            "source": f"{name} (.aider.chat.history.md), session started {session.started}",
            "model": MODEL,
            "max_input_tokens": WINDOW,
            "notes": f"recorded with {model or 'an unknown model'}",
        }
        if edit_format in EDIT_FORMATS:
            meta["edit_format"] = edit_format
        events = _with_probes(events, make_probes(events, turns))
        replays.append(Replay(meta=meta, events=events))
    return replays


def import_path(
    src: Path,
    input_history: Path | None = None,
    min_turns: int = 2,
    *,
    split_replies: bool = False,
    unattributed: Counter | None = None,
    edit_failures: bool = False,
) -> list[Replay]:
    """``src``: a chat history file. The input history is ``input_history``, or found next to it
    (``.aider.input.history``, or ``input_history/STEM.aider.input.history``)."""
    src = Path(src)
    if input_history is None:
        for candidate in (
            src.with_name(".aider.input.history"),
            src.parent / "input_history" / f"{src.stem}.aider.input.history",
        ):
            if candidate.is_file() and src.name != candidate.name:
                input_history = candidate
                break
    typed = None
    if input_history is not None:
        typed = parse_input_history(input_history.read_text(encoding="utf-8", errors="replace"))
    name = src.stem.lstrip(".").replace(".aider.chat.history", "") or "aider-history"
    text = src.read_text(encoding="utf-8", errors="replace")
    return import_text(
        text,
        name,
        typed,
        min_turns,
        split_replies=split_replies,
        unattributed=unattributed,
        edit_failures=edit_failures,
    )
