"""Store speed: ingest of a typical tool output, recall over 10,000 real messages.

Run: ``.venv/bin/pytest tests/store/bench_store.py --benchmark-only``. Goals (issue "The store
and recall"): ingest (classify + compress + store, embedding left to the background worker)
p95 <= 20 ms; recall p95 <= 50 ms with 10,000 entries. p95 is computed from the per-round times
and stored in ``extra_info``; nothing here asserts a time.

The 10,000 entries are the messages of the real Aider chat histories in the shared data (user
prompts, tool output, assistant replies with SEARCH/REPLACE blocks), each ingested through the
normal pipeline. The store has no vector index (``vectors=False``), so recall is the FTS5 side of
the hybrid ranker plus fusion, boosts and entry loading.
"""

from __future__ import annotations

import itertools
import random
import re
import statistics
from pathlib import Path

import pytest

from aider_gardener.store import Store
from aider_gardener.store.recall import recall
from aider_gardener.types import Source

TYPICAL = "pytest_failures_typeerror__X_Ray_LLM.log"  # 209 lines of real pytest output
ENTRIES = 10_000
ROUNDS = 300

pytestmark = pytest.mark.filterwarnings("ignore")


def _p95_ms(benchmark) -> float:
    data = sorted(benchmark.stats.stats.data)
    return round(1000 * data[min(len(data) - 1, int(0.95 * len(data)))], 3)


def _record(benchmark, **extra) -> None:
    stats = benchmark.stats.stats
    benchmark.extra_info.update(
        p95_ms=_p95_ms(benchmark),
        median_ms=round(1000 * statistics.median(stats.data), 3),
        **extra,
    )


def test_ingest_typical_output(benchmark, tool_outputs_dir, tmp_path):
    text = (tool_outputs_dir / TYPICAL).read_text(encoding="utf-8", errors="replace")
    store = Store(tmp_path / "gs", vectors=False)
    counter = itertools.count()

    def ingest():
        # a distinct original every round: a repeated one would take the dedup fast path
        n = next(counter)
        return store.ingest(f"{text}\n=== run {n} ===\n", Source(role="tool", command="pytest"))

    entry = benchmark.pedantic(ingest, rounds=ROUNDS, iterations=1, warmup_rounds=5)
    assert entry.stored
    _record(benchmark, lines=text.count("\n"), tokens=entry.tokens_original, ratio=entry.ratio)
    store.close()


def _messages(histories: Path) -> list[tuple[str, str]]:
    """(role, text) messages of every history, round-robin across files so the corpus mixes
    projects the way a long-lived store would. Blocks are split at blank lines; a block's first
    line names its role (``#### `` user, ``> `` tool, else assistant) and consecutive assistant
    blocks are joined up to 15 lines."""
    per_file = []
    for path in sorted(histories.glob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        msgs: list[tuple[str, list[str]]] = []
        for block in re.split(r"\n\s*\n", text):
            lines = block.strip("\n").splitlines()
            if not lines:
                continue
            first = lines[0]
            role = (
                "user"
                if first.startswith("#### ")
                else "tool" if first.startswith("> ") else "assistant"
            )
            if msgs and role == "assistant" == msgs[-1][0] and len(msgs[-1][1]) + len(lines) <= 15:
                msgs[-1][1].extend(["", *lines])
            else:
                msgs.append((role, lines))
        per_file.append([(r, "\n".join(ls)) for r, ls in msgs if len("".join(ls)) >= 40])
    out = []
    for group in itertools.zip_longest(*per_file):
        out.extend(m for m in group if m is not None)
    return list(dict.fromkeys(out))


@pytest.fixture(scope="module")
def big_store(histories_dir, tmp_path_factory):
    msgs = _messages(histories_dir)[:ENTRIES]
    if len(msgs) < ENTRIES:
        pytest.skip(f"only {len(msgs)} messages in the shared histories")
    store = Store(tmp_path_factory.mktemp("big") / "gs", vectors=False)
    for role, text in msgs:
        store.ingest(text, Source(role=role))
    yield store, msgs
    store.close()


def _queries(msgs: list[tuple[str, str]], n: int = 200) -> list[str]:
    """Half identifiers/paths/error words taken from the entries, half natural-language spans of
    user prompts: the two kinds of question recall gets."""
    rng = random.Random(7)
    ident = re.compile(r"[\w./-]*(?:_|\.py|\.js|\.ts|Error)[\w./-]*")
    idents = sorted({m for _, t in msgs for m in ident.findall(t) if 4 <= len(m) <= 60})
    prompts = [t[5:] for r, t in msgs if r == "user" and len(t.split()) >= 6]
    out = []
    for i in range(n):
        if i % 2:
            out.append(rng.choice(idents))
        else:
            words = rng.choice(prompts).split()
            start = rng.randrange(0, max(1, len(words) - 6))
            out.append(" ".join(words[start : start + rng.randint(3, 8)]))
    return out


def test_recall_10k_entries(benchmark, big_store):
    store, msgs = big_store
    queries = itertools.cycle(_queries(msgs))
    hits = benchmark.pedantic(
        lambda: recall(store, next(queries), limit=5), rounds=ROUNDS, iterations=1, warmup_rounds=5
    )
    assert isinstance(hits, list)
    n = store.read(lambda c: c.execute("SELECT count(*) FROM entries").fetchone()[0])
    _record(benchmark, entries=n, mb=round(store.path.stat().st_size / 1e6, 1))


def test_fts_search_10k_entries(benchmark, big_store):
    store, msgs = big_store
    queries = itertools.cycle(_queries(msgs))
    benchmark.pedantic(
        lambda: store.fts_search(next(queries), 50), rounds=ROUNDS, iterations=1, warmup_rounds=5
    )
    _record(benchmark)


def test_ingest_into_10k_store(benchmark, big_store, tool_outputs_dir):
    """Ingest cost must not grow with the store (max(seq), FTS5 merge, indexes)."""
    store, _ = big_store
    text = (tool_outputs_dir / TYPICAL).read_text(encoding="utf-8", errors="replace")
    counter = itertools.count()
    benchmark.pedantic(
        lambda: store.ingest(f"{text}\n=== big run {next(counter)} ===\n", Source(role="tool")),
        rounds=ROUNDS,
        iterations=1,
        warmup_rounds=5,
    )
    _record(benchmark)
