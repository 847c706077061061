"""Chunking on real outputs and synthetic edge cases: sizes, boundaries, losslessness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.store import chunking
from aider_gardener.store.chunking import MAX_TOKENS, chunk, estimate_tokens
from aider_gardener.tokens import count_tokens
from aider_gardener.types import ContentClass
from tests.conftest import tool_output_files

REAL = [p for p in tool_output_files() if p.stat().st_size < 400_000]


def test_blank_text_has_no_chunks():
    assert chunk("", ContentClass.LOG) == []
    assert chunk(" \n\t\n", ContentClass.PROSE) == []


def test_short_text_is_one_chunk():
    text = "ImportError: cannot import name 'foo' from 'bar' (bar/__init__.py)\n"
    assert chunk(text, ContentClass.ERROR) == [text]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_outputs_chunk_losslessly_within_limits(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    cls = ContentClass.STRUCTURED if path.suffix == ".json" else ContentClass.LOG
    chunks = chunk(text, cls)
    assert "".join(chunks) == text
    sizes = [count_tokens(c) for c in chunks]
    # The block-ratio estimate may miss a chunk's real count by a little (measured: <= 25 %).
    assert max(sizes) <= MAX_TOKENS * 1.3, (path.name, max(sizes))
    if len(chunks) > 2:
        inner = sizes[:-1]  # the last chunk takes what is left
        assert sum(inner) / len(inner) >= 150, (path.name, inner)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_log_chunks_end_on_line_boundaries(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    chunks = chunk(text, ContentClass.LOG)
    long_lines = any(estimate_tokens(line) > MAX_TOKENS for line in text.splitlines())
    if long_lines:
        pytest.skip("has lines longer than a chunk; those are cut by design")
    for c in chunks[:-1]:
        assert c.endswith(("\n", "\r")), repr(c[-40:])


def test_estimate_tracks_tiktoken(tool_outputs_dir):
    for path in REAL:
        text = path.read_text(encoding="utf-8", errors="replace")
        for piece in chunk(text, ContentClass.LOG)[:20]:
            real = count_tokens(piece)
            assert abs(estimate_tokens(piece) - real) <= max(30, real * 0.25), path.name


def _python_module(n_funcs: int) -> str:
    parts = ['"""A module."""\n\nimport os\n\n']
    for i in range(n_funcs):
        body = "".join(f"    value_{j} = os.path.join('a', 'b{j}')\n" for j in range(12))
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
        " ".join(f"Sentence {i}.{j} explains one more detail of the design." for j in range(9))
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
    line = ("x" * 50 + " ") * 20_000  # ~1 MB, one line
    chunks = chunk(line, ContentClass.LOG)
    assert "".join(chunks) == line
    assert len(chunks) > 1
    assert max(count_tokens(c) for c in chunks) <= MAX_TOKENS * 1.25


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
