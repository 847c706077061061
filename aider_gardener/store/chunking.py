"""Split a stored original into embedding-sized chunks, on boundaries that mean something.

One vector for a 5,000-line build log says nothing about line 3,000, so recall would find the
entry but not the part that answers the query. Chunks of ~200-250 word pieces are small enough
that each vector is about one thing, and large enough that a definition or paragraph keeps its
context. Boundaries follow the content class: top-level definitions for code, blank-line
paragraphs for prose, single lines for logs; a line is only cut when it alone exceeds the limit.
Chunks are verbatim slices: ``"".join(chunk(text, cls)) == text`` for any non-blank text.

Sizes are counted in the embedder's own word pieces (MiniLM reads 256 and drops the rest), with
the model's ``tokenizer.json`` and ``tokenizers`` alone: exactly, word by word, up to 32 KB, then
from the ratio measured so far with a margin, so a huge log costs no more. Without the tokenizer
(FTS5-only installs) tiktoken counts and a token counts as ``FALLBACK_PIECES_PER_TOKEN`` pieces.
Measurements: docs/decisions/086-embedding-chunks.md.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from typing import Any, Iterable, Sequence

from ..tokens import count_tokens
from ..types import ContentClass

log = logging.getLogger(__name__)

WINDOW_PIECES = 254  # MiniLM's 256-piece window less [CLS] and [SEP]
TARGET_PIECES = 200  # chunks are packed up to this size ...
MAX_PIECES = 254  # ... and a unit that would overflow this starts a new chunk
# Beyond this many chunks an entry gets proportionally larger chunks (which overflow the window):
# a huge build log would otherwise queue minutes of embedding (decision 086) for text FTS5
# already indexes.
MAX_CHUNKS = 512
# Word pieces per tiktoken token when the model's tokenizer is unavailable (decision 086).
FALLBACK_PIECES_PER_TOKEN = 1.6
_MEASURED_CHARS = 1 << 15  # counted line by line; estimated past this
_ESTIMATE_MARGIN = 1.15  # past it, sizes are inflated by this much (decision 086)
_FALLBACK_MEASURED_CHARS = 1 << 16  # tiktoken is ten times faster: it can look further
_SAMPLE_CHARS = 2048
_MAX_RATIO = 32.0  # chars per piece: a run of blank lines or junk still costs something
_MIN_RATIO = 0.25  # Hangul: a syllable is three pieces (its jamo)

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

# Printable ASCII words and punctuation marks as BERT's pre-tokenizer splits them; text with
# anything else is counted by the whole tokenizer.
_WORD = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
_NOT_PLAIN = re.compile(r"[^\t\n\r -~]")
_MAX_WORDS = 50_000  # distinct words remembered (~5 MB); forgotten all at once past that
_PROBE = "ImportError: cannot import name 'parse_config' (src/app/config.py:12) E0432 0x7ffd"

_counter: "_PieceCounter | None" = None
_counter_failed = False
_counter_lock = threading.Lock()


def chunk(text: str, cls: ContentClass | str) -> list[str]:
    """The chunks to embed for one entry; one chunk for a short text, none for a blank one.
    Never raises: ingest must store the entry whatever happens here."""
    if not text or not text.strip():
        return []
    try:
        return _chunk(text, cls)
    except Exception as err:  # noqa: BLE001 - one chunk is still a (truncated) vector
        log.warning("gardener: chunking failed (%s: %s); one chunk", type(err).__name__, err)
        return [text]


def _chunk(text: str, cls: ContentClass | str) -> list[str]:
    lines = text.splitlines(keepends=True)
    sizes, exact = _line_pieces(lines)
    total = sum(sizes)
    if total <= MAX_PIECES:
        return [text]
    limit = MAX_PIECES
    if total / TARGET_PIECES > MAX_CHUNKS:
        limit = int(total / MAX_CHUNKS * MAX_PIECES / TARGET_PIECES) + 1
    target = limit * TARGET_PIECES // MAX_PIECES
    kind = _as_class(cls)
    if kind in _CODE:
        units = _definitions(lines)
    elif kind in _PARAGRAPHS:
        units = _paragraphs(lines)
    else:
        units = [[i] for i in range(len(lines))]
    return list(_pack(lines, sizes, exact, units, target, limit))


def estimate_pieces(text: str) -> int:
    """The size ``chunk`` packs by: exact for the first ``_MEASURED_CHARS``, an estimate with a
    margin past them. Exposed so tests can hold it to the real count."""
    return round(sum(_line_pieces(text.splitlines(keepends=True))[0])) if text else 0


def count_pieces(texts: Sequence[str]) -> list[int]:
    """Word pieces of each text as the embedder reads them, without [CLS]/[SEP] or truncation
    (the tiktoken-based estimate when the tokenizer is unavailable). Never raises."""
    texts = [t if isinstance(t, str) else str(t) for t in texts]
    counter = _piece_counter()
    if counter is not None:
        try:
            return counter.count(texts)
        except Exception as err:  # noqa: BLE001 - a tokenizer failure must not stop ingest
            log.debug("gardener: counting word pieces failed (%s); estimating", err)
    return [math.ceil(count_tokens(t) * FALLBACK_PIECES_PER_TOKEN) for t in texts]


def tokenizer_available() -> bool:
    """Whether sizes come from the model's own tokenizer (else from the tiktoken fallback)."""
    return _piece_counter() is not None


class _PieceCounter:
    """The model's tokenizer, configured for counting: no padding, no truncation. A copy of its
    own, not the embedder's: that one truncates, and getting it would load the model.

    Running the whole tokenizer builds an ``Encoding`` with every piece's string and offsets,
    too slow for every ingest (decision 086). For printable ASCII, BERT's normalizer only
    lowercases and its pre-tokenizer only splits at whitespace and at each punctuation mark
    (every printable non-alphanumeric ASCII character), so a text's pieces are the sum of its
    words' WordPiece counts: words are found with one regex, and each distinct word is split by
    the tokenizer's own WordPiece model once and remembered. Same counts (checked at load and by
    the tests). Other text (non-ASCII, control characters) goes through the whole tokenizer."""

    def __init__(self) -> None:
        from .embeddings import load_tokenizer, model_path

        path = model_path() / "tokenizer.json"
        self.tokenizer: Any = load_tokenizer()
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        # without offsets, ~30 % faster; older tokenizers lack it
        self._batch = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        self._lock = threading.Lock()  # fast tokenizers raise "Already borrowed" across threads
        self._words: dict[str, int] = {}
        self._model: Any = self.tokenizer.model if _is_uncased_bert(path) else None
        if self._model is not None and self.count([_PROBE]) != self._full([_PROBE]):
            self._model = None

    def count(self, texts: Sequence[str]) -> list[int]:
        if self._model is None:
            return self._full(texts)
        split = [None if _NOT_PLAIN.search(t) else _WORD.findall(t) for t in texts]
        words = self._words
        new = {w for ws in split if ws for w in ws if w not in words}
        if len(words) + len(new) > _MAX_WORDS:  # replaced, not cleared: other threads read it
            words = self._words = {}
            new = {w for ws in split if ws for w in ws}
        if new:
            with self._lock:
                for w in new:
                    words[w] = len(self._model.tokenize(w.lower()))
        others = iter(self._full([t for t, ws in zip(texts, split) if ws is None]))
        get = words.__getitem__
        return [next(others) if ws is None else sum(map(get, ws)) for ws in split]

    def _full(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        with self._lock:
            return [len(e) for e in self._batch(list(texts), add_special_tokens=False)]

    def pieces(self, text: str) -> tuple[list[str], list[tuple[int, int]]]:
        """Each piece of ``text`` and its (start, end) in ``text``'s characters."""
        with self._lock:
            enc = self.tokenizer.encode(text, add_special_tokens=False)
        return enc.tokens, enc.offsets


def _is_uncased_bert(path: Any) -> bool:
    """Whether the word-sum shortcut holds for this tokenizer file."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        norm, pre, model = config["normalizer"], config["pre_tokenizer"], config["model"]
        return (
            norm.get("type") == "BertNormalizer"
            and norm.get("lowercase") is True
            and pre.get("type") == "BertPreTokenizer"
            and model.get("type") == "WordPiece"
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _piece_counter() -> _PieceCounter | None:
    global _counter, _counter_failed
    if _counter is None and not _counter_failed:
        with _counter_lock:
            if _counter is None and not _counter_failed:
                try:
                    _counter = _PieceCounter()
                except Exception as err:  # noqa: BLE001 - missing package, file or bad JSON
                    _counter_failed = True
                    log.info(
                        "gardener: MiniLM tokenizer unavailable (%s: %s); chunk sizes estimated "
                        "with tiktoken",
                        type(err).__name__,
                        err,
                    )
    return _counter


def _as_class(cls: ContentClass | str) -> ContentClass | None:
    try:
        return ContentClass(cls)
    except ValueError:
        return None


def _line_pieces(lines: list[str]) -> tuple[list[float], int]:
    """Word pieces per line, and how many leading lines were counted exactly.

    Lines are counted one by one up to ``_MEASURED_CHARS``: BERT's pre-tokenizer splits at
    whitespace, so a chunk's pieces are exactly the sum of its lines'. Past that (and from a
    line longer than that on), the chars-per-piece ratio measured so far is applied, times
    ``_ESTIMATE_MARGIN``, so a huge log costs no more than its first 32 KB."""
    if _piece_counter() is None:
        return _estimated_line_pieces(lines), 0
    exact = chars = 0
    while exact < len(lines) and chars < _MEASURED_CHARS:
        if len(lines[exact]) > _MEASURED_CHARS:
            break
        chars += len(lines[exact])
        exact += 1
    counted = lines[:exact]
    if exact < len(lines) and len(lines[exact]) > _MEASURED_CHARS:
        counted = [*counted, _sample(lines[exact])]  # for the ratio of the rest
    counts = count_pieces(counted)
    sizes = [float(n) for n in counts[:exact]]
    if exact < len(lines):
        scale = _ESTIMATE_MARGIN / _ratio(sum(len(t) for t in counted), sum(counts))
        sizes.extend(len(line) * scale for line in lines[exact:])
    return sizes, exact


def _estimated_line_pieces(lines: list[str]) -> list[float]:
    """Without the model's tokenizer: tiktoken counts each block of ~2 KB once (a count per
    line would cost more than the rest of ingest, and flood ``count_tokens``' cache), and the
    block's chars-per-piece ratio, at ``FALLBACK_PIECES_PER_TOKEN`` pieces a token, is applied
    to its lines. Past ``_FALLBACK_MEASURED_CHARS`` the average ratio so far is used."""
    sizes: list[float] = []
    measured_chars = measured_pieces = 0.0
    start = 0
    while start < len(lines):
        end, chars = start, 0
        while end < len(lines) and (chars < _SAMPLE_CHARS or end == start):
            chars += len(lines[end])
            end += 1
        if measured_chars < _FALLBACK_MEASURED_CHARS:
            block = "".join(lines[start:end])
            if len(block) > _MEASURED_CHARS:
                block = _sample(block)
            pieces = count_tokens(block) * FALLBACK_PIECES_PER_TOKEN
            measured_chars += len(block)
            measured_pieces += pieces
            ratio = _ratio(len(block), pieces)
        else:
            ratio = _ratio(int(measured_chars), measured_pieces)
        sizes.extend(len(line) / ratio for line in lines[start:end])
        start = end
    return sizes


def _sample(line: str) -> str:
    """What is counted of a huge line (a 1 MB minified file): three slices from its start,
    middle and end."""
    mid = len(line) // 2 - _SAMPLE_CHARS // 2
    return " ".join((line[:_SAMPLE_CHARS], line[mid : mid + _SAMPLE_CHARS], line[-_SAMPLE_CHARS:]))


def _ratio(chars: int, pieces: float) -> float:
    return min(_MAX_RATIO, max(_MIN_RATIO, chars / pieces)) if pieces > 0 else _MAX_RATIO


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
    lines: list[str],
    sizes: list[float],
    exact: int,
    units: Iterable[list[int]],
    target: int,
    limit: int,
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
            cut = _cut_at_pieces(line, limit) if i < exact else None
            if cut is None:
                ratio = len(line) / line_size if line_size else 4.0
                cut = [(p, len(p) / ratio) for p in _cut(line, int(limit * ratio))]
            yield from (p for p, _ in cut[:-1])
            buf, size = [cut[-1][0]], cut[-1][1]
    if buf:
        yield "".join(buf)


def _cut_at_pieces(line: str, limit: int) -> list[tuple[str, float]] | None:
    """Cut an over-long line after at most ``limit`` word pieces each, where the model's own
    tokenizer puts piece boundaries: at whitespace if one lies in the second half, else before
    a piece that starts a word (never inside one, whose rest would tokenize differently), else
    hard. Returns (slice, pieces) pairs, or None when the tokenizer is unavailable."""
    if _counter is None:
        return None
    try:
        tokens, offsets = _counter.pieces(line)
    except Exception as err:  # noqa: BLE001 - cut by characters instead
        log.debug("gardener: tokenizing a long line failed (%s)", err)
        return None
    out: list[tuple[str, float]] = []
    start_char, k = 0, 0
    while len(tokens) - k > limit:
        first = k + max(1, limit // 2)
        nxt = k + limit  # the first piece that does not fit
        word_start: int | None = None
        for j in range(nxt, first - 1, -1):
            at = offsets[j][0]
            if at > start_char and line[at - 1].isspace():
                best = j
                break
            if word_start is None and not tokens[j].startswith("##"):
                word_start = j
        else:
            best = nxt if word_start is None else word_start
        cut = offsets[best][0]
        if cut <= start_char:
            return None
        out.append((line[start_char:cut], float(best - k)))
        start_char, k = cut, best
    out.append((line[start_char:], float(len(tokens) - k)))
    return out


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
