"""The replay format: one JSON object per line, in the order things happened.

Kept as plain dicts (not classes per event) because the file *is* the interface: importers write
it, people edit it by hand, and the runner reads it; ``validate`` is the one place that says what
a well-formed replay is, with the line number of each problem. ``replays/README.md`` documents
the same schema for people.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

# event type -> (required fields with their types, optional fields with their types)
SCHEMA: dict[str, tuple[dict[str, type | tuple[type, ...]], dict[str, type | tuple[type, ...]]]] = {
    "meta": (
        {"name": str, "source": str, "model": str, "max_input_tokens": int},
        {"edit_format": str, "description": str, "notes": str},
    ),
    "user": ({"content": str}, {}),
    # applied/commits: ground truth kept by importers (edits that applied, commits made); the
    # runner ignores them, evaluations of the fact tracker use them
    "assistant": ({"content": str}, {"applied": list, "commits": list}),
    "run": (
        {"command": str, "output": str},
        {"exit_code": int, "via": str, "gap": bool},
    ),
    "add": ({"path": str}, {"content": str, "read_only": bool}),
    "drop": ({"path": str}, {"content": str}),
    "probe": (
        {"question": str, "answers": list, "source_turn": int},
        {"kind": str},
    ),
    # the Aider process ends and a new one starts in the same repo with the same store; resume
    # (default true) starts it with --gardener-resume
    "session": ({}, {"resume": bool}),
}
PROBE_FILE_FIELDS = {"replay": str, "at_turn": int, "question": str, "answers": list}
VIAS = ("run", "test")
TURN_EVENTS = ("user", "run")  # each is one line typed at Aider's prompt


class ReplayFormatError(ValueError):
    """A replay or probe file that does not follow the schema; ``problems`` lists each."""

    def __init__(self, where: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"{where}: " + "; ".join(problems[:10]))


@dataclass
class Replay:
    meta: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.meta["name"])

    def all_events(self) -> list[dict[str, Any]]:
        return [dict(self.meta, type="meta"), *self.events]

    def turns(self) -> int:
        return sum(1 for e in self.events if e["type"] in TURN_EVENTS)

    def probes(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == "probe"]


def _check_fields(
    obj: dict[str, Any], required: dict[str, Any], optional: dict[str, Any]
) -> list[str]:
    problems = []
    for key, typ in required.items():
        if key not in obj:
            problems.append(f"missing {key!r}")
        elif not isinstance(obj[key], typ) or (typ is int and isinstance(obj[key], bool)):
            problems.append(f"{key!r} must be {getattr(typ, '__name__', typ)}")
    for key, typ in optional.items():
        if key in obj and not isinstance(obj[key], typ):
            problems.append(f"{key!r} must be {getattr(typ, '__name__', typ)}")
    unknown = set(obj) - set(required) - set(optional) - {"type"}
    if unknown:
        problems.append(f"unknown fields {sorted(unknown)}")
    return problems


def _check_answers(answers: Any) -> list[str]:
    if not isinstance(answers, list) or not answers:
        return ["'answers' must be a non-empty list of strings"]
    if not all(isinstance(a, str) and a.strip() for a in answers):
        return ["'answers' must hold non-empty strings"]
    return []


def validate(events: list[dict[str, Any]]) -> list[str]:
    """Every problem in a replay's events (meta first), as ``line N: …``; [] when valid."""
    problems: list[str] = []
    if not events:
        return ["line 1: empty replay (a meta event is required)"]
    turn = 0
    for i, event in enumerate(events, start=1):
        if not isinstance(event, dict):
            problems.append(f"line {i}: not a JSON object")
            continue
        kind = event.get("type")
        if kind not in SCHEMA:
            problems.append(f"line {i}: unknown event type {kind!r}")
            continue
        if (i == 1) != (kind == "meta"):
            problems.append(f"line {i}: the meta event must be the first line, and only it")
        required, optional = SCHEMA[kind]
        errs = _check_fields(event, required, optional)
        if kind == "meta" and not errs and event["max_input_tokens"] <= 0:
            errs.append("'max_input_tokens' must be positive")
        if kind == "run" and event.get("via", "run") not in VIAS:
            errs.append(f"'via' must be one of {VIAS}")
        if kind == "probe" and not errs:
            errs += _check_answers(event["answers"])
            if not 0 <= event["source_turn"] <= turn:
                errs.append(f"'source_turn' {event['source_turn']} is not a turn before it")
        if kind in ("add", "drop") and not errs:
            path = Path(event["path"])
            if path.is_absolute() or ".." in path.parts:
                errs.append("'path' must be relative and inside the repo")
        if kind in TURN_EVENTS:
            turn += 1
        problems += [f"line {i}: {e}" for e in errs]
    return problems


def from_events(events: list[dict[str, Any]], where: str = "replay") -> Replay:
    problems = validate(events)
    if problems:
        raise ReplayFormatError(where, problems)
    meta = {k: v for k, v in events[0].items() if k != "type"}
    return Replay(meta=meta, events=list(events[1:]))


def _read_jsonl(path: Path) -> list[Any]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ReplayFormatError(str(path), [f"line {n}: invalid JSON ({err.msg})"]) from None
    return rows


def load(path: str | Path) -> Replay:
    path = Path(path)
    return from_events(_read_jsonl(path), str(path))


def dumps(replay: Replay) -> str:
    problems = validate(replay.all_events())
    if problems:
        raise ReplayFormatError(replay.name, problems)
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in replay.all_events())


def save(replay: Replay, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(replay), encoding="utf-8")
    return path


def load_probe_file(path: str | Path) -> list[dict[str, Any]]:
    """A separate probe file: ``{"replay", "at_turn", "question", "answers", "source_turn"}``
    per line (``source_turn`` optional, defaulting to ``at_turn``)."""
    path = Path(path)
    rows = _read_jsonl(path)
    problems = []
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            problems.append(f"line {n}: not a JSON object")
            continue
        errs = _check_fields(row, PROBE_FILE_FIELDS, {"source_turn": int, "kind": str})
        if not errs:
            errs += _check_answers(row["answers"])
        problems += [f"line {n}: {e}" for e in errs]
    if problems:
        raise ReplayFormatError(str(path), problems)
    return rows


def add_probes(replay: Replay, probes: Iterable[dict[str, Any]]) -> Replay:
    """A copy of ``replay`` with the probe-file rows naming it inserted right after turn
    ``at_turn`` (after that turn's replies, before the next turn starts)."""
    mine = [p for p in probes if p["replay"] == replay.name]
    if not mine:
        return replay
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for p in mine:
        event = {
            "type": "probe",
            "question": p["question"],
            "answers": list(p["answers"]),
            "source_turn": int(p.get("source_turn", p["at_turn"])),
        }
        if "kind" in p:
            event["kind"] = p["kind"]
        by_turn.setdefault(int(p["at_turn"]), []).append(event)
    out: list[dict[str, Any]] = list(by_turn.pop(0, []))
    turn = 0
    for event in replay.events:
        if event["type"] in TURN_EVENTS:
            out += by_turn.pop(turn, []) if turn else []
            turn += 1
        out.append(event)
    for at in sorted(by_turn):
        out += by_turn[at]
    new = Replay(meta=dict(replay.meta), events=out)
    problems = validate(new.all_events())
    if problems:
        raise ReplayFormatError(replay.name, problems)
    return new
