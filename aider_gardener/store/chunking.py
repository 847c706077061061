"""Split a stored original into embedding-sized chunks, on boundaries that mean something.

One vector for a 5,000-line build log says nothing about line 3,000, so recall would find the
entry but not the part that answers the query. Chunks of ~200-300 tokens are small enough that
each vector is about one thing (and that MiniLM, which reads at most 256 word pieces, sees most of
each chunk), and large enough that a definition or paragraph keeps its context.

Boundaries follow the content class: top-level definitions for code, blank-line paragraphs for
prose, single lines for logs. A line is only ever cut when it alone exceeds the limit (minified
code, one-line JSON). Chunks are verbatim slices: ``"".join(chunk(text, cls)) == text`` for any
non-blank text, so a chunk can always be located in its original.

Token counts use characters-per-token ratios measured with tiktoken on blocks of ~2 KB and
applied to each line's length: counting every line separately would cost more than the rest of
ingest. The ratio varies from 2.4 (yarn logs) to 4.5 (pytest output) on the shared data, and
along one log too, which is why a fixed ``len / 4`` is not used.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..tokens import count_tokens
from ..types import ContentClass

TARGET_TOKENS = 250  # chunks are packed up to this size ...
MAX_TOKENS = 300  # ... and a unit that would overflow this starts a new chunk
# Beyond this many chunks an entry gets proportionally larger chunks: a 1.5 MB build log would
# otherwise queue ~1,500 embeddings (a minute of one CPU core) for text FTS5 already indexes.
MAX_CHUNKS = 512
_BLOCK_CHARS = 2048
_MEASURED_CHARS = 1 << 16

# A top-level definition: starts at column 0 (that is what makes it top level).
_DEF_RE = re.compile(
    r"(?:export\s+(?:default\s+)?)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r"(?:def|class|function|fn|func|impl|struct|enum|trait|interface|module|type|"
    r"public|private|protected|static|const|let|var)\b"
)
# Lines that belong to the definition that follows them.
_PREFIX_RE = re.compile(r"(?:@|#\[|///|/\*\*|\* |#(?!#)|//)")

_CODE = {ContentClass.CODE, ContentClass.EDIT}
_PARAGRAPHS = {ContentClass.PROSE, ContentClass.PROMPT, ContentClass.ERROR}


def chunk(text: str, cls: ContentClass | str) -> list[str]:
    """The chunks to embed for one entry; one chunk for a short text, none for a blank one."""
    if not text or not text.strip():
        return []
    lines = text.splitlines(keepends=True)
    sizes = _line_tokens(lines)
    total = sum(sizes)
    if total <= MAX_TOKENS:
        return [text]
    limit = MAX_TOKENS
    if total / TARGET_TOKENS > MAX_CHUNKS:
        limit = int(total / MAX_CHUNKS * MAX_TOKENS / TARGET_TOKENS) + 1
    target = limit * TARGET_TOKENS // MAX_TOKENS
    cls = _as_class(cls)
    if cls in _CODE:
        units = _definitions(lines)
    elif cls in _PARAGRAPHS:
        units = _paragraphs(lines)
    else:
        units = [[i] for i in range(len(lines))]
    return list(_pack(lines, sizes, units, target, limit))


def estimate_tokens(text: str) -> int:
    """The estimate ``chunk`` uses, exposed so tests can hold it to tiktoken's real count."""
    return round(sum(_line_tokens(text.splitlines(keepends=True)))) if text else 0


def _as_class(cls: ContentClass | str) -> ContentClass | None:
    try:
        return ContentClass(cls)
    except ValueError:
        return None


def _line_tokens(lines: list[str]) -> list[float]:
    """Estimated tokens per line: each block of ~2 KB is counted with tiktoken once and its
    characters-per-token ratio applied to its lines (density changes along a log: a block of
    hex addresses costs twice the tokens of a block of English). Past the first
    ``_MEASURED_CHARS`` the average ratio so far is used, so a huge log costs no more."""
    sizes: list[float] = []
    measured_chars = measured_tokens = 0
    start = 0
    while start < len(lines):
        end, chars = start, 0
        while end < len(lines) and (chars < _BLOCK_CHARS or end == start):
            chars += len(lines[end])
            end += 1
        if measured_chars < _MEASURED_CHARS:
            tokens = count_tokens("".join(lines[start:end]))
            measured_chars += chars
            measured_tokens += tokens
            ratio = chars / tokens if tokens else 4.0
        else:
            ratio = measured_chars / measured_tokens if measured_tokens else 4.0
        ratio = max(1.0, ratio)
        sizes.extend(len(line) / ratio for line in lines[start:end])
        start = end
    return sizes


def _definitions(lines: list[str]) -> list[list[int]]:
    """Each top-level definition, with the decorators and comments right above it, is one unit."""
    units: list[list[int]] = [[]]
    prefix_start: int | None = None  # index in the current unit where a comment/decorator run began
    for i, line in enumerate(lines):
        cur = units[-1]
        top = line[:1] not in (" ", "\t", "\n", "\r", "")
        if top and _DEF_RE.match(line) and cur:
            if prefix_start is not None and prefix_start > 0:
                units[-1], moved = cur[:prefix_start], cur[prefix_start:]
                units.append(moved + [i])
            elif prefix_start == 0:
                cur.append(i)
            else:
                units.append([i])
            prefix_start = None
            continue
        if top and _PREFIX_RE.match(line):
            if prefix_start is None:
                prefix_start = len(cur)
        elif line.strip():
            prefix_start = None
        cur.append(i)
    return [u for u in units if u]


def _paragraphs(lines: list[str]) -> list[list[int]]:
    """Blank lines end a paragraph; the blank lines stay with the paragraph before them."""
    units: list[list[int]] = [[]]
    for i, line in enumerate(lines):
        if line.strip() and units[-1] and not lines[units[-1][-1]].strip():
            units.append([])
        units[-1].append(i)
    return [u for u in units if u]


def _pack(
    lines: list[str], sizes: list[float], units: Iterable[list[int]], target: int, limit: int
) -> Iterable[str]:
    """Greedy packing: whole units while they fit, then whole lines, then cut lines."""
    buf: list[str] = []
    size = 0.0
    for unit in units:
        unit_size = sum(sizes[i] for i in unit)
        if buf and (size + unit_size > limit or size >= target):
            yield "".join(buf)
            buf, size = [], 0.0
        if unit_size <= limit:
            buf.extend(lines[i] for i in unit)
            size += unit_size
            continue
        for i in unit:  # a unit too large for one chunk: fall back to line boundaries
            line, line_size = lines[i], sizes[i]
            if buf and size + line_size > limit:
                yield "".join(buf)
                buf, size = [], 0.0
            if line_size <= limit:
                buf.append(line)
                size += line_size
                continue
            ratio = len(line) / line_size if line_size else 4.0
            pieces = _cut(line, int(limit * ratio))
            yield from pieces[:-1]
            buf, size = [pieces[-1]], len(pieces[-1]) / ratio
    if buf:
        yield "".join(buf)


def _cut(line: str, width: int) -> list[str]:
    """Cut an over-long line at whitespace near ``width`` characters, or hard at ``width``."""
    width = max(width, 16)
    pieces = []
    start = 0
    while len(line) - start > width:
        end = start + width
        space = line.rfind(" ", start + width // 2, end)
        if space > start:
            end = space + 1
        pieces.append(line[start:end])
        start = end
    pieces.append(line[start:])
    return pieces
