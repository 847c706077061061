"""The figures of one replay in one mode, as the JSON report carries them (issue 5, §3).

Billing counts what a provider charges for: every request that was answered, the main model's
and the summarizer's alike; a request refused for exceeding the window is counted in
``overflows`` and not billed. Probe recall is ``n`` probes with ``hit`` 0 for the ``aider``
modes, which have no recall, so ``probe_in_prompt_or_recall5`` compares like with like.

Probe figures use the loose matcher (``matching.py``: verbatim, or every content word of the
answer in one message / one recalled hit), the same for every mode; the ``*_verbatim`` figures
are the strict ones. ``probe_phases`` splits them by where a continuity replay asked them
(after a ``/soft-restart``, after a resumed session), ``probe_kinds`` by the probes' ``kind``.
Gardener time per turn leaves out opening the store, reported once per Aider process as
``gardener_open_ms``.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from .runner import ModeRun, ProbeResult

LONG_DISTANCE = 40
VERBATIM = "_verbatim"


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values): the value a reader can find in the data."""
    data = sorted(values)
    if not data:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(data)))
    return float(data[min(rank, len(data)) - 1])


def _ratio(hit: int, n: int) -> dict[str, int]:
    return {"hit": int(hit), "n": int(n)}


def _probe_ratios(probes: list[ProbeResult], suffix: str = "") -> dict[str, dict[str, int]]:
    def prompt(p: ProbeResult) -> bool:
        return bool(p.in_prompt_verbatim if suffix else p.in_prompt)

    def recall(p: ProbeResult) -> bool:
        return bool(p.in_recall5_verbatim if suffix else p.in_recall5)

    n = len(probes)
    return {
        f"probe_in_prompt{suffix}": _ratio(sum(prompt(p) for p in probes), n),
        f"probe_in_recall5{suffix}": _ratio(sum(recall(p) for p in probes), n),
        f"probe_in_prompt_or_recall5{suffix}": _ratio(
            sum(prompt(p) or recall(p) for p in probes), n
        ),
    }


def probe_figures(
    run: ModeRun, min_distance: int = 0, probes: list[ProbeResult] | None = None
) -> dict[str, dict[str, int]]:
    """Loose and verbatim hit ratios of ``probes`` (default: the run's) at ``min_distance``
    or more."""
    chosen = [p for p in (run.probes if probes is None else probes) if p.distance >= min_distance]
    return {**_probe_ratios(chosen), **_probe_ratios(chosen, VERBATIM)}


def _grouped(run: ModeRun, attr: str) -> dict[str, dict[str, dict[str, int]]]:
    groups: dict[str, list[ProbeResult]] = {}
    for p in run.probes:
        if getattr(p, attr):
            groups.setdefault(getattr(p, attr), []).append(p)
    return {key: probe_figures(run, probes=probes) for key, probes in sorted(groups.items())}


def mode_figures(run: ModeRun) -> dict[str, Any]:
    main = [r for r in run.requests if r.kind == "main" and not r.overflow]
    summary = [r for r in run.requests if r.kind == "summary"]
    per_turn: dict[int, int] = {}
    for r in main:
        per_turn[r.turn] = per_turn.get(r.turn, 0) + r.tokens
    refused = [r for r in run.requests if r.kind == "main" and r.overflow]
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
        "gardener_open_ms": round(run.gardener_open_ms[0], 2) if run.gardener_open_ms else 0.0,
        "gardener_open_ms_each": [round(ms, 2) for ms in run.gardener_open_ms],
        "sessions": run.sessions,
        "wall_s": round(run.wall_s, 2),
        "turns": run.turns,
        "prompt_tokens_per_turn": [per_turn.get(t, 0) for t in range(1, run.turns + 1)],
        # turns that made an answered request (the rest show 0 above: commands, skipped lines)
        "request_turns": sorted(per_turn),
        "overflow_requests": [[r.turn, r.tokens] for r in refused],
        "unused_replies": run.unused_replies,
        "skipped_commands": run.skipped_commands,
        "errors": list(run.errors),
    }
    figures.update(probe_figures(run))
    figures["probe_long"] = probe_figures(run, LONG_DISTANCE)["probe_in_prompt_or_recall5"]
    figures["probe_phases"] = _grouped(run, "phase")
    figures["probe_kinds"] = _grouped(run, "kind")
    figures["probes"] = [
        {
            "question": p.question,
            "distance": p.distance,
            "in_prompt": p.in_prompt,
            "in_recall5": p.in_recall5,
            "in_prompt_verbatim": p.in_prompt_verbatim,
            "in_recall5_verbatim": p.in_recall5_verbatim,
            "kind": p.kind,
            "phase": p.phase,
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
