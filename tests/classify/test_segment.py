"""The public API: ``segment`` invariants for any input and source; source rules; ``classify``."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.classify import classify, segment
from aider_gardener.types import ContentClass, Segment, Source

C = ContentClass
SOURCES = [
    Source(),
    Source(role="user"),
    Source(role="assistant"),
    Source(role="tool"),
    Source(role="tool", command="pytest -x"),
    Source(role="tool", command="cat data.json"),
    Source(role="tool", command="git diff"),
    Source(path="src/app.py"),
    Source(path="notes.log"),
]


def assert_covers(text: str, segs: list[Segment]) -> None:
    """Contiguous, in order, covering the text exactly, each text the slice it claims."""
    if not text:
        assert segs == []
        return
    assert segs, "non-empty text must produce segments"
    assert segs[0].start == 0
    assert segs[-1].end == len(text)
    for a, b in zip(segs, segs[1:]):
        assert a.end == b.start
    for s in segs:
        assert s.start < s.end
        assert s.text == text[s.start : s.end]
        assert isinstance(s.cls, ContentClass)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in s.meta.items())


# Lines that exercise every detector: fences, edit markers, trace frames, JSON, diffs, logs.
MARKERS = [
    "```",
    "```python",
    "````",
    "~~~",
    "<source>",
    "</source>",
    "<<<<<<< SEARCH",
    "=======",
    ">>>>>>> REPLACE",
    "src/app.py",
    "Traceback (most recent call last):",
    '  File "x.py", line 3, in f',
    "    return 1/0",
    "ZeroDivisionError: division by zero",
    "java.lang.IllegalStateException: boom",
    "\tat com.x.Y.z(Y.java:12)",
    "Caused by: java.io.IOException: io",
    "    at Object.<anonymous> (/app/x.js:3:9)",
    "TypeError: x is not a function",
    "panic: runtime error",
    "goroutine 1 [running]:",
    "fn @ app.js:1",
    "=================================== FAILURES ===================================",
    "_____________________ test_x _____________________",
    "E       assert 1 == 2",
    "{",
    '  "a": [1, 2],',
    "}",
    '  version "1.2.3"',
    "diff --git a/x b/x",
    "--- a/x",
    "+++ b/x",
    "@@ -1,2 +1,2 @@",
    "-old",
    "+new",
    "2024-01-02 10:00:00 INFO started",
    "I ran this command:",
    "And got this output:",
    "# 1 SEARCH/REPLACE block failed to match!",
    "This is a perfectly ordinary sentence about the code.",
    "",
    "   ",
    "\x1b[31mred\x1b[0m",
    "\ufffd\ufffd",
]
marker_text = st.lists(st.sampled_from(MARKERS), max_size=60).map("\n".join)
junk_text = st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace"))
any_text = st.one_of(st.text(max_size=400), junk_text, marker_text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=any_text, src=st.sampled_from(SOURCES))
def test_segments_always_cover_the_text(text, src):
    assert_covers(text, segment(text, src))


@settings(max_examples=150, deadline=None)
@given(text=marker_text, src=st.sampled_from(SOURCES))
def test_classify_returns_a_class_of_one_of_the_segments(text, src):
    segs = segment(text, src)
    cls = classify(text, src)
    assert isinstance(cls, ContentClass)
    if segs:
        assert cls in {s.cls for s in segs}


@settings(max_examples=60, deadline=None)
@given(text=marker_text)
def test_run_wrapper_output_keeps_its_wrapper_as_prompt(text):
    msg = f"I ran this command:\n\npytest\n\nAnd got this output:\n\n{text}\n"
    segs = segment(msg, Source(role="user"))
    assert_covers(msg, segs)
    assert segs[0].cls is C.PROMPT
    assert "I ran this command" in segs[0].text


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1_000_000,  # one 1 MB line
        "{" * 10_000 + "}" * 10_000,  # deeply nested JSON
        "{\n" * 5_000,  # ten thousand unmatched brackets
        "```\n" * 4_000 + "<<<<<<< SEARCH\n" * 2_000,
        "\x00\x01\x02 binary \xff" * 1000,
        "  at x (y.js:1:1)\n" * 5_000,
        '  File "a.py", line 1, in f\n' * 5_000,
    ],
    ids=[
        "1MB-line",
        "deep-json",
        "open-brackets",
        "fences+markers",
        "binary",
        "frames",
        "py-frames",
    ],
)
@pytest.mark.parametrize("src", SOURCES[:5], ids=lambda s: f"{s.role}-{s.command}")
def test_pathological_inputs_do_not_crash(text, src):
    assert_covers(text, segment(text, src))


def test_empty_text_has_no_segments():
    assert segment("", Source(role="user")) == []
    assert classify("", Source(role="user")) is C.PROMPT


def test_path_extension_decides_for_file_content():
    code = "def f():\n    return 1\n"
    assert [s.cls for s in segment(code, Source(path="pkg/mod.py"))] == [C.CODE]
    assert segment(code, Source(path="pkg/mod.py"))[0].meta == {"path": "pkg/mod.py", "lang": "py"}
    assert [s.cls for s in segment("a: 1\n", Source(path="conf.yaml"))] == [C.STRUCTURED]
    assert [s.cls for s in segment("Some notes.\n", Source(path="README.md"))] == [C.PROSE]


def test_role_decides_the_default_class():
    text = "Please rename the function and keep the tests green.\n"
    assert [s.cls for s in segment(text, Source(role="user"))] == [C.PROMPT]
    assert [s.cls for s in segment(text, Source(role="assistant"))] == [C.PROSE]
    out = "2024-01-02 10:00:00 INFO started\n2024-01-02 10:00:01 INFO ready\n"
    assert [s.cls for s in segment(out, Source(role="tool"))] == [C.LOG]


def test_command_decides_viewed_files_and_diffs():
    js = '{"a": [1, 2, 3], "b": {"c": null}}\n'
    assert classify(js, Source(role="tool", command="cat conf.json")) is C.STRUCTURED
    py = "import os\n\nprint(os.getcwd())\n"
    assert classify(py, Source(role="tool", command="cat tools/run.py")) is C.CODE
    diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    assert classify(diff, Source(role="tool", command="git diff HEAD~1")) is C.EDIT


def test_without_source_a_reply_reads_as_prose_and_a_log_as_log():
    reply = (
        "I will rename the helper so the intent is clearer for future readers.\n\n"
        "app/util.py\n```python\n<<<<<<< SEARCH\ndef f():\n=======\ndef g():\n"
        ">>>>>>> REPLACE\n```\n"
    )
    assert [s.cls for s in segment(reply, Source())] == [C.PROSE, C.EDIT]
    log = "".join(f"2024-01-02 10:00:{i:02d} INFO worker {i} done\n" for i in range(30))
    assert classify(log, Source()) is C.LOG


def test_classify_prefers_the_prompt_of_a_user_message():
    paste = "".join(f"2024-01-02 10:00:{i:02d} ERROR disk {i} failed\n" for i in range(40))
    msg = "Why does this keep failing?\n\n" + paste
    segs = segment(msg, Source(role="user"))
    assert [s.cls for s in segs] == [C.PROMPT, C.LOG]
    assert classify(msg, Source(role="user")) is C.PROMPT
