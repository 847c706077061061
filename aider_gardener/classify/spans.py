"""Turn the detectors' partial, possibly overlapping findings into the final segment list.

Every detector reports character spans of what it recognised; everything in between gets the
mode's default class. Doing the bookkeeping in one place is what guarantees the invariants the
pipeline relies on: segments are contiguous, in order, cover the whole text, and each segment's
``text`` is exactly its slice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..types import ContentClass, Segment

_OWN_BLOCK = ("fence", "path", "edit")


@dataclass
class Span:
    start: int
    end: int
    cls: ContentClass
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def keep_apart(self) -> bool:
        """Fenced blocks, edits (their path/lang differ) and tracebacks (one trace per segment,
        for the error compressor) never merge with a neighbour of the same class."""
        return self.cls is ContentClass.ERROR or any(k in self.meta for k in _OWN_BLOCK)


def finalize(text: str, spans: list[Span], default: ContentClass) -> list[Segment]:
    """Fill gaps with ``default``, resolve overlaps (earlier span wins), merge neighbours of the
    same class and fold whitespace-only pieces into a neighbour."""
    if not text:
        return []
    parts: list[Span] = []
    pos = 0
    for sp in sorted(spans, key=lambda s: (s.start, -s.end)):
        start, end = max(sp.start, pos), min(sp.end, len(text))
        if end <= start:
            continue
        if start > pos:
            parts.append(Span(pos, start, default))
        parts.append(Span(start, end, sp.cls, dict(sp.meta)))
        pos = end
    if pos < len(text):
        parts.append(Span(pos, len(text), default))
    parts = _fold_blank(text, parts)
    merged: list[Span] = []
    for sp in parts:
        last = merged[-1] if merged else None
        if last and last.cls == sp.cls and not last.keep_apart and not sp.keep_apart:
            last.end = sp.end
            last.meta = {**sp.meta, **last.meta}
        else:
            merged.append(sp)
    return [Segment(s.cls, s.start, s.end, text[s.start : s.end], s.meta) for s in merged]


def _fold_blank(text: str, parts: list[Span]) -> list[Span]:
    """A run of blank lines between two segments belongs to the one before it (to the one after
    it at the very start), so blank lines never become segments of their own."""
    out: list[Span] = []
    for sp in parts:
        if out and not text[sp.start : sp.end].strip():
            out[-1] = Span(out[-1].start, sp.end, out[-1].cls, out[-1].meta)
        elif out and not text[out[-1].start : out[-1].end].strip():
            prev = out.pop()
            out.append(Span(prev.start, sp.end, sp.cls, sp.meta))
        else:
            out.append(sp)
    return out
