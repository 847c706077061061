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
