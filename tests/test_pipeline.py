"""The pipeline's guarantees on hostile and real input: never longer, idempotent, never raises."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.pipeline import compress, entry_id
from aider_gardener.types import HANDLE_PREFIX, ContentClass, Source
from tests.conftest import tool_output_files

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
    block = "".join(f"2026-01-01 12:00:{i % 60:02d} INFO worker {i} processed item {i * 7}\n" for i in range(1000))
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
