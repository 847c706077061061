"""The JSON keys the issue specifies, the figures behind them, the table and the plot switch."""

from __future__ import annotations

import builtins
import io
import json

import pytest

from bench.__main__ import main
from bench.replay.format import from_events, save
from bench.replay.metrics import percentile, report_json
from bench.replay.report import plot, print_report
from bench.replay.runner import ModeRun, ProbeResult, Request
from tests.bench.test_runner import tiny_events

KEYS = {
    "prompt_tokens_total",
    "prompt_tokens_peak",
    "overflows",
    "llm_summary_calls",
    "gardener_ms_p95",
}
PROBE_KEYS = {"probe_in_prompt", "probe_in_recall5", "probe_in_prompt_or_recall5"}


def fake_run(mode: str, tokens: list[int]) -> ModeRun:
    run = ModeRun("r", mode, "gpt-4o", 1000, turns=len(tokens))
    run.requests = [Request(i + 1, t, "main", overflow=t > 1000) for i, t in enumerate(tokens)]
    run.requests.append(Request(2, 300, "summary"))
    run.gardener_ms = [1.0, 2.0, 30.0]
    run.probes = [ProbeResult("q", 45, 2, False, True), ProbeResult("q", 7, 2, True, False)]
    return run


def test_figures_follow_the_requests():
    report = report_json([fake_run("aider", [100, 200, 1500]), fake_run("gardener", [50, 60, 70])])
    aider = report["replays"]["r"]["modes"]["aider"]
    assert aider["prompt_tokens_total"] == 100 + 200 + 300  # overflow not billed, summary billed
    assert aider["prompt_tokens_peak"] == 200 and aider["overflows"] == 1
    assert aider["llm_summary_calls"] == 1 and aider["llm_summary_input_tokens"] == 300
    assert aider["gardener_ms_p95"] == 30.0 and aider["gardener_ms_p50"] == 2.0
    assert aider["probe_in_prompt"] == {"hit": 1, "n": 2}
    assert aider["probe_in_recall5"] == {"hit": 1, "n": 2}
    assert aider["probe_in_prompt_or_recall5"] == {"hit": 2, "n": 2}
    assert aider["probe_long"] == {"hit": 1, "n": 1}
    assert aider["prompt_tokens_per_turn"] == [100, 200, 0]


def test_percentile_is_nearest_rank():
    assert percentile([], 95) == 0.0
    assert percentile([5, 1, 3], 50) == 3.0
    assert percentile(range(1, 101), 95) == 95.0


def test_table_shows_ratios_to_aider():
    from rich.console import Console

    report = report_json([fake_run("aider", [100, 200]), fake_run("gardener", [50, 100])])
    out = io.StringIO()
    print_report(report, Console(file=out, width=200))
    text = out.getvalue()
    assert "gardener" in text and "(0.75×)" in text and "(1.00×)" in text  # (150+300) / (300+300)


def test_plot_says_one_line_without_matplotlib(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    message = plot(report_json([fake_run("aider", [1])]), tmp_path / "p.png")
    assert "matplotlib" in message and "\n" not in message
    assert not (tmp_path / "p.png").exists()


def test_cli_run_writes_the_json_the_issue_specifies(tmp_path, capsys):
    save(from_events(tiny_events()), tmp_path / "replays" / "tiny.jsonl")
    probe = {
        "replay": "tiny",
        "at_turn": 2,
        "question": "which test failed?",
        "answers": ["test_parse_blank"],
        "source_turn": 2,
    }
    (tmp_path / "replays" / "extra.probes.jsonl").write_text(json.dumps(probe) + "\n")
    out = tmp_path / "out.json"
    code = main(
        [
            "run",
            str(tmp_path / "replays"),
            "--modes",
            "aider",
            "gardener-evict",
            "--no-vectors",
            "--json",
            str(out),
            "--plot",
            str(tmp_path / "p.png"),
            "-q",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    modes = report["replays"]["tiny"]["modes"]
    assert set(modes) == {"aider", "gardener-evict"}
    for fig in modes.values():
        assert KEYS | PROBE_KEYS <= set(fig)
        for key in PROBE_KEYS:
            assert set(fig[key]) == {"hit", "n"} and fig[key]["n"] == 2
    printed = capsys.readouterr().out
    assert "prompt tokens billed" in printed and "tiny" in printed
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_unknown_modes_and_bad_files(tmp_path, capsys):
    assert main(["run", str(tmp_path), "--modes", "aider"]) == 2  # no replay files
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user", "content": "x"}\n')
    assert main(["run", str(bad)]) == 2
    assert main(["run", str(bad), "--modes", "nope"]) == 2
    assert "unknown modes" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["coding-session-50", "ask-research", "small-window-overflow"])
def test_bundled_replays_are_what_the_generator_writes(name, tmp_path):
    from pathlib import Path

    from replays.generate import main as generate

    generate([str(tmp_path)])
    bundled = Path(__file__).resolve().parents[2] / "replays" / f"{name}.jsonl"
    assert (tmp_path / f"{name}.jsonl").read_text() == bundled.read_text()


def test_coding_session_probes_at_distances_5_20_40():
    from pathlib import Path

    from bench.replay.format import load

    replay = load(Path(__file__).resolve().parents[2] / "replays" / "coding-session-50.jsonl")
    assert replay.turns() == 50
    turn, distances = 0, set()
    for e in replay.events:
        if e["type"] in ("user", "run"):
            turn += 1
        elif e["type"] == "probe":
            distances.add(turn - e["source_turn"])
    assert {5, 20, 40} <= distances
    kinds = {e["type"] for e in replay.events}
    assert {"add", "user", "assistant", "run", "probe"} <= kinds
    assert any(e.get("via") == "test" and e.get("exit_code") for e in replay.events)


def test_cli_window_override(tmp_path):
    path = tmp_path / "tiny.jsonl"
    save(from_events(tiny_events(window=100000)), path)
    out = tmp_path / "out.json"
    args = ["run", str(path), "--modes", "aider", "--no-vectors", "-q", "--json", str(out)]
    assert main(args + ["--window", "3000"]) == 0
    entry = json.loads(out.read_text())["replays"]["tiny"]
    assert entry["meta"]["max_input_tokens"] == 3000
    assert entry["modes"]["aider"]["overflows"] >= 1  # the large /test output no longer fits


def continuity_run(mode: str) -> ModeRun:
    run = ModeRun("c", mode, "gpt-4o", 1000, turns=4, sessions=2)
    run.requests = [Request(1, 100, "main"), Request(3, 1200, "main", overflow=True)]
    run.requests.append(Request(4, 150, "main"))
    run.gardener_ms = [3.0, 1.0, 2.0, 4.0]
    run.gardener_open_ms = [250.0, 90.0]
    run.probes = [
        ProbeResult("q", 2, 1, True, False, False, False, kind="artifact"),
        ProbeResult("q", 3, 1, True, True, True, False, "artifact", "after-soft-restart"),
        ProbeResult("q", 3, 1, False, False, kind="artifact", phase="after-soft-restart"),
        ProbeResult("q", 4, 1, False, True, kind="artifact", phase="after-resume"),
    ]
    return run


def test_open_time_and_phases_and_verbatim_figures():
    fig = report_json([continuity_run("gardener")])["replays"]["c"]["modes"]["gardener"]
    assert fig["gardener_open_ms"] == 250.0 and fig["gardener_open_ms_each"] == [250.0, 90.0]
    assert fig["gardener_ms_p95"] == 4.0 and fig["sessions"] == 2  # opening not in the turns
    assert fig["probe_in_prompt"] == {"hit": 2, "n": 4}
    assert fig["probe_in_prompt_verbatim"] == {"hit": 1, "n": 4}
    assert fig["probe_in_prompt_or_recall5_verbatim"] == {"hit": 2, "n": 4}  # 2nd and 4th
    phases = fig["probe_phases"]
    assert set(phases) == {"after-soft-restart", "after-resume"}  # no phase: not grouped
    assert phases["after-soft-restart"]["probe_in_prompt_or_recall5"] == {"hit": 1, "n": 2}
    assert phases["after-resume"]["probe_in_recall5"] == {"hit": 1, "n": 1}
    assert fig["probe_kinds"]["artifact"]["probe_in_prompt_or_recall5"] == {"hit": 3, "n": 4}
    assert [p["phase"] for p in fig["probes"]][1:] == ["after-soft-restart"] * 2 + ["after-resume"]


def test_plot_draws_only_turns_with_a_request():
    from bench.replay.report import plot_points

    fig = report_json([continuity_run("aider")])["replays"]["c"]["modes"]["aider"]
    assert fig["prompt_tokens_per_turn"] == [100, 0, 0, 150]
    assert fig["request_turns"] == [1, 4] and fig["overflow_requests"] == [[3, 1200]]
    assert plot_points(fig) == ([1, 4], [100, 150])
    # a report written before request_turns existed: zero turns are left out too
    old = {"prompt_tokens_per_turn": [0, 20, 0, 30]}
    assert plot_points(old) == ([2, 4], [20, 30])


def test_table_shows_phase_rows_only_when_there_are_such_probes():
    from rich.console import Console

    out = io.StringIO()
    print_report(report_json([continuity_run("aider")]), Console(file=out, width=200))
    text = out.getvalue()
    assert "after /soft-restart" in text and "1/2 (50%)" in text and "after resume" in text
    assert "after a new session" not in text and "store open ms" in text
    out = io.StringIO()
    print_report(report_json([fake_run("aider", [1])]), Console(file=out, width=200))
    assert "after /soft-restart" not in out.getvalue()


def test_continuity_replay_is_what_the_generator_writes(tmp_path):
    from pathlib import Path

    from replays.generate import main as generate

    generate([str(tmp_path)])
    bundled = Path(__file__).resolve().parents[2] / "replays" / "continuity-30.jsonl"
    assert (tmp_path / "continuity-30.jsonl").read_text() == bundled.read_text()


def test_continuity_replay_edits_apply_and_probes_follow_each_reset():
    from pathlib import Path

    from aider.coders.editblock_coder import do_replace, find_original_update_blocks

    from bench.replay.format import load

    replay = load(Path(__file__).resolve().parents[2] / "replays" / "continuity-30.jsonl")
    assert 25 <= replay.turns() <= 32
    files, applied, phase = {}, 0, ""
    probes: dict[str, list[dict]] = {}
    said_before: list[str] = []  # everything the session said before the first reset
    said_after: list[str] = []
    fence = ("```", "```")
    for e in replay.events:
        text = "\n".join(str(e.get(k, "")) for k in ("path", "content", "command", "output"))
        (said_after if phase else said_before).append(text)
        if e["type"] == "add":
            files[e["path"]] = e["content"]
        elif e["type"] == "assistant":
            for path, search, replace in find_original_update_blocks(e["content"], fence, set()):
                new = do_replace(path, files.get(path), search, replace, fence)
                assert new is not None, f"edit of {path} does not apply"
                files[path], applied = new, applied + 1
        elif e["type"] == "user" and e["content"].startswith("/soft-restart"):
            phase = "after-soft-restart"
        elif e["type"] == "session":
            assert e.get("resume", True)
            phase = "after-resume"
        elif e["type"] == "probe":
            assert phase and e["kind"] == "artifact"
            probes.setdefault(phase, []).append(e)
    assert applied >= 6 and "Money(Decimal(number), currency)" in files["ledgerly/amounts.py"]
    assert set(probes) == {"after-soft-restart", "after-resume"}
    questions = [[p["question"] for p in ps] for ps in probes.values()]
    assert questions[0] == questions[1] and len(questions[0]) >= 8
    answers = [a for p in probes["after-resume"] for a in p["answers"]]
    for wanted in ("tests/test_amounts.py::test_parse_amount_thousands", "py-moneyed"):
        assert wanted in answers
    before, after = "\n".join(said_before), "\n".join(said_after)
    for answer in answers:
        assert answer in before, answer  # said before the reset …
        assert answer not in after, answer  # … and never repeated after it


def rendered(table_or_report) -> str:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=250)
    if isinstance(table_or_report, dict):
        print_report(table_or_report, console)
    else:
        console.print(table_or_report)
    return out.getvalue()


def row_after(text: str, label: str, offset: int = 1) -> str:
    """The row ``offset`` rows under the first row labelled ``label``."""
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if f" {label} " in line)
    return lines[index + offset]


def two_replays() -> list[ModeRun]:
    from tests.bench.test_metrics import make_run

    return [
        make_run("one", "aider", {1: 100, 2: 200}, {2: 300}),
        make_run("one", "gardener", {1: 50, 2: 100}, {2: 300}),
        make_run("two", "aider", {1: 1000, 2: 1000, 3: 1800}, {2: 300}),
        make_run("two", "gardener", {1: 100, 2: 100, 3: 600}, {2: 300}),
    ]


def test_common_row_sits_under_billed_with_its_ratio():
    from tests.bench.test_metrics import make_run

    report = report_json(
        [make_run("r", "aider", {1: 100, 2: 1500}), make_run("r", "gardener", {1: 40, 2: 900})]
    )
    row = row_after(rendered(report), "prompt tokens billed")
    assert "billed, turns all answered" in row
    assert "40 (0.40×)" in row and "100 (1.00×)" in row  # billed alone says 940 (9.40×)
    assert "turns all answered" in rendered(report).split("Billed =")[1]  # footnote says why


def test_totals_table_only_for_two_or_more_replays_and_with_ratios():
    from bench.replay.report import build_tables

    runs = two_replays()
    one = report_json(runs[:2])
    assert len(build_tables(one)) == 1 and "all 1 replays" not in rendered(one)
    report = report_json(runs)
    tables = build_tables(report)
    assert len(tables) == 3
    totals = rendered(tables[-1])
    assert "all 2 replays" in totals and "all 2 replays" not in rendered(tables[0])
    # billed: aider 600 + 2,300, gardener 450 + 1,100 (per replay 0.75× and 0.48×)
    billed = row_after(totals, "prompt tokens billed", 0)
    assert "2,900 (1.00×)" in billed and "1,550 (0.53×)" in billed
    # turn 3 of "two" was refused to aider, so gardener's 600 there is left out
    common = row_after(totals, "prompt tokens billed")
    assert "2,900 (1.00×)" in common and "950 (0.33×)" in common
    turns = [cell.strip() for cell in row_after(totals, "prompt tokens billed", 2).split("│")]
    assert turns[1:4] == ["turns all answered", "4", "4"]  # turns 1-2 of each replay
    assert "store open ms" not in totals and "store open ms" in rendered(tables[0])
    assert rendered(report).count("│ billed, turns all answered") == 3  # one row per table


def test_totals_header_says_when_a_mode_ran_fewer_replays():
    from tests.bench.test_metrics import make_run

    runs = two_replays() + [make_run("one", "gardener-evict", {1: 5})]
    text = rendered(report_json(runs))
    assert "gardener-evict (1 replays)" in text and "gardener (2 replays)" not in text


def test_old_json_without_common_figures_still_prints():
    report = report_json(two_replays())
    for entry in report["replays"].values():
        for fig in entry["modes"].values():
            del fig["prompt_tokens_common"], fig["common_turns"]
    del report["totals"]
    row = row_after(rendered(report), "prompt tokens billed")
    assert "billed, turns all answered" in row and "–" in row and "×" not in row
