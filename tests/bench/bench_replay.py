"""Benchmarks: one tiny replay through real Aider coders per mode (``--benchmark-only``)."""

from __future__ import annotations

import pytest

from bench.replay.format import from_events
from bench.replay.runner import MODES, bench_environment, run_replay
from tests.bench.test_runner import tiny_events


@pytest.mark.parametrize("mode", MODES)
def test_replay_tiny(benchmark, mode):
    replay = from_events(tiny_events())
    with bench_environment():
        run = benchmark.pedantic(
            run_replay, args=(replay, mode), kwargs={"vectors": False}, rounds=3, iterations=1
        )
    assert run.turns == 4 and not run.errors
