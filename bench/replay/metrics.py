"""The figures of one replay in one mode, as the JSON report carries them.

Billing counts what a provider charges for: every answered request, the main model's and the
summarizer's alike; a request refused for exceeding the window is counted in ``overflows`` and
not billed. Because a refused request costs nothing, ``prompt_tokens_total`` can make the mode
that fails look cheap: ``prompt_tokens_common`` bills only the turns every mode answered, the
cost of the same work. Probe figures use the loose matcher (``matching.py``), the same for every
mode, with the strict ones as ``*_verbatim``; the ``aider`` modes have no recall, so they count
``hit`` 0 and ``probe_in_prompt_or_recall5`` compares like with like. ``probe_phases`` and
``probe_kinds`` split probes by where a continuity replay asked them and by kind. Gardener time
per turn leaves out opening the store (``gardener_open_ms``, once per Aider process); ``totals``
takes its percentiles over every turn of every replay, not as a mean of per-replay ones.

Why each figure is counted this way: docs/decisions/056-replay-harness.md.
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
        "background_chunks": run.background_chunks,
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


def answered_turns(run: ModeRun) -> set[int]:
    """Turns on which the run made at least one main request that was not refused."""
    return {r.turn for r in run.requests if r.kind == "main" and not r.overflow}


def common_turns(runs: Iterable[ModeRun]) -> set[int]:
    """Turns every run answered (one run: its own answered turns; none: no turns)."""
    sets = [answered_turns(run) for run in runs]
    return set.intersection(*sets) if sets else set()


def billed_on(run: ModeRun, turns: set[int]) -> int:
    """Billed tokens of ``turns`` only: answered main requests and summary requests."""
    return sum(
        r.tokens
        for r in run.requests
        if r.turn in turns and (r.kind == "summary" or (r.kind == "main" and not r.overflow))
    )


SUMMED = (
    "prompt_tokens_total",
    "prompt_tokens_main",
    "prompt_tokens_common",
    "requests",
    "overflows",
    "llm_summary_calls",
    "llm_summary_input_tokens",
    "background_chunks",
)
PROBE_TOTALS = (
    "probe_in_prompt",
    "probe_in_recall5",
    "probe_in_prompt_or_recall5",
    "probe_in_prompt_verbatim",
    "probe_in_recall5_verbatim",
    "probe_in_prompt_or_recall5_verbatim",
    "probe_long",
)


def mode_totals(runs: list[ModeRun], figures: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode over several replays (``figures[i]`` is ``runs[i]``'s): sums, the highest peak,
    and gardener percentiles pooled over every turn."""
    pooled = [ms for run in runs for ms in run.gardener_ms]
    totals: dict[str, Any] = {"replays": len(runs)}
    totals.update({key: sum(int(f.get(key, 0)) for f in figures) for key in SUMMED})
    totals["common_turns"] = sum(int(f.get("common_turns", 0)) for f in figures)
    totals["prompt_tokens_peak"] = max((int(f["prompt_tokens_peak"]) for f in figures), default=0)
    totals["gardener_ms_p50"] = round(percentile(pooled, 50), 2)
    totals["gardener_ms_p95"] = round(percentile(pooled, 95), 2)
    totals["wall_s"] = round(sum(run.wall_s for run in runs), 2)
    for key in PROBE_TOTALS:
        totals[key] = _ratio(
            sum(f[key]["hit"] for f in figures if key in f),
            sum(f[key]["n"] for f in figures if key in f),
        )
    return totals


def report_json(runs: Iterable[ModeRun]) -> dict[str, Any]:
    """``{"replays": {NAME: {"meta": {...}, "modes": {MODE: {...}}}}}``, and with two or more
    replays ``"totals": {"replays": N, "modes": {MODE: {...}}}``."""
    grouped: dict[str, dict[str, ModeRun]] = {}
    out: dict[str, Any] = {"replays": {}}
    for run in runs:
        entry = out["replays"].setdefault(
            run.replay, {"meta": {"model": run.model, "max_input_tokens": run.window}, "modes": {}}
        )
        entry["modes"][run.mode] = mode_figures(run)
        grouped.setdefault(run.replay, {})[run.mode] = run
    by_mode: dict[str, tuple[list[ModeRun], list[dict[str, Any]]]] = {}
    for name, mode_runs in grouped.items():
        common = common_turns(mode_runs.values())
        for mode, run in mode_runs.items():
            figures = out["replays"][name]["modes"][mode]
            figures["prompt_tokens_common"] = billed_on(run, common)
            figures["common_turns"] = len(common)
            runs_of, figures_of = by_mode.setdefault(mode, ([], []))
            runs_of.append(run)
            figures_of.append(figures)
    if len(grouped) >= 2:
        out["totals"] = {
            "replays": len(grouped),
            "modes": {mode: mode_totals(*pair) for mode, pair in by_mode.items()},
        }
    return out
