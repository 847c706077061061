"""ingest -> classify -> compress -> count, for one input. No LLM call anywhere.

``compress`` is the one entry point the store, the Aider integration and the CLI use. Its
guarantees, tested on real outputs: the summary is never longer than the original (in characters
or tokens), compressing a summary again changes nothing, and no input raises.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from dataclasses import replace

from .classify import segment as split_segments
from .compress import COMPRESSORS, run_compressor
from .compress.base import strip_ansi
from .compress.large import LARGE_CHARS, compress_large
from .sanitize import decode
from .tokens import count_tokens
from .types import (
    HANDLE_PREFIX,
    Compressed,
    CompressionResult,
    CompressOptions,
    ContentClass,
    Segment,
    SegmentResult,
    Source,
    handle_line,
)

log = logging.getLogger(__name__)


def entry_id(original: str) -> str:
    """Short, stable, printable: the same original always gets the same id (content addressed),
    so a handle in an old summary stays valid across sessions and re-ingestion deduplicates."""
    digest = hashlib.blake2b(original.encode("utf-8", "replace"), digest_size=8).digest()
    return base64.b32encode(digest).decode("ascii").lower().rstrip("=")[:10]


def compress(
    data: str | bytes,
    source: Source | None = None,
    opts: CompressOptions | None = None,
    cls: ContentClass | None = None,
) -> CompressionResult:
    """Classify ``data`` into segments, compress each with its class compressor, count tokens.

    ``cls`` forces one class for the whole input (the CLI's ``--class``).
    """
    opts = opts or CompressOptions(source=source or Source())
    source = source or opts.source
    decoded = decode(data)
    raw = data if isinstance(data, bytes) and (decoded.binary or decoded.notes) else None
    if decoded.binary:
        original = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    else:
        original = data if isinstance(data, str) else decoded.text
    opts = replace(opts, source=source, entry_id=entry_id(original))
    text = strip_ansi(decoded.text)
    notes = list(decoded.notes)

    if decoded.binary:
        segs = [Segment(ContentClass.LOG, 0, len(original), original)]
        return _result(original, decoded.text, segs, [decoded.text], notes, opts, raw)
    if HANDLE_PREFIX in text:  # already a summary: compressing it again must change nothing
        seg = Segment(cls or ContentClass.LOG, 0, len(original), original)
        return _result(original, original, [seg], [original], notes, opts, raw)
    if len(text) > LARGE_CHARS:
        seg = Segment(cls or ContentClass.LOG, 0, len(text), text, {"large": "1"})
        done = run_compressor("large", compress_large, text, opts)
        return _result(original, done.text, [seg], [done], notes, opts, raw)

    if cls is not None:
        segs = [Segment(cls, 0, len(text), text)]
    else:
        segs = split_segments(text, source)

    outs = []
    for seg in segs:
        fn = COMPRESSORS.get(seg.cls)
        if fn is None or not seg.text.strip():  # prompts and blank runs stay verbatim
            outs.append(seg.text)
            continue
        seg_opts = opts if not seg.meta.get("path") else _with_path(opts, seg.meta["path"])
        outs.append(run_compressor(seg.cls.value, fn, seg.text, seg_opts))
    summary = _join(segs, outs)
    return _result(original, summary, segs, outs, notes, opts, raw)


def _with_path(opts: CompressOptions, path: str) -> CompressOptions:
    return replace(opts, source=replace(opts.source, path=path))


def _join(segs: list[Segment], outs: list) -> str:
    parts = []
    for seg, out in zip(segs, outs):
        body = out if isinstance(out, str) else out.text
        if seg.text.endswith("\n") and not body.endswith("\n"):
            body += "\n"
        parts.append(body)
    return "".join(parts)


def _result(original, summary, segs, outs, notes, opts, raw=None) -> CompressionResult:
    model = opts.model
    eid = entry_id(original)
    tokens_original = count_tokens(original, model)
    seg_results = []
    for seg, out in zip(segs, outs):
        comp = out if isinstance(out, Compressed) else Compressed(out, {})
        t_in = count_tokens(seg.text, model)
        t_out = count_tokens(comp.text, model) if comp.text != seg.text else t_in
        seg_results.append(SegmentResult(seg, comp, t_in, t_out))

    if notes:
        summary = summary.rstrip("\n") + "\n" + "".join(f"[{n}]\n" for n in notes)
    full = summary if summary == original else summary.rstrip("\n") + "\n" + handle_line(eid)
    tokens_summary = count_tokens(full, model)
    if tokens_summary >= tokens_original or len(full) >= len(original):
        full, tokens_summary = original, tokens_original  # never longer than the input
    dominant = _dominant(seg_results)
    return CompressionResult(
        entry_id=eid,
        cls=dominant,
        original=original,
        summary=full,
        tokens_original=tokens_original,
        tokens_summary=tokens_summary,
        segments=seg_results,
        notes=notes,
        raw=raw,
    )


def _dominant(results: list[SegmentResult]) -> ContentClass:
    """The class carrying most of the tokens names the whole entry (for priority and stats);
    a user prompt with a pasted log is still the user's prompt."""
    if not results:
        return ContentClass.PROSE
    weight: dict[ContentClass, int] = {}
    for r in results:
        weight[r.segment.cls] = weight.get(r.segment.cls, 0) + r.tokens_original
    if ContentClass.PROMPT in weight:
        return ContentClass.PROMPT
    return max(weight, key=weight.get)
