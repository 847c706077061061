"""The cost of reading phrases in an explicit recall (``store/phrases.py``) at its worst: 20
candidates each as long as it reads (``SCAN_CHARS``), Latin logs and Chinese prose, against a
short and a long query. Run: ``./dev bench tests/bench_phrases.py``; compare the medians with
``/recall``'s p95 in docs/benchmarks.md. Never asserted."""

from __future__ import annotations

import random

import pytest

from aider_gardener.store import phrases

QUERIES = {
    "short": "ON CONFLICT DO UPDATE cannot affect row a second time",
    "long": " ".join(["why did the nightly upgrade of the odoo leads module fail again"] * 8),
    "chinese": "更精簡的方案：移除 Site 級別的雙向同步",
}


def _log(rng: random.Random) -> str:
    lines = [
        f"2026-05-05 23:09:{rng.randrange(60):02d} INFO module {i} loaded" for i in range(4000)
    ]
    return "\n".join(lines)[: phrases.SCAN_CHARS]


def _chinese(rng: random.Random) -> str:
    chars = (
        "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之"
    )
    return "".join(rng.choice(chars) for _ in range(phrases.SCAN_CHARS))


@pytest.fixture(scope="module", params=["log", "chinese"])
def candidates(request):
    rng = random.Random(7)
    make = _log if request.param == "log" else _chinese
    return {f"e{i}": make(rng) for i in range(phrases.DEPTH)}


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_promote(benchmark, candidates, query):
    ranked = list(candidates)
    benchmark.extra_info.update(query=query, chars=sum(map(len, candidates.values())))
    benchmark.pedantic(
        phrases.promote, args=(QUERIES[query], ranked, candidates), rounds=5, iterations=1
    )
