"""Outputs too large to segment (a runaway build, a dumped binary-ish log): one linear pass.

Classifying and template-collapsing 100 MB in Python would stall the turn for tens of seconds.
Instead keep the head and the tail, and every distinct error/warning line found by one compiled
regex over the whole text (which runs at hundreds of MB/s), capped, with a count of the rest.
"""

from __future__ import annotations

import re

from ..types import Compressed, CompressOptions
from .base import clip_line

LARGE_CHARS = 4_000_000
_HEAD = 30
_TAIL = 30
_MAX_PROBLEM_LINES = 200
_PROBLEM_RE = re.compile(
    r"^.*(?:\berror\b|\bERROR\b|\bError\b|\bFAIL(?:ED|URE)?\b|\bwarning\b|\bWARN(?:ING)?\b|"
    r"\bException\b|\bTraceback\b|\bpanic\b|\bfatal\b|\bFATAL\b).*$",
    re.MULTILINE,
)


def compress_large(text: str, opts: CompressOptions) -> Compressed:
    n_lines = text.count("\n") + 1
    head_end = _nth_newline(text, _HEAD)
    tail_start = _nth_newline_from_end(text, _TAIL)
    head = [clip_line(x) for x in text[:head_end].splitlines()]
    tail = [clip_line(x) for x in text[tail_start:].splitlines()] if tail_start > head_end else []

    seen: set[str] = set()
    problems: list[str] = []
    total = 0
    for m in _PROBLEM_RE.finditer(text, head_end, max(head_end, tail_start)):
        total += 1
        line = clip_line(m.group(0))
        if line not in seen and len(problems) < _MAX_PROBLEM_LINES:
            seen.add(line)
            problems.append(line)

    out = list(head)
    out.append(f"… {n_lines - len(head) - len(tail):,} lines omitted; problem lines among them:")
    out.extend(problems)
    if total > len(problems):
        out.append(
            f"… {total - len(problems):,} more error/warning lines (repeats or over the cap)"
        )
    out.extend(tail)
    out.append(
        f"[large output: {len(text):,} chars, {n_lines:,} lines, {total:,} error/warning lines;"
        " head/tail and distinct problem lines kept]"
    )
    counts = {"lines": n_lines, "lines_out": len(out), "problem_lines": total}
    return Compressed("\n".join(out), counts)


def _nth_newline(text: str, n: int) -> int:
    pos = 0
    for _ in range(n):
        nxt = text.find("\n", pos)
        if nxt < 0:
            return len(text)
        pos = nxt + 1
    return pos


def _nth_newline_from_end(text: str, n: int) -> int:
    pos = len(text)
    for _ in range(n + 1):
        prev = text.rfind("\n", 0, pos)
        if prev < 0:
            return 0
        pos = prev
    return pos + 1
