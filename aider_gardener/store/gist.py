"""What an entry is about, in one short text embedded beside its chunks.

A question asked by meaning ("why did the login check fail?") matches what an entry is about,
while its chunks are mostly noise: a 300-line test run is passing lines, a long reply is code.
So each tool output that failed or is long gets one more chunk made of its command, its error
and failure lines and the files it names; each long reply its first sentences and the files it
touches.
The gist is only embedded (the original stays the text full-text search reads) and it is the
excerpt when it is the chunk that matched. Design: docs/decisions/095-recall-by-meaning.md.
"""

from __future__ import annotations

import re

MAX_CHARS = 700  # about 150-200 word pieces: one embedding window with room to spare
MAX_LINES = 6  # failure lines kept; the first ones say most (later ones repeat or cascade)
MAX_FILES = 8
_FAILURE = re.compile(
    r"\b(?:error|errors|fatal|exception|panic|traceback|failed|failure|failing|denied|refused"
    r"|cannot|can't|could not|unable|not found|no such|undefined|undeclared|timeout|timed out"
    r"|warning|assert\w*|expected)\b",
    re.IGNORECASE,
)
# A line that names the failure itself (an exception with its message, a failed test, a compiler
# error) says more than one that only has a failure word ("timeout-2.4.0" in a plugin list,
# "errors = scan(...)" in quoted code): those lines come first.
_STRONG = re.compile(
    r"\b\w*(?:Error|Exception|Exit)\b:|\bFAILED\b|\bFAIL:|^E\s|\berror(?:\[\w+\])?:|\bfatal:"
    r"|\bpanicked\b|Traceback"
)
_FILE = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}\b(?!\()")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_NOT_PROSE = re.compile(r"^\s*(?:```|<{5,}|={5,}|>{5,}|[-*+] |\d+\. |#|\||    )")
_SKIP_FILE = re.compile(r"^(?:e\.g|i\.e|vs|etc|[\d.]+)$|\.(?:com|org|net|io)$", re.IGNORECASE)


def gist(text: str, cls: str, role: str | None, command: str | None) -> str | None:
    """The gist to embed for an entry, or None when its chunks already say it (short turns)."""
    if not text or not text.strip():
        return None
    if role == "tool" or command:
        return _tool_gist(text, command)
    if role == "assistant" and len(text) > MAX_CHARS:
        return _reply_gist(text)
    return None


def _tool_gist(text: str, command: str | None) -> str | None:
    strong: list[str] = []
    weak: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        s = " ".join(line.split())
        hard = _STRONG.search(line) is not None
        if len(s) < 8 or not (hard or _FAILURE.search(s)):
            continue
        key = re.sub(r"\d+", "0", s)[:80]  # the same failure on another line number
        if key in seen:
            continue
        seen.add(key)
        if hard:
            strong.append(s[:200])
            if len(strong) >= MAX_LINES:
                break
        elif len(weak) < MAX_LINES:  # more could never be shown: strong ones come first
            weak.append(s[:200])
    lines = (strong + weak)[:MAX_LINES]
    head = f"$ {command.strip()}" if command and command.strip() else ""
    if not lines and (not head or len(text) <= MAX_CHARS):
        return None  # a short output that did not fail is its own gist
    parts = [head, *lines]
    files = _files(text)
    if files:
        parts.append("files: " + ", ".join(files))
    return _cap("\n".join(p for p in parts if p))


def _reply_gist(text: str) -> str | None:
    prose = [ln for ln in text.splitlines() if ln.strip() and not _NOT_PROSE.match(ln)]
    sentences = _SENTENCE.split(" ".join(" ".join(prose).split()))
    opening = " ".join(sentences[:3])
    files = _files(text)
    parts = [opening] + (["files: " + ", ".join(files)] if files else [])
    out = _cap("\n".join(p for p in parts if p))
    return out or None


def _files(text: str) -> list[str]:
    found: dict[str, None] = {}
    for m in _FILE.finditer(text[:200_000]):
        name = m.group(0).strip(".")
        if "." in name and not _SKIP_FILE.search(name):
            found.setdefault(name, None)
            if len(found) >= MAX_FILES:
                break
    return list(found)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"
