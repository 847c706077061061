"""Line offsets: exact spans and position lookups."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aider_gardener.classify.textlines import Lines


@given(st.text(alphabet="ab\n", max_size=200))
def test_offsets_and_index_agree_with_the_text(text):
    L = Lines(text)
    assert "\n".join(L.lines) == text
    for i, line in enumerate(L.lines):
        start = L.offset(i)
        assert text[start : start + len(line)] == line
        assert L.index(start) == i
    assert L.span(0, len(L.lines)) == (0, len(text))
