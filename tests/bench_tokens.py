"""Linear time on hostile sizes: ``compress`` and ``count_tokens`` on whitespace-heavy, one-line
and random inputs of 1, 3 and 10 MB (the inputs of ``python -m bench.linear``, which prints the
same as a per-MB table). Run: ``./dev bench tests/bench_tokens.py``; read the medians per MB
across sizes: flat is linear. Never asserted."""

from __future__ import annotations

import pytest

from bench import linear

SIZES = [1, 3, 10]
KINDS = ["newlines", "whitespace runs", "one-line JSON", "random bytes", "random text"]


@pytest.fixture(scope="module", params=[(k, s) for k in KINDS for s in SIZES], ids=str)
def data(request):
    kind, mb = request.param
    return kind, mb, linear.make(kind, mb)


def test_compress(benchmark, data):
    kind, mb, raw = data
    benchmark.extra_info.update(kind=kind, mb=mb)
    benchmark.pedantic(linear.time_compress, args=(raw,), rounds=3, iterations=1)


def test_count_tokens(benchmark, data):
    kind, mb, raw = data
    benchmark.extra_info.update(kind=kind, mb=mb)
    benchmark.pedantic(linear.time_count, args=(raw,), rounds=3, iterations=1)
