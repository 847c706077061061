"""Compiler and linter diagnostics grouped by file, code and message, every location kept.

A type-checker or linter run is a list of distinct facts (``a.tsx(120,5): error TS1005: ','
expected.`` forty-nine times with different lines), so template folding either loses locations
or keeps every line. Grouping keeps all of them in fewer tokens: one line per (code,
message) lists its files with their line numbers,
``TS1005 ×12 — ',' expected. — in a.tsx: lines 120,121,130; in b.tsx: line 7``.
Nothing is lost but the column, the repeated text and the numbers of messages that differ only
in numbers (``line too long (117 > 115 characters)``, shown as ``<n>``; the original is
stored). The form is the one ``facts.grouped_locations`` reads, so the fact check sees every
location.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FORMS = [
    # tsc: path(line,col): error TS1005: msg
    re.compile(
        r"^(?P<path>[^\s()]+)\((?P<line>\d+),\d+\): (?P<sev>error|warning) (?P<code>TS\d+): "
        r"(?P<msg>.*)$"
    ),
    # flake8/ruff concise/pycodestyle: path:line:col: CODE msg
    re.compile(r"^(?P<path>[^\s:]+):(?P<line>\d+):\d+: (?P<code>[A-Z]{1,4}\d{3,4}) (?P<msg>.*)$"),
    # mypy/pyright-ish/gcc: path:line[:col]: error|warning|note: msg  [code]
    re.compile(
        r"^(?P<path>[^\s:]+|[A-Za-z]:[^\s:]+):(?P<line>\d+):(?:\d+:)? (?P<sev>error|warning|note): "
        r"(?P<msg>.*?)(?:  \[(?P<code>[a-z][a-z0-9-]+)\])?$"
    ),
]
_DIGITS = re.compile(r"\d+")
MIN_LINES = 20  # fewer diagnostics read fine as printed
MIN_SHARE = 0.3  # of the non-blank lines: otherwise the output is something else quoting a few
MAX_PATHS = 40  # files per group line before it is split


def _worth_parsing(lines: list[str], probes: int = 400) -> bool:
    """An even sample of the lines: are diagnostics anywhere near ``MIN_SHARE`` of them? Saves
    three regex probes per line of a 100,000-line build log that is something else."""
    if len(lines) <= probes:
        return True
    step = len(lines) / probes
    sample = [lines[int(k * step)] for k in range(probes)]
    hits = sum(1 for x in sample if ": " in x and any(rx.match(x) for rx in _FORMS))
    return hits >= MIN_SHARE / 3 * sum(1 for x in sample if x.strip())


@dataclass
class _Group:
    first: int
    code: str
    msg: str
    paths: dict[str, list[str]] = field(default_factory=dict)
    members: list[int] = field(default_factory=list)


def group_diagnostics(lines: list[str]) -> tuple[list[tuple[int, str]], set[int]]:
    """``(position, rendered line)`` for each group, and the indexes of the lines they replace;
    nothing when the output is not mostly diagnostics or no group has two members."""
    if not _worth_parsing(lines):
        return [], set()
    # every form has ": ": too few such lines cannot reach the share (a build log whose sample
    # looked promising), and counting them is ten times cheaper than three regex probes a line
    candidates = [i for i, line in enumerate(lines) if ": " in line]
    nonblank = sum(1 for line in lines if line.strip())
    if len(candidates) < MIN_LINES or len(candidates) < MIN_SHARE * nonblank:
        return [], set()
    parsed: list[tuple[int, re.Match]] = []
    for i in candidates:
        line = lines[i]
        for rx in _FORMS:
            m = rx.match(line)
            if m:
                parsed.append((i, m))
                break
    if len(parsed) < MIN_LINES or len(parsed) < MIN_SHARE * nonblank:
        return [], set()
    groups: dict[tuple[str, str], _Group] = {}
    for i, m in parsed:
        d = m.groupdict()
        code = d.get("code") or d.get("sev") or ""
        if d.get("sev") in ("warning", "note") and d.get("code"):
            code = f"{d['sev']} {code}"
        key = (code, _DIGITS.sub("<n>", d["msg"]))  # "line too long (117 > 115 characters)"
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(i, code, d["msg"])
        elif g.msg != d["msg"]:
            g.msg = key[1]
        g.paths.setdefault(d["path"], []).append(d["line"])
        g.members.append(i)
    shown: list[tuple[int, str]] = []
    replaced: set[int] = set()
    _group_singletons([g for g in groups.values() if len(g.members) == 1], shown, replaced)
    for g in groups.values():
        if len(g.members) < 2:
            continue
        replaced.update(g.members)
        where = []
        for path, nums in g.paths.items():
            uniq = list(dict.fromkeys(nums))
            where.append(f"in {path}: {'line' if len(uniq) == 1 else 'lines'} {','.join(uniq)}")
        for k in range(0, len(where), MAX_PATHS):
            part = "; ".join(where[k : k + MAX_PATHS])
            shown.append((g.members[0], f"{g.code} ×{len(g.members)} — {g.msg} — {part}"))
    return shown, replaced


def _group_singletons(single: list[_Group], shown: list, replaced: set[int]) -> None:
    """Messages seen once (``F403 'from x import *' used``) still share code and file: one line
    per (code, file) lists the line numbers, then the messages in the same order."""
    by_file: dict[tuple[str, str], list[_Group]] = {}
    for g in single:
        path = next(iter(g.paths))
        by_file.setdefault((g.code, path), []).append(g)
    for (code, path), gs in by_file.items():
        if len(gs) < 2:
            continue
        nums = ",".join(g.paths[path][0] for g in gs)
        msgs = _factor([g.msg for g in gs])
        shown.append((gs[0].first, f"{code} ×{len(gs)} — in {path}: lines {nums} — {msgs}"))
        replaced.update(g.first for g in gs)


def _factor(msgs: list[str]) -> str:
    """``'a' may be undefined … | 'b' may be undefined …`` as ``{'a'|'b'} may be undefined …``:
    the messages' common start and end once, the parts that differ in order."""
    first, last = min(msgs), max(msgs)
    k = 0
    while k < len(first) and first[k] == last[k]:
        k += 1
    k = first.rfind(" ", 0, k) + 1 if k < len(first) else k
    rest = [m[k:] for m in msgs]
    a, b = min(rest, key=len), rest[0]
    j = 0
    while j < len(a) and all(r[len(r) - 1 - j] == rest[0][len(rest[0]) - 1 - j] for r in rest):
        j += 1
    cut = a.find(" ", len(a) - j) if j < len(a) else 0
    j = len(a) - cut if 0 <= cut and j < len(a) else j
    if k + j < 12:
        return " | ".join(msgs)
    middle = "|".join(r[: len(r) - j] for r in rest)
    return f"{msgs[0][:k]}{{{middle}}}{b[len(b) - j:] if j else ''}"
