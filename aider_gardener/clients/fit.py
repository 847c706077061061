"""A summary cut to what Claude Code passes on whole, its facts first.

Claude Code saves a tool result longer than its tool's limit to a file and shows the model a 2 KB
preview of it instead, so a summary that does not fit loses its facts and the id that gets the rest
back. The hook therefore cuts every replacement to the smaller of a token budget of its own
(``GARDENER_HOOK_SUMMARY_TOKENS``, 2,000) and the tool's limit with a margin. What stays, in order:
each line carrying a critical fact (``aider_gardener.critical``) no line before it carries, named
facts (a failing test, an exception, an error code) before mere locations, with the summary's first
and last lines after the first of them; then the lines repeating facts; then the head and tail of
the rest. A folded template (``[×12] …``) is one line that stands for its count. What is left out is
said in one line; the caller's first line names the stored id and the tools that get it back.

The limits below are Claude Code's (checked with the real CLI in
``tests/clients/test_claude_code_e2e_outputs.py``); where they come from, and measurements:
docs/decisions/022-claude-code-result-limits.md
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

SUMMARY_TOKENS = 2000
SUMMARY_TOKENS_ENV = "GARDENER_HOOK_SUMMARY_TOKENS"
MARGIN = 0.8  # of a limit, for what Claude Code adds around a result and tokenizers' drift
DEFAULT_LIMIT = 50_000  # characters: Claude Code's cap on any tool's maxResultSizeChars
BASH_LIMIT = 30_000
BASH_SETTING = "bashOutputMaxChars"
BASH_SETTING_RANGE = (4_000, 128_000)
LIMITS: dict[str, int | None] = {
    "Bash": BASH_LIMIT,
    "PowerShell": BASH_LIMIT,
    "Grep": 20_000,
    "Glob": DEFAULT_LIMIT,
    "WebFetch": DEFAULT_LIMIT,
    "WebSearch": DEFAULT_LIMIT,
    "Read": None,  # never saved to a file: Read refuses what is too big before any hook runs
}
CONTEXT_LIMIT = 10_000  # characters of a hook's additionalContext
MCP_TOKENS_ENV = "MAX_MCP_OUTPUT_TOKENS"
MCP_TOKENS = 25_000
LINE_CHARS = 300  # a kept line longer than this is shortened (its facts stay)
MODEL = "gpt-4o"
_FOLDED = re.compile(r"\A\[×(\d+)\] ")


def summary_tokens() -> int:
    """The token budget of a replacement: ``GARDENER_HOOK_SUMMARY_TOKENS`` or 2,000."""
    try:
        return max(200, int(os.environ.get(SUMMARY_TOKENS_ENV, "") or SUMMARY_TOKENS))
    except ValueError:
        return SUMMARY_TOKENS


def _bash_setting(cwd: Any) -> int | None:
    """``bashOutputMaxChars`` from the settings Claude Code reads for a project (user, project,
    local; the last one that sets it wins), clamped as Claude Code clamps it."""
    found = None
    places = [Path.home() / ".claude" / "settings.json"]
    if isinstance(cwd, str) and cwd:
        places += [Path(cwd) / ".claude" / "settings.json"]
        places += [Path(cwd) / ".claude" / "settings.local.json"]
    for place in places:
        try:
            value = json.loads(place.read_text(encoding="utf-8")).get(BASH_SETTING)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and value > 0:
            found = min(max(value, BASH_SETTING_RANGE[0]), BASH_SETTING_RANGE[1])
    return found


def char_limit(tool_name: str, cwd: Any = None) -> int | None:
    """Characters of a tool result Claude Code passes on whole (None: no limit)."""
    if tool_name in ("Bash", "PowerShell"):
        return _bash_setting(cwd) or BASH_LIMIT
    if tool_name.startswith("mcp__"):
        try:
            tokens = int(os.environ.get(MCP_TOKENS_ENV, "") or MCP_TOKENS)
        except ValueError:
            tokens = MCP_TOKENS
        return min(DEFAULT_LIMIT, max(1, tokens) * 4)
    return LIMITS.get(tool_name, DEFAULT_LIMIT)


def room(limit: int | None) -> int | None:
    """What the hook may use of a limit: the limit less its margin."""
    return None if limit is None else int(limit * MARGIN)


def js_length(text: str) -> int:
    """``text.length`` in JavaScript (UTF-16 code units): what Claude Code compares."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


@dataclass
class Fitted:
    text: str
    tokens: int
    lines: int  # summary lines in all
    kept: int  # summary lines kept
    fact_lines: int  # summary lines with facts (a folded template counted by its count)
    fact_lines_kept: int


def _weight(line: str) -> int:
    m = _FOLDED.match(line)
    return int(m.group(1)) if m else 1


def _keys(line: str) -> set[tuple[str, str]]:
    """The facts one line carries, as keys comparable with ``fact_keys`` of the original:
    locations as (file name, line), other facts by kind and value."""
    from .. import critical

    found = critical.extract(line)
    keys = {(kind, v) for kind, values in found.items() if kind not in _PLACES for v in values}
    if any(c.isdigit() for c in line):
        keys |= {("@", f"{name}:{n}") for name, n in critical.locations(line.replace("\\", "/"))}
        for name, numbers in critical.grouped_locations([line]).items():
            keys |= {("@", f"{name}:{n}") for n in numbers}
    return keys


_PLACES = ("path_lines", "frames")


def fact_keys(found: dict[str, set[str]]) -> set[tuple[str, str]]:
    """``critical.extract`` output as the keys ``_keys`` gives a line."""
    out = set()
    for kind, values in found.items():
        for v in values:
            if kind in _PLACES:
                path, _, n = v.replace("\\", "/").rpartition(":")
                out.add(("@", f"{path.rsplit('/', 1)[-1]}:{n}"))
            else:
                out.add((kind, v))
    return out


def _ends(indices: list[int]) -> list[int]:
    """Head and tail alternately: a log's start and its final counts first."""
    rest, out = list(indices), []
    while rest:
        out.append(rest.pop(0))
        if rest:
            out.append(rest.pop())
    return out


def body_lines(summary: str) -> list[str]:
    """A pipeline summary's lines without its handle line (the fitted text's first line names
    the id instead)."""
    from ..types import HANDLE_PREFIX

    lines = summary.rstrip("\n").split("\n")
    while lines and (lines[-1].startswith(HANDLE_PREFIX) or not lines[-1].strip()):
        lines.pop()
    return lines


def fit(
    summary: str,
    head: str,
    budget: int,
    max_chars: int | None,
    wanted: Iterable[tuple[str, str]] | Callable[[], Iterable[tuple[str, str]]] | None = None,
    model: str = MODEL,
    rank: Callable[[str], Any] | None = None,
    what: str = "summary",
) -> Fitted:
    """``head`` and the lines of ``summary`` that fit ``budget`` tokens and ``max_chars``
    characters (see the module docstring for which). ``wanted``: the original's fact keys
    (``fact_keys``), or a function giving them, called only when the summary does not fit
    whole; by default the summary's own. ``rank``: a line's priority (lowest first) in place of
    the facts-first order, ties kept in order (an outline keeps its outer levels); ``what``:
    the closing line's word for the lines left out."""
    from ..compress.base import clip_line
    from ..tokens import count_tokens

    lines = body_lines(summary)
    cap = max_chars if max_chars is not None else 10**12
    whole = "\n".join([head, *lines])
    tokens = count_tokens(whole, model)
    fits = tokens <= budget and js_length(whole) <= cap
    keys = [_keys(line) for line in lines]
    if callable(wanted):
        wanted = None if fits else wanted()
    want = set(wanted) if wanted is not None else set().union(*keys) if keys else set()
    facts_at = [i for i, k in enumerate(keys) if k & want]
    total_fact_lines = sum(_weight(lines[i]) for i in facts_at)
    if fits:
        n = len(lines)
        return Fitted(whole, tokens, n, n, total_fact_lines, total_fact_lines)

    short = [clip_line(line, LINE_CHARS) if len(line) > LINE_CHARS else line for line in lines]
    # distinct: a line with a fact no line before it has; those with a named fact (a failing
    # test, an exception, an error code) before those that add only a location
    seen: set[tuple[str, str]] = set()
    named: list[int] = []
    placed: list[int] = []
    repeats: list[int] = []
    for i in facts_at:
        new = (keys[i] & want) - seen
        if not new:
            repeats.append(i)
        else:
            (placed if all(k[0] == "@" for k in new) else named).append(i)
        seen |= new
    distinct = named + placed
    fact_set = set(facts_at)
    ends = _ends([i for i in range(len(lines)) if i not in fact_set])
    order = distinct[:1] + ends[:2] + distinct[1:] + repeats + ends[2:]
    if rank is not None:
        order = sorted(range(len(lines)), key=lambda i: (rank(lines[i]), i))
    cost = {i: count_tokens(short[i], model) + 1 for i in order}
    width = {i: js_length(short[i]) + 1 for i in order}
    spare_tokens = budget - count_tokens(head, model) - 60  # the closing note's share
    spare_chars = cap - js_length(head) - 300
    keep: list[int] = []
    for i in order:
        if cost[i] <= spare_tokens and width[i] <= spare_chars:
            keep.append(i)
            spare_tokens -= cost[i]
            spare_chars -= width[i]
    while True:
        text = _render(head, short, sorted(keep), lines, keys, want, facts_at, budget, what)
        tokens = count_tokens(text, model)
        if (tokens <= budget and js_length(text) <= cap) or not keep:
            break
        keep.pop()  # the last in priority order goes first
    covered = _covered(keep, keys, want)
    kept_facts = sum(_weight(lines[i]) for i in facts_at if keys[i] & want <= covered)
    return Fitted(text, tokens, len(lines), len(keep), total_fact_lines, kept_facts)


def _covered(keep: list[int], keys: list[set], want: set) -> set:
    return set().union(*(keys[i] & want for i in keep)) if keep else set()


def _render(head, short, keep, lines, keys, want, facts_at, budget, what) -> str:
    out = [head, *(short[i] for i in keep)]
    left = len(lines) - len(keep)
    if left:
        covered = _covered(keep, keys, want)
        gone = [i for i in facts_at if not keys[i] & want <= covered]
        more = sum(_weight(lines[i]) for i in gone)
        with_facts = ""
        if gone:
            with_facts = f", {len(gone):,} with facts not shown here ({more:,} output lines)"
        out.append(
            f"[gardener: {left:,} more {what} lines{with_facts} left out to fit {budget:,}"
            " tokens; expand the id above for the whole output]"
        )
    return "\n".join(out)
