"""Token counting: the unit every ratio and budget in the gardener is measured in.

tiktoken's o200k_base for models that use it (gpt-4o, o1, gpt-4.1, gpt-5 ...), cl100k_base for
everything else (Claude, Gemini, DeepSeek, local models: their own tokenizers are not shipped
offline, and cl100k is within a few percent of them on code and English). Results are cached by
content hash, because the same message is counted on every turn.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from functools import lru_cache

from . import offline  # noqa: F401  (TIKTOKEN_CACHE_DIR before tiktoken loads an encoding)

_CACHE_SIZE = 65536
# Above this size a text is counted in line-aligned chunks with tiktoken's threaded batch encoder.
# BPE can merge across a chunk boundary, so the count may differ by a token per chunk; on a
# multi-megabyte output that error is far below a thousandth.
_CHUNK_CHARS = 1 << 18

_LONG_WORD = 1024
_SLICE = 64
# Beyond this, counts are estimated from samples (see _estimate).
_SAMPLE_ABOVE = 16_000_000
_SAMPLE_CHARS = 65536

_cache: OrderedDict[tuple[str, bytes], int] = OrderedDict()
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


def count_tokens(text: str, model: str | None = "gpt-4o") -> int:
    if not text:
        return 0
    enc_name = encoding_name(model)
    key = (
        enc_name,
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest(),
    )
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    n = _count(text, _encoding(enc_name))
    with _lock:
        _cache[key] = n
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return n


def _count(text: str, enc) -> int:
    if len(text) > _SAMPLE_ABOVE:
        return _estimate(text, enc)
    chunks = _line_chunks(text) if len(text) > _CHUNK_CHARS else [text]
    pieces = [p for chunk in chunks for p in _split_long_words(chunk)]
    if len(pieces) == 1:
        return len(enc.encode_ordinary(pieces[0]))
    return sum(len(ids) for ids in enc.encode_ordinary_batch(pieces, num_threads=2))


def _line_chunks(text: str) -> list[str]:
    chunks = []
    start = 0
    while start < len(text):
        end = min(start + _CHUNK_CHARS, len(text))
        if end < len(text):
            nl = text.rfind("\n", start, end)
            if nl > start:
                end = nl + 1
        chunks.append(text[start:end])
        start = end
    return chunks


def _split_long_words(chunk: str) -> list[str]:
    """BPE is quadratic in the length of one pre-tokenised word: 50,000 repeated characters take
    seconds, a run of U+FFFD from decoded binary tens of seconds. Cutting whitespace-free runs
    longer than ``_LONG_WORD`` into short slices keeps counting linear; such runs tokenise to about
    one token per few characters either way, so the count moves by well under 1%."""
    if len(chunk) < _LONG_WORD:
        return [chunk]
    words = chunk.split()
    if not words or max(map(len, words)) < _LONG_WORD:
        return [chunk]
    out = []
    pos = 0
    for word in words:
        if len(word) < _LONG_WORD:
            continue
        at = chunk.find(word, pos)
        out.append(chunk[pos:at])
        out.extend(word[i : i + _SLICE] for i in range(0, len(word), _SLICE))
        pos = at + len(word)
    out.append(chunk[pos:])
    return [p for p in out if p]


def _estimate(text: str, enc) -> int:
    """Above ``_SAMPLE_ABOVE`` characters (a runaway 100 MB output) exact counting would stall the
    turn for tens of seconds; count evenly spaced samples and scale. Only the size of such an
    output is estimated; nothing that small is ever estimated."""
    n = 64
    step = len(text) // n
    sample = [text[i * step : i * step + _SAMPLE_CHARS] for i in range(n)]
    pieces = [p for chunk in sample for p in _split_long_words(chunk)]
    counted = sum(len(ids) for ids in enc.encode_ordinary_batch(pieces, num_threads=2))
    return round(counted * len(text) / sum(map(len, sample)))
