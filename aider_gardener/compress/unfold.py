"""Names a log summary folded into a template, given back where a budget has room.

The log compressor folds alike lines to its own 10 % target (``[×533] inflating: <*>``), but a
client with a fixed summary budget (Claude Code's hook: 2,000 tokens) often has room left, and
the next tool call uses exactly the names ``<*>`` hid. A few lines come back whole, more as
their names by folder, then lines it dropped unmarked; numbers and times stay folded (decision
022).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .base import clip_line
from .paths import split_path

_FOLDED = re.compile(r"\A\[×([\d,]+)\] (.*)\Z")
_GAP = re.compile(r"\A… ([\d,]+) lines omitted …\Z")
_CLIPPED = re.compile(r"\A(.+) …\[\+[\d,]+ chars\]… (.+)\Z")  # ``base.clip_line``'s cut
_PLACEHOLDER = re.compile(r"<(?:\*|n|ts|time|date|ip|hex|uuid|dur)>")
_NAME_SLOTS = ("<*>", "<uuid>")
_SLOT_RE = {
    "<*>": r"\S+",
    "<n>": r"\d+(?:[.,]\d+)*",
    "<uuid>": r"[0-9a-fA-F-]{36}",
}
# what a token holds besides its numbers for it to be a name: a path, a file, a word with a
# separator (``file_<n>.so``, ``test_<n>``), not a unit (``<n>ms``) or a ratio (``(<n>/236)``)
_NAMED_NUMBERS = re.compile(r"[A-Za-z].*[/\\._-]|[/\\._-].*[A-Za-z]|[A-Za-z]{3}")
_OTHER_SLOT = r".+?"  # a timestamp, time, date, address, hex or duration
_STRIP = "'\"`,;:()[]{}<>"
_NAMEY = re.compile(r"[A-Za-z0-9_]")
MAX_LINES = 200_000  # of the original scanned; a bigger output keeps its templates
MAX_TEMPLATES = 40
MAX_LINE_CHARS = 2_000
MAX_TRIED = 30_000  # lines tried against templates in all: a bound on the time a huge log takes
MIN_LITERAL = 3  # characters of a template's longest fixed part, to find its lines by
CHARS_PER_TOKEN_MAX = 8  # few tokens hold more characters than this (long words, runs of spaces)
MIN_SHARE = 24  # tokens a template's names get at least, when there is room for any
WHOLE_MAX = 24  # lines a fold or a gap may come back as
SILENT_MAX_LINES = 5_000  # outputs whose silently dropped lines are looked for
CLIPPED_SCAN = 2_000
FOLDERS_MAX = 8  # folders the closing line of a cut list of names names, with their counts


@dataclass
class _Fold:
    at: int  # the summary line
    count: int
    matched: int  # lines of the original that fit the template
    lines: list[str]  # those lines, distinct, in order
    names: list[str]  # the distinct names in its name slots, in order


def unfold(
    summary: str, original: str, room: int, count: Callable[[str], int], id_hint: str = ""
) -> str:
    """``summary`` with its folded names back within ``room`` tokens more (``count`` counts a
    text's tokens); unchanged when nothing folds names or there is no room. ``id_hint``: how
    the reader gets the whole output, said after a cut list of names."""
    if room <= 0:
        return summary
    rows = summary.split("\n")
    lines = original.split("\n", MAX_LINES)
    if len(lines) > MAX_LINES:
        return summary
    folds = _folds(rows, original)
    gaps, silent = _gaps(rows, lines)
    if not folds and not gaps and not silent:
        return summary
    # a few lines come back whole in place of their row; more than that are shown as their
    # names, which cost a fraction of the lines
    candidates = [f for f in folds if f.matched >= f.count and len(f.lines) <= WHOLE_MAX]
    whole, room = _cheapest(candidates + gaps, room, count, rows)
    named: dict[int, list[str]] = {}
    # the fewest names first, so what a short list leaves of its share goes to the longer ones
    rest = sorted((f for f in folds if f.at not in whole), key=lambda f: (len(f.names), f.at))
    for k, f in enumerate(rest):
        share = room // (len(rest) - k)
        if share < MIN_SHARE:
            break
        listed = _names(f, share, count, id_hint)
        room -= sum(count(x) + 1 for x in listed)
        named[f.at] = listed
    # last, what the summary left out without a word, after its row, where the room still allows
    after, room = _cheapest(silent, room, count)
    out: list[str] = []
    for i, row in enumerate(rows):
        if i in whole:
            out.extend(whole[i])
            continue
        out.append(row)
        out.extend(named.get(i, ()))
        out.extend(after.get(i, ()))
    return "\n".join(out)


def _cheapest(
    folds: list[_Fold], room: int, count: Callable[[str], int], rows: list[str] | None = None
) -> tuple[dict[int, list[str]], int]:
    """The folds whose lines fit ``room``, the fewest lines first, by summary row, and the room
    left. With ``rows``, each fold's lines stand in place of its row, so cost that row less."""
    taken: dict[int, list[str]] = {}
    for f in sorted(folds, key=lambda f: (len(f.lines), f.at)):
        if rows is None:  # at most WHOLE_MAX lines after a row: cheap to count
            cost = sum(count(x) + 1 for x in f.lines)
        elif sum(map(len, f.lines)) > CHARS_PER_TOKEN_MAX * (room + len(rows[f.at])):
            continue  # cannot fit: counting its tokens would cost more than the answer
        else:
            cost = sum(count(x) + 1 for x in f.lines) - count(rows[f.at])
        if cost <= room:
            taken[f.at] = f.lines
            room -= cost
    return taken, room


def _gaps(rows: list[str], lines: list[str]) -> tuple[list[_Fold], list[_Fold]]:
    """The lines the summary left out between two of its rows found in the original: those a
    ``… N lines omitted …`` row stands for (N lines apart; ``at`` is the marker row), and, in a
    short output, those left out silently between two adjacent rows (``at``: the row before)."""
    short = len(lines) <= SILENT_MAX_LINES
    if not short and not any(_GAP.match(row) for row in rows):
        return [], []
    at = _anchors(rows, lines)
    gaps, silent = [], []
    for i, row in enumerate(rows):
        m = _GAP.match(row)
        if m is not None and i - 1 in at and i + 1 in at:
            a, b = at[i - 1], at[i + 1]
            n = int(m.group(1).replace(",", ""))
            if b - a - 1 == n:
                gone = [clip_line(x.rstrip()) for x in lines[a + 1 : b]]
                gaps.append(_Fold(i, n, n, gone, []))
        elif short and i in at and i + 1 in at:
            a, b = at[i], at[i + 1]
            gone = [clip_line(x.rstrip()) for x in lines[a + 1 : b] if x.strip()]
            if 0 < len(gone) <= WHOLE_MAX:
                silent.append(_Fold(i, len(gone), len(gone), gone, []))
    return gaps, silent


def _anchors(rows: list[str], lines: list[str]) -> dict[int, int]:
    """Summary row -> the line of the original it shows, in order: rows shown whole, and rows
    ``clip_line`` cut (found by their two ends, among the next ``CLIPPED_SCAN`` lines)."""
    where: dict[str, list[int]] = {}
    for j, line in enumerate(lines):
        where.setdefault(line.rstrip(), []).append(j)
    at: dict[int, int] = {}
    pos = 0
    for i, row in enumerate(rows):
        if _GAP.match(row) or _FOLDED.match(row):
            continue
        found = where.get(row.rstrip())
        if found:
            k = bisect.bisect_left(found, pos)
            if k < len(found):
                at[i] = pos = found[k]
                pos += 1
            continue
        cut = _CLIPPED.match(row)
        if cut is None:
            continue
        head, tail = cut.group(1), cut.group(2)
        for j in range(pos, min(len(lines), pos + CLIPPED_SCAN)):
            if lines[j].startswith(head) and lines[j].rstrip().endswith(tail.rstrip()):
                at[i] = j
                pos = j + 1
                break
    return at


def _folds(rows: list[str], original: str) -> list[_Fold]:
    """The summary's template lines with a name slot, and what they stand for."""
    found: list[tuple[int, int, re.Pattern, str]] = []
    for i, row in enumerate(rows):
        m = _FOLDED.match(row)
        if m is None or "…" in m.group(2) or "[facts:" in m.group(2):
            continue
        pattern = _pattern(m.group(2))
        literal = max(re.split(r"<[a-z*]+>|\s+", m.group(2)), key=len)
        if pattern is None or len(literal) < MIN_LITERAL:
            continue
        found.append((i, int(m.group(1).replace(",", "")), pattern, literal))
        if len(found) >= MAX_TEMPLATES:
            break
    folds = []
    tried = 0
    for at, n, pattern, literal in found:
        kept: dict[str, None] = {}
        names: dict[str, None] = {}
        matched = 0
        for line in _lines_with(original, literal):
            tried += 1
            if matched >= n or tried > MAX_TRIED:  # all its lines found; or enough work done
                break
            # no line longer than a summary shows whole: lazy slots on a megabyte line could
            # backtrack for minutes
            m = pattern.fullmatch(line) if len(line) <= MAX_LINE_CHARS else None
            if m is None:
                continue
            matched += 1
            kept[clip_line(line.rstrip())] = None
            for value in m.groups():
                name = value.strip(_STRIP)
                if _NAMEY.search(name):
                    names[name] = None
        if names:
            folds.append(_Fold(at, n, matched, list(kept), list(names)))
    return folds


def _lines_with(text: str, literal: str) -> Iterator[str]:
    """The lines of ``text`` that hold ``literal``, found by ``str.find`` (a Python loop over
    every line of a megabyte log took most of the time)."""
    pos = 0
    while (k := text.find(literal, pos)) >= 0:
        start = text.rfind("\n", 0, k) + 1
        end = text.find("\n", k)
        end = len(text) if end < 0 else end
        yield text[start:end]
        pos = end + 1


def _pattern(template: str) -> re.Pattern | None:
    """A regex of the lines ``template`` stands for, each name slot a group; None when no slot
    holds a name. A name slot: ``<*>`` (a whole token that differed), or a token that is more
    than its numbers (``file_<n>.so``: the numbers were all that differed in a path)."""
    parts, names = [], 0
    for token in re.split(r"(\s+)", template.strip()):
        if not token:
            continue
        if token.isspace():
            parts.append(r"\s+")
            continue
        pieces = [
            _SLOT_RE.get(p, _OTHER_SLOT) if _PLACEHOLDER.fullmatch(p) else re.escape(p)
            for p in re.split(r"(<[a-z*]+>)", token)
            if p
        ]
        literal = _PLACEHOLDER.sub("", token)
        if token in _NAME_SLOTS:
            parts.append(f"({pieces[0]})")
            names += 1
        elif literal != token and _NAMED_NUMBERS.search(literal):
            parts.append("(" + "".join(pieces) + ")")
            names += 1
        else:
            parts.append("".join(pieces))
    if not names:
        return None
    return re.compile(r"\s*" + "".join(parts) + r"\s*")


def _names(f: _Fold, room: int, count: Callable[[str], int], id_hint: str) -> list[str]:
    """Lines naming what ``f`` folded, within ``room`` tokens: paths by directory, other names
    in one list; then how many were left out, and in which folders (so none goes unnamed)."""
    pathy = sum(1 for x in f.names if "/" in x or "\\" in x) >= 0.8 * len(f.names)
    groups: dict[str, list[str]] = {}
    for name in f.names:
        folder, base = split_path(name) if pathy else ("", name)
        groups.setdefault(folder, []).append(base)
    # the closing line's room: the count and the id, and the folders left when there are several
    reserve = count(id_hint) + 12 + (min(FOLDERS_MAX, len(groups)) * 12 if len(groups) > 1 else 0)
    out: list[str] = []
    used = 0
    left: dict[str, int] = {}
    for prefix, members in groups.items():
        if left:  # a folder before this one did not fit whole
            left[prefix] = len(members)
            continue
        label = f"  {prefix}: " if prefix else "  ↳ "
        row: list[str] = []
        cost = count(label)
        for m in members:
            c = count(m) + 1
            if used + cost + c > room - reserve:
                break
            row.append(m)
            cost += c
        if row:
            out.append(label + ", ".join(row))
            used += cost
        if len(row) < len(members):
            left[prefix] = len(members) - len(row)
    if not out:
        return []
    if left:
        more = f"  … {sum(left.values()):,} more"
        if len(groups) > 1:
            where = [f"{p} {n:,}" for p, n in list(left.items())[:FOLDERS_MAX]]
            if len(left) > FOLDERS_MAX:
                where.append(f"{len(left) - FOLDERS_MAX:,} more folders")
            more += f" ({'; '.join(where)})"
        out.append(more + id_hint)
    return out
