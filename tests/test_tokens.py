import random

import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener import tokens
from aider_gardener.tokens import count_tokens, encoding_name


def test_encoding_choice():
    assert encoding_name("gpt-4o") == "o200k_base"
    assert encoding_name("openai/gpt-4o-mini") == "o200k_base"
    assert encoding_name("gpt-4") == "cl100k_base"
    assert encoding_name("anthropic/claude-sonnet-4-20250514") == "cl100k_base"
    assert encoding_name(None) == "cl100k_base"


def test_counts_match_tiktoken():
    import tiktoken

    text = "def hello(name):\n    return f'hi {name}'\n" * 10
    assert count_tokens(text, "gpt-4") == len(tiktoken.get_encoding("cl100k_base").encode(text))
    assert count_tokens("", "gpt-4o") == 0


def test_large_text_chunked_count_is_exact():
    """Chunks are cut only where no pre-token spans the cut: a chunk boundary used to fall at any
    newline, even inside a pre-token."""
    import tiktoken

    text = "".join(f"step {i}.\n\n\n\n\n\n" for i in range(50_000))  # "." takes the newlines
    exact = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    assert count_tokens(text, "gpt-4o") == exact


def test_cache_returns_same_value():
    text = "cache me " * 100
    assert count_tokens(text) == count_tokens(text)


def test_long_words_are_counted_exactly():
    """BPE is quadratic on one long pre-token; counting it in windows keeps it linear (speed is
    benchmarked in tests/bench_tokens.py) and the count exact (it was cut in 64-character slices,
    within 2%)."""
    import tiktoken

    rng = random.Random(5)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000))
    text = "see " + word + " tail " + "\ufffd" * 3000
    exact = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    assert count_tokens(text, "gpt-4o") == exact


def test_huge_text_is_estimated_within_one_percent():
    import tiktoken

    from aider_gardener import tokens

    line = "2026-01-01 12:00:00 INFO worker {} processed item {} in {}ms\n"
    text = "".join(line.format(i, i * 7, i % 97) for i in range(300_000))
    exact = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    old = tokens._SAMPLE_ABOVE
    tokens._SAMPLE_ABOVE = 1_000_000
    try:
        estimate = tokens._count(text, tokens._encoding("o200k_base"))
    finally:
        tokens._SAMPLE_ABOVE = old
    assert abs(estimate - exact) <= exact * 0.01


def _adversarial_lines(seed: int) -> str:
    """Lines starting and ending with every kind of character the pre-tokenizer treats apart:
    newline runs, CRLF, spaces, tabs, '/', punctuation, digits, contractions, non-ASCII."""
    import random

    rng = random.Random(seed)
    starts = [
        "\n",
        " ",
        "\t",
        "/",
        "\r\n",
        ".",
        "'s",
        "1",
        "a",
        "A",
        "-",
        "#",
        '"',
        "é",
        "中",
        "  ",
    ]
    ends = ["\n", "\r\n", "\n\n", " \n", ".\n", "/\n"]
    body = "ab1.,/ \t'\"-_"
    return "".join(
        rng.choice(starts)
        + "".join(rng.choice(body) for _ in range(rng.randint(0, 30)))
        + rng.choice(ends)
        for _ in range(rng.randint(400, 900))
    )


def test_counting_by_runs_of_lines_is_exact():
    import tiktoken

    from aider_gardener import tokens

    for name in ("cl100k_base", "o200k_base"):
        enc = tiktoken.get_encoding(name)
        for seed in range(20):
            text = _adversarial_lines(seed)
            assert len(text) > tokens._RUNS_ABOVE
            assert tokens._count_runs(text, enc, name) == len(enc.encode_ordinary(text))


def test_a_wrapped_output_reuses_the_counts_of_its_lines():
    """Aider's message around a command's output, then the output alone: exact both times, and
    the second count encodes only the runs the header changed."""
    import tiktoken

    from aider_gardener import tokens

    output = "".join(
        f"2024-05-0{i % 9 + 1} worker-{i % 7} took {i * 37 % 1000} ms\n" for i in range(800)
    )
    message = f"I ran this command:\n\npytest -q\n\nAnd got this output:\n\n{output}\n"
    enc = tiktoken.get_encoding("o200k_base")
    assert count_tokens(message, "gpt-4o") == len(enc.encode_ordinary(message))
    calls = []
    real = tokens._encoding("o200k_base")

    class Spy:
        def encode_ordinary(self, text):
            calls.append(len(text))
            return real.encode_ordinary(text)

    assert tokens._count_runs(output, Spy(), "o200k_base") == len(enc.encode_ordinary(output))
    assert 0 < sum(calls) < len(output) / 4


# Long pre-tokens of every kind the pre-tokenizers make, and what sits around them.
LONG_RUNS = {
    "newlines": "\n" * 9000,
    "spaces before a word": "see" + " " * 7000 + "word",
    "spaces at the end": "end" + " " * 7000,
    "mixed whitespace": "".join(random.Random(1).choice(" \t\n\r") for _ in range(6000)),
    "indent after blank lines": "def f():" + "\n" * 3000 + " " * 2000 + "return 1\n",
    "punctuation takes the newlines": "x." + "\n" * 4000 + "/path",
    "rule line": "=" * 5000 + "\n",
    "replacement characters": "\ufffd" * 4000 + " ok",
    "unicode spaces": "a" + "\u3000" * 3000 + "\xa0" * 1000 + "b",
    "combining marks": "e\u0301" * 2500,
    "cjk": "中文" * 2000,
    "control bytes": "\x1c\x1d" * 2000 + "\x00" * 1000,
    "lone surrogate inside": "a" * 2000 + "\ud800" + "b" * 2000,
}


@pytest.mark.parametrize("name", sorted(LONG_RUNS))
@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_long_pre_tokens_count_exactly(name, encoding):
    """Long runs are counted in windows, not handed to tiktoken whole; the count is still
    tiktoken's count of the whole text."""
    text = LONG_RUNS[name]
    exact = len(tiktoken.get_encoding(encoding).encode_ordinary(text))
    assert tokens._count(text, tokens._encoding(encoding), encoding) == exact


class _Spy:
    """An encoding that records the longest pre-token tiktoken's BPE is given."""

    def __init__(self, name):
        self.real = tokens._encoding(name)
        self.split = regex.compile(self.real._pat_str).findall
        self.name = name
        self.longest = 0
        self._core_bpe = self

    def _see(self, text):
        pieces = self.split(text)
        self.longest = max([self.longest, *map(len, pieces)])

    def encode_ordinary(self, text):
        self._see(text)
        return self.real.encode_ordinary(text)

    def encode_ordinary_batch(self, texts, num_threads=8):
        for text in texts:
            self._see(text)
        return self.real.encode_ordinary_batch(texts, num_threads=num_threads)

    def encode_single_piece(self, piece):
        self.longest = max(self.longest, len(piece))
        return self.real._core_bpe.encode_single_piece(piece)

    def decode_single_token_bytes(self, token):
        return self.real.decode_single_token_bytes(token)


@pytest.mark.parametrize(
    "text",
    [
        "\n" * 300_000,
        ("word" + " " * 50_000 + "\n") * 6,
        "".join(random.Random(2).choice(" \t\n") for _ in range(200_000)),
        "x" * 200_000,
        "\ufffd" * 100_000,
    ],
    ids=["newlines", "space runs", "mixed whitespace", "one word", "replacement characters"],
)
def test_no_long_pre_token_reaches_tiktoken_whole(text):
    """Linear time without timing anything: tiktoken's quadratic BPE only ever sees pieces of a
    few hundred bytes (compress(b"\\n" * 300000) spent 30 s on one 300,000-byte piece)."""
    spy = _Spy("o200k_base")
    tokens._count(text, spy, "o200k_base")
    assert 0 < spy.longest <= 1024  # a window, or twice one after a join that failed


@pytest.mark.parametrize("unit", [b" ", b"\n", b"a", "\ufffd".encode(), "\u3000".encode(), b"=-"])
def test_count_long_is_the_bpe_of_the_whole_piece(unit):
    enc = tiktoken.get_encoding("o200k_base")
    for n in (600, 1777, 5000):
        piece = (unit * n)[:n]
        assert tokens._count_long(piece, enc) == len(enc._encode_single_piece(piece))


_PIECES = st.sampled_from(
    [" ", "\n", "\t", "\r\n", "a", "Z", "é", "\u0301", "'s", ".", "/", "=", "1", "中", "\ufffd"]
    + ["\x1c", "\x00", "\xa0", "\u3000", "😀", "ab", " x", ".\n"]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_PIECES, st.integers(min_value=1, max_value=1500)), min_size=1, max_size=6),
    st.sampled_from(["cl100k_base", "o200k_base"]),
)
def test_texts_with_long_runs_count_exactly(runs, encoding):
    text = "".join(piece * n for piece, n in runs)
    exact = len(tiktoken.get_encoding(encoding).encode_ordinary(text))
    assert tokens._count(text, tokens._encoding(encoding), encoding) == exact
