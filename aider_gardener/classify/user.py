"""User messages: the user's own words are the prompt and are never compressed.

Only a large pasted block (a fence, or an unfenced run of log/trace/code/JSON/diff lines, of at
least ``PASTE_MIN_LINES`` lines) gets the class of what it is; small pastes are part of the
prompt. Aider's ``/run`` and ``/test`` wrapper ("I ran this command: … And got this output: …") is
prompt around command output that is classified as such.
"""

from __future__ import annotations

import re

from ..types import ContentClass
from . import lines as lk
from .aider_text import aider_message_class
from .assistant import block_meta, sniff
from .markdown import scan
from .output import output_spans
from .source import class_for_lang, class_for_path
from .spans import Span
from .textlines import Lines
from .traces import find_traces

PASTE_MIN_LINES = 20
RUN_WRAPPER = re.compile(r"\AI ran this command:\n\n(?P<cmd>.*?)\n\nAnd got this output:\n\n", re.S)

C = ContentClass


def user_spans(text: str, L: Lines | None = None) -> list[Span]:
    """Spans of the large pasted blocks of a user message (the rest is prompt)."""
    m = RUN_WRAPPER.match(text)
    if m:
        out_start = m.end()
        sub = output_spans(text[out_start:], m.group("cmd").strip())
        return [Span(s.start + out_start, s.end + out_start, s.cls, s.meta) for s in sub]
    known = aider_message_class(text)
    if known is not None:  # e.g. the failed-edit report Aider sends back as a user message
        return [Span(0, len(text), known, {"aider": "1"})]
    L = L or Lines(text)
    spans: list[Span] = []
    prev = 0
    for blk in scan(L):
        spans.extend(_pastes(L, prev, blk.a))
        body = L.lines[blk.body_a : blk.body_b]
        if _size(body) >= PASTE_MIN_LINES:
            start, end = L.span(blk.a, blk.b)
            meta = block_meta(blk)
            if blk.kind in ("sr", "diff"):
                cls = C.EDIT
            elif blk.path:  # a file's content shown to the model (Aider's "Here are the files")
                cls = class_for_path(blk.path) or class_for_lang(blk.lang) or sniff(body)
                meta.pop("edit", None)
            else:
                cls = class_for_lang(blk.lang) or sniff(body)
            if cls not in (C.PROSE, C.PROMPT):
                spans.append(Span(start, end, cls, meta))
        prev = blk.b
    spans.extend(_pastes(L, prev, len(L.lines)))
    return spans


def _size(body: list[str]) -> int:
    """Lines of a pasted block; double-spaced pastes (a blank after every line) count once."""
    nonblank = sum(1 for x in body if x.strip())
    return nonblank if len(body) - nonblank > 0.4 * len(body) else len(body)


def _pastes(L: Lines, a: int, b: int) -> list[Span]:
    """Large unfenced pastes in user text: clusters of tracebacks first, then runs of non-prose
    lines (a pasted log, JSON, code, diff)."""
    if b - a < PASTE_MIN_LINES:
        return []
    lines = L.lines
    chunk_start, chunk_end = L.span(a, b)
    chunk = L.text[chunk_start:chunk_end]
    out: list[Span] = []
    free = [(a, b)]
    for s, e, lang in _trace_clusters(chunk):
        la, lb = L.index(chunk_start + s), L.index(chunk_start + max(s, e - 1)) + 1
        if _size(lines[la:lb]) >= PASTE_MIN_LINES:
            out.append(Span(chunk_start + s, chunk_start + e, C.ERROR, {"lang": lang}))
            free = [r for x, y in free for r in ((x, min(y, la)), (max(x, lb), y)) if r[1] > r[0]]
    for fa, fb in free:
        out.extend(_runs(L, fa, fb))
    return out


def _trace_clusters(chunk: str) -> list[tuple[int, int, str]]:
    """Traces separated by at most a few lines (a repeated error, a log line between) are one
    pasted block."""
    clusters: list[tuple[int, int, str]] = []
    for s, e, lang in find_traces(chunk):
        if clusters and chunk.count("\n", clusters[-1][1], s) <= 3:
            clusters[-1] = (clusters[-1][0], e, clusters[-1][2])
        else:
            clusters.append((s, e, lang))
    return clusters


def _runs(L: Lines, a: int, b: int) -> list[Span]:
    if b - a < PASTE_MIN_LINES:
        return []
    lines = L.lines
    kinds = [lk.kind(lines[i]) for i in range(a, b)]
    out: list[Span] = []
    i = 0
    n = len(kinds)
    while i < n:
        if kinds[i] in (lk.PROSE, lk.BLANK):
            i += 1
            continue
        j = i
        prose_run = 0
        last = i
        while j < n:
            k = kinds[j]
            if k == lk.PROSE:
                prose_run += 1
                if prose_run > 1:
                    break
            elif k != lk.BLANK:
                prose_run = 0
                last = j + 1
            j += 1
        body = lines[a + i : a + last]
        if _size(body) >= PASTE_MIN_LINES:
            start, end = L.span(a + i, a + last)
            cls = sniff(body, default=C.LOG)
            if cls not in (C.PROSE, C.PROMPT):
                out.append(Span(start, end, cls, {}))
        i = max(last, i + 1)
    return out
