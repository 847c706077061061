"""Token counting: the unit every ratio and budget in the gardener is measured in.

tiktoken's o200k_base for models that use it (gpt-4o, o1, gpt-4.1, gpt-5 ...), cl100k_base for
everything else (Claude, Gemini, DeepSeek, local models: their own tokenizers are not shipped
offline, and cl100k is within a few percent of them on code and English). Results are cached by
content hash, because the same message is counted on every turn.
"""

from __future__ import annotations

import hashlib
import re
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
    n = _count(text, _encoding(enc_name), enc_name)
    _remember(_cache, key, n, _CACHE_SIZE)
    return n


def _remember(cache: OrderedDict, key: tuple[str, bytes], n: int, size: int) -> None:
    with _lock:
        cache[key] = n
        if len(cache) > size:
            cache.popitem(last=False)


def _count(text: str, enc, enc_name: str = "") -> int:
    if len(text) > _SAMPLE_ABOVE:
        return _estimate(text, enc)
    chunks = _line_chunks(text) if len(text) > _CHUNK_CHARS else [text]
    pieces = [p for chunk in chunks for p in _split_long_words(chunk)]
    if len(pieces) == 1:
        if len(text) > _RUNS_ABOVE and enc_name in ("cl100k_base", "o200k_base"):
            return _count_runs(text, enc, enc_name)
        return len(enc.encode_ordinary(pieces[0]))
    return sum(len(ids) for ids in enc.encode_ordinary_batch(pieces, num_threads=2))


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
    key = (enc_name, hashlib.blake2b(run.encode("utf-8", "surrogatepass"), digest_size=16).digest())
    with _lock:
        hit = _run_cache.get(key)
        if hit is not None:
            _run_cache.move_to_end(key)
            return hit
    n = len(enc.encode_ordinary(run))
    _remember(_run_cache, key, n, _RUN_CACHE_SIZE)
    return n


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
