"""Split one input into class-homogeneous segments, each routed to its own compressor.

Provenance decides the reading mode, content decides the classes inside it: a file's content is
classed by its extension; the user's words are ``prompt``, with ``/run`` output and large pastes
carved out; an assistant's reply is prose with edit blocks and fences; command output is ``log``
with tracebacks, embedded JSON and diffs cut out; an unknown text is read like a reply when it
looks like chat, else like command output. The segments always cover the text exactly, in order
(``seg.text == text[seg.start:seg.end]``; none for an empty text).

``Segment.meta`` keys: ``path`` (file of an edit block, whole-file fence or shown file), ``lang``
(fence language, extension or trace language), ``fence`` ("1": includes its fence lines), ``edit``
(``search_replace``, ``whole``, ``udiff``), ``command``/``runner`` (command output, e.g.
``pytest``), ``format`` (``json``, ``yarn.lock``, ``paths``), ``aider`` ("1": Aider's own message).

Decision record: docs/decisions/019-classification-by-provenance.md
"""

from __future__ import annotations

from ..types import ContentClass, Segment, Source
from . import lines as lk
from .assistant import assistant_spans
from .markdown import FENCE_OPEN, SEARCH
from .output import output_spans
from .source import class_for_path, ext_of
from .spans import Span, finalize
from .user import user_spans

__all__ = ["classify", "segment"]


def segment(text: str, source: Source) -> list[Segment]:
    """Contiguous segments covering ``text``; see the module docstring for the rules."""
    if not text:
        return []
    source = source or Source()
    if source.path and not source.command:
        cls = class_for_path(source.path)
        if cls is not None and cls is not ContentClass.LOG:
            meta = {"path": source.path}
            if ext_of(source.path):
                meta["lang"] = ext_of(source.path)
            return finalize(text, [Span(0, len(text), cls, meta)], cls)
    role = (source.role or "").lower()
    if role == "user":
        return finalize(text, user_spans(text), ContentClass.PROMPT)
    if role == "assistant":
        return finalize(text, assistant_spans(text), ContentClass.PROSE)
    if role == "tool" or source.command or source.path:
        return finalize(text, output_spans(text, source.command), ContentClass.LOG)
    if _chat_like(text):
        return finalize(text, assistant_spans(text), ContentClass.PROSE)
    return finalize(text, output_spans(text, None), ContentClass.LOG)


def classify(text: str, source: Source) -> ContentClass:
    """The class of the whole input: the one carrying most of its characters, except that a
    user message is the user's prompt whatever was pasted into it (prompts are never dropped)."""
    segs = segment(text, source)
    if not segs:
        return ContentClass.PROMPT if (source and source.role == "user") else ContentClass.PROSE
    weight: dict[ContentClass, int] = {}
    for seg in segs:
        weight[seg.cls] = weight.get(seg.cls, 0) + len(seg.text.strip()) + 1
    if ContentClass.PROMPT in weight:
        return ContentClass.PROMPT
    return max(weight, key=lambda c: weight[c])


def _chat_like(text: str) -> bool:
    """Without provenance: does this read like a chat reply rather than command output?"""
    head = text[:20_000].split("\n")
    if any(SEARCH.match(x) for x in head):
        return True
    sample = lk.sample(head)
    counts = lk.counts(sample)
    nonblank = max(1, len(sample) - counts.get(lk.BLANK, 0))
    fences = sum(1 for x in sample if FENCE_OPEN.match(x))
    prose = counts.get(lk.PROSE, 0) / nonblank
    logish = (counts.get(lk.LOG, 0) + counts.get(lk.TRACE, 0)) / nonblank
    return logish < 0.2 and (prose >= 0.5 or (fences >= 2 and prose >= 0.2))
