"""Segmenter speed on real inputs (goal: <= ~5 ms for a 2,000-line output, linear in size).
Run: ``./dev bench tests/classify`` or ``pytest tests/classify/bench_classify.py --benchmark-only``.
Reported by pytest-benchmark, never asserted.
"""

from __future__ import annotations

import pytest

from aider_gardener.classify import segment
from aider_gardener.types import Source
from tests.conftest import HISTORIES, TOOL_OUTPUTS, tool_output_files

FILES = tool_output_files()


@pytest.mark.parametrize("path", FILES, ids=[p.name.split("__")[0] for p in FILES])
def test_segment_tool_output(benchmark, path):
    text = path.read_text(encoding="utf-8", errors="replace")
    segs = benchmark(segment, text, Source(role="tool"))
    benchmark.extra_info.update(lines=text.count("\n"), chars=len(text), segments=len(segs))


def _history_messages(role_prefix: str) -> str:
    """The largest assistant reply (or user message) of one real history, de-prefixed."""
    path = HISTORIES / "Ahmad-A0__Inversity-SnapSwap.md"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    from bench.classification import parse_history

    units = parse_history(path, path.name)
    msgs = {id(u.message): u.message for u in units if u.message.role == role_prefix}
    return max((m.text for m in msgs.values()), key=len)


@pytest.mark.parametrize("role", ["assistant", "user"])
def test_segment_chat_message(benchmark, role):
    text = _history_messages(role)
    segs = benchmark(segment, text, Source(role=role))
    benchmark.extra_info.update(lines=text.count("\n"), chars=len(text), segments=len(segs))


def test_segment_2000_line_log_no_source(benchmark):
    path = TOOL_OUTPUTS / "loghub_HDFS_2k.log"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    text = path.read_text(encoding="utf-8", errors="replace")
    benchmark(segment, text, Source())
