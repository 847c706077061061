"""ingest -> classify -> compress -> count, for one input. No LLM call anywhere.

``compress`` is the one entry point the store, the Aider integration and the CLI use. Its
guarantees, tested on real outputs: the summary is never longer than the original (in characters
or tokens), compressing a summary again changes nothing, and no input raises.

A split input must not cost more than a whole one, so three steps look across segments: a test
run is detected and parsed once on the whole text (its slices are compressed knowing the runner,
and one line states the run's counts at the end); a slice that would come out longer in tokens is
kept as printed; repeated failure sections collapse to pointers (``compress/dedupe.py``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from dataclasses import replace

from . import critical
from .classify import segment as split_segments
from .compress import testrun
from .compress.base import run_compressor, strip_ansi
from .compress.dedupe import dedupe_failures
from .compress.keep_critical import keep_critical
from .compress.large import LARGE_CHARS, compress_large
from .compress.registry import COMPRESSORS
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
    with critical.shared_scans():  # the log compressor and the fact net scan the same text once
        return _compress(data, source, opts, cls)


def _compress(
    data: str | bytes,
    source: Source | None,
    opts: CompressOptions | None,
    cls: ContentClass | None,
) -> CompressionResult:
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

    # Compressing a summary again must change nothing, even one the binary sniff rejects: a NUL
    # 8 KB into an output is text, and then within the first 8 KB of its shorter summary.
    if _is_summary(strip_ansi(original) if decoded.binary else text):
        seg = Segment(cls or ContentClass.LOG, 0, len(original), original)
        return _result(original, original, [seg], [original], notes, opts, raw)
    if decoded.binary:
        segs = [Segment(ContentClass.LOG, 0, len(original), original)]
        return _result(original, decoded.text, segs, [decoded.text], notes, opts, raw)
    if len(text) > LARGE_CHARS:
        seg = Segment(cls or ContentClass.LOG, 0, len(text), text, {"large": "1"})
        done = run_compressor("large", compress_large, text, opts)
        return _result(original, done.text, [seg], [done], notes, opts, raw)

    if cls is not None:
        segs = [Segment(cls, 0, len(text), text)]
    else:
        segs = split_segments(text, source)

    run = _whole_run(text, segs, source)
    base_opts = replace(opts, test_runner=run.runner) if run else opts
    outs: list[Compressed | str] = []
    for seg in segs:
        fn = COMPRESSORS.get(seg.cls)
        if fn is None or not seg.text.strip():  # prompts and blank runs stay verbatim
            outs.append(seg.text)
            continue
        path = seg.meta.get("path")
        seg_opts = _with_path(base_opts, path) if path else base_opts
        outs.append(run_compressor(seg.cls.value, fn, seg.text, seg_opts))
    if len(segs) > 1:
        outs = [_no_worse(seg, out, opts.model) for seg, out in zip(segs, outs)]
        outs = dedupe_failures(segs, outs)
    outs = _keep_critical(segs, outs)
    summary = _join(segs, outs)
    if run:
        summary = _with_run_summary(summary, run)
    return _result(original, summary, segs, outs, notes, opts, raw)


def _keep_critical(segs: list[Segment], outs: list) -> list:
    """Every critical fact of a segment missing from the whole summary comes back in that
    segment's output (``compress/keep_critical.py``): the promise holds whatever a compressor did.
    """
    whole = critical.Summary(_join(segs, outs))
    restored: set[tuple[str, str]] = set()
    done = []
    for seg, out in zip(segs, outs):
        body = out if isinstance(out, str) else out.text
        if body == seg.text:
            done.append(out)
            continue
        kept = keep_critical(seg.text, body, whole, restored)
        if kept != body:
            out = Compressed(kept, {**out.counts, "facts_restored": 1}, out.fallback)
        done.append(out)
    return done


def _whole_run(text: str, segs: list[Segment], source: Source) -> testrun.TestRun | None:
    """The test run a split tool output is, parsed once on the whole text.

    Segments are slices: the counts sit in the last one, the failure sections in the middle, so
    detection and the run's summary belong to the whole. Only for tool output split into several
    segments, none of them a prompt or an edit (those make it a chat message quoting a run, not
    the run), and only when the parse found something to report."""
    if len(segs) < 2 or source.role in ("user", "assistant"):
        return None
    classes = {seg.cls for seg in segs}
    if ContentClass.LOG not in classes or classes & {ContentClass.PROMPT, ContentClass.EDIT}:
        return None
    runner = testrun.detect_runner(text, source.command)
    if runner is None:
        return None
    _, lines = testrun.split_output(text)
    run = testrun.parse_test_run(lines, runner)
    return run if (run.counts or run.failures or run.codes) else None


def _no_worse(seg: Segment, out: Compressed | str, model: str) -> Compressed | str:
    """A short slice can come out longer in tokens than it went in (a four-line tail plus a
    ``[log: …]`` line); the slice as printed is then the better summary of itself."""
    if isinstance(out, str) or out.text == seg.text or len(out.text) < 0.5 * len(seg.text):
        return out
    if count_tokens(out.text, model) >= count_tokens(seg.text, model):
        return Compressed(seg.text, {**out.counts, "kept_verbatim": 1})
    return out


def _with_run_summary(summary: str, run: testrun.TestRun) -> str:
    """One line for the whole run: the runner's counts, and any failing id no segment shows."""
    lines = [f"[{run.summary()}]"]
    missing = [t for t in run.failed_ids() if t not in summary]
    if missing:
        lines.insert(0, "failing (not shown above): " + ", ".join(missing))
    return summary.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


def _is_summary(text: str) -> bool:
    """A summary ends with its handle line; text that merely quotes the marker is not one."""
    tail = text.rstrip()
    return tail[tail.rfind("\n") + 1 :].startswith(HANDLE_PREFIX)


def _with_path(opts: CompressOptions, path: str) -> CompressOptions:
    return replace(opts, source=replace(opts.source, path=path))


def _join(segs: list[Segment], outs: list) -> str:
    parts = []
    for seg, out in zip(segs, outs):
        body = out if isinstance(out, str) else out.text
        if not body and seg.text:  # folded into a neighbour's line by de-duplication
            continue
        if seg.text.endswith("\n") and not body.endswith("\n"):
            body += "\n"
        parts.append(body)
    return "".join(parts)


def _result(original, summary, segs, outs, notes, opts, raw=None) -> CompressionResult:
    model = opts.model
    eid = opts.entry_id or entry_id(original)  # set by compress(); hashing 100 MB twice is waste
    tokens_original = count_tokens(original, model)
    seg_results = []
    chars = sum(len(seg.text) for seg in segs) or 1
    for seg, out in zip(segs, outs):
        comp = out if isinstance(out, Compressed) else Compressed(out, {})
        if len(segs) == 1:
            t_in = tokens_original if seg.text == original else count_tokens(seg.text, model)
        else:
            # a segment's share of the original's tokens, by characters: what the per-segment
            # figures (class weighting, per-class stats) need, without tokenizing the input twice
            t_in = max(1, round(tokens_original * len(seg.text) / chars)) if seg.text else 0
        t_out = count_tokens(comp.text, model) if comp.text != seg.text else t_in
        seg_results.append(SegmentResult(seg, comp, t_in, t_out))

    full, tokens_summary = _shorter(original, tokens_original, summary, notes, eid, model)
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


def _shorter(original, tokens_original, summary, notes, eid, model) -> tuple[str, int]:
    """The summary with its notes and handle line, if shorter than the original in tokens and
    characters; else without the notes (when they cost the whole saving the original came back,
    as text, and compressed again as text, with no note, it shrank); else the original."""
    bodies = [summary]
    if notes:
        bodies.insert(0, summary.rstrip("\n") + "\n" + "".join(f"[{n}]\n" for n in notes))
    for body in bodies:
        full = body if body == original else body.rstrip("\n") + "\n" + handle_line(eid)
        tokens = count_tokens(full, model)
        if tokens < tokens_original and len(full) < len(original):
            return full, tokens
    return original, tokens_original  # never longer than the input


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
    return max(weight, key=lambda cls: weight[cls])
