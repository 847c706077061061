"""Command / tool output: a log, with tracebacks, embedded JSON and diffs cut out exactly.

Outputs can be megabytes, so the decision of what the output *is* looks at a bounded sample of
lines, while the boundaries of traces and data blocks come from whole-text regex scans that only
materialise line offsets when something was found. A path list (Glob, ``ls``, ``find``) is
structured data of ``format`` ``paths``: its compressor keeps every name that fits
(``compress/paths.py``) where the log compressor would fold them into templates.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from ..compress.paths import path_list
from ..compress.text_table import text_table
from ..types import ContentClass
from . import lines as lk
from .aider_text import aider_message_class
from .assistant import assistant_spans, sniff
from .markdown import FENCE_OPEN
from .source import command_class, expects_json, runner
from .spans import Span
from .structured import find_blocks, has_blocks, is_json
from .textlines import Lines
from .traces import find_traces, has_marker

C = ContentClass
SNIFF_CHARS = 60_000
_MARKDOWN = re.compile(r"^(?:#{1,6} \S|[-*] \S|\*\*[^\s*]|\d{1,2}\. \S|> \S|---\s*$)")


def output_spans(text: str, command: str | None = None) -> list[Span]:
    """Spans of a command's output; uncovered text is log (the caller's default)."""
    if not text.strip():
        return []
    meta = {"command": command} if command else {}
    known = aider_message_class(text)
    if known is not None:
        return [Span(0, len(text), known, {"aider": "1"})]
    by_command = command_class(command)
    if by_command is not None and by_command is not C.LOG:
        if by_command is C.EDIT:
            return fill(text, _diff_output(text, meta), C.LOG, meta)
        return [Span(0, len(text), by_command, dict(meta))]
    if (text.lstrip()[:1] in ("{", "[") or expects_json(command)) and is_json(text):
        return [Span(0, len(text), C.STRUCTURED, dict(meta))]
    if path_list(text) is not None:  # Glob, ls, find, git ls-files: every name is the fact
        return [Span(0, len(text), C.STRUCTURED, {**meta, "format": "paths"})]
    if text_table(text) is not None:  # psql, mysql, sqlite: each row's ids are the facts
        return [Span(0, len(text), C.STRUCTURED, {**meta, "format": "table"})]
    if _starts_as_diff(text):  # ``git diff > x.diff`` shown without its command
        return fill(text, _diff_output(text, meta), C.LOG, meta)
    sample = _sample_lines(text)
    if _yaml_like(sample):
        return [Span(0, len(text), C.STRUCTURED, {**meta, "format": "yaml"})]
    looks = _looks_like(sample)
    if looks is C.PROSE:
        return fill(text, assistant_spans(text), C.PROSE, {})
    if looks is C.CODE:
        return [Span(0, len(text), C.CODE, dict(meta))]
    spans: list[Span] = []
    L = Lines(text) if (has_marker(text) or has_blocks(text)) else None
    if L is not None:
        traces = find_traces(text, L)
        spans.extend(Span(s, e, C.ERROR, {"lang": lang}) for s, e, lang in traces)
        blocks = find_blocks(text, L)
        spans.extend(
            Span(s, e, C.STRUCTURED, {"format": fmt})
            for s, e, fmt in blocks
            if not _overlaps(traces, s, e)
        )
    run = runner(command)
    if run:
        meta["runner"] = run
    return fill(text, spans, C.LOG, meta)


def _overlaps(sorted_spans: list[tuple[int, int, str]], start: int, end: int) -> bool:
    i = bisect_right(sorted_spans, (start, float("inf"), ""))
    return (i > 0 and sorted_spans[i - 1][1] > start) or (
        i < len(sorted_spans) and sorted_spans[i][0] < end
    )


def fill(text: str, spans: list[Span], default: ContentClass, meta: dict[str, str]) -> list[Span]:
    """The spans plus explicit ``default`` spans for the gaps (so gaps carry ``meta`` too)."""
    out: list[Span] = []
    pos = 0
    for sp in sorted(spans, key=lambda x: x.start):
        if sp.start < pos:
            continue
        if sp.start > pos:
            out.append(Span(pos, sp.start, default, dict(meta)))
        out.append(sp)
        pos = sp.end
    if pos < len(text):
        out.append(Span(pos, len(text), default, dict(meta)))
    return out


def _diff_output(text: str, meta: dict[str, str]) -> list[Span]:
    """``git diff`` / ``git show``: the diff is an edit; commit headers and stats are log."""
    L = Lines(text)
    spans: list[Span] = []
    i, n = 0, len(L.lines)
    while i < n:
        if L.lines[i].startswith("diff "):
            j = i + 1
            while j < n and not L.lines[j].startswith(("diff ", "commit ")):
                j += 1
            s, e = L.span(i, j)
            spans.append(Span(s, e, C.EDIT, {**meta, "edit": "udiff"}))
            i = j
        else:
            i += 1
    if not spans and any(x.startswith("@@") for x in L.lines[:200]):
        spans.append(Span(0, len(text), C.EDIT, {**meta, "edit": "udiff"}))
    return spans


_YAML_LINE = re.compile(r"^\s*(?:-\s+)?(?:[\w\"'./-]+:(?:\s|$)|-\s|-$)|^---\s*$|^\s*#")


def _starts_as_diff(text: str) -> bool:
    head = text.lstrip()[:400]
    return head.startswith("diff --git ") and "\n@@ -" in text[:20_000]


def _yaml_like(sample: list[str]) -> bool:
    """A YAML document (manifests, configs): nearly every line a ``key:``, list item, comment or
    ``---``, with a document marker or the Kubernetes ``apiVersion:``/``kind:`` pair."""
    nonblank = [x for x in sample if x.strip()]
    if len(nonblank) < 10:
        return False
    if not any(x.startswith(("---", "apiVersion:")) for x in nonblank[:50]):
        return False
    yamlish = sum(1 for x in nonblank if _YAML_LINE.match(x))
    logs = sum(1 for x in nonblank if lk.LOG_RE.match(x) or lk.TRACE_RE.match(x))
    return yamlish >= 0.85 * len(nonblank) and logs <= 0.02 * len(nonblank)


def _sample_lines(text: str) -> list[str]:
    if len(text) <= SNIFF_CHARS:
        return lk.sample(text.split("\n"))
    head = text[: SNIFF_CHARS // 2].split("\n")[:-1]
    mid_at = len(text) // 2
    mid = text[mid_at : mid_at + SNIFF_CHARS // 4].split("\n")[1:-1]
    tail = text[-SNIFF_CHARS // 4 :].split("\n")[1:]
    return lk.sample(head + mid + tail)


def _looks_like(sample: list[str]) -> ContentClass | None:
    """Whole-output verdicts that override the log default: a markdown document (prose with
    fences/headings, e.g. ``cat README.md`` or a reply mistaken for output), or source code."""
    kinds = [lk.kind(x) for x in sample]
    counts = {k: kinds.count(k) for k in set(kinds)}
    nonblank = len(sample) - counts.get(lk.BLANK, 0)
    if nonblank < 2:
        return None
    prose = counts.get(lk.PROSE, 0) / nonblank
    log = (counts.get(lk.LOG, 0) + counts.get(lk.TRACE, 0)) / nonblank
    code = counts.get(lk.CODE, 0) / nonblank
    if log >= 0.1 and code < 0.6:
        return None  # the common case, decided without the finer checks below
    sentences = (
        sum(1 for x, k in zip(sample, kinds) if k == lk.PROSE and lk.is_sentence(x.strip()))
        / nonblank
    )
    fences = sum(1 for x in sample if FENCE_OPEN.match(x))
    markdown = sum(1 for x in sample if _MARKDOWN.match(x))
    if (
        log < 0.1
        and prose >= 0.2
        and (
            (sentences >= 0.5 and nonblank >= 3)
            or (markdown >= 3 and sentences >= 0.08)
            or (fences >= 2 and sentences >= 0.15)
        )
    ):
        return C.PROSE
    if code >= 0.6 and log < 0.05 and prose < 0.15:
        return C.CODE
    return None


__all__ = ["fill", "output_spans", "sniff"]
