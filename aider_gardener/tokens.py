"""Token counting: the unit every ratio and budget in the gardener is measured in.

tiktoken's o200k_base for models that use it (gpt-4o, o1, gpt-4.1, gpt-5 ...), cl100k_base for
everything else (Claude, Gemini, DeepSeek, local models: their own tokenizers are not shipped
offline, and cl100k is within a few percent of them on code and English). Results are cached by
content hash, because the same message is counted on every turn.

Counts are exact (tiktoken's own ``encode_ordinary`` count) up to ``_SAMPLE_ABOVE`` characters and
take time linear in the text. tiktoken's BPE is quadratic in the length of one pre-token, and a
command can print a megabyte of newlines, so pre-tokens of ``_LONG`` characters or more are found
and encoded in windows whose joins are checked (``_count_long``); the rest is cut where no
pre-token can span the cut (``_SAFE``) and handed to tiktoken. Above ``_SAMPLE_ABOVE`` characters
the count is estimated from samples. Timings: docs/benchmarks.md.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from functools import lru_cache

import regex  # tiktoken's own dependency: its pattern syntax (\p{L}, possessives)

from . import offline  # noqa: F401  (TIKTOKEN_CACHE_DIR before tiktoken loads an encoding)

_CACHE_SIZE = 65536
# Above this size a text is counted in chunks, cut at ``_SAFE`` positions, with tiktoken's
# threaded batch encoder.
_CHUNK_CHARS = 1 << 18

# A pre-token this long or longer is encoded by _count_long, in windows of _WINDOW bytes, keeping
# the tokens that end _MARGIN bytes before a window's end (a token is at most 128 bytes). Smaller
# windows cost less BPE per byte and more Python per byte: 256 was the fastest measured.
_LONG = 512
_WINDOW = 256
_MARGIN = 128
# Beyond this, counts are estimated from samples (see _estimate).
_SAMPLE_ABOVE = 16_000_000
_SAMPLE_CHARS = 65536

# From this size up to _CHUNK_CHARS a text is counted as the sum of its runs of lines
# (_count_runs), each run's count cached on its own.
_RUNS_ABOVE = 8192
_RUN_CACHE_SIZE = 16384
# A newline followed by a character that begins a new pre-token in cl100k_base and o200k_base:
# none of their pre-tokenizer's patterns continues past such a newline (a newline run goes on
# only over more newlines, punctuation only over newlines and "/", a whitespace run only over
# whitespace), so the text's tokens are exactly its parts' tokens.
_CUT = re.compile(r"\n(?=[^\s/])")
_CUT_MASK = 15  # a cut at about one in 16 of those newlines
# Cuts that keep a count exact: a _CUT, or an ASCII letter or digit followed by an ASCII character
# no word, number or contraction goes on over (a pre-token ends there, and it is not whitespace,
# so neither part's pre-tokenizer, which sees the end of its text, splits differently).
_SAFE = re.compile(
    r"(?<=\n)(?=[^\s/])|(?<=[A-Za-z0-9])(?=[\x00-\x26\x28-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f])"
)


def _byte_class(members: bytes) -> bytes:
    """A ``bytes.translate`` table: 1 for ``members`` and for every non-ASCII byte, else 0."""
    return bytes(1 if b in members or b >= 0x80 else 0 for b in range(256))


# A pre-token of _LONG characters is a run of whitespace, of letters (after one leading
# character, before a 3-letter contraction), or of punctuation (after one space, with newlines):
# so it holds a run of _LONG - 4 bytes of one of these classes. Non-ASCII bytes belong to all
# three: only ASCII is classified, so no Unicode table can disagree with tiktoken's.
_ASCII_WS = b"\t\n\x0b\x0c\r "
_CLASSES = [
    _byte_class(_ASCII_WS),
    _byte_class(bytes(range(65, 91)) + bytes(range(97, 123))),
    _byte_class(bytes(b for b in range(128) if not chr(b).isalnum() and b not in b"\t\x0b\x0c ")),
]
_RUN = b"\x01" * (_LONG - 4)

_cache: OrderedDict[tuple[str, bytes], int] = OrderedDict()
_run_cache: OrderedDict[tuple[str, bytes], int] = OrderedDict()
_lock = threading.Lock()


def encoding_name(model: str | None) -> str:
    import tiktoken

    name = (model or "").split("/")[-1]
    if name:
        try:
            enc = tiktoken.encoding_name_for_model(name)
            if enc in ("o200k_base", "cl100k_base"):
                return enc
        except KeyError:
            pass
    return "cl100k_base"


@lru_cache(maxsize=None)
def _encoding(name: str):
    import tiktoken

    return tiktoken.get_encoding(name)


@lru_cache(maxsize=None)
def _pretokenizer(name: str):
    """tiktoken's pre-tokenizer pattern, run by ``regex`` (which splits identically; tested)."""
    return regex.compile(_encoding(name)._pat_str)


def count_tokens(text: str, model: str | None = "gpt-4o") -> int:
    if not text:
        return 0
    enc_name = encoding_name(model)
    return _cached(
        _cache, _CACHE_SIZE, enc_name, text, lambda: _count(text, _encoding(enc_name), enc_name)
    )


def _cached(cache: OrderedDict, size: int, enc_name: str, text: str, count) -> int:
    """``count()`` of ``text``, kept in ``cache`` (LRU of ``size``) by encoding and content hash."""
    key = (
        enc_name,
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest(),
    )
    with _lock:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit
    n = count()
    with _lock:
        cache[key] = n
        if len(cache) > size:
            cache.popitem(last=False)
    return n


def _count(text: str, enc, enc_name: str = "") -> int:
    enc_name = enc_name or enc.name
    if enc_name not in ("cl100k_base", "o200k_base"):  # the cuts below are proven for these two
        return len(enc.encode_ordinary(text))
    if len(text) > _SAMPLE_ABOVE:
        return _estimate(text, enc, enc_name)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: what tiktoken's encode_ordinary counts instead
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        raw = text.encode("utf-8")
    total = 0
    pos = 0
    for start, end in _long_regions(text, raw):
        total += _count_plain(text[pos:start], enc, enc_name)
        total += _count_region(text[start:end], enc, enc_name)
        pos = end
    return total + _count_plain(text[pos:], enc, enc_name)


def _count_plain(text: str, enc, enc_name: str) -> int:
    """A text in which no pre-token reaches ``_LONG`` characters: tiktoken is linear on it."""
    if not text:
        return 0
    if len(text) > _CHUNK_CHARS:
        chunks = _safe_chunks(text)
        if len(chunks) > 1:
            return sum(len(ids) for ids in enc.encode_ordinary_batch(chunks, num_threads=2))
    if len(text) > _RUNS_ABOVE:
        return _count_runs(text, enc, enc_name)
    return len(enc.encode_ordinary(text))


def _count_runs(text: str, enc, enc_name: str) -> int:
    """A command's output is counted twice in a turn, as Aider's message (a header and a fence
    around it) and as the stored body, and a re-run prints mostly the same lines again. Counted
    as the sum of its runs of lines, each cached, the second count costs only the runs that
    differ. Runs end where the next line decides (content, not position: the same lines cut the
    same way under any header), and only at a newline ``_CUT`` allows, so the sum is the exact
    count, not an estimate."""
    total = 0
    start = 0
    for m in _CUT.finditer(text):
        end = m.end()
        if hash(text[end : end + 48]) & _CUT_MASK:
            continue
        total += _run_count(text[start:end], enc, enc_name)
        start = end
    return total + _run_count(text[start:], enc, enc_name)


def _run_count(run: str, enc, enc_name: str) -> int:
    if not run:
        return 0
    return _cached(
        _run_cache, _RUN_CACHE_SIZE, enc_name, run, lambda: len(enc.encode_ordinary(run))
    )


def _safe_chunks(text: str) -> list[str]:
    chunks = []
    start = 0
    while len(text) - start > _CHUNK_CHARS:
        m = _SAFE.search(text, start + _CHUNK_CHARS)
        if m is None:
            break
        chunks.append(text[start : m.start()])
        start = m.start()
    chunks.append(text[start:])
    return chunks


def _long_regions(text: str, raw: bytes) -> list[tuple[int, int]]:
    """Spans of ``text`` that may hold a pre-token of ``_LONG`` characters, each widened to
    ``_SAFE`` cuts (or the text's ends), sorted and disjoint. Linear: byte classes by
    ``bytes.translate``, runs by ``bytes.find``, cuts by one compiled pattern."""
    if len(text) < _LONG:
        return []
    runs = []
    for table in _CLASSES:
        marked = raw.translate(table)
        at = marked.find(_RUN)
        while at >= 0:
            end = marked.find(b"\x00", at + len(_RUN))
            end = len(marked) if end < 0 else end
            runs.append((at, end))
            at = marked.find(_RUN, end)
    if not runs:
        return []
    runs = _char_spans(runs, raw) if len(raw) != len(text) else sorted(runs)
    regions: list[tuple[int, int]] = []
    for start, end in runs:
        if regions and start < regions[-1][1]:  # inside the region before, or running past it
            if end > regions[-1][1]:
                regions[-1] = (regions[-1][0], _safe_after(text, end))
            continue
        low = regions[-1][1] if regions else 0
        regions.append((_safe_before(text, start, low), _safe_after(text, end)))
    return regions


def _char_spans(runs: list[tuple[int, int]], raw: bytes) -> list[tuple[int, int]]:
    """Byte spans of ``raw`` (valid UTF-8) as character spans, widened to whole characters."""

    def boundary(at: int, step: int) -> int:
        while 0 < at < len(raw) and raw[at] & 0xC0 == 0x80:
            at += step
        return at

    runs = sorted((boundary(start, -1), boundary(end, 1)) for start, end in runs)
    chars: dict[int, int] = {}
    done_bytes = done_chars = 0
    for at in sorted({edge for run in runs for edge in run}):
        done_chars += len(raw[done_bytes:at].decode("utf-8"))
        chars[at] = done_chars
        done_bytes = at
    return [(chars[start], chars[end]) for start, end in runs]


def _safe_after(text: str, pos: int) -> int:
    m = _SAFE.search(text, pos)
    return m.start() if m else len(text)


def _safe_before(text: str, pos: int, low: int) -> int:
    """The last ``_SAFE`` cut in ``[low, pos]``, looking back no further than needed; ``low``
    (the text's start or a region's end, a cut either way) if there is none."""
    span = 256
    while True:
        start = max(low, pos - span)
        last = None
        for m in _SAFE.finditer(text, start, pos + 1):
            last = m.start()
        if last is not None or start == low:
            return low if last is None else last
        span *= 4


def _count_region(text: str, enc, enc_name: str) -> int:
    """Pre-tokenize ``text`` (which begins and ends at ``_SAFE`` cuts) as tiktoken does; encode
    each long pre-token by ``_count_long`` and the stretches between them whole. A stretch is cut
    just after its last pre-token that is not all whitespace (the lemma behind ``_SAFE``); the
    whitespace pre-tokens after that, before the long one, are counted one by one."""
    total = 0
    start = safe = 0  # the stretch's start; the end of its last non-whitespace pre-token
    loose: list[str] = []  # whitespace pre-tokens after ``safe``
    for m in _pretokenizer(enc_name).finditer(text):
        a, b = m.span()
        if b - a >= _LONG:
            total += _count_plain(text[start:safe], enc, enc_name)
            total += sum(len(enc.encode_ordinary(p)) for p in loose)  # each alone: itself
            total += _count_long(m.group().encode("utf-8"), enc)
            start = safe = b
            loose = []
        elif m.group().isspace():  # str.isspace also takes \x1c-\x1f: the safe side
            loose.append(m.group())
        else:
            safe = b
            loose = []
    return total + _count_plain(text[start:], enc, enc_name)


def _count_long(piece: bytes, enc) -> int:
    """The exact BPE count of one long pre-token, in linear time.

    Encoded in windows of ``_WINDOW`` bytes, keeping the tokens that end ``_MARGIN`` bytes before
    the window's end (the end changes the last few tokens of a run). Two encodings join into the
    encoding of the whole when the last token of the first and the first of the second encode to
    themselves as a pair: BPE merges the lowest-ranked pair first, so had it merged across the
    join in the whole, it would merge across it in that pair too (the "compatible pair" lemma of
    github/rust-gems' bpe crate). A join that fails is re-encoded from the previous window's start
    to twice as far; at worst that is tiktoken's own encoding of the whole piece."""
    # a run of one character repeats the same windows and joins: encode each once
    encode = lru_cache(maxsize=1024)(enc._core_bpe.encode_single_piece)
    size = _token_size(enc)
    parts: list[tuple[int, int, int, int]] = []  # (start, tokens, last token's start, its id)
    start, end = 0, min(len(piece), _WINDOW)
    while start < len(piece):
        ids = encode(piece[start:end])
        if end < len(piece):  # keep the tokens the window's end cannot have changed (likely)
            keep, at = 1, start + size(ids[0])
            while keep < len(ids) and at + size(ids[keep]) <= end - _MARGIN:
                at += size(ids[keep])
                keep += 1
            ids = ids[:keep]
        if parts:
            _, _, last_at, last_id = parts[-1]
            if encode(piece[last_at : start + size(ids[0])]) != [last_id, ids[0]]:
                # this part ends beyond the failed window, so the loop always moves on
                start = parts.pop()[0]
                end = min(len(piece), start + 2 * (end - start))
                continue
        stop = start + sum(map(size, ids))
        parts.append((start, len(ids), stop - size(ids[-1]), ids[-1]))
        start, end = stop, min(len(piece), stop + _WINDOW)
    return sum(part[1] for part in parts)


@lru_cache(maxsize=None)
def _token_size(enc):
    """Token id -> its length in bytes, memoised (long pieces repeat few tokens)."""
    return lru_cache(maxsize=65536)(lambda t: len(enc.decode_single_token_bytes(t)))


def _estimate(text: str, enc, enc_name: str) -> int:
    """Above ``_SAMPLE_ABOVE`` characters (a runaway 100 MB output) exact counting would stall the
    turn for tens of seconds; count evenly spaced samples and scale. Only the size of such an
    output is estimated; nothing that small is ever estimated."""
    n = 64
    step = len(text) // n
    sample = [text[i * step : i * step + _SAMPLE_CHARS] for i in range(n)]
    counted = sum(_count(chunk, enc, enc_name) for chunk in sample)
    return round(counted * len(text) / sum(map(len, sample)))
