"""Per-line cues and the bounded sample."""

from __future__ import annotations

import pytest

from aider_gardener.classify import lines as lk
from tests.hang import finishes


@pytest.mark.parametrize(
    "line,kind",
    [
        ('  File "x.py", line 3, in f', lk.TRACE),
        ("    at Foo.bar(Foo.java:12)", lk.TRACE),
        ("081109 203615 148 INFO dfs.DataNode: x", lk.LOG),
        ("Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user", lk.LOG),
        ("src/a.ts(3,5): error TS2339: Property 'x' does not exist", lk.LOG),
        ("Tokens: 9.2k sent, 185 received. Cost: $0.03 message.", lk.LOG),
        ('  "name": "wonka",', lk.STRUCT),
        ("This is a sentence about the design of things.", lk.PROSE),
        ("- Create the folder and move the files there.", lk.PROSE),
        ("from backend.app.models.company import Company", lk.CODE),
        ("npm run dev", lk.CODE),
        ("return x + 1;", lk.CODE),
        ("diff --git a/x b/x", lk.DIFF),
        ("src/app.py", lk.PATH),
        ("", lk.BLANK),
    ],
)
def test_kind(line, kind):
    assert lk.kind(line) == kind


def test_is_path_and_sentence():
    assert lk.is_path("### client/src/App.css") == "client/src/App.css"
    assert lk.is_path("`app/main.py`:") == "app/main.py"
    assert lk.is_path("Here is app/main.py") is None
    assert lk.is_sentence("This change makes the loader tolerate a missing configuration file.")
    assert not lk.is_sentence("checking for gcc... cc")


def test_sample_is_bounded_and_keeps_head_and_tail():
    lines = [str(i) for i in range(10_000)]
    s = lk.sample(lines, limit=240)
    assert len(s) == 240
    assert s[:5] == ["0", "1", "2", "3", "4"] and s[-1] == "9999"
    assert lk.sample(lines[:10]) == lines[:10]


@pytest.mark.parametrize("unit", ["a", "-", "/", "a("])
def test_a_long_at_line_is_classified_in_linear_time(unit):
    """TRACE_RE's frame alternative, [class]+.*(?:\\(.*\\)|:\\d+), rescanned the line once per split
    of a long "at aaaa…" between its + and its .*."""
    assert finishes(lk.kind, "at " + unit * 200_000 + "!") != lk.TRACE
    assert lk.kind("    at foo.bar(Baz.java:12)") == lk.TRACE


@pytest.mark.parametrize(
    "line",
    ["    " + " " * 400_000 + "x", "\xa0" * 400_000 + "x", "tests/a.py ." + " " * 100_000 + "!"],
    ids=["spaces", "no-break spaces", "test progress"],
)
def test_a_long_blank_run_is_classified_in_linear_time(line):
    """LOG_RE's "… [ 42%]" alternative (.*) sat after ^\\s*: every split of a blank run between
    them rescanned the line; \\s*(?:[…])?\\s*$ did the same at a test-progress line's end."""
    assert finishes(lk.kind, line) != lk.LOG
    assert lk.kind("tests/test_a.py ..F.    [ 42%]") == lk.LOG
