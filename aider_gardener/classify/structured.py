"""Recognise structured data: a whole JSON document, or JSON / lockfile blocks inside a log.

A parse is the only trustworthy test for JSON (a log line can look like a key/value pair), so
whole texts and embedded ``{ … }`` blocks are confirmed with :func:`json.loads`. Lockfiles
(``yarn.lock``) are not JSON but have a rigid line grammar, checked line by line on the run only.
"""

from __future__ import annotations

import json
import re

from .textlines import Lines

MAX_PARSE = 8_000_000
_JSON_OPEN = re.compile(r"\n[ \t]*[{\[][ \t]*\r?(?=\n)")
_YARN_HINT = re.compile(r'\n[ \t]+version "')
_LOCK_KEY = r'(?:"[^"\n]+"|@?[\w./-]+@[^\s,"]*)'
_LOCK_LINE = r"""(?:
        [ \t]*
      | [ \t]*\#[^\n]*
      | [ \t]*KEY(?:,\ KEY)*:[ \t]*
      | [ \t]+(?:version|resolved|integrity|dependencies|optionalDependencies|peerDependencies
          |bin):?[^\n]*
      | [ \t]+"?@?[\w./-]+"?\ (?:"[^"\n]*"|\S+)[ \t]*
    )\r?""".replace("KEY", _LOCK_KEY)
_YARN_LINE = re.compile(r"^" + _LOCK_LINE + r"$", re.X)
# a whole run of lockfile lines in one C-level match; judging each line by its first word is
# enough inside a run (and several times faster than the full grammar above)
_YARN_RUN = re.compile(
    r"(?:[ \t]*(?:[#\"@]|[\w./-]+(?:@|\ \")|version\ |resolved\ |integrity\ "
    r"|(?:optional|peer)?[dD]ependencies:)[^\n]*\n|[ \t]*\r?\n)+",
    re.X,
)
MIN_BLOCK_LINES = 8
MIN_LOCK_LINES = 20


def is_json(text: str) -> bool:
    """The whole text is one JSON document or JSON Lines."""
    s = text.strip()
    if len(s) < 2 or s[0] not in "{[" or len(s) > MAX_PARSE:
        return False
    try:
        json.loads(s)
        return True
    except (ValueError, RecursionError):
        pass
    rows = [x for x in s.splitlines()[:50] if x.strip()]
    if len(rows) < 2:
        return False
    try:
        for row in rows:
            json.loads(row)
        return s.count("\n") < 50 or _all_json_lines(s)
    except (ValueError, RecursionError):
        return False


def _all_json_lines(s: str) -> bool:
    try:
        for row in s.splitlines():
            if row.strip():
                json.loads(row)
        return True
    except (ValueError, RecursionError):
        return False


def _has_json(text: str) -> bool:
    return text.lstrip(" \t")[:1] in ("{", "[") or bool(_JSON_OPEN.search(text))


def _has_lock(text: str) -> bool:
    return len(_YARN_HINT.findall(text, 0, 200_000)) >= 3


def has_blocks(text: str) -> bool:
    return _has_json(text) or _has_lock(text)


def find_blocks(text: str, lines: Lines | None = None) -> list[tuple[int, int, str]]:
    """Character spans of embedded JSON documents and lockfile runs, in order."""
    has_json, has_lock = _has_json(text), _has_lock(text)
    if not has_json and not has_lock:
        return []
    L = lines or Lines(text)
    out: list[tuple[int, int, str]] = []
    if has_json:
        starts = [0] if text.lstrip(" \t")[:1] in ("{", "[") else []
        starts.extend(m.start() + 1 for m in _JSON_OPEN.finditer(text))
        budget = [4 * len(L.lines) + 1000]  # lines the bracket scans may visit, in total
        for pos in starts:
            if (out and pos < out[-1][1]) or budget[0] <= 0:
                continue
            span = _json_block(L, L.index(pos), budget)
            if span:
                out.append(span)
    if has_lock:
        out.extend(_lock_runs(L, out))
    out.sort()
    return out


def _json_block(L: Lines, k: int, budget: list[int]) -> tuple[int, int, str] | None:
    """The bracket-balanced block starting at line ``k`` if it parses as JSON. ``budget`` caps the
    total scanning, so a text of ten thousand unmatched ``{`` lines stays linear."""
    lines, n = L.lines, len(L.lines)
    depth = 0
    i = k
    limit = min(n, k + budget[0])
    while i < limit:
        depth += _depth_change(lines[i])
        i += 1
        if depth <= 0:
            break
    budget[0] -= i - k
    if depth != 0 or i - k < MIN_BLOCK_LINES:
        return None
    start, end = L.span(k, i)
    try:
        json.loads(L.text[start:end])
    except (ValueError, RecursionError):
        return None
    return start, end, "json"


def _depth_change(line: str) -> int:
    if '"' in line:
        line = re.sub(r'"(?:[^"\\]|\\.)*"', "", line)
    return line.count("{") + line.count("[") - line.count("}") - line.count("]")


def _lock_runs(L: Lines, taken: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    text, lines = L.text, L.lines
    pos = 0
    while True:
        m = _YARN_HINT.search(text, pos)
        if not m:
            break
        i = L.index(m.start() + 1)
        a = i
        while a > 0 and i - a < 50 and _YARN_LINE.match(lines[a - 1]):
            a -= 1
        run = _YARN_RUN.match(text, L.offset(i))
        b = L.index(run.end()) if run and run.end() < len(text) else len(lines)
        b = max(b, i + 1)
        while b > a and not lines[b - 1].strip():
            b -= 1
        while a < b and not lines[a].strip():
            a += 1
        if b - a >= MIN_LOCK_LINES:
            start, end = L.span(a, b)
            if not any(s < end and start < e for s, e, _ in taken):
                out.append((start, end, "yarn.lock"))
        pos = max(L.offset(b), m.end())
    return out
