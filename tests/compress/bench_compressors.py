"""Compressor speed on real outputs: each class compressor alone, the full pipeline, and tiktoken
on the same text as the throughput yardstick. Run: ``./dev bench tests/compress``.

Goals (issue 2): <= 20 ms for a 2,000-line output, <= 200 ms for the 1.5 MB build log, throughput
close to tiktoken's own. Reported as medians by pytest-benchmark, never asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aider_gardener import critical
from aider_gardener.compress.registry import COMPRESSORS
from aider_gardener.pipeline import compress
from aider_gardener.tokens import _encoding
from aider_gardener.types import CompressOptions, ContentClass, Source
from tests.conftest import TOOL_OUTPUTS, TOOL_OUTPUTS_MORE, all_tool_output_files

SITE = Path(__import__("aider").__file__).parent

# (class, input) pairs that represent each compressor's typical work.
CLASS_INPUTS = {
    ContentClass.LOG: TOOL_OUTPUTS / "loghub_HDFS_2k.log",
    ContentClass.STRUCTURED: TOOL_OUTPUTS / "github_api_paginate_issues__raw-fixture.json",
    ContentClass.CODE: SITE / "coders" / "base_coder.py",
    ContentClass.PROSE: SITE / "website" / "docs" / "usage" / "tips.md",
    ContentClass.ERROR: TOOL_OUTPUTS / "maven_cucumber_java__simple-dtu-pay.txt",
}


def _read(path: Path) -> str:
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("cls", list(CLASS_INPUTS), ids=lambda c: c.value)
def test_class_compressor(benchmark, cls):
    text = _read(CLASS_INPUTS[cls])
    path = str(CLASS_INPUTS[cls]) if cls in (ContentClass.CODE, ContentClass.STRUCTURED) else None
    opts = CompressOptions(source=Source(role="tool", path=path))
    out = benchmark(COMPRESSORS[cls], text, opts)
    benchmark.extra_info.update(lines=text.count("\n"), chars=len(text), out_chars=len(out.text))


FILES = all_tool_output_files()  # both folders: the 20k-line npm debug log is in the second
IDS = [f"{p.parent.name[13:] or 'base'}-{p.name.split('__')[0]}" for p in FILES]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_pipeline_on_real_output(benchmark, path):
    data = path.read_bytes()
    result = benchmark(compress, data, Source(role="tool"))
    benchmark.extra_info.update(
        lines=data.count(b"\n"), mb=round(len(data) / 1e6, 3), ratio=round(result.ratio, 4)
    )


@pytest.mark.parametrize("name", ["loghub_HDFS_2k.log", "c_build_log__minix.log"])
def test_log_compressor_alone(benchmark, name):
    text = _read(TOOL_OUTPUTS / name)
    benchmark(COMPRESSORS[ContentClass.LOG], text, CompressOptions())
    benchmark.extra_info.update(lines=text.count("\n"), mb=round(len(text) / 1e6, 3))


@pytest.mark.parametrize("name", ["loghub_HDFS_2k.log", "c_build_log__minix.log"])
def test_tiktoken_yardstick(benchmark, name):
    text = _read(TOOL_OUTPUTS / name)
    enc = _encoding("o200k_base")
    benchmark(enc.encode_ordinary, text)
    benchmark.extra_info.update(lines=text.count("\n"), mb=round(len(text) / 1e6, 3))


NPM_HUGE = "npm_debug_install_ECONNRESET_huge__Gulp-and-Webpack.log"


def test_fact_extraction_on_the_npm_debug_log(benchmark):
    """The shared fact definition runs on every output (the pipeline's last step): its cost on
    the 20k-line npm debug log, next to the whole pipeline's above."""
    text = _read(TOOL_OUTPUTS_MORE / NPM_HUGE)
    found = benchmark(critical.extract, text)
    benchmark.extra_info.update(lines=text.count("\n"), facts=sum(len(v) for v in found.values()))
