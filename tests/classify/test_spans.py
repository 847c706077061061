"""finalize: gaps filled, overlaps resolved, neighbours merged, blank runs folded."""

from __future__ import annotations

from aider_gardener.classify.spans import Span, finalize
from aider_gardener.types import ContentClass as C


def test_gaps_take_the_default_and_everything_is_covered():
    text = "aaa\nbbb\nccc\n"
    segs = finalize(text, [Span(4, 8, C.CODE)], C.PROSE)
    assert [(s.cls, s.text) for s in segs] == [
        (C.PROSE, "aaa\n"),
        (C.CODE, "bbb\n"),
        (C.PROSE, "ccc\n"),
    ]


def test_overlapping_spans_keep_the_earlier_one():
    text = "0123456789"
    segs = finalize(text, [Span(0, 6, C.LOG), Span(4, 10, C.ERROR)], C.PROSE)
    assert [(s.cls, s.start, s.end) for s in segs] == [(C.LOG, 0, 6), (C.ERROR, 6, 10)]


def test_same_class_neighbours_merge_but_blocks_and_traces_stay_apart():
    text = "a\nb\nc\nd\n"
    segs = finalize(text, [Span(0, 2, C.LOG), Span(2, 4, C.LOG)], C.LOG)
    assert len(segs) == 1 and segs[0].text == text
    fenced = [Span(0, 2, C.CODE, {"fence": "1"}), Span(2, 4, C.CODE, {"fence": "1"})]
    assert len(finalize(text, fenced, C.PROSE)) == 3
    traces = [Span(0, 2, C.ERROR), Span(2, 4, C.ERROR)]
    assert [s.cls for s in finalize(text, traces, C.LOG)] == [C.ERROR, C.ERROR, C.LOG]


def test_blank_runs_join_a_neighbour():
    text = "code\n\n\nprose\n"
    segs = finalize(text, [Span(0, 5, C.CODE, {"fence": "1"}), Span(5, 7, C.PROSE)], C.PROSE)
    assert [(s.cls, s.text) for s in segs] == [(C.CODE, "code\n\n\n"), (C.PROSE, "prose\n")]
    lead = finalize("\n\nx\n", [Span(2, 4, C.CODE, {"fence": "1"})], C.PROSE)
    assert [(s.cls, s.text) for s in lead] == [(C.CODE, "\n\nx\n")]


def test_out_of_range_and_empty_spans_are_ignored():
    segs = finalize("abc", [Span(2, 99, C.CODE), Span(1, 1, C.LOG)], C.PROSE)
    assert [(s.cls, s.start, s.end) for s in segs] == [(C.PROSE, 0, 2), (C.CODE, 2, 3)]
    assert finalize("", [Span(0, 3, C.CODE)], C.PROSE) == []
