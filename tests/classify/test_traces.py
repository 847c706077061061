"""Trace detection: each format found whole, with exact bounds; lone error lines are no traces."""

from __future__ import annotations

import pytest

from aider_gardener.classify.traces import find_traces, has_marker
from tests.hang import finishes


def spans_text(text):
    return [text[s:e] for s, e, _ in find_traces(text)]


def test_python_traceback_with_chained_exception_is_one_trace():
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/app/a.py", line 3, in <module>\n    main()\n'
        '  File "/app/a.py", line 2, in main\n    raise KeyError("k")\n'
        "KeyError: 'k'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/app/b.py", line 9, in run\n    fail()\n'
        "RuntimeError: wrapped\n"
    )
    text = "INFO starting\n" + tb + "INFO shutting down\n"
    found = find_traces(text)
    assert len(found) == 1
    s, e, lang = found[0]
    assert lang == "python"
    assert text[s:e] == tb


def test_python_traceback_with_indentation_stripped_keeps_source_lines():
    # Aider's "> " history copies strip indentation: source lines look like exception lines.
    tb = (
        "Traceback (most recent call last):\n"
        'File "/app/main.py", line 38, in guessed_wrong_repo\n'
        "check_repo = Path(GitRepo(io, fnames, git_dname).root).resolve()\n"
        "^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        'File "/app/repo.py", line 85, in __init__\n'
        "raise SuitableRepoNotFound()\n"
        "aider.repo.SuitableRepoNotFound\n"
    )
    assert spans_text(tb + "Next message\n") == [tb]


def test_headerless_python_frames_with_exception_after_a_blank_line():
    tb = (
        "Unhandled exception in event loop:\n"
        '  File "/x/app.py", line 1, in run\n    a()\n'
        '  File "/x/menus.py", line 217, in f\n    s = "x" + style\n'
        "        ~~~~^~~~~~\n\n"
        'Exception can only concatenate str (not "Style") to str\n'
    )
    assert spans_text(tb) == [tb]


def test_java_trace_with_caused_by_and_more():
    tr = (
        "java.lang.IllegalStateException: boom\n"
        "\tat com.acme.Service.run(Service.java:42)\n"
        "\tat com.acme.Main.main(Main.java:7)\n"
        "Caused by: java.io.IOException: disk full\n"
        "\tat com.acme.Store.write(Store.java:88)\n"
        "\t... 2 more\n"
    )
    text = "[INFO] Running tests\n" + tr + "[INFO] BUILD FAILURE\n"
    found = find_traces(text)
    assert [(text[s:e], lang) for s, e, lang in found] == [(tr, "java")]


def test_js_stack_and_csharp_stack_languages():
    js = "TypeError: x is not a function\n    at f (/app/x.js:3:9)\n    at g (/app/y.js:1:1)\n"
    cs = (
        "Unhandled exception. System.InvalidOperationException: nope\n"
        "   at Shop.Cart.Add() in /src/Cart.cs:line 12\n"
        "   at Shop.Program.Main() in /src/P.cs:line 5\n"
    )
    assert [lang for *_, lang in find_traces(js)] == ["javascript"]
    assert [lang for *_, lang in find_traces(cs)] == ["csharp"]


def test_jest_console_location_frames_are_not_traces():
    text = (
        "  console.log\n    [dotenv] injecting env (15) from .env\n\n"
        "      at _log (../node_modules/dotenv/lib/main.js:142:11)\n\n"
        "  console.error\n    [Nest] 1 - ERROR [Svc] call failed\n\n"
        "      at Svc.call (src/svc.ts:9:3)\n"
    )
    assert find_traces(text) == []


def test_single_error_lines_in_a_log_are_not_traces():
    text = "ERROR: connection refused\nerror[E0432]: unresolved import\nValueError: bad\n"
    assert not has_marker(text)
    assert find_traces(text) == []


def test_pytest_failure_sections_end_at_the_next_section_or_bar():
    text = (
        "=================================== FAILURES ===================================\n"
        "____________________________________ test_a ____________________________________\n"
        "    def test_a():\n>       assert 1 == 2\nE       assert 1 == 2\n\n"
        "t.py:2: AssertionError\n"
        "____________________________________ test_b ____________________________________\n"
        "E       KeyError: 'b'\n\nt.py:5: KeyError\n"
        "=========================== short test summary info ============================\n"
        "FAILED t.py::test_a - assert 1 == 2\n"
    )
    parts = spans_text(text)
    assert len(parts) == 2
    assert parts[0].startswith("____") and parts[0].endswith("t.py:2: AssertionError\n")
    assert "test_b" in parts[1] and parts[1].endswith("t.py:5: KeyError\n")


def test_go_panic_and_rust_backtrace():
    go = (
        "panic: runtime error: index out of range [3] with length 3\n\n"
        "goroutine 1 [running]:\nmain.main()\n\t/app/main.go:8 +0x1d\nexit status 2\n"
    )
    rust = (
        "thread 'main' panicked at src/main.rs:2:5:\nboom\nstack backtrace:\n"
        "   0: rust_begin_unwind\n             at /rustc/x/library/std/src/panicking.rs:645:5\n"
        "   1: app::main\n"
    )
    assert [lang for *_, lang in find_traces(go)] == ["go"]
    assert spans_text(rust) == [rust]


def test_browser_console_frames():
    text = "Uncaught TypeError: a is undefined\n" + "".join(
        f"f{i} @ bundle.js:{i + 1}\n" for i in range(5)
    )
    assert spans_text(text) == [text]


def test_found_spans_are_sorted_and_disjoint():
    tb = 'Traceback (most recent call last):\n  File "a.py", line 1, in f\n    g()\nE: x\n'
    text = ("line\n" + tb) * 20
    found = find_traces(text)
    assert len(found) == 20
    for (s1, e1, _), (s2, e2, _) in zip(found, found[1:]):
        assert e1 <= s2


RUN = 200_000  # milliseconds per pattern when linear; these shapes were quadratic


@pytest.mark.parametrize(
    "text",
    [
        'Traceback (most recent call last):\n  File "/app/a.py", line 3, in <module>\n'
        "    main()\n    " + "~" * RUN + "!\nKeyError: 'k'\n",  # a marker line: [\^~ ]*\s*$
        "Error: boom\n    at foo (/app/a.js:1:2)\n" + " " * RUN + "\n    at bar (/app/b.js:3:4)\n",
    ],
    ids=["python marker", "code frame spaces"],
)
def test_long_runs_in_trace_lines_do_not_hang(text):
    spans = finishes(find_traces, text)
    assert all(0 <= s < e <= len(text) for s, e, _ in spans)
