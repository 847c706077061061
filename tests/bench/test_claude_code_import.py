"""The Claude Code transcript importer and ``python -m bench claude-code`` on a synthetic session
written here in the real files' schema (the traps: one record per content block with the same
usage, sidechains, meta records, titles that are not compactions, a boundary followed by the
summary record), and on the real shared transcripts when present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.claude_code import file_kept, hooks_available, measure, survival, totals
from bench.replay.format import ReplayFormatError, load
from bench.replay.importers.claude_code import import_path, parse, tool_command, turn_of_items
from tests.conftest import SHARED

REAL = SHARED / "claude_code_transcripts"
CWD = "/home/dev/proj"
FAILING = "tests/test_parser.py::test_unicode_keys"
KEPT_FAILING = "tests/test_api.py::test_login"
BUILD_LOG = "\n".join(f"[{i:05d}] compiling module_{i}.c ok" for i in range(2500))


def _rec(kind: str, message: dict | None = None, **extra) -> dict:
    rec = {"type": kind, "isSidechain": False, "cwd": CWD, "sessionId": "s1", "version": "2.1.0"}
    if message is not None:
        rec["message"] = message
    rec.update(extra)
    return rec


def _user(text) -> dict:
    return _rec("user", {"role": "user", "content": text})


def _assistant(msg_id: str, block: dict, context: int) -> dict:
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0}
    usage["cache_read_input_tokens"] = context - 103
    message = {"id": msg_id, "role": "assistant", "model": "claude-test", "content": [block]}
    return _rec("assistant", dict(message, usage=usage))


def _tool_use(msg_id: str, tool_id: str, name: str, args: dict, context: int) -> dict:
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": args}
    return _assistant(msg_id, block, context)


def _result(tool_id: str, output, error: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
    return _user([block])


def _say(msg_id: str, text: str, context: int) -> dict:
    return _assistant(msg_id, {"type": "text", "text": text}, context)


def session_records() -> list:
    pytest_out = (
        "=========================== short test summary info ============================\n"
        f"FAILED {FAILING} - KeyError: 'naïve'\n"
        f"FAILED {KEPT_FAILING} - AssertionError: 401 != 200\n"
        "========================= 2 failed, 40 passed in 1.20s ========================="
    )
    recs = [
        {"type": "queue-operation", "operation": "dequeue"},
        _user("Fix the failing parser tests in src/parser.py please"),
        _say("m1", "I'll run the tests first.", 12000),
        _tool_use("m1", "t1", "Bash", {"command": "pytest -q"}, 12000),  # same id: one call
        _result("t1", pytest_out, error=True),
        _tool_use("m2", "t2", "Bash", {"command": "make build"}, 15000),
        # the structured result a PostToolUse hook is given, as Claude Code records it
        _result("t2", BUILD_LOG) | {"toolUseResult": {"stdout": BUILD_LOG, "stderr": ""}},
        _rec("assistant", {"id": "side", "role": "assistant", "content": []}, isSidechain=True),
        _user("<local-command-caveat>Caveat: not typed</local-command-caveat>") | {"isMeta": True},
        _tool_use(
            "m3", "t3", "Edit", {"file_path": f"{CWD}/src/parser.py", "old_string": "a"}, 16000
        ),
        _result("t3", [{"type": "text", "text": "The file src/parser.py has been updated."}]),
        {"type": "summary", "summary": "Parser test fixes", "leafUuid": "x"},
        "this line is not JSON",
        _rec(
            "system",
            subtype="compact_boundary",
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        ),
        _user(
            "This session is being continued from a previous conversation that ran out of "
            f"context.\nSummary: tests {KEPT_FAILING} failed; edited src/parser.py."
        )
        | {"isCompactSummary": True},
        _user("<command-name>/model</command-name>\n<command-args>opus</command-args>"),
        _user("Now check the API again"),
        _say("m4", "Running the API tests.", 9000),
    ]
    for n in range(6):  # later turns, so the early probe is asked well after it was said
        recs += [
            _tool_use(f"m{5 + n}", f"u{n}", "Read", {"file_path": f"{CWD}/doc{n}.md"}, 9500),
            _result(f"u{n}", f"     1→notes {n}"),
        ]
    return recs


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "session-1.jsonl"
    lines = [
        r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in session_records()
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_parse_keeps_the_main_conversation(transcript):
    t = parse(transcript)
    kinds = [k for k, _ in t.items]
    assert kinds[:7] == ["user", "assistant", "tool", "tool", "tool", "compaction", "user"]
    assert t.items[6][1] == "/model opus"  # a slash command as typed, wrappers dropped
    assert t.usage == [12000, 15000, 16000, 9000] + [9500] * 6  # one per message id
    assert t.bad_lines == 1 and t.titles == ["Parser test fixes"]  # a title, not a compaction
    [comp] = t.compactions
    assert comp.pre_tokens == 150000 and comp.trigger == "auto" and comp.calls_before == 3
    assert comp.summary.startswith("This session is being continued")
    pytest_call, build, edit = t.tools[:3]
    assert pytest_call.is_error and FAILING in pytest_call.output
    assert edit.output == "The file src/parser.py has been updated."  # text blocks joined
    assert tool_command("Edit", edit.input) == f"Edit {CWD}/src/parser.py"
    assert turn_of_items(t)[:3] == [1, 1, 2]


def test_old_format_summary_without_boundary(tmp_path):
    path = tmp_path / "old.jsonl"
    recs = [
        _user("hello there, build the iso"),
        _say("a", "Building.", 50000),
        _user("This session is being continued from a previous conversation. It was: build")
        | {"isCompactSummary": True, "parentUuid": None},
        _user("continue"),
    ]
    path.write_text("\n".join(json.dumps(r) for r in recs), encoding="utf-8")
    [comp] = parse(path).compactions
    assert comp.pre_tokens is None and comp.calls_before == 1 and "It was: build" in comp.summary


def test_import_cli_writes_a_valid_replay(transcript, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["import", "claude-code", str(transcript), "-o", str(out)]) == 0
    replay = load(out / "session-1.jsonl")
    runs = [e for e in replay.events if e["type"] == "run"]
    assert runs[0] == {
        "type": "run",
        "command": "pytest -q",
        "output": runs[0]["output"],
        "exit_code": 1,
    }
    assert "1 compactions at turn" in replay.meta["notes"] and "150000" in replay.meta["notes"]
    probes = replay.probes()
    assert any(FAILING in p["answers"][0] or "KeyError" in p["answers"][0] for p in probes)
    for p in probes:
        assert not any(a in p["question"] for a in p["answers"])


def test_import_rejects_a_file_with_no_conversation(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "summary", "summary": "t"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ReplayFormatError):
        import_path(bad)
    assert main(["import", "claude-code", str(bad), "-o", str(tmp_path / "o")]) == 2
    assert "no Claude Code conversation" in capsys.readouterr().err


def test_survival_counts_each_holder():
    found = {"failing_tests": {FAILING, KEPT_FAILING}, "exceptions": set()}
    files = {"src/parser.py", "src/api/views.py"}
    kept, by_kind = survival(f"tests {KEPT_FAILING} failed; edited parser.py", found, files, [])
    assert kept == {"facts": 1, "files": 1, "decisions": 0}
    assert by_kind["failing_tests"] == 1
    assert file_kept("src/api/views.py", "see src\\api\\views.py") and not file_kept(
        "src/a.py", "data.py"
    )


@pytest.mark.parametrize("via", ["pipeline", "hooks"])
def test_measure_the_synthetic_session(transcript, via):
    if via == "hooks" and not hooks_available():
        pytest.skip("aider_gardener.clients.claude_hooks is not there yet")
    fig = measure(transcript, via=via)
    assert fig.via == via
    assert fig.calls == 10 and fig.context_peak == 16000
    # the 2,500-line build log enters as a summary of at most 1,024 tokens
    assert fig.tool_tokens_before > 20000 > fig.tool_tokens_after
    assert fig.throttled == 1 and fig.tool_outputs == 9
    [comp] = fig.compactions
    assert comp.found["facts"] >= 2 and comp.found["files"] == 1
    assert comp.kept["summary"]["facts"] == 1  # only KEPT_FAILING is in the real summary
    assert comp.kept["summary"]["files"] == 1
    assert comp.kept["state"]["facts"] >= 2  # open failing tests are in the state block
    across = [p for p in fig.probes if p.across_compaction]
    assert across, fig.probes
    lost = [p for p in across if FAILING in p.question or not p.in_context]
    assert lost and all(p.in_recall for p in lost)  # gone from the real context, recalled
    tot = totals([fig])
    assert tot["compactions"] == 1 and tot["tool_tokens_after"] == fig.tool_tokens_after


def test_report_command_prints_both_sides(transcript, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["claude-code", str(transcript), "-q", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Claude Code (real)" in text and "gardener" in text and "150,000" in text
    report = json.loads(out.read_text())
    assert report["totals"]["sessions"] == 1 and report["sessions"][0]["compactions"]


def test_report_command_without_transcripts(tmp_path, capsys):
    assert main(["claude-code", str(tmp_path)]) == 2
    assert "no transcripts" in capsys.readouterr().err


def test_real_transcripts_parse_and_import(tmp_path):
    files = sorted(REAL.glob("*.jsonl")) if REAL.is_dir() else []
    if not files:
        pytest.skip(f"shared Claude Code transcripts not found at {REAL}")
    with_summary = 0
    for path in files:
        t = parse(path)
        assert t.usage and t.tools, path.name
        with_summary += any(c.summary for c in t.compactions)
        assert not any(c.summary.startswith("Parser") for c in t.compactions)
    assert with_summary >= 4  # the sessions the SOURCES.tsv says were compacted
    replays = import_path(REAL)
    assert len(replays) == len(files)
    assert sum(len(r.probes()) for r in replays) >= 20


def test_compaction_probes_ask_right_after_each_compaction(transcript):
    t = parse(transcript)
    from bench.replay.importers.claude_code import claude_probes, events_of

    events = events_of(t)
    turns = sum(1 for e in events if e["type"] in ("user", "run"))
    probes = claude_probes(t, events, turns)
    [comp] = t.compactions
    at = turn_of_items(t)[comp.at]
    mine = [(when, p) for when, p in probes if p["kind"].startswith("compaction:")]
    assert mine and all(when == at and p["source_turn"] <= at for when, p in mine)
    fig = measure(transcript, via="pipeline")
    asked = [p for p in fig.probes if p.kind.startswith("compaction:")]
    assert len(asked) == len(mine)
    for probe, (_, made) in zip(asked, mine):
        # right after the compaction Claude Code's context is its summary alone
        assert probe.across_compaction
        assert probe.in_context_verbatim == (made["answers"][0] in comp.summary)


# --- issue 22: calls until auto-compaction, failures and facts through the hooks ---


def test_until_compaction_counts_calls_to_claude_codes_threshold():
    from bench.claude_code import AUTO_COMPACT, until_compaction

    assert AUTO_COMPACT == 167_000  # 200,000 - min(max output, 20,000) - 13,000 (2.1.332)
    usage = [20_000 + 10_000 * i for i in range(20)]  # reaches 167,000 at call 15
    usage[16:] = [40_000 + 10_000 * i for i in range(4)]  # a compaction before call 16
    sim = until_compaction(usage, {16}, {i: 5_000 for i in range(1, 20)})
    assert (sim["calls_without"], sim["projected_without"]) == (15, False)
    assert sim["calls_with"] > 15 and sim["projected_with"]  # half the growth: projected
    # after 19 calls 105,000 (85,000 grown), then at that mean growth per call to 167,000
    assert sim["calls_with"] == pytest.approx(19 + (167_000 - 105_000) / (85_000 / 19))
    # the drop at the compaction is no growth; every other step is
    assert sim["grown_without"] == 18 * 10_000
    assert sim["grown_with"] == 18 * 10_000 - 19 * 5_000


def test_measure_sends_failures_to_post_tool_use_failure_and_counts_facts(transcript):
    if not hooks_available():
        pytest.skip("aider_gardener.clients.claude_hooks is not there yet")
    fig = measure(transcript, via="hooks")
    # the failed pytest run and the build log: their facts are all in what the model sees
    assert fig.facts_found >= 2 and fig.facts_kept == fig.facts_found
    assert fig.saved_at and all(0 < call <= fig.calls for call in fig.saved_at)
    assert fig.to_compaction["calls_without"] > 0
    tot = totals([fig])
    assert tot["output_facts_found"] == fig.facts_found


# --- issue 26: how much of what a compaction summarized was stale tool output ---


def test_stale_tool_output_counts_each_reason_once_per_compaction(tmp_path):
    from bench.claude_code import stale_tool_output

    big = "\n".join(f"line {i} of the module" for i in range(200))
    calls = [  # (id, tool, input, output), in order, all before the compaction
        ("r1", "Read", {"file_path": f"{CWD}/a.py"}, big),  # changed: a.py is edited below
        ("r2", "Read", {"file_path": f"{CWD}/b.py", "offset": 10, "limit": 5}, "b 10-14"),  # r3
        ("r3", "Read", {"file_path": f"{CWD}/b.py"}, "b.py whole"),  # reread: r4 shows it again
        ("c1", "Read", {"file_path": f"{CWD}/c.py", "offset": 1, "limit": 5}, "c 1-5"),  # current
        ("c2", "Read", {"file_path": f"{CWD}/c.py", "offset": 90, "limit": 5}, "c 90-94"),
        ("b1", "Bash", {"command": "pytest -q"}, "1 failed"),  # rerun: b2 runs it again
        ("g1", "Grep", {"pattern": "TODO"}, "a.py:3: TODO"),  # rerun: g2, same input
        ("g2", "Grep", {"pattern": "TODO", "path": "src"}, "src/x.py:1: TODO"),  # another input
        ("e1", "Edit", {"file_path": f"{CWD}/a.py", "old_string": "x"}, "a.py updated"),
        ("r4", "Read", {"file_path": f"{CWD}/b.py"}, "b.py whole"),
        ("b2", "Bash", {"command": "pytest -q"}, "1 passed"),
        ("g3", "Grep", {"pattern": "TODO"}, "a.py:3: TODO"),
        ("m1", "Bash", {"command": "cat big.log"}, big),  # cleared by the microcompaction
    ]
    recs = [_user("fix a.py")]
    for n, (tool_id, name, args, output) in enumerate(calls):
        recs += [_tool_use(f"m{n}", tool_id, name, args, 10_000 + n), _result(tool_id, output)]
    recs.append(
        _rec(
            "system",
            subtype="microcompact_boundary",
            microcompactMetadata={"trigger": "auto", "compactedToolIds": ["m1"]},
        )
    )
    recs += [
        _rec("system", subtype="compact_boundary", compactMetadata={"preTokens": 150_000}),
        _user("This session is being continued from a previous conversation.")
        | {"isCompactSummary": True},
        _tool_use("n1", "after", "Bash", {"command": "pytest -q"}, 20_000),  # after: not counted
        _result("after", "1 passed"),
    ]
    path = tmp_path / "stale.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    t = parse(path)
    assert t.cleared == {"m1": t.compactions[0].at}  # cleared before the compaction
    [row] = stale_tool_output(t)
    assert row["results"] == 12  # m1 was cleared before the compaction
    # each reason counts its result once; the Edit's own echo, other lines of c.py and the
    # latest results are current
    assert (row["changed"], row["reread"], row["rerun"], row["stale"]) == (1, 2, 2, 5)
    assert row["changed_tokens"] > row["tokens"] / 2  # r1, the big read of the edited file
    assert row["stale_tokens"] == sum(row[f"{k}_tokens"] for k in ("changed", "reread", "rerun"))
    fig = measure(path, via="pipeline")
    assert fig.compactions[0].stale == row
    tot = totals([fig])
    assert tot["compacted_stale"] == 5 and tot["compacted_context"] == 150_000
