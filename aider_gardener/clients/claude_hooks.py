"""Claude Code hooks: the gardener behind Claude Code's lifecycle events, a short process each.

Claude Code runs ``gardener-hook EVENT`` with the event's JSON on stdin and reads JSON (or, for
PreCompact, plain text) from stdout. ``handle(event, payload)`` is the whole logic as a pure
function of the payload and the project's store, so the bench can replay transcripts through it;
``main`` only reads, prints and guards. PostToolUse replaces only output the model reads rather
than edits from, and only when the summary is at most half of it or it is over Claude Code's own
limit; every output is stored for recall, and so is the conversation. Prompt recall is full-text
(a hook cannot wait for the embedding model); PreCompact and SessionStart carry the session's
facts across compactions through a verified checkpoint. Hooks run after every tool call, so
events go to a warm server (below). Nothing may break Claude Code: an internal error is one line
in ``hooks.log`` and an empty answer, and files a payload names are read only where they should.

Formats relied on, decisions and measurements: docs/decisions/021-claude-code-hooks.md
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .hook_wire import ENV_NAMES, ENV_PREFIXES, MAX_STDIN, read_to_end, reply_wait

if TYPE_CHECKING:
    from ..store.db import Store


# Few imports at module level: a hook that no server answered imports this module in its own
# process (``hook_client``), and the rest loads with the handler that needs it.


class _Log:
    """This module's logger, with ``logging`` imported on first use."""

    def __getattr__(self, name: str) -> Any:
        import logging

        return getattr(logging.getLogger(__name__), name)


log = _Log()


def redact(text: str) -> str:
    from ..redact import redact as _redact

    return _redact(text)


def open_regular(path: Any, flags: int = 0) -> Any:
    from .transcript import open_regular as _open_regular

    return _open_regular(path, flags)


EVENTS = (
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "PreCompact",
    "SessionStart",
)
CLIENT = "claude"
LOG_NAME = "hooks.log"
LOG_MAX_BYTES = 1 << 20  # then hooks.log moves to hooks.log.1
STATE_DIRNAME = "claude"  # per-session hook state, in the store folder
CHECKPOINT_DIRNAME = "checkpoints"
REPLACE_MIN_TOKENS = 1024  # Aider's --gardener-max-output default
REPLACE_MAX_RATIO = 0.5
NOTE_MIN_TOKENS = 1000
UNFOLD_MARGIN = 24  # tokens kept free when names are given back: the closing line, drift
MAX_OUTPUT_ENV = "GARDENER_HOOK_MAX_OUTPUT"
# Tools whose output the model reads rather than edits from: their results may be replaced.
REPLACEABLE = frozenset(
    {"Bash", "PowerShell", "BashOutput", "Grep", "Glob", "WebFetch", "WebSearch"}
)
# Tools whose results hold nothing worth storing (the edit itself is in the transcript).
SKIPPED = frozenset(
    {
        "Edit",
        "MultiEdit",
        "Write",
        "NotebookEdit",
        "TodoWrite",
        "TaskCreate",
        "TaskUpdate",
        "TaskStop",
        "KillShell",
        "ExitPlanMode",
        "EnterPlanMode",
        "AskUserQuestion",
        "Skill",
        "SlashCommand",
        "ToolSearch",
    }
)
OWN_TOOL = re.compile(r"^mcp__.*gardener", re.IGNORECASE)
ALL_TOOLS_SINCE = (2, 1, 121)  # updatedToolOutput for every tool
WARN_LEVELS = (85, 70)  # percent, highest first
REARM_MARGIN = 5
RAG_BUDGET = 1500  # tokens of recalled context per prompt
RAG_HITS = 3
RAG_MIN_CHARS = 12
RAG_SKIP_MAX = 40  # recall at most this many more candidates to make up for skipped ones
STATE_TOKENS = 800  # as Aider's --gardener-state-tokens default
FILLER_MAX_CHARS = 80  # a one-line reply this short ("Let me check.") is not stored, as in Aider
REPLY_IDS_KEPT = 16  # ids of the last replies stored, so none is stored twice
LOCK_WAIT = 5.0  # seconds a hook waits for its session's state (``_Session``)
_SLASH_COMMAND = re.compile(r"\A/[A-Za-z][\w:.-]*(?:\s|\Z)")
VERSION_SCAN = 64 << 10
_VERSION = re.compile(rb'"version":\s*"(\d+)\.(\d+)\.(\d+)')
# Claude Code's own words for an output it cut and saved (2.1.x), when they reach a hook as text
_SAVED_TO = re.compile(r"\A\s*<persisted-output>\s*\n[^\n]*\bFull output saved to: ([^\n]+)")
SAVED_SCAN = 4096
# A failed command's result: "Exit code N" (PostToolUseFailure's ``error``), "Error: Exit code N"
# (the transcript's ``toolUseResult``), then what it printed.
_EXIT_CODE = re.compile(r"\A(?:Error: )?Exit code (\d+)\b[^\n]*\n?")
# Tools whose failure is what a command or a server printed (stored as their output is); other
# tools fail with Claude Code's own words about the call (no such file, too large, no match).
FAILURE_STORED = frozenset({"Bash", "PowerShell", "BashOutput", "WebFetch", "WebSearch"})
FAILURE_SHARE = 0.5  # of the summary budget, for a failure's summary added beside its output
# The gardener's MCP tools as Claude Code names a plugin's (mcp__plugin_<plugin>_<server>__<tool>,
# from claude_plugin/.claude-plugin/plugin.json and .mcp.json).
GARDENER_TOOL = "mcp__plugin_aider-gardener_gardener__"


# --- tool outputs ---


@dataclass
class ToolOutput:
    """The text a tool call produced, as the gardener stores it, and its provenance."""

    text: str
    command: str | None = None
    path: str | None = None
    tool: str | None = None
    exit_code: int | None = None
    saved: str | None = None  # where Claude Code saved the whole output (it cut what it shows)


def _blocks_text(value: Any) -> str | None:
    """Text of MCP/Messages content blocks (a list of ``{type: text, text}``), or None."""
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        value = value["content"]
    if not isinstance(value, list) or not value:
        return None
    parts = []
    for block in value:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, str):
            parts.append(block)
        else:
            return None  # an image or resource: not text we can stand in for
    return "\n".join(parts)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


_SESSION_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")


def tool_results_dir(transcript_path: Any) -> Path | None:
    """Where Claude Code saved this session's cut outputs: 2.1.x keeps the transcript as
    ``~/.claude/projects/<project>/<session id>.jsonl`` and the outputs in
    ``<session id>/tool-results/`` beside it. None when the transcript's name is no session id
    (then no saved output is read)."""
    if not isinstance(transcript_path, (str, os.PathLike)) or not str(transcript_path):
        return None
    path = Path(transcript_path)
    if not _SESSION_NAME.fullmatch(path.stem):
        return None
    return path.parent / path.stem / "tool-results"


def _persisted(path: Any, tool_results: Path | None) -> str | None:
    """The whole output Claude Code saved to a file when it cut ``stdout`` (over 30,000
    characters, 2.1.x: ``persistedOutputPath``); None when there is no such readable file.

    The path comes with the hook's input, so it is read only inside the session's own
    tool-results folder, after symlinks: a hook must not be a way to copy ``~/.ssh`` or ``/etc``
    into the store (and into the model's context)."""
    if not isinstance(path, str) or not path:
        return None
    real = os.path.realpath(path)
    base = os.path.realpath(tool_results) if tool_results is not None else None
    if base is None or real == base or os.path.commonpath([real, base]) != base:
        log.warning(
            "gardener: persistedOutputPath %s is not in this session's tool-results folder"
            " (%s): not read",
            path,
            tool_results,
        )
        return None
    fh = open_regular(real, getattr(os, "O_NOFOLLOW", 0))
    if fh is None:
        return None
    with fh:
        if os.fstat(fh.fileno()).st_size > MAX_STDIN:
            return None
        data = fh.read()
    # Claude Code's own stdout drops the trailing newline; the same output must get the same id
    # whether or not it was long enough to be saved to a file.
    return data.decode("utf-8", "surrogateescape").rstrip("\n")


def tool_output(
    tool_name: str, tool_input: Any, tool_response: Any, tool_results: Path | None = None
) -> ToolOutput | None:
    """What a tool call's result is, as text to store; None when there is nothing to store (an
    edit, a task-list update, the gardener's own tools, an empty result). ``tool_results``: the
    session's folder of saved outputs (``tool_results_dir``), the only place a cut output's
    whole text is read from."""
    name = str(tool_name or "")
    if not name or name in SKIPPED or OWN_TOOL.match(name):
        return None
    args = tool_input if isinstance(tool_input, dict) else {}
    resp = tool_response
    command = path = saved = None
    code = None
    text: str | None
    if isinstance(resp, str):
        text = resp
        m = _EXIT_CODE.match(resp)
        if m:
            code = int(m.group(1))
            text = resp[m.end() :]  # the same output stored by a success or a failure
    elif name in ("Bash", "PowerShell", "BashOutput") and isinstance(resp, dict):
        out, err = str(resp.get("stdout") or ""), str(resp.get("stderr") or "")
        saved = resp.get("persistedOutputPath")
        saved = saved if isinstance(saved, str) else None
        out = _persisted(saved, tool_results) or out
        text = out + ("\n" if out and err else "") + err
        if isinstance(resp.get("exitCode"), int):
            code = resp["exitCode"]
    elif name == "Read" and isinstance(resp, dict):
        file = resp.get("file")
        if not isinstance(file, dict):
            file = {}
        if resp.get("type") not in (None, "text") or not isinstance(file.get("content"), str):
            return None  # image, PDF, notebook: not text the compressors read
        text, path = file["content"], file.get("filePath") or args.get("file_path")
    elif name in ("Grep", "Glob") and isinstance(resp, dict):
        if isinstance(resp.get("content"), str) and resp.get("content"):
            text = resp["content"]
        else:
            text = "\n".join(str(f) for f in resp.get("filenames") or [])
    elif name == "WebFetch" and isinstance(resp, dict):
        text = str(resp.get("result") or "")
    else:
        text = _blocks_text(resp)
        if text is None:
            if resp is None or resp == {} or resp == []:
                return None
            text = _dumps(resp)
    if name in ("Bash", "PowerShell"):
        command = str(args.get("command") or "") or None
    elif name in ("Grep", "Glob"):
        pattern = args.get("pattern")
        command = f"{name} {pattern}" if pattern else name
    elif name == "WebFetch":
        url = args.get("url") or (resp.get("url") if isinstance(resp, dict) else None)
        command = f"WebFetch {url}" if url else name
    elif name != "Read":
        command = name
    if not text or not text.strip():
        return None
    if saved is None and (m := _SAVED_TO.search(text[:SAVED_SCAN])):
        saved = m.group(1).strip()
    tool = None if name in ("Bash", "PowerShell") else name
    return ToolOutput(text, command, path, tool, code, saved or None)


def replacement(tool_name: str, tool_response: Any, text: str) -> Any:
    """``text`` in the shape of the tool's own result, which is what Claude Code takes as
    ``updatedToolOutput`` (2.1.332 silently drops a plain string for Bash, whose result is
    ``{stdout, stderr, interrupted, isImage}``); None when the shape is not one we know."""
    resp = tool_response
    if isinstance(resp, str):
        return text
    if tool_name.startswith("mcp__"):
        if isinstance(resp, list):
            return [{"type": "text", "text": text}]
        if isinstance(resp, dict) and isinstance(resp.get("content"), list):
            return {**resp, "content": [{"type": "text", "text": text}]}
        return None
    if not isinstance(resp, dict):
        return None
    shaped = {k: v for k, v in resp.items() if not k.startswith("persistedOutput")}
    if tool_name in ("Bash", "PowerShell", "BashOutput"):
        shaped.update(stdout=text, stderr="")
    elif tool_name == "WebFetch":
        shaped.update(result=text)
    elif tool_name == "Grep" and isinstance(resp.get("content"), str) and resp.get("content"):
        shaped.update(content=text, numLines=text.count("\n") + 1)
    elif tool_name == "Glob" and isinstance(resp.get("filenames"), list):
        # Claude Code shows ``filenames`` joined by newlines, then its own "Showing N of M"
        # note counting them: the text goes in as one "name" and the note, counting the real
        # files, is said here instead, so the model reads exactly this text
        for key in ("truncated", "totalMatches", "countIsComplete"):
            shaped.pop(key, None)
        note = _glob_note(resp)
        shaped.update(filenames=[f"{text}\n{note}" if note else text], truncated=False)
    elif tool_name == "Grep" and isinstance(resp.get("filenames"), list):
        shaped.update(filenames=[text])  # after Claude Code's "Found N files", N the real count
    elif tool_name == "Read" and resp.get("type") in (None, "text"):
        file = resp.get("file")
        if not isinstance(file, dict) or not isinstance(file.get("content"), str):
            return None
        # Claude Code numbers the lines it shows from ``startLine``: the summary's own first line
        # says they are not the file's
        shaped["file"] = {**file, "content": text, "numLines": text.count("\n") + 1}
    else:
        return None
    return shaped


def _glob_note(resp: dict) -> str | None:
    """Claude Code's own line for a Glob it cut at 100 files (2.1.332's wording)."""
    if not resp.get("truncated"):
        return None
    shown, total = len(resp.get("filenames") or []), resp.get("totalMatches")
    if not isinstance(total, int):
        return "(Results are truncated. Consider using a more specific path or pattern.)"
    if resp.get("countIsComplete"):
        return (
            f"(Showing {shown} of {total} matching files; {total - shown} more are not listed."
            " Narrow the pattern or path to see the rest.)"
        )
    return (
        f"(Showing the first {shown} files; there are more than {total} matches. Narrow the"
        " pattern or path to see the rest.)"
    )


def can_replace(
    tool_name: str,
    version: tuple[int, int, int] | None,
    tool_input: Any = None,
    read_kind: str | None = None,
) -> bool:
    """Whether this Claude Code lets a PostToolUse hook replace this tool's output, and the
    gardener wants to (docs/decisions/021-claude-code-hooks.md). A Read is replaced only when
    it read a whole file nobody edits by hand (``read_kind``, from ``claude_read.read_kind``),
    or in outline mode; one given ``offset`` or ``limit`` asked for exactly those lines."""
    if tool_name.startswith("mcp__"):
        return True
    if tool_name == "Read":
        args = tool_input if isinstance(tool_input, dict) else {}
        if args.get("offset") is not None or args.get("limit") is not None:
            return False
        if read_kind is None:
            return False
    elif tool_name not in REPLACEABLE:
        return False
    return version is None or version >= ALL_TOOLS_SINCE


def _max_output() -> int:
    try:
        return max(1, int(os.environ.get(MAX_OUTPUT_ENV, "") or REPLACE_MIN_TOKENS))
    except ValueError:
        return REPLACE_MIN_TOKENS


# --- payload helpers ---


def claude_version(transcript_path: Any) -> tuple[int, int, int] | None:
    """The Claude Code version that writes this transcript (its records carry ``version``)."""
    fh = open_regular(transcript_path)
    if fh is None:
        return None
    try:
        with fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - VERSION_SCAN))
            tail = fh.read()
    except OSError:
        return None
    found = _VERSION.findall(tail)
    if not found:
        return None
    return tuple(int(x) for x in found[-1])  # type: ignore[return-value]


def _store_dir(payload: dict) -> Path:
    from .project import store_location

    return store_location(payload.get("cwd") or None)[0]


def _open(payload: dict):
    """The project's store for one hook process: no vectors, no threads beyond SQLite's
    checkpointer (the MCP server embeds what hooks queue)."""
    from .. import preload
    from .project import client_session_id, open_project_store

    # The numeric stack is preloaded only to keep threads from importing it concurrently; a hook
    # starts no such thread, and the import costs ~0.5 s, more than the whole hook's budget.
    preload._done = True
    return open_project_store(
        payload.get("cwd") or None,
        vectors=False,
        worker=False,
        session_id=client_session_id(CLIENT, payload.get("session_id")),
    )


def _state_path(store_dir: Path, payload: dict) -> Path:
    from .project import client_session_id

    sid = client_session_id(CLIENT, payload.get("session_id")) or "claude-unknown"
    return store_dir / STATE_DIRNAME / f"{sid}.json"


def _load_state(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        log.warning("gardener: hook state not saved (%s)", err)


class _Session:
    """A session's hook state, loaded under the session's lock and kept locked until it is
    saved, after the answer when that is where the work went (``_after_answer``): the next hook
    of the session (a Stop that comes as soon as its prompt is answered) then reads the state
    this one saved, never one it would overwrite. The lock is waited for ``LOCK_WAIT`` seconds
    at most (then the state is used unlocked, as before there was one); a process that dies
    holding it lets it go."""

    def __init__(self, store_dir: Path, payload: dict) -> None:
        self.path = _state_path(store_dir, payload)
        self.lock = _lock_file(self.path.with_suffix(".lock"))
        self.state = _load_state(self.path)

    def save(self) -> None:
        _save_state(self.path, self.state)

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def _lock_file(path: Path) -> Any:
    import fcntl

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fh = open(path, "a")
    except OSError:
        return None
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except BlockingIOError:
            if time.monotonic() >= deadline:
                log.warning("gardener: %s held over %.0f s: state used unlocked", path, LOCK_WAIT)
                fh.close()
                return None
            time.sleep(0.005)
        except OSError:
            fh.close()
            return None


# Work a handler leaves for after its answer: a list while the server answers (it sends the
# answer, then does the work), None in a process of its own (done at once: Claude Code waits for
# the process, and nothing may outlive it there).
_deferred: list | None = None


def _after_answer(job: Callable[[], None]) -> None:
    """Do ``job`` after the answer has gone when the server answers (Claude Code waits for the
    answer, not for this; the server's child outlives its client), else now."""
    if _deferred is None:
        job()
    else:
        _deferred.append(job)


def _hook_output(event: str, **fields: Any) -> dict:
    specific = {k: v for k, v in fields.items() if v is not None}
    return {"hookSpecificOutput": {"hookEventName": event, **specific}} if specific else {}


# --- PostToolUse ---


def post_tool_use(payload: dict) -> dict:
    name = str(payload.get("tool_name") or "")
    results = tool_results_dir(payload.get("transcript_path"))
    response = payload.get("tool_response")
    out = tool_output(name, payload.get("tool_input"), response, results)
    if out is None:
        return {}
    entry = _ingest(payload, out)
    if entry is None:
        return {}
    full = entry.tokens_original
    version = claude_version(payload.get("transcript_path"))
    kind = None
    if name == "Read":
        from .claude_read import outline_wanted, read_kind

        kind = read_kind(out.path, out.text, str(entry.cls))
        kind = kind or ("outline" if outline_wanted() else None)
    replaceable = can_replace(name, version, payload.get("tool_input"), kind)
    if replaceable and full <= _max_output():
        secret = _redacted_output(name, response, out.text, entry.id)
        if secret is not None:
            return secret
    if replaceable and full > _max_output():
        text = _fitted_summary(name, payload, out, entry, kind)
        shaped = replacement(name, response, text) if text is not None else None
        if shaped is not None:
            fields: dict[str, Any] = {"updatedToolOutput": shaped}
            if name.startswith("mcp__"):
                fields["updatedMCPToolOutput"] = shaped
            return _hook_output("PostToolUse", **fields)
    if full >= NOTE_MIN_TOKENS:
        note = (
            f"[gardener: stored as id={entry.id} ({full:,} tokens, {entry.cls}); recall it later"
            " with the gardener's recall/expand tools]"
        )
        return _hook_output("PostToolUse", additionalContext=note)
    return {}


def _ingest(payload: dict, out: ToolOutput) -> Any:
    """The stored entry of a tool's output; None when nothing was kept (a locked store runs in
    memory and is gone with this process; the store logged why): an id that cannot be expanded
    must not stand in for the output."""
    from ..types import Source

    store = _open(payload)
    try:
        entry = store.ingest(
            out.text, Source(role="tool", command=out.command, path=out.path), tool=out.tool
        )
        degraded = store.degraded
    finally:
        store.close()
    return None if degraded or not getattr(entry, "stored", False) else entry


def _summary_head(entry: Any, out: ToolOutput, kind: str | None, failed: bool = False) -> str:
    """The replacement's first line: the id (in the form ``facts_from_transcript`` reads back),
    what the text is, and the tools that give the whole back, as Claude Code names them."""
    from ..types import handle_line

    full, eid = entry.tokens_original, entry.id
    whole = f'{GARDENER_TOOL}expand {{"id": "{eid}"}}'
    if kind == "outline":
        what = (
            f'outline of {out.path} ({full:,} tokens): "N| " starts a line kept with its number'
            ' N in the file, "… lines A-B …" stands for a folded body; Read with offset/limit'
            f" the lines you need, or {whole} for the whole file"
        )
    elif kind is not None:
        what = (
            f"summary of {out.path} ({kind}, {full:,} tokens), not its text: the numbers before"
            f" the lines count summary lines; Read with offset/limit for exact lines, {whole} for"
            " the whole file"
        )
    else:
        done = "failed command's output as Claude Code passed it" if failed else "output"
        what = f"summary of this {full:,}-token {done}; the whole: {whole}"
        if out.saved:  # the model's own way back to it, which the replaced result no longer says
            what += f" (Claude Code saved it too: {out.saved})"
    return (
        f"{handle_line(eid)} aider-gardener {what}; search stored outputs:"
        f" {GARDENER_TOOL}recall"
    )


def _fitted_summary(
    name: str, payload: dict, out: ToolOutput, entry: Any, kind: str | None
) -> str | None:
    """The text to stand in for an output: its summary (a Read's outline in outline mode), with
    the first line ``_summary_head``, cut to the summary budget and the tool's Claude Code limit
    with its facts first (``fit``); None when it saves too little: at most half the output's
    tokens, unless the output is over Claude Code's limit (the model would get a 2 KB preview).
    A path list gets its tree instead (``_path_tree``)."""
    from ..compress import paths
    from . import fit

    full = entry.tokens_original
    limit = fit.char_limit(name, payload.get("cwd"))
    rank = None
    if kind == "outline":
        from .claude_read import outline, outline_rank

        done = outline(out.text, str(out.path))
        if done is None:
            return None
        body, rank = done[0], outline_rank
    else:
        body = entry.summary
    over = limit is not None and fit.js_length(out.text) > limit
    if kind is None and paths.MARKER_RE.search(body):
        tree = _path_tree(out, entry, _summary_head(entry, out, None), limit, over)
        if tree is not None or not over:
            return tree
    if body == entry.original and not over:
        return None
    head = _summary_head(entry, out, kind)
    if rank is None:
        body = _unfolded(body, out.text, head, full, limit, over, entry.id)
    fitted = fit.fit(
        redact(body),
        head,
        fit.summary_tokens(),
        fit.room(limit),
        wanted=lambda: fit.fact_keys(_facts(out.text)),
        rank=rank,
        what="outline" if rank is not None else "summary",
    )
    if fitted.tokens > REPLACE_MAX_RATIO * full and not over:
        return None
    return fitted.text


def _unfolded(
    body: str, original: str, head: str, full: int, limit: int | None, over: bool, eid: str
) -> str:
    """``body`` with the names its templates folded given back (``compress/unfold.py``), in
    the room left under the summary budget and, unless the output is over Claude Code's limit
    anyway, under half the output: what is replaced still saves at least half."""
    from ..compress import unfold
    from ..tokens import count_tokens
    from . import fit

    def count(text: str) -> int:
        return count_tokens(text, fit.MODEL)

    cap = fit.summary_tokens() if over else min(fit.summary_tokens(), int(REPLACE_MAX_RATIO * full))
    room = cap - count(head) - count(body) - UNFOLD_MARGIN
    try:
        more = unfold.unfold(
            body, original, room, count, f' (all: {GARDENER_TOOL}expand {{"id": "{eid}"}})'
        )
    except Exception:  # the summary as it was is still a good replacement
        log.exception("gardener: giving folded names back failed; the summary stays folded")
        return body
    chars = fit.room(limit)
    if chars is not None and fit.js_length(f"{head}\n{more}") > chars:
        return body
    return more


def _path_tree(out: ToolOutput, entry: Any, head: str, limit: int | None, over: bool) -> Any:
    """A path list's replacement: its tree (``compress/paths.py``) in the summary budget, with
    never fewer names than Claude Code shows (all of an output within the tool's limit: Glob's
    100 at most), so it replaces whenever it costs less than the list; None when it does not."""
    from ..compress import paths
    from ..tokens import count_tokens
    from . import fit

    found = paths.path_list(out.text)
    if found is None:
        return None
    room = fit.room(limit)
    tree = paths.render(
        found,
        fit.summary_tokens() - count_tokens(head, fit.MODEL),
        entry.id,
        fit.MODEL,
        floor=0 if over else len(found.paths),
        max_chars=None if room is None else room - fit.js_length(head),
    )
    text = redact(f"{head}\n{tree}")
    if count_tokens(text, fit.MODEL) >= entry.tokens_original and not over:
        return None
    return text


def _facts(text: str) -> dict:
    from .. import critical

    return critical.extract(text)


def post_tool_use_failure(payload: dict) -> dict:
    """A failed tool call (2.1.332 sends a command that exits non-zero here, not to
    PostToolUse): ``error`` is what the model is shown, "Exit code N" and the output, whose
    middle Claude Code cuts past about 10,000 characters (the rest is not saved anywhere). The
    output is stored as PostToolUse stores one, so recall finds it. The answer can only add
    context (``additionalContext``; no ``updatedToolOutput`` for this event), so a large
    failure gets its summary beside the output, facts first, in half the summary budget, and
    only when that is at most half its size: the model then has its facts and the id to expand."""
    name = str(payload.get("tool_name") or "")
    error = payload.get("error")
    stored = name in FAILURE_STORED or name.startswith("mcp__") and not OWN_TOOL.match(name)
    if not stored or not isinstance(error, str):
        return {}
    out = tool_output(name, payload.get("tool_input"), error)
    if out is None:
        return {}
    entry = _ingest(payload, out)
    if entry is None:
        return {}
    full = entry.tokens_original
    if full > _max_output() and entry.summary != entry.original:
        from . import fit

        fitted = fit.fit(
            redact(entry.summary),
            _summary_head(entry, out, None, failed=True),
            int(fit.summary_tokens() * FAILURE_SHARE),
            fit.room(fit.CONTEXT_LIMIT),
            wanted=lambda: fit.fact_keys(_facts(out.text)),
        )
        if fitted.tokens <= REPLACE_MAX_RATIO * full:
            return _hook_output("PostToolUseFailure", additionalContext=fitted.text)
    if full >= NOTE_MIN_TOKENS:
        note = (
            f"[gardener: this failure's output is stored as id={entry.id} ({full:,} tokens);"
            " recall it later with the gardener's recall/expand tools]"
        )
        return _hook_output("PostToolUseFailure", additionalContext=note)
    return {}


def _redacted_output(name: str, response: Any, text: str, entry_id: str) -> dict | None:
    """The hook's answer for an output small enough to pass whole that holds a key: the model
    gets it redacted (the store keeps the original); None when it holds none."""
    safe = redact(text)
    if safe == text:
        return None
    note = f"[gardener: secrets redacted before the model saw this output; stored as id={entry_id}]"
    shaped = replacement(name, response, f"{safe}\n{note}")
    if shaped is None:
        return None
    fields: dict[str, Any] = {"updatedToolOutput": shaped}
    if name.startswith("mcp__"):
        fields["updatedMCPToolOutput"] = shaped
    return _hook_output("PostToolUse", **fields)


# --- UserPromptSubmit ---


def _warning(usage: Any, state: dict) -> tuple[str | None, str | None]:
    """(message for the user, note for the model) when usage crosses a warning level; each
    level fires once until usage falls ``REARM_MARGIN`` below it."""
    pct = usage.percent
    warned = int(state.get("warned") or 0)
    if warned and pct < warned - REARM_MARGIN:
        warned = 0
    level = next((lvl for lvl in WARN_LEVELS if pct >= lvl), 0)
    state["warned"] = max(warned, level) if level else warned
    if not level or level <= warned:
        return None, None
    figures = f"{pct:.0f}% ({usage.used:,} of {usage.window:,} tokens)"
    if level >= WARN_LEVELS[0]:
        user = (
            f"gardener: context {figures}: Claude Code will compact soon; the gardener's"
            " checkpoint and state block will carry the session over"
        )
        model = (
            f"[gardener: context is {figures} full. Compaction is near: prefer the gardener's"
            " recall tool to re-reading large files or re-running long commands.]"
        )
    else:
        user = f"gardener: context {figures}"
        model = (
            f"[gardener: context is {figures} full. Large outputs are stored; recall them by id"
            " with the gardener's tools instead of repeating them.]"
        )
    return user, model


def _in_context(store: Store, session_id: str | None, since: float) -> set[str]:
    """Ids this session stored since ``since`` (its last compaction), or saw again since then (a
    file read before the compaction and read again after it keeps its first sighting, but the
    store notes its access): the context holds them. An entry another session re-read since
    counts too, which can only cost a recall, never add noise."""
    if not session_id:
        return set()

    def q(c):
        rows = c.execute(
            "SELECT s.entry_id FROM entry_sessions s WHERE s.session_id = ? AND (s.first_seen >= ?"
            " OR s.entry_id IN (SELECT id FROM entries WHERE last_access >= ?))",
            (session_id, since, since),
        )
        return {r[0] for r in rows}

    try:
        return store.read(q)
    except Exception as err:  # noqa: BLE001 - recall may repeat something, no more
        log.warning("gardener: reading this session's entries failed (%s)", err)
        return set()


def _recall_block(store: Store, prompt: str, skip: set[str], budget: int) -> tuple[str, list[str]]:
    """Recalled summaries for ``prompt`` within ``budget`` tokens, and their ids: only hits above
    the relevance floor (``prompt_recall``)."""
    from ..store.recall import recall
    from ..tokens import count_tokens
    from .prompt_recall import relevant

    if len(prompt.strip()) < RAG_MIN_CHARS or prompt.lstrip().startswith("/"):
        return "", []
    hits = recall(store, prompt, limit=RAG_HITS + min(len(skip), RAG_SKIP_MAX), mode="fts")
    hits = relevant(store, prompt, [h for h in hits if h.entry_id not in skip])
    head = "[gardener: stored context that may bear on this request (recall/expand for more)]"
    used = count_tokens(head)
    parts = [head]
    ids: list[str] = []
    for hit in hits:
        if hit.entry_id in skip or len(ids) >= RAG_HITS:
            continue
        where = f" {hit.source_path}" if hit.source_path else ""
        block = f"--- id={hit.entry_id} ({hit.cls}{where})\n{redact(hit.text.strip())}"
        cost = count_tokens(block)
        if used + cost > budget:
            continue
        parts.append(block)
        ids.append(hit.entry_id)
        used += cost
    return ("\n".join(parts), ids) if ids else ("", [])


def _ingest_turn(store: Store, text: str, role: str, reply_to: str) -> Any:
    """Store one conversation turn with the turn it answers as its indexed context.

    The store would take the session's previous entry for that, which in an Aider chat is the
    previous turn; in Claude Code the tool outputs of the turn come in between (PostToolUse
    stores them before the reply is read), so the hook, which knows the prompt a reply answers
    and the reply a prompt follows, names it (``Store.ingest(reply_to=...)``)."""
    from ..types import ContentClass, Source

    forced = ContentClass.PROMPT if role == "user" else None  # a reply: as Aider's
    return store.ingest(text, Source(role=role), cls=forced, reply_to=reply_to or None)


def _is_filler(text: str) -> bool:
    return len(text) <= FILLER_MAX_CHARS and "\n" not in text.strip()


def _new_replies(payload: dict, state: dict, last: Any = None) -> list[str]:
    """The assistant's replies since the last one stored (``state``'s transcript offset moves
    on), and ``last`` (Stop's ``last_assistant_message``) when the transcript does not hold it
    yet; fillers and replies already stored are left out."""
    from .transcript import replies_since

    path = payload.get("transcript_path")
    texts: list[str] = []
    if path:
        same = state.get("conv_path") == str(path)
        replies, offset = replies_since(path, state.get("conv_offset") if same else None)
        state.update(conv_path=str(path), conv_offset=offset)
        texts = [r.text for r in replies]
    if isinstance(last, str) and last.strip() and last.strip() not in texts:
        texts.append(last.strip())
    texts = [text for text in texts if not _is_filler(text)]
    if not texts:
        return []
    from ..pipeline import entry_id

    seen = set(state.get("conv_ids") or [])
    out = []
    for text in texts:
        if entry_id(text) in seen:
            continue
        seen.add(entry_id(text))
        out.append(text)
    return out


def _store_turns(store: Store, state: dict, replies: list[str], prompt: str | None) -> None:
    """Store ``replies`` (each as an answer to the session's last prompt), then ``prompt`` (as
    following the last reply), and remember in ``state`` what they answer."""
    from ..store.db import CONTEXT_CHARS

    ids = list(state.get("conv_ids") or [])
    for text in replies:
        entry = _ingest_turn(store, text, "assistant", str(state.get("conv_prompt") or ""))
        ids.append(entry.id)
        state["conv_reply"] = text[:CONTEXT_CHARS]
    if prompt:
        _ingest_turn(store, prompt, "user", str(state.get("conv_reply") or ""))
        state["conv_prompt"] = prompt[:CONTEXT_CHARS]
    state["conv_ids"] = ids[-REPLY_IDS_KEPT:]


def _storable_prompt(prompt: str) -> bool:
    """The user's own words: not a slash command (``/compact``), not a wrapper Claude Code
    writes as user text. Short answers ("A", "yes") are kept: their context says what they
    answer."""
    return is_prompt(prompt) and not _SLASH_COMMAND.match(prompt.lstrip())


def user_prompt_submit(payload: dict) -> dict:
    """Usage warnings, session RAG for the prompt, and the conversation into the store: the
    replies written since the last stored one, then the prompt itself (after recall, so it is
    not its own hit). What recall added is said in one line to the user (``systemMessage``,
    after a usage warning), and nothing when it added nothing.

    The answer needs only the usage and recall; storing the conversation (and the usage, for
    the MCP server) waits until it has gone (``_after_answer``), with the session's state held
    until then. Replies read but not yet stored are in the context: recall skips them."""
    from .transcript import usage_from_transcript

    store_dir = _store_dir(payload)
    session = _Session(store_dir, payload)
    try:
        state = session.state
        user_msg = model_note = added = None
        usage = usage_from_transcript(payload.get("transcript_path"), payload.get("model"))
        if usage is not None:
            user_msg, model_note = _warning(usage, state)
        context = [model_note] if model_note else []
        prompt = str(payload.get("prompt") or "")
        replies = _new_replies(payload, state)
        keep = prompt.strip() if _storable_prompt(prompt) else None
        ask = len(prompt.strip()) >= RAG_MIN_CHARS and (store_dir / "store.sqlite").exists()
        if ask:
            from ..pipeline import entry_id
            from .prompt_recall import added_line

            store = _open(payload)
            try:
                since = float(state.get("compacted_at") or 0.0)
                skip = _in_context(store, store.session_id, since)
                skip |= set(state.get("recalled") or [])
                skip |= {entry_id(text) for text in replies}
                if keep:
                    skip.add(entry_id(keep))  # the same words asked before: nothing new
                block, ids = _recall_block(store, prompt, skip, RAG_BUDGET)
                if block:
                    context.append(block)
                    state["recalled"] = list(dict.fromkeys([*(state.get("recalled") or []), *ids]))
                    added = added_line(store, ids)  # what the user is told the model got
            finally:
                store.close()
    except BaseException:
        session.release()
        raise

    def store_conversation() -> None:
        try:
            if usage is not None:
                from .transcript import save_usage

                save_usage(store_dir, usage)
            if replies or keep:
                _store_turns_now(payload, state, replies, keep)
            session.save()
        finally:
            session.release()

    _after_answer(store_conversation)
    out = _hook_output("UserPromptSubmit", additionalContext="\n\n".join(context) or None)
    shown = "\n".join(x for x in (user_msg, added) if x)
    if shown:
        out["systemMessage"] = shown
    return out


def _store_turns_now(payload: dict, state: Any, replies: list, keep: Any) -> None:
    """``_store_turns`` in a store opened for this one write: UserPromptSubmit and Stop store
    after their answer has gone, each in its own process or server child."""
    store = _open(payload)
    try:
        _store_turns(store, state, replies, keep)
    finally:
        store.close()


# --- Stop ---


def stop(payload: dict) -> dict:
    """The turn's replies into the store, its final one included: Claude Code 2.1.47+ passes
    it as ``last_assistant_message`` (the transcript may not hold it yet when Stop runs); an
    older one's is read from the transcript, here or at the next prompt. Never blocks the stop:
    the answer is always empty, so the work waits until that has gone (``_after_answer``), the
    session's state held from here (whoever takes it next finds the replies stored)."""
    session = _Session(_store_dir(payload), payload)

    def store_replies() -> None:
        try:
            state = session.state
            replies = _new_replies(payload, state, payload.get("last_assistant_message"))
            if replies:
                _store_turns_now(payload, state, replies, None)
            session.save()
        finally:
            session.release()

    _after_answer(store_replies)
    return {}


# --- facts from a transcript ---


def _records(path: Any):
    fh = open_regular(path)
    if fh is None:
        return
    with fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and not record.get("isSidechain"):
                yield record


# User records that are not the user's words: slash-command wrappers and their output, task
# notifications, interruption markers, hook feedback (Claude Code writes them as user text).
_NOT_A_PROMPT = re.compile(
    r"\A\s*(?:<(?:command|local-command|task-notification|system-reminder|user-prompt-submit)"
    r"[\w-]*>|\[Request interrupted|Caveat: |Stop hook feedback:|Unknown skill:)"
)


def is_prompt(text: Any) -> bool:
    """Whether a user record's text is something the user typed."""
    return isinstance(text, str) and bool(text.strip()) and not _NOT_A_PROMPT.match(text)


def _relative(path: Any, root: Path) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    try:
        return str(Path(path).resolve().relative_to(root))
    except (ValueError, OSError):
        return path


def facts_from_transcript(path: Any, root: Path, tracker: Any = None, lookup: Any = None) -> Any:
    """The session's facts (a ``FactTracker``) from a Claude Code transcript: user prompts,
    replies, command outputs (with the entry ids the PostToolUse hook stored them under), reads
    and edits, in order; subagent records are left out.

    Claude Code records a replaced output as replaced (the summary), so an output citing its
    ``[full output stored: id=…]`` is read as that entry's original when ``lookup(id)`` (e.g.
    ``store.get``) has it."""
    from ..continuity.tracker import FactTracker

    tracker = tracker or FactTracker()
    results = tool_results_dir(path)
    uses: dict[str | None, tuple[str, dict]] = {}
    turn = 0
    for record in _records(path):
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if record.get("type") == "user":
            if isinstance(content, str):
                if record.get("isCompactSummary") or record.get("isMeta") or not is_prompt(content):
                    continue
                turn += 1
                tracker.on_prompt(content, turn)
                continue
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and not record.get("isMeta"):
                    if record.get("isCompactSummary") or not is_prompt(block.get("text")):
                        continue
                    turn += 1
                    tracker.on_prompt(block.get("text", ""), turn)
                elif block.get("type") == "tool_result":
                    name, args = uses.get(block.get("tool_use_id"), ("", {}))
                    result = record.get("toolUseResult", block.get("content"))
                    _observe_result(tracker, name, args, result, block, turn, root, lookup, results)
        elif record.get("type") == "assistant" and isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and block.get("text"):
                    tracker.on_reply(block["text"], turn)
                elif block.get("type") == "tool_use":
                    given = block.get("input")
                    args = given if isinstance(given, dict) else {}
                    uses[block.get("id")] = (str(block.get("name") or ""), args)
    return tracker


_HANDLE_ID = re.compile(r"\[full output stored: id=([a-z2-7]{10})\]")


def _observe_result(tracker, name, args, result, block, turn, root, lookup, results) -> None:
    from ..pipeline import entry_id

    if name in ("Edit", "MultiEdit", "Write", "NotebookEdit"):
        if block.get("is_error"):
            return
        path = _relative(args.get("file_path") or args.get("notebook_path"), root)
        if path:
            created = [path] if isinstance(result, dict) and result.get("type") == "create" else []
            tracker.on_edit_applied([path], turn, created=created)
        return
    out = tool_output(name, args, result, results)
    if out is None:
        return
    if name == "Read":
        path = _relative(out.path, root)
        if path:
            tracker.on_files_added([path], turn)
        return
    if name in ("Bash", "PowerShell"):
        code = out.exit_code
        if code is None and block.get("is_error"):
            code = 1
        elif code is None:
            code = 0
        text, eid = out.text, entry_id(out.text)
        cited = _HANDLE_ID.findall(text)
        if cited and lookup is not None:
            stored = lookup(cited[-1])
            if stored is not None:
                text, eid = stored.original, stored.id
        tracker.on_output(out.command, text, turn, eid, exit_code=code)


# --- PreCompact / SessionStart ---


def _checkpoint_dir(store_dir: Path) -> Path:
    """Where the Aider session keeps them too (``integration.keeper.CHECKPOINT_DIRNAME``;
    not imported from there: that module imports Aider, seconds a hook cannot spend)."""
    return store_dir / CHECKPOINT_DIRNAME


def _state_block(book: Any) -> str:
    """The block in the words of a client whose model recalls with the gardener's MCP tools
    (the header says so; Aider's says ``/recall ID``)."""
    from ..continuity.state import TOOLS_RECALL, render_state

    return render_state(book, max_tokens=STATE_TOKENS, model="gpt-4o", recall=TOOLS_RECALL)


def pre_compact(payload: dict) -> dict:
    """Write a verified checkpoint and return ``{"text": instructions}`` for the compaction."""
    from ..continuity.checkpoint import carried_facts, load_latest
    from ..continuity.tracker import FactTracker
    from .project import client_session_id, project_dir

    store_dir = _store_dir(payload)
    root = project_dir(payload.get("cwd") or None)
    folder = _checkpoint_dir(store_dir)
    sid = client_session_id(CLIENT, payload.get("session_id")) or "claude-unknown"
    latest = load_latest(folder, warn=log.warning, project=str(root)) if folder.is_dir() else None
    tracker = FactTracker(carried_facts(latest.facts)) if latest and latest.session != sid else None
    session = _Session(store_dir, payload)
    try:
        state = session.state
        store = _open(payload)
        try:
            # replies written before the compaction are stored before it: recall may then offer
            # them (the summary holds them no more); stored after, they would count as in context
            _store_turns(store, state, _new_replies(payload, state), None)
            tracker = facts_from_transcript(
                payload.get("transcript_path"), root, tracker, store.get
            )
            book = tracker.book
            _save_facts(store, book)
        finally:
            store.close()
        return _compacted(payload, session, book, folder, root, sid)
    finally:
        session.release()


def _compacted(payload: dict, session: Any, book: Any, folder: Path, root: Path, sid: str) -> dict:
    """PreCompact's checkpoint, written and verified, and its answer."""
    from ..continuity.checkpoint import read_checkpoint, render_checkpoint, write_checkpoint

    trigger = "manual" if payload.get("trigger") == "manual" else "pressure"
    text = render_checkpoint(
        book,
        trigger=trigger,
        session=sid,
        project=str(root),
        note=f"Claude Code PreCompact ({payload.get('trigger') or 'auto'})",
    )
    path = write_checkpoint(folder, text)
    checkpoint = read_checkpoint(path)  # verified: written, read back, and parsed again
    if not checkpoint.verified:
        raise RuntimeError(f"checkpoint {path} reads back unverified")
    session.state.update(compacted_at=time.time(), recalled=[], checkpoint=str(path))
    session.save()
    block = _state_block(checkpoint.facts)
    lines = [
        "Keep the following session state, kept by aider-gardener, verbatim in the summary:",
        block or "(no facts recorded yet)",
        f"Full checkpoint: {path}.",
    ]
    return {"text": "\n".join(lines), "checkpoint": str(path)}


def _save_facts(store: Store, book: Any) -> None:
    """The facts go to the store too, so the MCP server and a later Aider session can read
    them (the checkpoint file is the copy that needs no store)."""
    from ..continuity.sync import save_facts

    try:
        save_facts(store, store.session_id, list(book))
    except Exception as err:  # noqa: BLE001 - the checkpoint file holds them already
        log.warning("gardener: facts not saved in the store (%s)", err)


CATCH_UP_SESSIONS = 3  # earlier sessions' transcripts SessionStart(startup) reads at most
CATCH_UP_BYTES = 64 << 20  # of them in all


def _transcripts_dir(payload: dict, latest: Any) -> Path | None:
    """Claude Code's folder of this project's transcripts: the one this session's transcript is
    in, or (at startup Claude Code names a file it has not written yet, which the hook is not
    given) the one holding the transcript of the checkpoint's session, found by its id under
    ``$CLAUDE_CONFIG_DIR`` (default ``~/.claude``) ``/projects``."""
    own = payload.get("transcript_path")
    if isinstance(own, str) and own:
        return Path(own).parent
    session = str(latest.session or "")
    prefix = f"{CLIENT}-"
    raw = session[len(prefix) :] if session.startswith(prefix) else ""
    if not _SESSION_NAME.fullmatch(raw):
        return None
    config = os.environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
    try:
        found = sorted(Path(config, "projects").glob(f"*/{raw}.jsonl"))
    except OSError:
        return None
    return found[0].parent if len(found) == 1 else None


def _in_project(path: Path, root: Path) -> bool:
    """Whether a transcript is of this project: its first record naming a ``cwd`` names one
    inside ``root`` (a checkpoint is a file anyone can edit: its session id must not lead the
    hook to another project's transcript)."""
    for record in _records(str(path)):
        cwd = record.get("cwd")
        if isinstance(cwd, str) and cwd:
            try:
                Path(cwd).resolve().relative_to(root)
                return True
            except (ValueError, OSError):
                return False
    return False


def _later_transcripts(payload: dict, latest: Any, root: Path) -> list[Path]:
    """This project's other Claude Code transcripts written after the latest checkpoint,
    oldest first, the latest ``CATCH_UP_SESSIONS`` of them within ``CATCH_UP_BYTES``: the
    sessions that went on, or ended, after it."""
    folder = _transcripts_dir(payload, latest)
    try:
        since = latest.path.stat().st_mtime if latest.path else 0.0
    except OSError:
        return []
    if folder is None:
        return []
    own = f"{payload.get('session_id') or ''}.jsonl"
    found = []
    try:
        for path in folder.glob("*.jsonl"):
            if path.name == own or not _SESSION_NAME.fullmatch(path.stem):
                continue
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_mtime > since:
                found.append((info.st_mtime, info.st_size, path))
    except OSError:
        return []
    found.sort()
    kept, total = [], 0
    for _mtime, size, path in reversed(found[-CATCH_UP_SESSIONS:]):
        if total + size > CATCH_UP_BYTES:
            break
        if _in_project(path, root):
            kept.append(path)
            total += size
    return kept[::-1]


def _caught_up(payload: dict, latest: Any, folder: Path, root: Path) -> Any:
    """The latest checkpoint brought up to date with what the sessions after it did, written
    as those sessions' exit checkpoint (Claude Code has no exit hook: a session checkpoints at
    PreCompact only): an error fixed after the last compaction is then closed, and no later
    session carries it, here or at its own PreCompact. None when no session went on since."""
    from ..continuity.checkpoint import (
        carried_facts,
        read_checkpoint,
        render_checkpoint,
        write_checkpoint,
    )
    from ..continuity.tracker import FactTracker
    from .project import client_session_id

    paths = _later_transcripts(payload, latest, root)
    if not paths:
        return None
    tracker = FactTracker(carried_facts(latest.facts))
    store = _open(payload) if (_store_dir(payload) / "store.sqlite").exists() else None
    try:
        for path in paths:
            tracker = facts_from_transcript(str(path), root, tracker, store.get if store else None)
    finally:
        if store is not None:
            store.close()
    session = client_session_id(CLIENT, paths[-1].stem) or "claude-unknown"
    text = render_checkpoint(
        tracker.book,
        trigger="exit",
        session=session,
        project=str(root),
        note="Claude Code session end, read from its transcript when the next session started",
    )
    checkpoint = read_checkpoint(write_checkpoint(folder, text))
    return checkpoint if checkpoint.verified else None


def session_start(payload: dict) -> dict:
    """The state block as additional context: after a compaction or on resume, the latest
    checkpoint's; on startup, the open facts the sessions before left (``carried_facts``), read
    up to the end of those sessions (``_caught_up``)."""
    source = str(payload.get("source") or "startup")
    store_dir = _store_dir(payload)
    folder = _checkpoint_dir(store_dir)
    if not folder.is_dir():
        return {}  # no checkpoint yet: nothing to give, nothing more to load
    from ..continuity.checkpoint import carried_facts, load_latest
    from .project import client_session_id, project_dir

    root = project_dir(payload.get("cwd") or None)
    latest = load_latest(folder, warn=log.warning, project=str(root))
    if latest is None:
        return {}
    sid = client_session_id(CLIENT, payload.get("session_id"))
    if source == "compact":
        session = _Session(store_dir, payload)
        try:
            session.state.update(compacted_at=time.time(), recalled=[])
            session.save()
        finally:
            session.release()
    if source in ("compact", "resume") or latest.session == sid:
        book, what = latest.facts, "restored from the checkpoint written"
    else:
        try:
            latest = _caught_up(payload, latest, folder, root) or latest
        except Exception as err:  # noqa: BLE001 - the checkpoint as it is still helps
            log.warning("gardener: earlier sessions not read to their end (%s)", err)
        book, what = carried_facts(latest.facts), "carried over from the checkpoint of"
        if not len(book):
            return {}
    block = _state_block(book)
    if not block:
        return {}
    text = f"{block}\n[gardener: {what} {latest.created} ({latest.trigger}), {latest.path}]"
    return _hook_output("SessionStart", additionalContext=text)


# --- entry points ---

HANDLERS = {
    "PostToolUse": post_tool_use,
    "PostToolUseFailure": post_tool_use_failure,
    "UserPromptSubmit": user_prompt_submit,
    "Stop": stop,
    "PreCompact": pre_compact,
    "SessionStart": session_start,
}


def handle(event: str, payload: dict) -> dict:
    """The answer to one hook event: the JSON to print (``{}`` for nothing to say). PreCompact
    answers ``{"text": ..., "checkpoint": path}``: Claude Code takes plain text from that hook,
    so ``main`` prints ``text`` alone. Raises on internal errors (``main`` logs them)."""
    fn = HANDLERS.get(event)
    if fn is None or not isinstance(payload, dict):
        return {}
    store_dir = _store_dir(payload)
    if not _own_folder(store_dir):
        _log_line(
            store_dir,
            event,
            f"{store_dir} is not this user's to write (someone else's project?): no store"
            " made there, nothing answered",
        )
        return {}
    return fn(_regular_transcript(event, payload, store_dir))


def _own_folder(folder: Path) -> bool:
    """Whether a hook may write in ``folder`` (the store's), or, before it exists, in the
    nearest folder above it that does (where it would be made): only when it is this user's own
    and writable. A hook run in someone else's checkout must leave nothing there; root passes
    every ``os.access`` check, hence the owner."""
    folder = Path(folder)
    for candidate in (folder, *folder.parents):
        try:
            info = os.stat(candidate)
        except FileNotFoundError:
            continue
        except OSError:
            return False
        return info.st_uid == os.getuid() and os.access(candidate, os.W_OK)
    return False


def _regular_transcript(event: str, payload: dict, store_dir: Path) -> dict:
    """The payload without a ``transcript_path`` that is not a regular file now: a FIFO there
    blocks its reader until someone writes to it, a number would read a file descriptor. Every
    reader checks again on the file it opens (``transcript.open_regular``), so nothing swapped
    in between can block one either."""
    path = payload.get("transcript_path")
    if path is None or path == "":
        return payload
    try:
        mode = os.stat(path).st_mode if isinstance(path, str) else 0
    except FileNotFoundError:
        return {**payload, "transcript_path": None}  # not written yet: nothing to read
    except (OSError, ValueError):
        mode = 0
    if stat.S_ISREG(mode):
        return payload
    _log_line(store_dir, event, f"transcript_path {path!r} is not a regular file: not read")
    return {**payload, "transcript_path": None}


def render(event: str, answer: dict) -> str:
    """What ``main`` prints for ``handle``'s answer."""
    if event == "PreCompact":
        return str(answer.get("text") or "")
    return json.dumps(answer, ensure_ascii=False) if answer else ""


def _log_line(store_dir: Path | None, event: str, message: str) -> None:
    """One line in ``<store>/hooks.log`` (in the user's own log folder, ``_user_log_dir``, when
    the store's is not this user's to write); never raises."""
    try:
        folder = store_dir or _store_dir({})
        if not _own_folder(folder):
            folder = _user_log_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / LOG_NAME
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name(LOG_NAME + ".1"))
        except OSError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        line = " ".join(message.split())[:2000]
        with open(path, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(f"{stamp} {event or '?'} {line}\n")
    except Exception:  # noqa: BLE001 - the log is the last resort
        pass


def _user_log_dir() -> Path:
    """Where a hook logs what has no store of its own to go to: ``$XDG_STATE_HOME/aider-gardener``
    (default ``~/.local/state/aider-gardener``)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "aider-gardener"


def _log_handler(where: list) -> Any:
    """A logging handler that sends the store's and continuity's warnings to hooks.log, not to
    Claude Code's stderr (``where``: [store folder, event], filled in as they are known)."""
    import logging

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                _log_line(where[0], where[1], record.getMessage())
            except Exception:  # noqa: BLE001
                pass

    return Handler(logging.WARNING)


def answer(event: str, raw: bytes, send: Callable[[str], None] | None = None) -> str:
    """What to print for one hook's stdin bytes: parsing, the handler, and the log line for
    anything that goes wrong (never raises). Shared by the one-shot process and the server.

    ``send`` (the server's): called with the answer as soon as it is known; the work handlers
    leave for after it (``_after_answer``) is then done here, after Claude Code has its answer."""
    import logging

    global _deferred
    where: list = [None, event]
    handler = _log_handler(where)
    root_log = logging.getLogger("aider_gardener")
    root_log.addHandler(handler)
    root_log.propagate = False
    jobs: list[Callable[[], None]] = []
    _deferred = jobs if send is not None else None
    try:
        try:
            out = _answer(event, raw, where)
        finally:
            _deferred = None
        if send is not None:
            try:
                send(out)
            except Exception as err:  # noqa: BLE001 - the client is gone: the work is still due
                _log_line(where[0], where[1], f"answer not sent ({type(err).__name__}: {err})")
            for job in jobs:
                try:
                    job()
                except Exception as err:  # noqa: BLE001 - never break Claude Code
                    _log_line(where[0], where[1], f"after the answer: {_failure(err)}")
        return out
    finally:
        root_log.removeHandler(handler)


def _failure(err: BaseException) -> str:
    import traceback

    tb = traceback.extract_tb(err.__traceback__)
    at = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return f"internal error {type(err).__name__}: {err}{at}"


def _answer(event: str, raw: bytes, where: list) -> str:
    try:
        text = raw.decode("utf-8", "surrogateescape").strip()
        if not text:
            _log_line(None, event, "empty input: nothing to do")
            return ""
        try:
            payload = json.loads(text)
        except ValueError as err:
            _log_line(None, event, f"input is not JSON ({err}): ignored")
            return ""
        if not isinstance(payload, dict):
            _log_line(None, event, f"input is JSON {type(payload).__name__}, not an object")
            return ""
        event = event or str(payload.get("hook_event_name") or "")
        where[1] = event
        try:
            where[0] = _store_dir(payload)
        except Exception:  # noqa: BLE001
            where[0] = None
        if event not in HANDLERS:
            _log_line(where[0], event, f"unknown hook event {event!r}: ignored")
            return ""
        return render(event, handle(event, payload))
    except Exception as err:  # noqa: BLE001 - never break Claude Code
        _log_line(where[0], event, _failure(err))
        return ""


# --- the warm server ---
#
# A fresh Python process spends ~1 s before the first ingest can finish: tiktoken builds its BPE
# tables (o200k: ~0.7 s) and the classifiers compile ~400 regular expressions, several times the
# 200 ms PostToolUse budget, on every tool call. So the first hook of a session starts a server
# in the background (one per user, interpreter and code version, on a Unix socket in a private
# 0700 folder) and answers its own event in process; later hooks hand their stdin to the server,
# which answers each request in a child forked from its warm process (the same ``answer``, with
# the caller's working directory and gardener/Claude environment variables), and print its
# reply. The server exits after ``SERVER_IDLE`` seconds without a request, or at its next check
# (every ``GARDENER_HOOKD_CHECK`` seconds, 30) once its socket is removed or taken.
# ``GARDENER_HOOKD=0`` turns it off (every event in its own process).
#
# What a child would otherwise load for itself on every request (the store, continuity, the
# chunker's tokenizer), the server loads once before it forks any (``_warm_up``: one answer of
# each event for a scratch project). It listens before it warms up, so a hook that comes
# meanwhile waits for it instead of answering in process beside it on the same cores.
# A child sends its answer as soon as it has it and then does what the answer did not need
# (``_after_answer``: storing the conversation), so Claude Code waits for the answer only.
#
# Nothing one request does can wedge it: the server only accepts and forks; a child's reads
# have a deadline, and the kernel ends a child still running when its client stopped waiting, or
# as long again after its answer (``SIGALRM``); the client waits ``reply_wait(event)``, a third
# of its hook's timeout in hooks.json, then answers in process with the two thirds left.
SERVER_IDLE = 900.0
SERVER_CHECK = 30.0  # seconds between checks that the socket is still this server's
SERVER_CHECK_ENV = "GARDENER_HOOKD_CHECK"  # that interval, in seconds (tests shorten it)
REQUEST_TIMEOUT = 5.0  # for a whole request to arrive (a client sends it at once)
WARM_UP_LIMIT = 60  # seconds; a server whose warm-up step takes longer exits
MAX_REQUESTS = 16  # children at once; past that a client answers in process


def _check_interval() -> float:
    try:
        value = float(os.environ.get(SERVER_CHECK_ENV, "") or SERVER_CHECK)
    except ValueError:
        return SERVER_CHECK
    return value if 0.05 <= value <= 3600 else SERVER_CHECK


def serve(path: Path, idle: float = SERVER_IDLE, check: float | None = None) -> int:
    """Answer hook requests on the Unix socket ``path`` until ``idle`` seconds pass without
    one, or until the socket is removed or taken by another server (checked every ``check``
    seconds, default ``GARDENER_HOOKD_CHECK`` or 30).

    Each request is answered in a child forked from this warm process (a few ms): the loop
    here only accepts, so no request waits on another, and each has its own environment and
    working directory. SQLite serializes the children's writes."""
    import fcntl
    import signal
    import socket

    from .. import preload

    path = Path(path)
    check = _check_interval() if check is None else check
    try:
        lock = open(f"{path}.lock", "w")
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server holds this socket
    preload._done = True  # no threads race to import the numeric stack here (see ``_open``)
    _exit_cleanly_on_signals()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inode = None
    try:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old_umask)
        sock.listen(64)
        inode = path.stat().st_ino
        Path(f"{path}.pid").write_text(str(os.getpid()))
        os.chdir("/")  # hold no project folder (a test's temp folder, a removed worktree)
        warming: Any = _warm_up_steps()  # between requests, until it is done
        running: set[int] = set()
        last = time.monotonic()
        while True:
            _reap(running)
            if warming is not None:
                sock.settimeout(0.0)
            else:
                sock.settimeout(0.1 if running else min(idle, check))  # reap children soon
            try:
                conn, _ = sock.accept()
            except (socket.timeout, BlockingIOError):
                if warming is not None:
                    signal.alarm(WARM_UP_LIMIT)  # a step that hangs ends the server
                    if next(warming, None) is None:
                        warming = None
                    signal.alarm(0)
                    continue
                if time.monotonic() - last >= idle:
                    return 0
                try:
                    if path.stat().st_ino != inode:
                        return 0  # another server took the name: no client reaches this one
                except OSError:
                    return 0  # the socket (or its folder) was removed
                continue
            last = time.monotonic()
            with conn:
                if len(running) >= MAX_REQUESTS:
                    _log_line(_user_log_dir(), "server", "too many requests at once: one refused")
                    continue  # its client answers in process
                try:
                    pid = os.fork()
                except OSError as err:
                    _log_line(_user_log_dir(), "server", f"cannot fork ({err}): one refused")
                    continue
                if pid == 0:
                    _serve_child(conn, sock, lock)
                running.add(pid)
    finally:
        sock.close()
        _remove_own(path, inode)
        lock.close()


def _warm_up() -> None:
    """All of ``_warm_up_steps`` at once."""
    for _ in _warm_up_steps():
        pass


def _warm_up_steps() -> Any:
    """Answer one request of each event, in process, for a scratch project in a temp folder
    (removed after; the caller's environment put back around each): every module and table a
    handler loads on first use is then this process's, and each child forked from it starts
    with them. Yields after each request (``True``; ``None`` once done), so that the server
    answers the hooks of the session that started it in between: one that comes during the
    warm-up waits for a step, not for all of it. A warm-up that fails leaves the server as it
    was: its children load what they need."""
    import shutil
    import tempfile

    scratch = None
    try:
        scratch = Path(tempfile.mkdtemp(prefix="gardener-warm-up-"))
        for event, payload in _warm_up_requests(scratch):
            saved = dict(os.environ)
            try:
                for key in ("AIDER_GARDENER_STORE", "CLAUDE_PROJECT_DIR", "CLAUDE_CONFIG_DIR"):
                    os.environ.pop(key, None)
                home, state = str(scratch / "home"), str(scratch / "state")
                os.environ.update(HOME=home, XDG_STATE_HOME=state)
                answer(event, json.dumps(payload).encode())
            finally:
                os.environ.clear()
                os.environ.update(saved)
            yield True
    except Exception as err:  # noqa: BLE001 - a server that is not warm still answers
        _log_line(_user_log_dir(), "server", f"warm-up failed ({type(err).__name__}: {err})")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _warm_up_requests(scratch: Path) -> list[tuple[str, dict]]:
    """One request of each event as Claude Code sends them, for a project in ``scratch``: a
    build log big enough to be replaced (and as a failure, and as a Read of a log), a reply, a
    compaction and the start after it, and a later session that starts with the error carried
    over and recalls the log."""
    project = scratch / "project"
    (project / ".git").mkdir(parents=True)  # a repository's root, as far as the store looks
    sid = "0warm-up"
    transcript = scratch / "home" / ".claude" / "projects" / "-project" / f"{sid}.jsonl"
    transcript.parent.mkdir(parents=True)
    reply = "The build fails: src/parser.c uses tokn_kind, which is undeclared; fixing it next."
    build = "".join(f"[{i}/400] Building CXX object src/CMakeFiles/m{i}.o\n" for i in range(400))
    build += "src/parser.c:412:9: error: 'tokn_kind' undeclared (first use in this function)\n"
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True}
    records = [
        {"type": "user", "message": {"role": "user", "content": "build the project"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [use]}},
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{**result, "content": f"Exit code 2\n{build}"}],
            },
            "toolUseResult": f"Error: Exit code 2\n{build}",
        },
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": reply}],
                "usage": {"input_tokens": 1200, "cache_read_input_tokens": 30000},
            },
        },
    ]
    lines = (json.dumps({**r, "cwd": str(project), "version": "2.1.332"}) for r in records)
    transcript.write_text("".join(f"{line}\n" for line in lines))
    base = {"session_id": sid, "transcript_path": str(transcript), "cwd": str(project)}
    later = dict(base, session_id="1warm-up", transcript_path=None)  # the next session
    log = str(project / "build.log")
    return [
        ("SessionStart", dict(base, source="startup")),
        ("UserPromptSubmit", dict(base, prompt="build the project")),
        (
            "PostToolUse",
            dict(
                base,
                tool_name="Bash",
                tool_input={"command": "make"},
                tool_response={"stdout": build, "stderr": "", "interrupted": False},
            ),
        ),
        (
            "PostToolUseFailure",
            dict(
                base,
                tool_name="Bash",
                tool_input={"command": "make"},
                error=f"Exit code 2\n{build}",
            ),
        ),
        (
            "PostToolUse",
            dict(
                base,
                tool_name="Read",
                tool_input={"file_path": log},
                tool_response={"type": "text", "file": {"filePath": log, "content": build}},
            ),
        ),
        ("Stop", dict(base, last_assistant_message=reply)),
        ("PreCompact", dict(base, trigger="auto")),
        ("SessionStart", dict(base, source="compact")),
        ("SessionStart", dict(later, source="startup")),
        ("UserPromptSubmit", dict(later, prompt="why is tokn_kind undeclared in the build?")),
    ]


def _reap(running: set[int]) -> None:
    """Collect the children that have ended; one the alarm ended is logged (its client had
    stopped waiting and answered in process, or its work after the answer was stuck)."""
    import signal

    for pid in list(running):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if not done:
            continue
        running.discard(pid)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            _log_line(_user_log_dir(), "server", "a request ran out of time (SIGALRM): ended")


def _exit_cleanly_on_signals() -> None:
    """SIGTERM/SIGHUP (a logout, ``kill``, a test's teardown) and SIGALRM (a warm-up past
    ``WARM_UP_LIMIT``) end ``serve`` through its ``finally``, so the socket and pid files go
    with the process instead of piling up."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        try:
            signal.signal(sig, stop)
        except (ValueError, OSError):  # not the main thread (in-process tests)
            pass


def _remove_own(path: Path, inode: int | None) -> None:
    """Remove the socket and its side files, unless another server has taken the name; the pid
    file whenever it still names this process (a removed socket's pid file must not outlive
    it: whoever stops servers by it would signal a pid the system may have reused)."""
    try:
        own = inode is not None and path.stat().st_ino == inode
    except OSError:
        own = False
    pid_file = Path(f"{path}.pid")
    try:
        if pid_file.read_text().strip() == str(os.getpid()):
            pid_file.unlink()
    except OSError:
        pass
    if not own:
        return
    for leftover in (path, Path(f"{path}.spawned")):
        try:
            leftover.unlink()
        except OSError:
            pass


def _serve_child(conn: Any, listener: Any, lock: Any) -> None:
    """One request in a child of the server; never returns. The child lets go of what is the
    server's (its socket, its lock: a lingering child must not keep a new server from
    starting), and ends as signals say, never through the server's clean-up."""
    import signal

    try:
        listener.close()
        lock.close()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        _serve_one(conn)
    finally:
        os._exit(0)


def _serve_one(conn: Any) -> None:
    """Read the request within ``REQUEST_TIMEOUT``, take on the caller's working directory and
    environment, and answer it, then do what the answer left for after it. The kernel ends the
    process (``SIGALRM``) once the client has stopped waiting, or once the work after the answer
    has taken as long again, whatever the handler is stuck in."""
    import math
    import signal
    import socket

    try:
        data = read_to_end(conn, 1 << 20, time.monotonic() + REQUEST_TIMEOUT)
        head, _, raw = data.partition(b"\n")
        meta = json.loads(head)
        event = str(meta.get("event") or "")
        signal.alarm(math.ceil(reply_wait(event)))
        env = meta.get("env") if isinstance(meta.get("env"), dict) else {}
        for key in [k for k in os.environ if k.startswith(ENV_PREFIXES) or k in ENV_NAMES]:
            os.environ.pop(key)
        os.environ.update({str(k): str(v) for k, v in env.items()})
        try:
            os.chdir(meta.get("cwd") or "/")
        except OSError:
            pass

        def send(out: str) -> None:
            try:
                conn.sendall(b"ok\n" + out.encode("utf-8", "surrogateescape"))
                conn.shutdown(socket.SHUT_RDWR)  # the client has all of it: it prints and exits
            finally:
                conn.close()
                signal.alarm(math.ceil(reply_wait(event)))

        answer(event, raw, send=send)
    except Exception as err:  # noqa: BLE001 - logged; the client answers in process
        _log_line(_user_log_dir(), "server", f"request failed ({type(err).__name__}: {err})")


if __name__ == "__main__":  # pragma: no cover - the server: ``-m ... --serve SOCKET``
    sys.exit(serve(Path(sys.argv[2])) if sys.argv[1:2] == ["--serve"] else 2)
