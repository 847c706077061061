"""Context usage from real Claude Code transcripts: the hand sum of the last main-thread
assistant usage, window rules, compaction boundaries, and the saved copy other processes read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aider_gardener.clients import transcript
from aider_gardener.clients.transcript import (
    Usage,
    load_usage,
    save_usage,
    usage_from_transcript,
    window_for,
)
from tests.conftest import SHARED

TRANSCRIPTS = SHARED / "claude_code_transcripts"


def transcript_files() -> list[Path]:
    return sorted(TRANSCRIPTS.glob("*.jsonl")) if TRANSCRIPTS.is_dir() else []


def hand_sum(path: Path) -> int | None:
    """The last main-thread, non-synthetic assistant usage, summed by hand from the file read
    forwards (the module reads backwards from the end)."""
    last = None
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
            post = (record.get("compactMetadata") or {}).get("postTokens")
            last = post if post else None
            continue
        if record.get("type") != "assistant" or record.get("isSidechain"):
            continue
        message = record["message"]
        if message.get("model") == "<synthetic>":
            continue
        u = message.get("usage") or {}
        n = (
            u.get("input_tokens", 0)
            + u.get("cache_creation_input_tokens", 0)
            + u.get("cache_read_input_tokens", 0)
        )
        if n:
            last = n
    return last


@pytest.mark.parametrize("path", transcript_files(), ids=lambda p: p.name[11:45])
def test_real_transcript_usage_is_the_hand_sum(path):
    usage = usage_from_transcript(path)
    expected = hand_sum(path)
    assert usage is not None and expected is not None
    assert usage.used == expected
    assert usage.window == 200_000  # none of these sessions ran a [1m] model
    assert usage.model and usage.at > 1.6e9


def test_no_shared_data_is_a_skip_not_a_pass():
    if not transcript_files():
        pytest.skip(f"no transcripts at {TRANSCRIPTS}")
    assert len(transcript_files()) >= 5


def _record(kind: str, **kw) -> str:
    return json.dumps({"type": kind, "timestamp": "2026-01-21T06:19:38.056Z", **kw})


def _assistant(inp: int, create: int, read: int, model="claude-sonnet-4-5", **kw) -> str:
    usage = {
        "input_tokens": inp,
        "cache_creation_input_tokens": create,
        "cache_read_input_tokens": read,
        "output_tokens": 99,
    }
    return _record(
        "assistant",
        message={"role": "assistant", "model": model, "content": [], "usage": usage},
        **kw,
    )


def test_sidechain_synthetic_and_zero_usage_are_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [
        _assistant(10, 1000, 50_000),
        _assistant(5, 5, 5, isSidechain=True),
        _assistant(0, 0, 0, model="<synthetic>"),
        _record("user", message={"role": "user", "content": "hi"}),
        "not json at all {",
        "",
    ]
    path.write_text("\n".join(lines))
    usage = usage_from_transcript(path)
    assert usage.used == 51_010 and usage.window == 200_000 and not usage.estimated


def test_compaction_boundary_gives_the_estimate_or_unknown(tmp_path):
    path = tmp_path / "t.jsonl"
    boundary = {"subtype": "compact_boundary", "compactMetadata": {"trigger": "auto"}}
    path.write_text("\n".join([_assistant(1, 2, 170_000), _record("system", **boundary)]))
    assert usage_from_transcript(path) is None  # stale count must not warn after /compact
    boundary["compactMetadata"]["postTokens"] = 9_000
    path.write_text("\n".join([_assistant(1, 2, 170_000), _record("system", **boundary)]))
    usage = usage_from_transcript(path)
    assert usage.used == 9_000 and usage.estimated
    path.write_text(path.read_text() + "\n" + _assistant(1, 1, 12_000))
    assert usage_from_transcript(path).used == 12_002


def test_window_rules(monkeypatch):
    monkeypatch.delenv(transcript.WINDOW_ENV, raising=False)
    assert window_for("claude-opus-4-5-20251101") == 200_000
    assert window_for("claude-sonnet-4-5[1m]") == 1_000_000
    assert window_for("claude-sonnet-4-5", used=250_000) == 1_000_000
    assert window_for(None) == 200_000
    monkeypatch.setenv(transcript.WINDOW_ENV, "400000")
    assert window_for("claude-sonnet-4-5[1m]") == 400_000
    monkeypatch.setenv(transcript.WINDOW_ENV, "junk")
    assert window_for("x") == 200_000


def test_model_setting_gives_the_1m_window(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_assistant(1, 1, 150_000))
    assert usage_from_transcript(path, model="claude-sonnet-4-5[1m]").window == 1_000_000


def test_usage_far_from_the_end_is_found(tmp_path, monkeypatch):
    """The tail is read in growing blocks: a usage before a long run of progress records (as
    real sessions have) is still found."""
    monkeypatch.setattr(transcript, "TAIL_BLOCK", 1024)
    filler = _record("progress", data={"text": "x" * 500})
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([_assistant(3, 4, 5)] + [filler] * 200))
    assert usage_from_transcript(path).used == 12


def test_missing_and_bad_files_give_none(tmp_path):
    assert usage_from_transcript(None) is None
    assert usage_from_transcript(tmp_path / "absent.jsonl") is None
    assert usage_from_transcript(tmp_path) is None  # a directory
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(bytes(range(256)) * 100)
    assert usage_from_transcript(binary) is None


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2000))
def test_junk_never_raises(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("junk") / "t.jsonl"
    path.write_bytes(data)
    usage_from_transcript(path)


def test_save_and_load_round_trip(tmp_path):
    usage = Usage(used=123_456, window=200_000, model="claude-opus-4-5", at=1.7e9)
    path = save_usage(tmp_path / "store", usage)
    assert path is not None and path.name == transcript.USAGE_FILENAME
    assert load_usage(tmp_path / "store") == usage
    assert round(load_usage(tmp_path / "store").percent, 3) == 61.728
    assert not list((tmp_path / "store").glob(".usage-*"))  # no temp file left


def test_load_bad_or_missing_gives_none(tmp_path):
    assert load_usage(tmp_path) is None
    (tmp_path / transcript.USAGE_FILENAME).write_text("{not json")
    assert load_usage(tmp_path) is None
    (tmp_path / transcript.USAGE_FILENAME).write_text('{"used": "x"}')
    assert load_usage(tmp_path) is None


def test_save_into_an_unwritable_place_gives_none(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    assert save_usage(blocker, Usage(1, 2, None, 0.0)) is None


# --- the assistant's replies, read incrementally ---


def _main_thread_replies(path: Path) -> list[str]:
    """Every main-thread assistant text, from the file read whole and forwards by hand."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") != "assistant" or record.get("isSidechain"):
            continue
        if record.get("isApiErrorMessage") or record["message"].get("model") == "<synthetic>":
            continue
        content = record["message"].get("content")
        texts = [b["text"] for b in content if b.get("type") == "text" and b["text"].strip()]
        if texts:
            out.append("\n".join(texts).strip())
    return out


@pytest.mark.parametrize("path", transcript_files(), ids=lambda p: p.name[11:45])
def test_real_replies_read_in_pieces_are_the_replies_read_whole(path, tmp_path):
    """The transcript written a few records at a time (cut mid-line too), read on from each
    offset: together, exactly the main-thread replies, each once, in order."""
    data = path.read_bytes()
    expected = _main_thread_replies(path)
    assert [r.text for r in transcript.replies_since(path, 0)[0]] == expected
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"")
    got, offset, pos, step = [], 0, 0, 7919
    while pos < len(data):
        pos = min(len(data), pos + step)
        step = step * 3 // 2  # pieces of growing size, ending anywhere in a line
        live.write_bytes(data[:pos])
        replies, offset = transcript.replies_since(live, offset)
        got += [r.text for r in replies]
        assert offset <= pos and (offset == 0 or data[offset - 1 : offset] == b"\n")
    assert got == expected
    assert offset == len(data)


def _text(text: str, mid: str = "m", **extra) -> str:
    return _record(
        "assistant",
        message={
            "id": mid,
            "model": "claude-opus-4-5",
            "content": [{"type": "text", "text": text}],
        },
        **extra,
    )


def test_replies_skip_what_is_not_the_assistants_own_text(tmp_path):
    path = tmp_path / "t.jsonl"
    tool_only = _record(
        "assistant",
        message={"id": "t", "content": [{"type": "tool_use", "id": "x", "name": "Bash"}]},
    )
    thinking = _record(
        "assistant", message={"id": "k", "content": [{"type": "thinking", "thinking": "hm"}]}
    )
    lines = [
        _record("user", message={"role": "user", "content": [{"type": "text", "text": "hi"}]}),
        _text("subagent", "s", isSidechain=True),
        tool_only,
        thinking,
        _record(
            "assistant",
            isApiErrorMessage=True,
            message={"model": "<synthetic>", "content": [{"type": "text", "text": "API Error"}]},
        ),
        _text("first part", "m1"),
        _text("second part", "m1"),  # the same message, written a block at a time
        _text("another", "m2"),
    ]
    path.write_text("\n".join(lines) + "\n")
    replies, offset = transcript.replies_since(path, None)
    assert [r.text for r in replies] == ["first part\nsecond part", "another"]
    assert offset == path.stat().st_size
    assert transcript.replies_since(path, offset) == ([], offset)  # nothing new


def test_replies_offset_into_another_file_reads_its_tail(tmp_path, monkeypatch):
    """An offset that does not fall after a line end (the file was replaced), or past the end,
    reads the last REPLY_TAIL bytes only, from the first whole line in them."""
    monkeypatch.setattr(transcript, "REPLY_TAIL", 300)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(_text(f"reply number {i}", f"m{i}") for i in range(20)) + "\n")
    size = path.stat().st_size
    for offset in (None, 5, size + 10, -1):
        replies, new = transcript.replies_since(path, offset)
        texts = [r.text for r in replies]
        assert texts and texts[-1] == "reply number 19" and len(texts) < 20
        assert new == size
    partial = _text("not finished yet", "m99")[:40]
    with open(path, "a") as fh:
        fh.write(partial)  # Claude Code is still writing this record
    replies, new = transcript.replies_since(path, size)
    assert replies == [] and new == size  # read whole next time


def test_replies_from_missing_or_junk_files(tmp_path):
    assert transcript.replies_since(None, 3) == ([], 3)
    assert transcript.replies_since(tmp_path / "absent.jsonl", 7) == ([], 7)
    junk = tmp_path / "j.jsonl"
    junk.write_bytes(b'{"type": "assistant", "text"\n\xff\xfe "assistant" "text"\n[1]\n')
    assert transcript.replies_since(junk, 0) == ([], junk.stat().st_size)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2000), st.one_of(st.none(), st.integers(-5, 2100)))
def test_replies_junk_never_raises(tmp_path_factory, data, offset):
    path = tmp_path_factory.mktemp("junk") / "t.jsonl"
    path.write_bytes(data)
    replies, new = transcript.replies_since(path, offset)
    assert 0 <= new <= len(data)


def test_a_fifo_as_transcript_reads_as_nothing_without_blocking(tmp_path):
    """A FIFO nobody writes would block a plain open() for ever, and with it every later hook."""
    from aider_gardener.clients.transcript import replies_since, usage_from_transcript

    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    assert usage_from_transcript(fifo) is None
    assert replies_since(fifo, 0) == ([], 0)
