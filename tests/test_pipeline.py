"""The pipeline's guarantees on hostile and real input: never longer, idempotent, never raises."""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.pipeline import compress, entry_id
from aider_gardener.types import HANDLE_PREFIX, ContentClass, Source
from tests.conftest import tool_output_files
from tests.critical_facts import failing_tests, missing_facts

FILES = tool_output_files()


def _check_invariants(result):
    assert result.tokens_summary <= result.tokens_original
    assert len(result.summary) <= max(len(result.original), len(result.summary.splitlines()[0]))
    again = compress(result.summary)
    assert again.summary == result.summary, "compressing a summary again must change nothing"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_real_outputs_shrink_and_are_idempotent(path):
    data = path.read_bytes()
    result = compress(data, source=Source(role="tool"))
    _check_invariants(result)
    if result.tokens_original > 2000:
        assert result.tokens_summary < result.tokens_original * 0.6
        assert result.summary.rstrip().endswith(f"{HANDLE_PREFIX}{result.entry_id}]")


def test_segments_cover_the_input_in_order(tool_outputs_dir):
    text = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text()
    result = compress(text, source=Source(role="tool", command="pytest"))
    pos = 0
    for seg in result.segments:
        assert seg.segment.start == pos
        assert text[seg.segment.start : seg.segment.end] == seg.segment.text
        pos = seg.segment.end
    assert pos == len(text)


def test_entry_id_is_short_stable_and_content_addressed():
    a, b = entry_id("hello"), entry_id("hello ")
    assert a == entry_id("hello") and a != b
    assert len(a) == 10 and a.isalnum() and a == a.lower()


def test_user_prompt_is_never_compressed():
    prompt = "Please refactor the parser. " * 200
    result = compress(prompt, source=Source(role="user"))
    assert result.cls is ContentClass.PROMPT
    assert result.summary == prompt


def test_binary_output_gets_one_line_and_keeps_the_original():
    data = bytes(range(256)) * 400
    result = compress(data, source=Source(role="tool"))
    assert result.summary.startswith("[binary output: 102,400 bytes")
    assert len(result.summary.splitlines()) == 2  # the message and the recall handle
    assert result.raw == data  # the store keeps the exact bytes


def test_tiny_binary_is_left_alone_rather_than_grown():
    result = compress("\x00", source=Source(role="user"))
    assert result.summary == "\x00"


def test_invalid_utf8_is_replaced_and_said():
    data = b"build ok\n" * 50 + b"\xff\xfe\xfa broken bytes\n" + b"error: linker failed\n" * 3
    result = compress(data, source=Source(role="tool"))
    assert "invalid UTF-8" in result.summary
    assert "linker failed" in result.summary


def test_utf16_output_from_powershell_is_decoded():
    text = "error TS2339: Property 'x' does not exist on type 'Y'.\n" * 30
    result = compress(text.encode("utf-16"), source=Source(role="tool"))
    assert "TS2339" in result.summary and "decoded from UTF-16" in result.summary


def test_ansi_escapes_do_not_reach_the_summary():
    line = "\x1b[31mFAILED\x1b[0m tests/test_a.py::test_b - AssertionError: boom\n"
    result = compress("\x1b[32mok\x1b[0m step\n" * 300 + line)
    assert "\x1b[" not in result.summary
    assert "tests/test_a.py::test_b" in result.summary


def test_one_megabyte_single_line():
    text = "x" * (1 << 20)
    result = compress(text)
    assert result.tokens_summary < result.tokens_original
    assert len(result.summary) < 5000


def test_json_nested_ten_thousand_deep_does_not_crash():
    text = "[" * 10_000 + "]" * 10_000
    result = compress(text, source=Source(role="tool", path="deep.json"))
    _check_invariants(result)
    obj = '{"a":' * 10_000 + "1" + "}" * 10_000
    _check_invariants(compress(obj))


def test_malformed_json_and_unparseable_code():
    bad_json = json.dumps({"items": [{"id": i, "name": f"n{i}"} for i in range(500)]})[:-7]
    _check_invariants(compress(bad_json, source=Source(role="tool", path="x.json")))
    bad_code = "def f(:\n    return )(\n" * 300 + "class {{{\n" * 100
    _check_invariants(compress(bad_code, source=Source(path="broken.py")))


@pytest.mark.skipif(os.environ.get("GARDENER_SKIP_HUGE") == "1", reason="GARDENER_SKIP_HUGE=1")
def test_hundred_megabyte_output_is_compressed_not_crashed():
    block = "".join(
        f"2026-01-01 12:00:{i % 60:02d} INFO worker {i} processed item {i * 7}\n"
        for i in range(1000)
    )
    text = block * 1800 + "ERROR worker 3 crashed: out of memory\n" + block * 10
    assert len(text) > 100_000_000
    result = compress(text, source=Source(role="tool"))
    assert "out of memory" in result.summary
    assert len(result.summary) < 50_000
    assert "large output" in result.summary


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_any_bytes_never_raise_never_grow(data):
    result = compress(data, source=Source(role="tool"))
    assert result.tokens_summary <= max(result.tokens_original, 20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(max_size=3000),
    st.sampled_from(["user", "assistant", "tool", None]),
    st.sampled_from([None, "a.py", "b.json", "c.ts", "d.yaml", "e.csv"]),
)
def test_any_text_never_raises_never_grows_and_is_idempotent(text, role, path):
    result = compress(text, source=Source(role=role, path=path))
    assert result.tokens_summary <= result.tokens_original
    assert compress(result.summary).summary == result.summary


# --------------------------------------------------------------------------- split test runs

RUN_LINE = re.compile(r"^\[(?:pytest|unittest|jest|go|cargo|maven|tsc|cypress|bun): ")


def _verbose_pytest_log(n_failed: int = 6) -> tuple[str, list[str]]:
    """pytest -v with live logs: parametrized cases failing the same way, one section each."""
    ids = [f"test_load[case{k}]" for k in range(n_failed)]
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.2.0, pluggy-1.5.0",
        "collected 40 items",
        "",
    ]
    lines += [f"tests/test_io.py::test_ok_{k} PASSED{' ' * 40}[{k * 2:3d}%]" for k in range(30)]
    for k, test_id in enumerate(ids):
        lines += [f"tests/test_io.py::{test_id} ", f"FAILED{' ' * 67}[{60 + k * 3:3d}%]"]
    lines += [
        "",
        "=================================== FAILURES ===================================",
    ]
    for k, test_id in enumerate(ids):
        lines += [
            f"_______________________________ {test_id} ________________________________",
            "",
            f"path = '/tmp/data{k}.csv'",
            "",
            "    def test_load(path):",
            ">       rows = load(path)",
            "",
            "tests/test_io.py:14: ",
            "_ " * 40,
            "",
            f"self = <app.io.Loader object at 0x7f00{k:04x}>",
            "",
            "    def load(self, path):",
            "        with open(path) as fh:",
            ">           return parse(fh.read())",
            "E           ValueError: header row missing",
            "",
            "app/io.py:33: ValueError",
        ]
    lines.append("=========================== short test summary info ============================")
    lines += [f"FAILED tests/test_io.py::{t} - ValueError: header row missing" for t in ids]
    lines.append(
        f"===================== {n_failed} failed, 30 passed in 1.23s ====================="
    )
    return "\n".join(lines) + "\n", ids


def test_a_split_test_log_gets_one_summary_of_the_whole_run():
    text, _ = _verbose_pytest_log()
    result = compress(text, source=Source(role="tool"))
    classes = [s.segment.cls for s in result.segments]
    assert classes.count(ContentClass.ERROR) == 6 and ContentClass.LOG in classes  # really split
    lines = result.summary.splitlines()
    run_lines = [x for x in lines if RUN_LINE.match(x)]
    assert run_lines == [lines[-2]]  # once, right above the recall handle
    assert run_lines[0].startswith("[pytest: 6 failed, 30 passed")
    assert "no counts found" not in result.summary
    assert not any(x.startswith("[log: ") and "pytest" in x for x in lines)  # no per-slice counts
    _check_invariants(result)


def test_identical_failures_across_segments_collapse_and_every_id_is_named():
    text, ids = _verbose_pytest_log()
    result = compress(text, source=Source(role="tool"))
    lines = result.summary.splitlines()
    assert sum(x.startswith("E ") for x in text.splitlines()) == len(ids)
    assert sum(x.startswith("E ") for x in lines) == 1
    group = next(x for x in lines if x.startswith("[×5 failures identical to the one above: "))
    assert all(test_id in group for test_id in ids[1:])
    assert not missing_facts(text, result.summary)


def test_progress_markers_of_a_verbose_run_collapse():
    text, ids = _verbose_pytest_log()
    result = compress(text, source=Source(role="tool"))
    lines = result.summary.splitlines()
    assert f"[×{len(ids)}] FAILED [<n>%]" in lines
    assert not any(re.match(r"^FAILED\s+\[\s*\d+%\]$", x) for x in lines)


def test_outputs_that_are_no_test_run_get_no_run_summary():
    app = [
        f"2024-05-01 12:00:{k % 60:02d} [INFO] worker {k} handled request {k * 7}"
        for k in range(80)
    ]
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/main.py", line 9, in run\n'
        '    raise RuntimeError("worker pool exhausted")\n'
        "RuntimeError: worker pool exhausted\n"
    )
    text = "\n".join(app[:40]) + "\n" + trace + "\n".join(app[40:]) + "\n"
    result = compress(text, source=Source(role="tool"))
    assert len(result.segments) > 1
    assert not any(RUN_LINE.match(x) for x in result.summary.splitlines())
    pasted, _ = _verbose_pytest_log()
    result = compress(pasted, source=Source(role="user"))  # pasted by the user: not our summary
    assert not any(RUN_LINE.match(x) for x in result.summary.splitlines())


def test_real_streamline_log_split_compresses_close_to_whole(tool_outputs_dir):
    text = (tool_outputs_dir / "pytest_long_warnings__STREAMLINE.log").read_text()
    split = compress(text, source=Source(role="tool"))
    whole = compress(text, source=Source(role="tool"), cls=ContentClass.LOG)
    assert sum(s.segment.cls is ContentClass.ERROR for s in split.segments) >= 17
    assert split.tokens_summary < 1.5 * whole.tokens_summary
    lines = split.summary.splitlines()
    group = next(x for x in lines if x.startswith("[×16 failures identical to the one above: "))
    assert group.count("test_valid_model_runner[") == 16
    assert sum(bool(RUN_LINE.match(x)) for x in lines) == 1
    assert "no counts found" not in split.summary
    assert failing_tests(text) and not missing_facts(text, split.summary)


@pytest.mark.parametrize(
    "name",
    [
        "pytest_failures_typeerror__X_Ray_LLM.log",
        "jest_nestjs__neural-ticker-core.txt",
        "maven_cucumber_java__simple-dtu-pay.txt",
        "pytest_importerror__ha-whatsapp.log",
    ],
)
def test_real_split_runs_have_one_run_line_and_no_slice_counts(tool_outputs_dir, name):
    text = (tool_outputs_dir / name).read_text(encoding="utf-8", errors="replace")
    result = compress(text, source=Source(role="tool"))
    assert len(result.segments) > 1
    lines = result.summary.splitlines()
    assert sum(bool(RUN_LINE.match(x)) for x in lines) == 1
    assert not any(x.startswith("[log: ") and " | " in x for x in lines)
    for seg in result.segments:  # no slice comes out longer in tokens than it went in
        assert seg.tokens_summary <= seg.tokens_original


def test_real_repeated_same_exception_keeps_each_failing_statement(tool_outputs_dir):
    text = (tool_outputs_dir / "pytest_failures_typeerror__X_Ray_LLM.log").read_text()
    result = compress(text, source=Source(role="tool"))
    lines = result.summary.splitlines()
    repeated = (
        "E       TypeError: build_json_report() takes 2 positional arguments but 7 were given"
    )
    assert text.splitlines().count(repeated) == 6
    assert lines.count(repeated) == 1
    assert (
        sum(x.startswith("[same exception as TestJSONReport.test_basic_structure") for x in lines)
        == 5
    )
    for line in text.splitlines():
        if line.startswith(">") or re.match(r"^tests\\\S+\.py:\d+: ", line):
            assert line in lines, line
    assert result.tokens_summary < 0.5 * result.tokens_original


def test_benchmark_split_pytest_log(benchmark, tool_outputs_dir):
    data = (tool_outputs_dir / "pytest_long_warnings__STREAMLINE.log").read_bytes()
    result = benchmark(compress, data, Source(role="tool"))
    assert result.tokens_summary < result.tokens_original


def test_text_quoting_the_handle_marker_is_still_compressed():
    text = "Summaries end with `[full output stored: id=…]` lines.\n" + "INFO step ok\n" * 400
    result = compress(text, source=Source(role="tool"))
    assert result.tokens_summary < result.tokens_original / 5


@pytest.mark.parametrize("as_bytes", [False, True])
def test_summary_with_nuls_past_the_sniff_window_is_left_alone(as_bytes):
    """NULs 8 KB into an output are text to the first pass, but the shorter summary brings them
    into the binary sniff window: the summary check must come first, or the second pass turns the
    summary into "[binary output …]"."""
    lines = [
        f"2024-05-01 12:00:{i % 60:02d} INFO worker {i % 7} processed item {i}" for i in range(400)
    ]
    text = "\n".join(lines) + "\nblob: \x00\x00\x01\x02\x00 end\n" + "\n".join(lines[:50]) + "\n"
    first = compress(text.encode() if as_bytes else text)
    assert "\x00" in first.summary and first.summary != first.original
    assert compress(first.summary).summary == first.summary


def test_utf32_output_compresses_idempotently():
    """Decoded as UTF-16 (its BOM starts alike) it was text with a NUL after every character,
    kept whole by a forced class; compressed again, as a str, that text was binary."""
    lines = [
        f"2024-05-16 12:58:{i % 60:02d} INFO [src/main.rs:{i}] item {i * 7} ok" for i in range(30)
    ]
    data = "\n".join(lines).encode("utf-32")
    first = compress(data, cls=ContentClass.ERROR)
    assert compress(first.summary, cls=ContentClass.ERROR).summary == first.summary


def test_a_note_that_costs_the_saving_does_not_break_idempotence():
    """Invalid UTF-8 adds a note to the summary. Where the note ate the whole saving the original
    came back, as text, and compressed again as text (no note) it shrank. The summary without
    the note is returned instead."""
    data = (
        b"ERROR request value debug id=804623\nINFO info passed module id=262864\n"
        b"INFO build value info error build value id=429816\n"
        b"ERROR failed value passed test value failed id=160864\nERROR build request id=82914\n"
        b"WARN module failed id=141387\nINFO passed import failed value passed id=618951\n"
        b"ERROR info request failed test request test id=869167\n"
        b"ERROR error import id=\xff\xff201651\n"
    )
    first = compress(data)
    assert compress(first.summary).summary == first.summary
    assert first.tokens_summary <= first.tokens_original
