"""The figures of one replay in one mode, as the JSON report carries them (issue 5, §3).

Billing counts what a provider charges for: every request that was answered, the main model's
and the summarizer's alike; a request refused for exceeding the window is counted in
``overflows`` and not billed. Probe recall is ``n`` probes with ``hit`` 0 for the ``aider``
modes, which have no recall, so ``probe_in_prompt_or_recall5`` compares like with like.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from .runner import ModeRun

LONG_DISTANCE = 40


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values): the value a reader can find in the data."""
    data = sorted(values)
    if not data:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(data)))
    return float(data[min(rank, len(data)) - 1])


def _ratio(hit: int, n: int) -> dict[str, int]:
    return {"hit": int(hit), "n": int(n)}


def probe_figures(run: ModeRun, min_distance: int = 0) -> dict[str, dict[str, int]]:
    probes = [p for p in run.probes if p.distance >= min_distance]
    return {
        "probe_in_prompt": _ratio(sum(p.in_prompt for p in probes), len(probes)),
        "probe_in_recall5": _ratio(sum(bool(p.in_recall5) for p in probes), len(probes)),
        "probe_in_prompt_or_recall5": _ratio(
            sum(p.in_prompt or bool(p.in_recall5) for p in probes), len(probes)
        ),
    }


def mode_figures(run: ModeRun) -> dict[str, Any]:
    main = [r for r in run.requests if r.kind == "main" and not r.overflow]
    summary = [r for r in run.requests if r.kind == "summary"]
    per_turn: dict[int, int] = {}
    for r in main:
        per_turn[r.turn] = per_turn.get(r.turn, 0) + r.tokens
    figures: dict[str, Any] = {
        "prompt_tokens_total": sum(r.tokens for r in main) + sum(r.tokens for r in summary),
        "prompt_tokens_main": sum(r.tokens for r in main),
        "prompt_tokens_peak": max((r.tokens for r in main), default=0),
        "requests": len(main),
        "overflows": sum(1 for r in run.requests if r.overflow),
        "llm_summary_calls": len(summary),
        "llm_summary_input_tokens": sum(r.tokens for r in summary),
        "gardener_ms_p50": round(percentile(run.gardener_ms, 50), 2),
        "gardener_ms_p95": round(percentile(run.gardener_ms, 95), 2),
        "wall_s": round(run.wall_s, 2),
        "turns": run.turns,
        "prompt_tokens_per_turn": [per_turn.get(t, 0) for t in range(1, run.turns + 1)],
        "unused_replies": run.unused_replies,
        "skipped_commands": run.skipped_commands,
        "errors": list(run.errors),
    }
    figures.update(probe_figures(run))
    figures["probe_long"] = probe_figures(run, LONG_DISTANCE)["probe_in_prompt_or_recall5"]
    figures["probes"] = [
        {
            "question": p.question,
            "distance": p.distance,
            "in_prompt": p.in_prompt,
            "in_recall5": p.in_recall5,
        }
        for p in run.probes
    ]
    return figures


def report_json(runs: Iterable[ModeRun]) -> dict[str, Any]:
    """``{"replays": {NAME: {"meta": {...}, "modes": {MODE: {...}}}}}``."""
    out: dict[str, Any] = {"replays": {}}
    for run in runs:
        entry = out["replays"].setdefault(
            run.replay, {"meta": {"model": run.model, "max_input_tokens": run.window}, "modes": {}}
        )
        entry["modes"][run.mode] = mode_figures(run)
    return out
