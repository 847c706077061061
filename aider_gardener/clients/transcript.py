"""Claude Code's real context usage, read from its session transcript (JSONL).

Each assistant record of ``transcript_path`` carries the Messages API ``usage`` of the request
that produced it, so the context the model saw on the last request is exactly
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``: the number Claude Code
itself compares against the window before it auto-compacts, which the gardener's own token
estimates would only approximate. Subagent (``isSidechain``), synthetic and zero-usage records
are skipped; a compaction boundary after the last usage makes it stale (Claude Code's estimate,
``compactMetadata.postTokens``, stands in when present). The window is 1,000,000 for ``[1m]``
models or when more than 200,000 tokens were used, else 200,000 (``GARDENER_CONTEXT_WINDOW``
overrides). Transcripts are read from the end in growing blocks, so a hook stays fast however
long the session is; the last usage is saved in the store folder for the MCP server.

Record format relied on: docs/decisions/026-claude-code-context-usage.md
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

DEFAULT_WINDOW = 200_000
LARGE_WINDOW = 1_000_000
WINDOW_ENV = "GARDENER_CONTEXT_WINDOW"
USAGE_FILENAME = "claude_usage.json"
TAIL_BLOCK = 256 << 10  # first read from the end; doubled until an assistant usage is found
MAX_SCAN = 64 << 20  # never read more than this of one transcript
USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


@dataclass
class Usage:
    """The context the model saw on its last request: ``used`` of ``window`` tokens.

    ``at``: when it was measured (Unix seconds; the transcript record's timestamp).
    ``model``: the model name as recorded (or as Claude Code's setting gave it).
    ``estimated``: True when ``used`` is Claude Code's own post-compaction estimate
    (``compactMetadata.postTokens``) rather than an API usage.
    """

    used: int
    window: int
    model: str | None
    at: float
    estimated: bool = False

    @property
    def fraction(self) -> float:
        return self.used / self.window if self.window > 0 else 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.fraction

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Usage":
        return cls(
            used=int(data["used"]),
            window=int(data["window"]),
            model=None if data.get("model") is None else str(data["model"]),
            at=float(data.get("at") or 0.0),
            estimated=bool(data.get("estimated", False)),
        )


def window_for(model: str | None, used: int = 0) -> int:
    """The context window of ``model`` in tokens (see the module docstring)."""
    env = os.environ.get(WINDOW_ENV, "").strip()
    if env:
        try:
            value = int(env.replace("_", "").replace(",", ""))
            if value > 0:
                return value
        except ValueError:
            pass
    name = (model or "").lower()
    if "[1m]" in name or name.endswith("-1m") or used > DEFAULT_WINDOW:
        return LARGE_WINDOW
    return DEFAULT_WINDOW


def _timestamp(record: dict) -> float:
    raw = record.get("timestamp")
    if isinstance(raw, str) and raw:
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return time.time()


def usage_tokens(usage: object) -> int:
    """input + cache creation + cache read of one Messages API ``usage`` object (0 if absent)."""
    if not isinstance(usage, dict):
        return 0
    total = 0
    for key in USAGE_KEYS:
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            total += int(value)
    return total


def _from_record(record: dict, model_hint: str | None) -> Usage | None:
    """A Usage for one transcript record, None when the record says nothing about it."""
    if not isinstance(record, dict) or record.get("isSidechain"):
        return None
    kind = record.get("type")
    if kind == "system" and record.get("subtype") == "compact_boundary":
        meta = record.get("compactMetadata") or {}
        post = meta.get("postTokens") if isinstance(meta, dict) else None
        if isinstance(post, (int, float)) and post > 0:
            return Usage(
                int(post), window_for(model_hint, int(post)), model_hint, _timestamp(record), True
            )
        return Usage(-1, 0, model_hint, _timestamp(record), True)  # stale: unknown until a reply
    if kind != "assistant":
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    model = message.get("model")
    if model == "<synthetic>":
        return None
    used = usage_tokens(message.get("usage"))
    if used <= 0:
        return None
    name = model_hint or (model if isinstance(model, str) else None)
    return Usage(used, window_for(name, used), name, _timestamp(record))


def _last_usage(lines: list[bytes], model_hint: str | None) -> tuple[bool, Usage | None]:
    """(whether a record about usage was found, its usage: None when it made usage unknown)."""
    for line in reversed(lines):
        line = line.strip()
        if not line or b'"' not in line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            continue
        found = _from_record(record, model_hint)
        if found is not None:
            return True, (None if found.used < 0 else found)
    return False, None


def open_regular(path: Any, flags: int = 0) -> Any:
    """``path`` opened for reading (binary) when it is a regular file, else None. Opened without
    blocking, so a FIFO or a device put there cannot hang the hook, and checked on the open file,
    so nothing swapped in between a check and the read gets read."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | flags)
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return os.fdopen(fd, "rb")
    except OSError:
        pass
    os.close(fd)
    return None


def usage_from_transcript(path: str | os.PathLike | None, model: str | None = None) -> Usage | None:
    """The last request's context usage in the transcript at ``path``; None when the file is
    missing or unreadable, holds no usage yet, or was compacted since the last reply without an
    estimate. Never raises. ``model``: Claude Code's model setting when the caller knows it (it
    alone tells a ``[1m]`` window)."""
    fh = open_regular(path)
    if fh is None:
        return None
    try:
        with fh:
            size = fh.seek(0, os.SEEK_END)
            block = TAIL_BLOCK
            while True:
                start = max(0, size - block)
                fh.seek(start)
                data = fh.read(size - start)
                lines = data.split(b"\n")
                if start > 0:
                    lines = lines[1:]  # the first piece is the end of a line cut in the middle
                decided, found = _last_usage(lines, model)
                if decided or start == 0 or block >= MAX_SCAN:
                    return found
                block *= 4
    except OSError:
        return None


def save_usage(store_dir: str | os.PathLike, usage: Usage) -> Path | None:
    """Write ``usage`` to ``<store_dir>/claude_usage.json`` atomically (temp file + rename, so a
    reader never sees half a file). Returns the path, None when it could not be written."""
    folder = Path(store_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".usage-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(usage.to_dict(), fh)
            target = folder / USAGE_FILENAME
            os.replace(tmp, target)
            return target
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except (OSError, TypeError, ValueError):
        return None


def load_usage(store_dir: str | os.PathLike) -> Usage | None:
    """The usage last saved in ``store_dir``; None when there is none or it is unreadable."""
    try:
        data = json.loads((Path(store_dir) / USAGE_FILENAME).read_text(encoding="utf-8"))
        return Usage.from_dict(data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


# --- the assistant's replies, read incrementally ---

REPLY_TAIL = 256 << 10  # what is read of a transcript this session has no offset into yet
MAX_REPLY_READ = 16 << 20  # more new transcript than this: only its last REPLY_TAIL is read


@dataclass
class Reply:
    """The text of one main-thread assistant message (its text blocks, in order)."""

    text: str
    uuid: str | None = None
    message_id: str | None = None


def _reply_of(record: dict) -> Reply | None:
    """The text of an assistant record; None for everything else: other record types, a
    subagent's (``isSidechain``), Claude Code's own (``<synthetic>``, API errors), and messages
    that are only tool calls or thinking."""
    if record.get("type") != "assistant" or record.get("isSidechain"):
        return None
    if record.get("isApiErrorMessage"):
        return None
    message = record.get("message")
    if not isinstance(message, dict) or message.get("model") == "<synthetic>":
        return None
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
    else:
        return None
    text = "\n".join(p for p in parts if p.strip()).strip()
    if not text:
        return None
    uuid, mid = record.get("uuid"), message.get("id")
    return Reply(
        text, uuid if isinstance(uuid, str) else None, mid if isinstance(mid, str) else None
    )


def replies_since(
    path: str | os.PathLike | None, offset: int | None = None
) -> tuple[list[Reply], int | None]:
    """The assistant's replies written to the transcript at ``path`` after byte ``offset``, and
    the offset to read on from next time (just past the last complete line: a record Claude Code
    is still writing is read next time, whole).

    A hook calls this on every prompt, so it reads only what is new; without a usable offset,
    or past ``MAX_REPLY_READ`` new bytes, only the last ``REPLY_TAIL`` bytes. Records of one
    message written a block at a time become one reply. Never raises: ``([], offset)`` when
    unreadable."""
    fh = open_regular(path)
    if fh is None:
        return [], offset
    try:
        with fh:
            size = fh.seek(0, os.SEEK_END)
            start = offset if isinstance(offset, int) and 0 <= offset <= size else None
            if start:
                fh.seek(start - 1)
                if fh.read(1) != b"\n":
                    start = None  # not where a line ended: another file now
            if start is None or size - start > MAX_REPLY_READ:
                start = max(0, size - REPLY_TAIL)
                cut = start > 0  # the first piece is the end of a line cut in the middle
            else:
                cut = False
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    lines = data[:end].split(b"\n")
    if cut:
        lines = lines[1:]
    replies: list[Reply] = []
    for line in lines:
        if b'"assistant"' not in line or b'"text"' not in line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            continue
        reply = _reply_of(record) if isinstance(record, dict) else None
        if reply is None:
            continue
        last = replies[-1] if replies else None
        if last is not None and reply.message_id and last.message_id == reply.message_id:
            last.text += "\n" + reply.text
            last.uuid = reply.uuid or last.uuid
        else:
            replies.append(reply)
    return replies, start + end
