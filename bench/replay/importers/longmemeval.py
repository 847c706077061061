"""A LongMemEval JSON (a list of entries, one haystack each) into one replay per entry.

A haystack is ~40 dated chat sessions, ~100k gpt-4o tokens: replayed in ask mode at gpt-4o's
128k window, plain Aider's last requests carry ~100k tokens of history, which is what the
benchmark wants to see (``--window`` replays it as if the window were smaller). Sessions go in
the chronological order of ``haystack_dates`` (the files do not always list them in order), each
opening with ``[Session N, <date>]``; content is kept exactly. Every question becomes a probe
after the last turn, ``longmemeval-original`` or ``longmemeval-added`` (the derived subset adds
questions); the ``has_answer`` turns of its answer sessions are acceptable answers too, since
answers are paraphrased or computed. Abstention questions (``_abs``) are left out. A malformed
file raises ``ReplayFormatError`` naming every problem rather than importing part of it: a
benchmark quietly missing a haystack would measure something else.

Layouts and edge cases: docs/decisions/055-replay-importers.md.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from ..format import Replay, ReplayFormatError

MODEL = "gpt-4o"
WINDOW = 128000
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # "2023/05/20 (Sat) 02:21"
SOURCE = "LongMemEval_S (derived 3-haystack subset)"
ROLES = ("user", "assistant")
# a user message starting with these is a command at Aider's prompt, so it keeps its header
COMMAND_PREFIXES = ("/", "!")
UNSAFE = re.compile(r"[^\w.-]")  # the name is a file name in the output folder: no subfolders


def _date_key(date: str) -> str:
    """Sortable form of a LongMemEval date; an unparsable one sorts by its text."""
    try:
        return datetime.strptime(date.strip(), DATE_FORMAT).isoformat()
    except ValueError:
        return date


def _questions(entry: dict[str, Any]) -> list[tuple[str, Any, list[str]]]:
    """(question, answer, answer session ids) triples of either layout."""
    if "questions" in entry:
        return list(zip(entry["questions"], entry["answers"], entry["answer_session_ids"]))
    return [(entry["question"], entry["answer"], entry.get("answer_session_ids", []))]


def _all_str(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, str) for v in values)


def entry_problems(entry: Any) -> list[str]:
    """What keeps ``entry`` from being imported ([] when it can be)."""
    if not isinstance(entry, dict):
        return ["not a JSON object"]
    sessions = entry.get("haystack_sessions")
    if not isinstance(sessions, list):
        return ["missing 'haystack_sessions' (a list of sessions)"]
    problems = []
    for key in ("haystack_dates", "haystack_session_ids"):
        values = entry.get(key)
        if not _all_str(values):
            problems.append(f"{key!r} must be a list of strings")
        elif len(values) != len(sessions):
            problems.append(f"{len(sessions)} haystack_sessions but {len(values)} {key}")
    for n, session in enumerate(sessions, start=1):
        if not isinstance(session, list) or not all(
            isinstance(t, dict) and t.get("role") in ROLES and isinstance(t.get("content"), str)
            for t in session
        ):
            problems.append(f"session {n} is not a list of {{role, content}} turns")
            break
    if "questions" in entry:
        lists = [entry.get(k) for k in ("questions", "answers", "answer_session_ids")]
        if not all(isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1:
            problems.append("'questions', 'answers', 'answer_session_ids' must be parallel lists")
        elif not all(isinstance(ids, list) and _all_str(ids) for ids in lists[2]):
            problems.append("'answer_session_ids' must be a list of lists of session ids")
    elif "question" not in entry or "answer" not in entry:
        problems.append("no 'questions' (or 'question' and 'answer')")
    elif not _all_str(entry.get("answer_session_ids", [])):
        problems.append("'answer_session_ids' must be a list of session ids")
    return problems


def entry_replay(entry: dict[str, Any], name: str, evidence: bool = True) -> Replay:
    """The replay of one entry that ``entry_problems`` accepts."""
    order = sorted(
        range(len(entry["haystack_sessions"])), key=lambda k: _date_key(entry["haystack_dates"][k])
    )
    events: list[dict[str, Any]] = []
    first_turn: dict[str, int] = {}  # session id -> its first turn
    answer_turns: dict[str, list[tuple[int, str]]] = {}  # session id -> has_answer (turn, text)
    turn = 0
    for number, k in enumerate(order, start=1):
        sid = entry["haystack_session_ids"][k]
        header = f"[Session {number}, {entry['haystack_dates'][k]}]"
        opened = False
        for entry_turn in entry["haystack_sessions"][k]:
            content = entry_turn["content"]
            if not content.strip():
                continue
            last = events[-1]["type"] if opened else None
            if entry_turn["role"] == "user":
                if last == "user":
                    events[-1]["content"] += "\n\n" + content
                else:
                    turn += 1
                    head = not opened or content.startswith(COMMAND_PREFIXES)
                    events.append(
                        {"type": "user", "content": f"{header}\n{content}" if head else content}
                    )
            else:
                if not opened:
                    turn += 1  # the assistant opened the session: a turn with only the header
                    events.append({"type": "user", "content": header})
                    last = "user"
                if last == "assistant":
                    events[-1]["content"] += "\n\n" + content
                else:
                    events.append({"type": "assistant", "content": content})
            opened = True
            first_turn.setdefault(sid, turn)
            if entry_turn.get("has_answer"):
                answer_turns.setdefault(sid, []).append((turn, content))
    for index, (question, answer, session_ids) in enumerate(_questions(entry)):
        present = [s for s in session_ids if s in first_turn]
        found = sorted(t for s in present for t in answer_turns.get(s, []))
        original = bool(found) if answer_turns else index == 0
        if original and str(entry.get("question_id", "")).endswith("_abs"):
            continue  # abstention: nothing in the haystack answers it
        answer_text = str(answer).strip()
        if not present or not answer_text or not str(question).strip():
            continue
        source = found[0][0] if found else min(first_turn[s] for s in present)
        answers = [answer_text]
        if evidence:
            answers += [text for _, text in found if text not in answers]
        events.append(
            {
                "type": "probe",
                "question": str(question),
                "answers": answers,
                "source_turn": source,
                "kind": "longmemeval-original" if original else "longmemeval-added",
            }
        )
    qid = entry.get("question_id", name)
    meta = {
        "name": name,
        "source": f"{SOURCE if 'questions' in entry else 'LongMemEval'}, question {qid}",
        "model": MODEL,
        "max_input_tokens": WINDOW,
        "edit_format": "ask",
        "notes": (
            f"question type {entry.get('question_type', 'unknown')}, asked "
            f"{entry.get('question_date', '?')}; probes of kind longmemeval-added were added by "
            "the derived subset's author, not LongMemEval"
        ),
    }
    return Replay(meta=meta, events=events)


def import_data(data: Any, where: str = "longmemeval") -> list[Replay]:
    """One replay per entry (``data`` may be a single entry); ``where`` names the source in
    errors."""
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ReplayFormatError(where, ["expected a list of LongMemEval entries"])
    problems = [
        f"entry {k} ({e.get('question_id')!r}): {p}" if isinstance(e, dict) else f"entry {k}: {p}"
        for k, e in enumerate(data, start=1)
        for p in entry_problems(e)
    ]
    if problems:
        raise ReplayFormatError(where, problems)
    return [
        entry_replay(entry, "longmemeval-" + UNSAFE.sub("_", str(entry.get("question_id", k))))
        for k, entry in enumerate(data)
    ]


def import_path(src: Path) -> list[Replay]:
    try:
        data = json.loads(Path(src).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReplayFormatError(str(src), [f"not a JSON file ({err})"]) from None
    return import_data(data, str(src))
