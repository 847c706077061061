"""UserPromptSubmit recall injects only what bears on the prompt, never what the context holds,
and says in one line what it added (issue 22, point 5).

The stores are real: a real Claude Code session (``../shared/data/claude_code_transcripts``)
replayed through the hooks as Claude Code runs them (``bench.prompt_recall.Replayer``: prompts,
tool results, replies, compactions), or entries stored through PostToolUse. Only the prompts
asked afterwards are written here."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aider_gardener.clients import claude_hooks, prompt_recall
from aider_gardener.clients.claude_hooks import handle
from aider_gardener.pipeline import entry_id
from aider_gardener.store.db import Store
from aider_gardener.store.recall import recall
from tests.conftest import SHARED

SESSION = "cc_session__SWORDIntel-claude-backups__e1ffaf02.jsonl"  # 80 entries once replayed
UNRELATED = "let's write the README now"  # shares a word or two with the session, no more
RELATED = "the DNS resolution fails inside systemd-nspawn again"  # what the session fought


@pytest.fixture(scope="module")
def replayed():
    """The store a real session left, and the project folder whose store it is."""
    from bench.prompt_recall import STORE_ENV, Replayer

    path = SHARED / "claude_code_transcripts" / SESSION
    if not path.is_file():
        pytest.skip(f"shared transcript not found: {path}")
    folder = Path(tempfile.mkdtemp(prefix="gardener-pr-"))
    replayer = Replayer(folder)
    try:
        replayer.replay(path)
    finally:
        replayer.close()
    saved = os.environ.get(STORE_ENV)
    os.environ[STORE_ENV] = str(folder / "store")
    try:
        yield folder / "project"
    finally:
        if saved is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = saved
        shutil.rmtree(folder, ignore_errors=True)


def _ask(cwd: Path, prompt: str, session: str) -> dict:
    return handle("UserPromptSubmit", {"session_id": session, "cwd": str(cwd), "prompt": prompt})


def test_the_replayed_store_is_big_enough_to_measure_rarity(replayed):
    with Store(Path(os.environ["AIDER_GARDENER_STORE"]), vectors=False) as store:
        rows = store.read(lambda c: c.execute("SELECT count(*) FROM entries_fts").fetchone()[0])
    assert rows >= prompt_recall.MIN_ENTRIES


def test_a_prompt_unrelated_to_the_store_gets_nothing(replayed):
    """Full-text recall finds entries sharing a word with it (the hook used to inject three),
    but none clears the floor: no context, no line for the user."""
    with Store(Path(os.environ["AIDER_GARDENER_STORE"]), vectors=False) as store:
        hits = recall(store, UNRELATED, limit=3, mode="fts")
        scored = prompt_recall.score(store, UNRELATED, hits)
    assert hits and not any(s.relevant for s in scored)
    assert _ask(replayed, UNRELATED, "later-1") == {}


def test_a_related_prompt_gets_the_entries_and_one_line_naming_them(replayed):
    answer = _ask(replayed, RELATED, "later-2")
    ctx = answer["hookSpecificOutput"]["additionalContext"]
    ids = [line.split()[1][3:] for line in ctx.splitlines() if line.startswith("--- id=")]
    assert 1 <= len(ids) <= claude_hooks.RAG_HITS
    assert "systemd-nspawn" in ctx and "DNS" in ctx
    line = answer["systemMessage"]
    assert "\n" not in line
    noun = "entry" if len(ids) == 1 else "entries"
    assert line.startswith(f"gardener: recalled {len(ids)} {noun}: ")
    assert all(f"{i} (" in line for i in ids)
    # asked again in the same session: those are in the context now, never offered twice
    again = _ask(replayed, RELATED, "later-2")
    ctx2 = (again.get("hookSpecificOutput") or {}).get("additionalContext") or ""
    assert not [i for i in ids if f"id={i}" in ctx2]


def test_scores_are_scale_free_measures_of_the_bm25_score(replayed):
    with Store(Path(os.environ["AIDER_GARDENER_STORE"]), vectors=False) as store:
        hits = recall(store, RELATED, limit=5, mode="fts")
        scored = prompt_recall.score(store, RELATED, hits)
        bm25 = dict(store.fts_search(RELATED, 50))
    assert [s.hit.entry_id for s in scored] == [h.entry_id for h in hits]
    for s in scored:
        assert s.bm25 == pytest.approx(bm25[s.hit.entry_id])
        assert s.share is not None and s.evidence is not None
        assert s.share > 0 and s.evidence > 0
    best = max(scored, key=lambda s: s.bm25)
    assert best.relevant and best.evidence >= prompt_recall.MIN_EVIDENCE


def test_a_chinese_prompt_is_not_sunk_by_pairs_that_straddle_its_words(tmp_path):
    """A CJK run is searched by its character pairs, and half of them cross a word boundary
    (为什么部署 gives 么部): no entry holds those, so they must not weigh in the prompt's share,
    or the reply that holds 部署 and 失败 falls under the floor (bench.prompt_recall)."""
    from aider_gardener.types import Source

    prompt = "为什么部署老是失败"
    reply = "这次部署失败是因为数据库连接超时；之前老是失败也是这个原因，超时已改成三十秒。"
    with Store(tmp_path / "store", vectors=False) as store:
        for i in range(prompt_recall.MIN_ENTRIES + 10):
            words = " ".join(f"step{j} of module m{(i + j) % 7}" for j in range(20))
            store.ingest(f"note {i}: the parser handles case {i}: {words}", Source())
        target = store.ingest(reply, Source(role="assistant"))
        hits = recall(store, prompt, limit=5, mode="fts")
        scored = {s.hit.entry_id: s for s in prompt_recall.score(store, prompt, hits)}
        weight, rows = prompt_recall._weight(store, prompt)
    assert rows > prompt_recall.MIN_ENTRIES
    found = scored[target.id]
    assert found.relevant, (found.share, found.evidence)
    # what the straddling pairs would have added: each at the idf of a word no row holds
    unheld = ("为什么部署老是失败", "为什", "么部", "署老")
    assert found.share * weight / (weight + len(unheld) * prompt_recall._idf(rows, 0)) < (
        prompt_recall.MIN_SHARE
    )


# --- what the context holds ---


def _read(cwd: Path, session: str, path: str, text: str) -> None:
    handle(
        "PostToolUse",
        {
            "session_id": session,
            "cwd": str(cwd),
            "tool_name": "Read",
            "tool_input": {"file_path": path},
            "tool_response": {"type": "text", "file": {"filePath": path, "content": text}},
        },
    )


def _compact(cwd: Path, session: str, transcript: Path) -> None:
    base = {"session_id": session, "cwd": str(cwd), "transcript_path": str(transcript)}
    handle("PreCompact", dict(base, trigger="manual"))
    handle("SessionStart", dict(base, source="compact"))


KAFKA = "\n".join(
    ["# Consumer settings for the orders pipeline"]
    + [f"stage_{i}.retries = {i % 4}" for i in range(60)]
    + ["auto_offset_reset = earliest  # after KafkaOffsetOutOfRangeError on orders-7"]
)


def test_a_file_read_again_after_a_compaction_is_not_recalled(tmp_path):
    """Read before the compaction and read again after it, the file is in the context: its
    entry keeps its first sighting in this session, yet must not be offered back."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "system", "version": "2.1.332"}) + "\n")
    ask = "why does the consumer reset its offset after KafkaOffsetOutOfRangeError?"
    _read(repo, "s1", "/srv/app/consumer.cfg", KAFKA)
    assert _ask(repo, ask, "s1") == {}  # stored by this session: in context
    _compact(repo, "s1", transcript)
    _read(repo, "s1", "/srv/app/consumer.cfg", KAFKA)  # the model reads it again
    assert _ask(repo, ask, "s1") == {}


def test_a_file_read_only_before_a_compaction_is_recalled_after_it(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "system", "version": "2.1.332"}) + "\n")
    ask = "why does the consumer reset its offset after KafkaOffsetOutOfRangeError?"
    _read(repo, "s1", "/srv/app/consumer.cfg", KAFKA)
    _compact(repo, "s1", transcript)
    answer = _ask(repo, ask, "s1")
    assert f"id={entry_id(KAFKA)}" in answer["hookSpecificOutput"]["additionalContext"]
    assert answer["systemMessage"] == (
        f"gardener: recalled 1 entry: {entry_id(KAFKA)} (app/consumer.cfg)"
    )
    assert _ask(repo, ask, "s1") == {}  # recalled once: in context until the next compaction


def test_a_young_store_offers_its_hits_as_before(tmp_path):
    """Below MIN_ENTRIES the index cannot tell rare words from common ones: no floor."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    _read(repo, "old", "/srv/app/consumer.cfg", KAFKA)
    answer = _ask(repo, "what does the orders pipeline retry?", "new")
    assert f"id={entry_id(KAFKA)}" in answer["hookSpecificOutput"]["additionalContext"]


# --- the line shown to the user ---


class _Entry:
    def __init__(self, path=None, command=None, original=""):
        self.path, self.command, self.original = path, command, original


def test_entries_are_named_by_file_command_or_first_words():
    assert prompt_recall.name(_Entry(path="X:\\03_ACG\\Custom_Addons\\a\\views\\v.xml")) == (
        "views/v.xml"
    )
    assert prompt_recall.name(_Entry(command="pytest -q tests/test_x.py")) == (
        "pytest -q tests/test_x.py"
    )
    named = prompt_recall.name(_Entry(original="**Done.** The ledger now talks to PostgreSQL 16"))
    assert named == '"Done. The ledger now talks …"'
    assert len(prompt_recall.name(_Entry(command="x" * 300))) == prompt_recall.NAME_MAX


def test_nothing_added_says_nothing():
    assert prompt_recall.added_line(None, []) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.text(max_size=300))
def test_scoring_never_raises_on_any_prompt(replayed, prompt):
    with Store(Path(os.environ["AIDER_GARDENER_STORE"]), vectors=False) as store:
        hits = recall(store, prompt, limit=3, mode="fts") if prompt.strip() else []
        scored = prompt_recall.score(store, prompt, hits)
        line = prompt_recall.added_line(store, [s.hit.entry_id for s in scored])
    assert len(scored) == len(hits)
    assert line is None or "\n" not in line
