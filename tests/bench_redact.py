"""Secret redaction in linear time on hostile inputs (long runs of what its patterns start
with: ``TOKEN_TOKEN_…`` once took 250 s for 200 kB). Run: ``./dev bench tests/bench_redact.py``
and read the medians per size: 4x the size should cost about 4x the time. Never asserted."""

from __future__ import annotations

import random

import pytest

from aider_gardener.redact import redact

SIZES = [50_000, 200_000]
HOSTILE = {
    "TOKEN_ run": lambda n: "TOKEN_" * (n // 6),
    "A_ run": lambda n: "A_" * (n // 2),
    "KEY= run": lambda n: "KEY=" * (n // 4),
    "sk- run": lambda n: "sk-" * (n // 3),
    "--token run": lambda n: "--token " * (n // 8),
    "PEM headers": lambda n: "-----BEGIN RSA PRIVATE KEY-----\n" * (n // 32),
    "quoted password": lambda n: '"password": "' + "x" * (n - 20),
    "random": lambda n: "".join(random.Random(n).choice("aA0=_-:/ \n\"'") for _ in range(n)),
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_redact(benchmark, kind, size):
    text = HOSTILE[kind](size)
    benchmark.extra_info.update(kind=kind, chars=len(text))
    benchmark.pedantic(redact, args=(text,), rounds=3, iterations=1)
