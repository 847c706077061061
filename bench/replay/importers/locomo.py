"""A LoCoMo JSON (a list of conversations) into one replay per conversation.

LoCoMo is two people talking over many dated sessions, not a coding session, so it is replayed in
ask mode: each of ``speaker_a``'s lines is a user turn (headed by the session's date when a new
session starts) and each of ``speaker_b``'s lines the reply; consecutive lines of one speaker are
joined. Every QA with evidence becomes a probe after the last turn, ``answers`` = the answer and
``source_turn`` = the turn of its first evidence line. LoCoMo answers are often paraphrases or
resolved relative dates ("7 May 2023" for "yesterday" in a dated session) that no string test
finds even when the whole conversation is in the prompt, so by default the evidence lines
themselves (``Speaker: text``, as replayed) are acceptable answers too: the probe then asks
"is what the question needs available to the model?" (``evidence=False`` keeps the answer
only). Adversarial questions (category 5) have no answer in the conversation and are left out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..format import Replay

MODEL = "gpt-4o"
WINDOW = 128000
ADVERSARIAL = 5
SESSION_KEY = re.compile(r"^session_(\d+)$")


def _line(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def conversation_replay(sample: dict[str, Any], name: str, evidence: bool = True) -> Replay:
    conv = sample["conversation"]
    speaker_a = conv.get("speaker_a", "A")
    sessions = sorted(
        (int(m.group(1)), key) for key in conv if (m := SESSION_KEY.match(key)) and conv[key]
    )
    events: list[dict[str, Any]] = []
    turn_of: dict[str, int] = {}
    said_of: dict[str, str] = {}
    turn = 0
    for number, key in sessions:
        date = conv.get(f"{key}_date_time", "")
        header = f"[Session {number}, {date}]\n" if date else f"[Session {number}]\n"
        for entry in conv[key]:
            text = _line(entry)
            if not text:
                continue
            role = "user" if entry.get("speaker") == speaker_a else "assistant"
            said = f"{entry.get('speaker', '?')}: {text}"
            if role == "user":
                if events and events[-1]["type"] == "user":
                    events[-1]["content"] += "\n" + said
                else:
                    turn += 1
                    events.append({"type": "user", "content": header + said})
                header = ""
            else:
                if header or not events or events[-1]["type"] not in ("user", "assistant"):
                    turn += 1  # the other speaker opened the session: a turn with only the date
                    events.append({"type": "user", "content": header + "(continues)"})
                    header = ""
                if events[-1]["type"] == "assistant":
                    events[-1]["content"] += "\n" + said
                else:
                    events.append({"type": "assistant", "content": said})
            if entry.get("dia_id"):
                turn_of[str(entry["dia_id"])] = turn
                said_of[str(entry["dia_id"])] = said
    for qa in sample.get("qa", []):
        if qa.get("category") == ADVERSARIAL or "answer" not in qa:
            continue
        turns = [turn_of[e] for e in qa.get("evidence", []) if e in turn_of]
        answer = str(qa["answer"]).strip()
        if not turns or not answer:
            continue
        events.append(
            {
                "type": "probe",
                "question": str(qa["question"]),
                "answers": [answer]
                + (
                    [said_of[e] for e in qa.get("evidence", []) if e in said_of] if evidence else []
                ),
                "source_turn": min(turns),
                "kind": f"locomo-category-{qa.get('category')}",
            }
        )
    meta = {
        "name": name,
        "source": f"LoCoMo conversation {sample.get('sample_id', name)}",
        "model": MODEL,
        "max_input_tokens": WINDOW,
        "edit_format": "ask",
        "notes": f"{speaker_a} is the user, {conv.get('speaker_b', 'B')} the assistant",
    }
    return Replay(meta=meta, events=events)


def import_data(data: list[dict[str, Any]], stem: str) -> list[Replay]:
    return [
        conversation_replay(sample, f"locomo-{sample.get('sample_id', f'{stem}-{k}')}")
        for k, sample in enumerate(data)
        if isinstance(sample, dict) and "conversation" in sample
    ]


def import_path(src: Path) -> list[Replay]:
    data = json.loads(Path(src).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = [data]
    return import_data(data, Path(src).stem)
