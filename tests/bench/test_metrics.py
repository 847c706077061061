"""Billing on the turns every mode answered, and the totals over replays."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.replay.metrics import (
    PROBE_TOTALS,
    SUMMED,
    answered_turns,
    common_turns,
    percentile,
    report_json,
)
from bench.replay.runner import ModeRun, ProbeResult, Request

WINDOW = 1000


def make_run(
    replay: str,
    mode: str,
    main: dict[int, int],
    summaries: dict[int, int] | None = None,
    ms: list[float] | None = None,
    probes: list[ProbeResult] | None = None,
) -> ModeRun:
    """One main request per turn of ``main`` (refused when over ``WINDOW``), one summary
    request per turn of ``summaries``."""
    run = ModeRun(replay, mode, "gpt-4o", WINDOW, turns=max(main, default=0))
    run.requests = [Request(t, n, "main", overflow=n > WINDOW) for t, n in main.items()]
    run.requests += [Request(t, n, "summary") for t, n in (summaries or {}).items()]
    run.gardener_ms = list(ms or [])
    run.probes = list(probes or [])
    run.wall_s = 1.25
    return run


def modes_of(report: dict, replay: str) -> dict:
    return report["replays"][replay]["modes"]


def test_common_set_leaves_out_a_turn_one_mode_overflowed_on():
    aider = make_run("r", "aider", {1: 100, 2: 200, 3: 1500, 4: 1600})
    gardener = make_run("r", "gardener", {1: 50, 2: 60, 3: 70, 4: 80})
    modes = modes_of(report_json([aider, gardener]), "r")
    assert modes["gardener"]["prompt_tokens_total"] == 50 + 60 + 70 + 80
    assert modes["gardener"]["prompt_tokens_common"] == 50 + 60  # turns 3 and 4: aider refused
    assert modes["aider"]["prompt_tokens_common"] == 100 + 200
    assert modes["aider"]["common_turns"] == modes["gardener"]["common_turns"] == 2


def test_a_turn_without_any_request_in_one_mode_is_not_common():
    aider = make_run("r", "aider", {1: 100, 3: 300})  # turn 2 was a command here
    gardener = make_run("r", "gardener", {1: 10, 2: 20, 3: 30})
    assert common_turns([aider, gardener]) == {1, 3}
    assert modes_of(report_json([aider, gardener]), "r")["gardener"]["prompt_tokens_common"] == 40


def test_a_refused_request_then_an_answered_one_makes_the_turn_answered():
    run = make_run("r", "aider", {1: 100})
    run.requests += [Request(2, 1200, "main", overflow=True), Request(2, 400, "main")]
    assert answered_turns(run) == {1, 2}


def test_a_summary_counts_on_a_common_turn_and_not_on_another():
    aider = make_run("r", "aider", {1: 100, 2: 200, 3: 1500}, summaries={2: 300, 3: 7000})
    gardener = make_run("r", "gardener", {1: 50, 2: 60, 3: 70}, summaries={1: 5, 3: 9})
    modes = modes_of(report_json([aider, gardener]), "r")
    assert modes["aider"]["prompt_tokens_common"] == 100 + 200 + 300  # not the turn-3 summary
    assert modes["gardener"]["prompt_tokens_common"] == 50 + 60 + 5
    assert modes["aider"]["prompt_tokens_total"] == 100 + 200 + 300 + 7000


def test_one_mode_alone_uses_its_own_answered_turns():
    run = make_run("r", "aider", {1: 100, 2: 1500, 3: 300}, summaries={2: 40, 3: 50})
    fig = modes_of(report_json([run]), "r")["aider"]
    assert fig["common_turns"] == 2
    assert fig["prompt_tokens_common"] == 100 + 300 + 50


def test_common_set_is_per_replay():
    a1 = make_run("one", "aider", {1: 100, 2: 1500})
    g1 = make_run("one", "gardener", {1: 10, 2: 20})
    a2 = make_run("two", "aider", {1: 100, 2: 200})
    g2 = make_run("two", "gardener", {1: 10, 2: 20})
    report = report_json([a1, g1, a2, g2])
    assert modes_of(report, "one")["gardener"]["prompt_tokens_common"] == 10
    assert modes_of(report, "two")["gardener"]["prompt_tokens_common"] == 30


def test_totals_sum_over_replays_and_take_the_highest_peak():
    probes = [ProbeResult("q", 50, 2, True, False), ProbeResult("q", 5, 2, False, False)]
    runs = [
        make_run("one", "aider", {1: 100, 2: 900, 3: 1500}, {2: 30}, [1.0], probes),
        make_run("one", "gardener", {1: 10, 2: 20, 3: 30}, {}, [2.0], probes[:1]),
        make_run("two", "aider", {1: 700, 2: 200}, {1: 70, 2: 80}, [3.0], probes),
        make_run("two", "gardener", {1: 40, 2: 50}, {}, [4.0], probes[1:]),
    ]
    report = report_json(runs)
    totals = report["totals"]
    assert totals["replays"] == 2 and set(totals["modes"]) == {"aider", "gardener"}
    aider, gardener = totals["modes"]["aider"], totals["modes"]["gardener"]
    assert aider["prompt_tokens_total"] == (100 + 900 + 30) + (700 + 200 + 70 + 80)
    assert aider["prompt_tokens_main"] == 100 + 900 + 700 + 200
    assert aider["prompt_tokens_common"] == (100 + 900 + 30) + (700 + 200 + 70 + 80)
    assert gardener["prompt_tokens_common"] == 10 + 20 + 40 + 50  # not turn 3 of "one"
    assert aider["common_turns"] == 4
    assert aider["prompt_tokens_peak"] == 900 and gardener["prompt_tokens_peak"] == 50
    assert aider["requests"] == 4 and aider["overflows"] == 1 and gardener["overflows"] == 0
    assert aider["llm_summary_calls"] == 3 and aider["llm_summary_input_tokens"] == 180
    assert aider["wall_s"] == 2.5 and aider["replays"] == 2
    assert aider["probe_in_prompt"] == {"hit": 2, "n": 4}
    assert aider["probe_long"] == {"hit": 2, "n": 2}
    assert gardener["probe_in_prompt_or_recall5_verbatim"] == {"hit": 1, "n": 2}
    for key in SUMMED:  # every sum is the sum of the per-replay figures
        per_replay = [modes_of(report, r)["gardener"][key] for r in ("one", "two")]
        assert gardener[key] == sum(per_replay), key
    assert set(PROBE_TOTALS) <= set(gardener)


def test_no_totals_for_one_replay():
    report = report_json([make_run("r", "aider", {1: 1}), make_run("r", "gardener", {1: 1})])
    assert "totals" not in report


def test_totals_of_a_mode_cover_only_the_replays_that_ran_it():
    runs = [
        make_run("one", "aider", {1: 100}),
        make_run("one", "gardener", {1: 10}),
        make_run("two", "aider", {1: 200}),
    ]
    modes = report_json(runs)["totals"]["modes"]
    assert modes["gardener"]["replays"] == 1 and modes["gardener"]["prompt_tokens_total"] == 10
    assert modes["aider"]["replays"] == 2 and modes["aider"]["prompt_tokens_total"] == 300


def test_pooled_p95_is_not_the_mean_of_per_replay_p95s():
    short = make_run("short", "gardener", {1: 10}, ms=[40.0])
    long = make_run("long", "gardener", {1: 10}, ms=[1.0] * 99)
    report = report_json([short, long])
    per_replay = [modes_of(report, r)["gardener"]["gardener_ms_p95"] for r in ("short", "long")]
    pooled = report["totals"]["modes"]["gardener"]
    assert per_replay == [40.0, 1.0]
    assert pooled["gardener_ms_p95"] == percentile([40.0] + [1.0] * 99, 95) == 1.0
    assert pooled["gardener_ms_p95"] != sum(per_replay) / 2
    assert pooled["gardener_ms_p50"] == 1.0


turn_tokens = st.dictionaries(st.integers(1, 12), st.integers(0, 2 * WINDOW), max_size=12)


@given(st.lists(st.tuples(turn_tokens, turn_tokens), min_size=1, max_size=4))
def test_common_billing_never_exceeds_billing(modes):
    runs = [make_run("r", f"m{i}", main, summaries) for i, (main, summaries) in enumerate(modes)]
    figures = modes_of(report_json(runs), "r")
    common = common_turns(runs)
    for run in runs:
        fig = figures[run.mode]
        assert fig["prompt_tokens_common"] <= fig["prompt_tokens_total"]
        assert fig["common_turns"] == len(common) <= len(answered_turns(run))
