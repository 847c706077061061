"""The replay schema: valid files load and round-trip, every kind of mistake is reported with
its line, and probe files insert probes after the turn they name."""

from __future__ import annotations

import json

import pytest

from bench.replay.format import (
    Replay,
    ReplayFormatError,
    add_probes,
    dumps,
    from_events,
    load,
    load_probe_file,
    save,
    validate,
)

META = {"type": "meta", "name": "t", "source": "test", "model": "gpt-4o", "max_input_tokens": 8000}


def events():
    return [
        dict(META),
        {"type": "add", "path": "src/app.py", "content": "x = 1\n"},
        {"type": "user", "content": "hello"},
        {"type": "assistant", "content": "hi"},
        {"type": "run", "command": "pytest", "output": "1 failed", "exit_code": 1, "via": "test"},
        {"type": "assistant", "content": "fixed"},
        {"type": "probe", "question": "q?", "answers": ["1 failed"], "source_turn": 2},
        {"type": "drop", "path": "src/app.py"},
        {"type": "user", "content": "/ask why?"},
    ]


def test_valid_replay_round_trips(tmp_path):
    replay = from_events(events())
    assert replay.name == "t" and replay.turns() == 3 and len(replay.probes()) == 1
    path = save(replay, tmp_path / "t.jsonl")
    again = load(path)
    assert again.all_events() == replay.all_events()
    assert dumps(again) == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "index, change, expected",
    [
        (0, {"max_input_tokens": "8k"}, "'max_input_tokens' must be int"),
        (0, {"max_input_tokens": 0}, "must be positive"),
        (2, {"content": None}, "'content' must be str"),
        (2, {"colour": "red"}, "unknown fields"),
        (4, {"via": "shell"}, "'via' must be one of"),
        (6, {"source_turn": 7}, "is not a turn before it"),
        (6, {"answers": []}, "non-empty list"),
        (6, {"answers": [""]}, "non-empty strings"),
        (1, {"path": "../etc/passwd"}, "inside the repo"),
        (1, {"path": "/etc/passwd"}, "inside the repo"),
        (3, {"type": "system"}, "unknown event type"),
    ],
)
def test_each_mistake_is_reported_with_its_line(index, change, expected):
    evs = events()
    evs[index] = {**evs[index], **change}
    problems = validate(evs)
    assert any(p.startswith(f"line {index + 1}:") and expected in p for p in problems), problems
    with pytest.raises(ReplayFormatError):
        from_events(evs)


def test_meta_must_come_first_and_once():
    evs = events()
    assert any("meta event must be the first" in p for p in validate(evs[1:]))
    assert any("meta event must be the first" in p for p in validate(evs + [dict(META)]))
    assert validate([]) and validate(evs) == []


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(META) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ReplayFormatError, match="line 2: invalid JSON"):
        load(path)


def test_probe_file_inserts_after_the_named_turn(tmp_path):
    replay = from_events(events())
    rows = [
        {"replay": "t", "at_turn": 1, "question": "a?", "answers": ["hi"], "source_turn": 1},
        {"replay": "t", "at_turn": 3, "question": "b?", "answers": ["x"]},
        {"replay": "other", "at_turn": 1, "question": "c?", "answers": ["y"]},
    ]
    path = tmp_path / "t.probes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    new = add_probes(replay, load_probe_file(path))
    kinds = [e["type"] for e in new.events]
    first = next(i for i, e in enumerate(new.events) if e.get("question") == "a?")
    # after turn 1's reply, before turn 2 starts
    assert kinds[first - 1] == "assistant" and new.events[first + 1]["type"] == "run"
    assert new.events[-1]["question"] == "b?" and new.events[-1]["source_turn"] == 3
    assert not any(e.get("question") == "c?" for e in new.events)
    assert len(replay.probes()) == 1  # the original is not changed


def test_bad_probe_file_is_rejected(tmp_path):
    path = tmp_path / "p.probes.jsonl"
    path.write_text(json.dumps({"replay": "t", "question": "q", "answers": ["a"]}) + "\n")
    with pytest.raises(ReplayFormatError, match="missing 'at_turn'"):
        load_probe_file(path)


def test_replay_with_unknown_fields_cannot_be_saved(tmp_path):
    replay = Replay(meta={k: v for k, v in META.items() if k != "type"}, events=[{"type": "x"}])
    with pytest.raises(ReplayFormatError):
        save(replay, tmp_path / "x.jsonl")


def test_session_event_and_assistant_ground_truth_fields():
    evs = events()
    evs[3] = {**evs[3], "applied": [{"path": "src/app.py"}], "commits": ["a1b2c3d fix"]}
    evs.insert(7, {"type": "session"})
    evs.append({"type": "session", "resume": False})
    replay = from_events(evs)
    assert replay.turns() == 3  # a new process is not a turn
    assert [e.get("resume", True) for e in replay.events if e["type"] == "session"] == [
        True,
        False,
    ]


@pytest.mark.parametrize(
    "event, expected",
    [
        ({"type": "session", "resume": "yes"}, "'resume' must be bool"),
        ({"type": "session", "path": "x"}, "unknown fields"),
        ({"type": "assistant", "content": "x", "applied": "all"}, "'applied' must be list"),
        ({"type": "assistant", "content": "x", "commits": 3}, "'commits' must be list"),
    ],
)
def test_bad_session_and_assistant_fields_are_reported(event, expected):
    problems = validate(events() + [event])
    assert any(p.startswith(f"line {len(events()) + 1}:") and expected in p for p in problems)
