"""Assistant replies: prose between blocks, and what each block is by its content.

SEARCH/REPLACE blocks, whole-file fences (path line + fence) and unified diffs are edits; other
fences are classified by their info string or, for loose ones (```` ``` ````, ``text``,
``markdown``), by ``sniff``, which user pastes and command output share: it judges a block of
lines by what they are, not by where they came from.
"""

from __future__ import annotations

import re

from ..types import ContentClass
from . import lines as lk
from .markdown import Block, scan
from .source import class_for_lang, ext_of
from .spans import Span
from .structured import is_json
from .textlines import Lines
from .traces import find_traces

C = ContentClass
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")


def assistant_spans(text: str, L: Lines | None = None) -> list[Span]:
    """Spans of everything that is not prose in an assistant reply (the rest is prose)."""
    L = L or Lines(text)
    spans: list[Span] = []
    pos = 0
    for blk in scan(L):
        gap_a, gap_b = pos, L.offset(blk.a)
        spans.extend(_traces_in(text, gap_a, gap_b))
        spans.append(_assistant_block(L, blk))
        pos = L.offset(blk.b)
    spans.extend(_traces_in(text, pos, len(text)))
    return spans


def _assistant_block(L: Lines, blk: Block) -> Span:
    start, end = L.span(blk.a, blk.b)
    meta = block_meta(blk)
    if blk.kind in ("sr", "diff") or blk.path:
        return Span(start, end, C.EDIT, meta)
    cls = class_for_lang(blk.lang) or sniff(L.lines[blk.body_a : blk.body_b], loose=True)
    return Span(start, end, cls, meta)


def block_meta(blk: Block) -> dict[str, str]:
    """What the compressors use: the file path, the language, whether fence lines are included,
    and for edits which of Aider's formats it is."""
    meta: dict[str, str] = {}
    if blk.kind != "sr" or blk.a < blk.body_a or blk.b > blk.body_b:
        meta["fence"] = "1"
    lang = blk.lang or (ext_of(blk.path) if blk.path else "")
    if lang:
        meta["lang"] = lang
    if blk.path:
        meta["path"] = blk.path
    if blk.kind == "sr":
        meta["edit"] = "search_replace"
    elif blk.kind == "diff":
        meta["edit"] = "udiff"
    elif blk.path:
        meta["edit"] = "whole"
    return meta


def _traces_in(text: str, a: int, b: int) -> list[Span]:
    if b <= a:
        return []
    chunk = text[a:b]
    return [Span(a + s, a + e, C.ERROR, {"lang": lang}) for s, e, lang in find_traces(chunk)]


def sniff(body: list[str], loose: bool = False, default: ContentClass = C.CODE) -> ContentClass:
    """Class of a block of lines by its content. ``loose``: a fence with no telling info string
    in an assistant reply, where prose (a quoted paragraph, a drafted document) is plausible."""
    if not any(x.strip() for x in body):
        return C.CODE
    text = "\n".join(body)
    traced = sum(e - s for s, e, _ in find_traces(text))
    if traced > 0.5 * len(text):
        return C.ERROR
    if is_json(text):
        return C.STRUCTURED
    sample = lk.sample(body)
    counts = lk.counts(sample)
    nonblank = len(sample) - counts.get(lk.BLANK, 0)
    share = {k: v / nonblank for k, v in counts.items() if k != lk.BLANK}
    diffish = sum(1 for x in sample if lk.is_diff_line(x))
    if counts.get(lk.DIFF, 0) >= 2 and diffish >= 0.5 * nonblank:
        return C.EDIT
    if diffish >= 0.6 * nonblank and nonblank >= 5:
        return C.EDIT
    if share.get(lk.TRACE, 0) >= 0.4:
        return C.ERROR
    prose = share.get(lk.PROSE, 0)
    if loose:  # a markdown document drafted in a fence: its tables are prose too
        prose += sum(1 for x in sample if _TABLE_ROW.match(x)) / nonblank
    if prose >= 0.5 or (loose and prose >= 0.3):
        return C.PROSE
    if share.get(lk.LOG, 0) >= 0.35:
        return C.LOG
    if share.get(lk.STRUCT, 0) >= 0.6:
        return C.STRUCTURED
    if default is not C.CODE and share.get(lk.CODE, 0) < 0.4:
        return default
    return C.CODE
