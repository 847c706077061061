"""The last step of every compression: no critical fact may be lost, whatever a compressor did.

Each compressor protects the facts it knows about in place (the log compressor keeps every line
carrying a shared fact, ``aider_gardener/critical.py``); this net catches the rest, for every class
and for forced classes alike: the facts of the original missing from the summary are looked up
(one C-speed ``str.find`` per fact, verified on the line found) and the lines carrying them come
back, in their original order, shortened only in their free text, after one marker line.
"""

from __future__ import annotations

import bisect
import re

from .. import critical
from .base import clip_line

MARKER = "[lines with facts the summary above left out:]"
LINE_LIMIT = 300
_MAX_TRIES = 40  # candidate lines checked per fact before giving up on it
_WORD = re.compile(r"[A-Za-z_][\w.:/-]{3,}")
_BOTTOM = re.compile(r"^\[(?:log|[\w-]+: \d)|^\[full output stored|^failing \(not shown above\)")


def keep_critical(
    original: str,
    summary: str,
    against: critical.Summary | None = None,
    restored: set[tuple[str, str]] | None = None,
) -> str:
    """``summary`` with the lines carrying any missing fact of ``original`` added back. A fact
    counts as present when ``against`` (the whole output's summary, for one segment's; default
    ``summary`` itself) has it, or when it is in ``restored`` (brought back for an earlier
    segment already; the facts restored here are added to it)."""
    found = critical.extract(original)
    if not any(found.values()):
        return summary
    gone = critical.missing(original, summary if against is None else against, found)
    if restored is not None:
        gone = {k: {f for f in v if (k, f) not in restored} for k, v in gone.items()}
        gone = {k: v for k, v in gone.items() if v}
        restored.update((k, f) for k, v in gone.items() for f in v)
    if not gone:
        return summary
    text = critical.strip_ansi(original).replace("\r\n", "\n").replace("\r", "\n")
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    picked: dict[int, list[str]] = {}
    if "fatal_lines" in gone:  # messages: one pass over the level lines finds them all
        want = gone.pop("fatal_lines")
        for m in critical.FATAL_LINE.finditer(text):
            msg = critical.fatal_message(m)
            if msg is not None and msg in want:
                want.discard(msg)
                picked.setdefault(bisect.bisect_right(starts, m.start()) - 1, []).append(msg)
    for kind, items in gone.items():
        for fact in sorted(items):
            i = _find_line(text, starts, kind, fact)
            if i is not None:
                picked.setdefault(i, []).append(fact)
    if not picked:
        return summary
    lines = text.split("\n")
    extra = [clip_line(lines[i].rstrip(), LINE_LIMIT) for i in sorted(picked)]
    return _insert(summary, [MARKER] + extra)


def _find_line(text: str, starts: list[int], kind: str, fact: str) -> int | None:
    if kind in ("path_lines", "frames"):
        path, _, num = fact.rpartition(":")
        name = re.split(r"[\\/]", path)[-1]
        for key in (f"{name}:{num}", f"{name}({num}", f'{name}", line {num}', f"{name}:[{num}"):
            i = _find_with(text, starts, kind, fact, key)
            if i is not None:
                return i
        return None
    return _find_with(text, starts, kind, fact, _key(kind, fact))


def _find_with(text: str, starts: list[int], kind: str, fact: str, key: str) -> int | None:
    if not key:
        return None
    pos = text.find(key)
    if key[-1:].isdigit():  # "2.cpp:1" must not stop at every "2.cpp:158"
        rx = re.compile(re.escape(key) + r"(?!\d)")
        m = rx.search(text)
        pos = m.start() if m else -1
    else:
        rx = None
    tries = 0
    while pos >= 0 and tries < _MAX_TRIES:
        i = bisect.bisect_right(starts, pos) - 1
        end = text.find("\n", pos)
        line = text[starts[i] : end if end >= 0 else len(text)]
        if critical.Summary(line).has(kind, fact):
            return i
        if end < 0:
            return None
        if rx is not None:
            m = rx.search(text, end)
            pos = m.start() if m else -1
        else:
            pos = text.find(key, end)
        tries += 1
    return None


def _key(kind: str, fact: str) -> str:
    """A literal every line carrying ``fact`` contains."""
    if kind == "exceptions":
        return fact.partition(": ")[0]
    if kind == "pods":
        return fact.rpartition(" ")[0]
    if kind == "terraform" and not fact.startswith(("Plan:", "Apply complete")):
        return fact.split(" ", 1)[0]
    if kind == "panics" and "#" in fact or kind == "terraform":
        words = _WORD.findall(fact.replace("#", " "))
        return max(words, key=len) if words else ""
    return fact


def _insert(summary: str, block: list[str]) -> str:
    """Before the closing summary/handle lines, so they stay last."""
    lines = summary.rstrip("\n").split("\n")
    k = len(lines)
    while k > 0 and _BOTTOM.match(lines[k - 1]):
        k -= 1
    out = lines[:k] + block + lines[k:]
    return "\n".join(out) + ("\n" if summary.endswith("\n") else "")
