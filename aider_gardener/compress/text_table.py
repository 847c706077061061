"""Query tools' text tables (psql, mysql, sqlite ``.mode box/table``) read back into rows.

The log compressor folded their rows like log lines ("2 samples … 33 more items"), so the ids an
agent queries for next were gone. Read as rows, a table goes through the structured compressor
like CSV: header, sample rows, then every hidden row's id-like columns.

A table is a header row of cells between ``|``, a rule line of dashes next to it, and rows with
as many cells; rule lines and a footer (``(300 rows)``, ``300 rows in set``) may come around
them. One pass over the lines; None as soon as it is not a table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_ROWS = 3
ROW_SHARE = 0.9  # of the lines that are not rules: the rest are footers and notes
MAX_NOTES = 4
_RULE_CHARS = frozenset("-=+| ")  # after leading blanks: "-----+----", "+----+", "====="
_BOX_RULE = re.compile(r"^[ \t]*[┌├└╞╘┏┣┗][─━═┬┼┴╤╪╧┯┿┷ ]+[┐┤┘╡╛┓┫┛]$")
_BOX = str.maketrans({"│": "|", "┃": "|"})


@dataclass
class TextTable:
    header: list[str]
    rows: list[list[str]]
    notes: list[str]  # footers and other lines that are not rows, in order


def _cells(line: str) -> list[str] | None:
    body = line.translate(_BOX).strip()
    if "|" not in body:
        return None
    if body.startswith("|") and body.endswith("|") and len(body) > 1:
        body = body[1:-1]
    return [c.strip() for c in body.split("|")]


def _is_rule(line: str) -> bool:
    """A line of dashes (with ``=``, ``+``, ``|``, spaces) or of box-drawing characters. A set
    test, not a regular expression: one of dashes around ``-{3,}`` backtracked cubically, and
    every command output's first line is tested."""
    body = line.lstrip(" \t")
    return bool(body) and "---" in body and set(body) <= _RULE_CHARS or bool(_BOX_RULE.match(line))


def _first_lines(text: str, n: int) -> list[str]:
    """The first ``n`` non-blank lines, without splitting the rest of a long output."""
    out: list[str] = []
    pos = 0
    while len(out) < n and pos <= len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end].rstrip("\r")
        if line.strip():
            out.append(line)
        pos = end + 1
    return out


def _header(lines: list[str]) -> tuple[int, list[str]] | None:
    """(index of the header line, its cells) when the first lines are a table's head."""
    if len(lines) < 2:
        return None
    start = 1 if _is_rule(lines[0]) else 0
    if start + 1 >= len(lines) or not _is_rule(lines[start + 1]):
        return None  # the header must sit on a rule line
    header = _cells(lines[start])
    if not header or len(header) < 2 or not any(header):
        return None
    return start, header


def text_table(text: str) -> TextTable | None:
    """The table in ``text`` when all of it is one (a few notes aside), else None."""
    if _header(_first_lines(text, 3)) is None:  # most outputs stop here, after 3 lines
        return None
    lines = [x.rstrip("\r") for x in text.split("\n") if x.strip()]
    if len(lines) < MIN_ROWS + 2:
        return None
    start, header = _header(lines[:3])  # type: ignore[misc]  # the same first lines
    rows: list[list[str]] = []
    notes: list[str] = []
    for line in lines[start + 2 :]:
        if _is_rule(line):
            continue
        cells = _cells(line)
        if cells is not None and len(cells) == len(header):
            rows.append(cells)
        else:
            notes.append(line.strip())
            if len(notes) > max(MAX_NOTES, (1 - ROW_SHARE) * (len(rows) + len(notes))):
                return None
    if len(rows) < MIN_ROWS:
        return None
    return TextTable(header, rows, notes)
