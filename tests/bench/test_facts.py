"""bench/facts.py: the importer's ground truth on a small synthetic history, the replay making
Aider apply (and fail) the recorded edits and commit them for real, the scoring, and, once the
fact tracker is wired into the gardener session, precision/recall on the synthetic history."""

from __future__ import annotations

import importlib.util
import json

import pytest

from bench.facts import (
    USER_CHANGE,
    Score,
    SessionResult,
    TurnRecord,
    as_current_aider,
    facts_of_turn,
    file_facts,
    import_history,
    main,
    norm_path,
    run_session,
    same_message,
    score_lists,
    score_session,
    score_sets,
)
from bench.replay.format import Replay, validate
from bench.replay.importers.aider_history import import_text
from bench.replay.runner import bench_environment

# Four replies: two edits that apply and commit (one creates a file, one a path with a space),
# one that fails to match (no Applied line), and the reflection that fixes it. Aider ends its
# own lines with two spaces ($ below); a multi-line tool message carries "> " on its first line
# only.
HISTORY = """
# aider chat started at 2025-02-01 10:00:00

> Aider v0.86.2$
> Main model: gpt-4o with diff edit format$
> Git repo: .git with 1 files$

#### /add app.py$
> Added app.py to the chat$

#### make x two$

Change `x`:

app.py
```python
<<<<<<< SEARCH
x = 1
=======
x = 2
>>>>>>> REPLACE
```

> Tokens: 1.2k sent, 60 received.$
> Applied edit to app.py$
> Commit 1a2b3c4 fix: make x two$

#### add a helper module and a user guide$

helper.py
```python
<<<<<<< SEARCH
=======
def greet(name):
    return f"hello {name}"
>>>>>>> REPLACE
```

docs/user guide.md
```markdown
<<<<<<< SEARCH
=======
> quoted in the guide, not a tool line
>>>>>>> REPLACE
```

app.py
```python
<<<<<<< SEARCH
x = 2
=======
from helper import greet
x = 2
>>>>>>> REPLACE
```

> Tokens: 1.5k sent, 120 received.$
> Committing app.py before applying edits.$
> Commit 0f0f0f0 chore: user's own change$
> Applied edit to helper.py$
> Applied edit to docs/user guide.md$
> Applied edit to app.py$
> Commit 2b3c4d5 feat: add greet helper and user guide$

#### rename y to z$

app.py
```python
<<<<<<< SEARCH
y = 5
=======
z = 5
>>>>>>> REPLACE
```

> Tokens: 1.6k sent, 40 received.$
> The LLM did not conform to the edit format.$
> # 1 SEARCH/REPLACE block failed to match!

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in app.py
<<<<<<< SEARCH
y = 5
=======
z = 5
>>>>>>> REPLACE

The SEARCH section must exactly match an existing block of lines including all white space$

There is no `y` in app.py; I will add `z` instead:

app.py
```python
<<<<<<< SEARCH
x = 2
=======
x = 2
z = 5
>>>>>>> REPLACE
```

> Tokens: 1.9k sent, 50 received.$
> Applied edit to app.py$
> Commit 3c4d5e6 feat: add z$
""".replace("$\n", "  \n")

TRUTH_EDITED = {2: {"app.py"}, 3: {"helper.py", "docs/user guide.md", "app.py"}, 4: {"app.py"}}
TRUTH_COMMITS = {
    2: ["fix: make x two"],
    3: ["feat: add greet helper and user guide"],
    4: ["feat: add z"],
}


def _tracker_wired() -> bool:
    try:
        return importlib.util.find_spec("aider_gardener.continuity.tracker") is not None
    except ModuleNotFoundError:
        return False


needs_tracker = pytest.mark.skipif(
    not _tracker_wired(), reason="the fact tracker is not wired into the gardener yet"
)


@pytest.fixture
def replay() -> Replay:
    (replay,) = import_text(HISTORY, "synthetic", min_turns=1, split_replies=True)
    return replay


def replies(replay: Replay) -> list[dict]:
    return [e for e in replay.events if e["type"] == "assistant"]


def test_ground_truth_follows_each_reply(replay):
    assert validate(replay.all_events()) == []
    first, second, failed, fixed = replies(replay)
    assert first["applied"] == ["app.py"]
    assert first["commits"] == [{"hash": "1a2b3c4", "message": "fix: make x two"}]
    assert second["applied"] == ["helper.py", "docs/user guide.md", "app.py"]
    assert second["commits"] == [
        {"hash": "0f0f0f0", "message": "chore: user's own change", "kind": "dirty"},
        {"hash": "2b3c4d5", "message": "feat: add greet helper and user guide"},
    ]
    assert "applied" not in failed and "commits" not in failed
    assert "SearchReplaceNoExactMatch" not in failed["content"]  # tool text, not the reply
    assert fixed["applied"] == ["app.py"] and fixed["commits"][0]["message"] == "feat: add z"
    assert "> quoted in the guide" in second["content"]


def test_replies_of_a_turn_merge_by_default_with_their_truth():
    (merged,) = import_text(HISTORY, "synthetic", min_turns=1)
    last = replies(merged)[-1]
    assert "y = 5" in last["content"] and "z = 5" in last["content"]
    assert last["applied"] == ["app.py"]
    assert [c["message"] for c in last["commits"]] == ["feat: add z"]


def test_old_aider_filename_gap_is_closed_and_nothing_else():
    old = "Here:\n\napp.py\n\n```python\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n"
    new = as_current_aider(old)
    assert "app.py\n```python\n<<<<<<< SEARCH" in new
    assert new.replace("app.py\n```", "app.py\n\n```") == old
    assert as_current_aider(new) == new


def test_scores():
    s = score_sets({"a", "b"}, {"b", "c"})
    assert (s.tp, s.fp, s.fn) == (1, 1, 1) and s.precision == 0.5 and s.recall == 0.5
    s = score_lists(["m", "m", "n"], ["m"])
    assert (s.tp, s.fp, s.fn) == (1, 0, 2)
    assert Score().precision is None and Score().recall is None
    assert norm_path(".\\src\\app.py") == "src/app.py"


def test_facts_of_a_turn_are_the_file_facts_it_added_or_changed():
    from aider_gardener.continuity.facts import FactBook

    book = FactBook()
    book.add("file", "src/a.py", "edited src/a.py", 1, detail={"op": "edited"})
    before = file_facts(book)
    fact = book.add("file", "src/b.py", "created src/b.py", 2, detail={"op": "created"})
    book.update(fact, detail={"commit": "abc1234", "message": "feat: b"})
    book.add("file", "docs", "added docs", 2, detail={"op": "added"})
    book.add("error", "E1", "KeyError: x", 2)
    edited, commits, stale = facts_of_turn(before, file_facts(book), floor=1)
    assert edited == {"src/b.py"}
    assert commits == [("abc1234", "feat: b")]
    assert stale == 0
    before = file_facts(book)
    old = book.current("file", "src/a.py")
    book.update(old, detail={"commit": "def5678", "message": "fix: a"})  # in place, turn 1
    edited, commits, stale = facts_of_turn(before, file_facts(book), floor=2)
    assert edited == {"src/a.py"} and commits == [("def5678", "fix: a")] and stale == 1


def test_a_clipped_commit_message_is_the_commit_message():
    assert same_message("feat: add a long …", "feat: add a long message about things")
    assert same_message("feat:  x", "feat: x")
    assert not same_message("feat: add a short …", "feat: add a long message")
    assert not same_message("feat: y", "feat: x")


def test_scoring_puts_misses_down_to_the_replay_or_the_tracker():
    result = SessionResult("h.md", "h--0000")
    result.repo_commits = {"abc1234" + "0" * 33: "feat: b"}
    result.records = [
        TurnRecord(
            1,
            truth_edited={"a.py", "b.py"},
            truth_commits=["feat: b"],
            fact_edited={"b.py"},
            fact_commits=[("abc1234", "feat: b"), ("fff9999", "feat: ghost")],
            aider_edited={"a.py", "b.py"},
            aider_commits=[("abc1234", "feat: b")],
        )
    ]
    s = score_session(result)
    assert (s.edited.tp, s.edited.fp, s.edited.fn) == (1, 0, 1)
    assert (s.commits.tp, s.commits.fp, s.commits.fn) == (1, 1, 0)
    assert s.replay_edited.recall == 1.0 and s.bad_hashes == 1
    assert s.misses["edit missed: Aider applied it, no fact"] == 1


@pytest.fixture(scope="module")
def plain_result():
    """One plain-Aider replay of the synthetic history (no gardener, so no facts)."""
    (replay,) = import_text(HISTORY, "synthetic", min_turns=1, split_replies=True)
    with bench_environment():
        return run_session(replay, "synthetic.md", gardener=False)


def test_replay_applies_and_commits_what_the_transcript_did(plain_result):
    by_turn = {r.turn: r for r in plain_result.records}
    for turn, paths in TRUTH_EDITED.items():
        assert by_turn[turn].aider_edited == paths, turn
        assert [m for _, m in by_turn[turn].aider_commits] == TRUTH_COMMITS[turn], turn
    subjects = list(plain_result.repo_commits.values())
    for messages in TRUTH_COMMITS.values():
        assert all(m in subjects for m in messages)  # real commits in the temp repo
    hashes = [h for r in plain_result.records for h, _ in r.aider_commits]
    assert all(any(full.startswith(h) for full in plain_result.repo_commits) for h in hashes)
    assert plain_result.excluded_commits["dirty"] == 1
    assert USER_CHANGE in subjects  # the dirty commit's stand-in, made by the replay
    assert USER_CHANGE not in [m for r in plain_result.records for _, m in r.aider_commits]
    assert plain_result.unused_replies == 0 and plain_result.errors == []
    s = score_session(plain_result)
    assert s.replay_edited.precision == s.replay_edited.recall == 1.0
    assert s.replay_commits.precision == s.replay_commits.recall == 1.0


def test_an_edit_the_transcript_did_not_apply_fails_in_the_replay(replay):
    truth = replies(replay)
    truth[1]["applied"].remove("helper.py")  # as if the user had declined the new file
    with bench_environment():
        result = run_session(replay, "synthetic.md", gardener=False)
    by_turn = {r.turn: r for r in result.records}
    assert "helper.py" not in by_turn[3].aider_edited
    assert by_turn[3].aider_edited == {"docs/user guide.md", "app.py"}


def test_a_commit_that_failed_in_the_transcript_fails_in_the_replay(replay):
    first = replies(replay)[0]
    first["commits"] = [{"hash": "", "message": "fix: make x two", "kind": "failed"}]
    with bench_environment():
        result = run_session(replay, "synthetic.md", gardener=False)
    by_turn = {r.turn: r for r in result.records}
    assert by_turn[2].aider_edited == {"app.py"} and by_turn[2].aider_commits == []
    assert "fix: make x two" not in result.repo_commits.values()
    assert [m for _, m in by_turn[3].aider_commits] == TRUTH_COMMITS[3]  # signing restored


@needs_tracker
def test_facts_match_the_transcript(replay):
    with bench_environment():
        result = run_session(replay, "synthetic.md")
    assert result.facts_available, result.errors
    s = score_session(result)
    assert s.edited.precision == s.edited.recall == 1.0, s.misses
    assert s.commits.precision == s.commits.recall == 1.0, s.misses
    assert s.bad_hashes == 0


@needs_tracker
def test_corrupted_truth_scores_below_one(replay):
    with bench_environment():
        result = run_session(replay, "synthetic.md")
    by_turn = {r.turn: r for r in result.records}
    # the facts come from the real replay; the truth they are scored against is made wrong
    by_turn[2].truth_edited.add("not_edited.py")  # a file the reply never touches
    by_turn[3].truth_commits = ["feat: a message Aider never wrote"]
    s = score_session(result)
    assert s.edited.recall < 1.0 and s.edited.precision == 1.0
    assert s.commits.precision < 1.0 and s.commits.recall < 1.0


def test_cli_on_a_file_writes_json(tmp_path, capsys):
    src = tmp_path / "synthetic.md"
    src.write_text(HISTORY)
    out = tmp_path / "facts.json"
    assert main([str(src), "--plain", "--quiet", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    (history,) = report["histories"]
    assert history["history"] == "synthetic.md" and history["sessions"] == 1
    assert history["replay_vs_transcript"]["edited"]["recall"] == 1.0
    assert history["commits_left_out_of_truth"] == {"dirty": 1}
    assert "Fact tracker vs transcript" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.md")]) == 2


def test_import_history_round_trips_through_files(tmp_path):
    src = tmp_path / "synthetic.md"
    src.write_text(HISTORY)
    replays, unattributed = import_history(src, tmp_path / "out")
    assert len(replays) == 1 and sorted((tmp_path / "out").glob("*.jsonl"))
    assert [len(e.get("applied", [])) for e in replies(replays[0])] == [1, 3, 0, 1]
    assert sum(unattributed.values()) == 0


def test_real_histories_have_ground_truth(histories_dir, tmp_path):
    files = sorted(histories_dir.glob("*.md"))
    if not files:
        pytest.skip("no chat histories in the shared data")
    applied = commits = 0
    for path in files:
        replays, _ = import_history(path, tmp_path / path.stem)
        for replay in replays:
            for event in replies(replay):
                applied += len(event.get("applied", []))
                commits += sum(1 for c in event.get("commits", []) if "kind" not in c)
    assert applied > 100 and commits > 100


def test_failed_blocks_are_kept_on_request_and_survive_the_replay_files(tmp_path):
    (plain,) = import_text(HISTORY, "synthetic", min_turns=1, split_replies=True)
    assert not any("failed_blocks" in e for e in plain.events)  # the replay format's fields
    src = tmp_path / "synthetic.md"
    src.write_text(HISTORY)
    (replay,), _ = import_history(src, tmp_path / "out")
    failed = [e.get("failed_blocks") for e in replies(replay)]
    assert failed == [None, None, [{"path": "app.py", "search": "y = 5\n"}], None]


def test_a_block_that_failed_in_the_transcript_fails_where_the_replay_has_its_lines():
    # the failed block searches for lines the replay's app.py holds (left by earlier turns)
    history = HISTORY.replace("y = 5\n=======\nz = 5", "x = 2\n=======\nx = 3")
    (replay,) = import_text(history, "synthetic", min_turns=1, split_replies=True)
    (failing,) = import_text(
        history, "synthetic", min_turns=1, split_replies=True, edit_failures=True
    )
    with bench_environment():
        ignored = run_session(replay, "synthetic.md", gardener=False)
        result = run_session(failing, "synthetic.md", gardener=False)
    assert len({r.turn: r for r in ignored.records}[4].aider_commits) == 2  # the divergence
    turn4 = {r.turn: r for r in result.records}[4]
    assert [m for _, m in turn4.aider_commits] == TRUTH_COMMITS[4]
    assert score_session(result).replay_commits.precision == 1.0


PARTLY = """
# aider chat started at 2025-02-01 10:00:00

> Main model: gpt-4o with diff edit format$

#### tidy both files$

a.py
```python
<<<<<<< SEARCH
a = 1
=======
a = 10
>>>>>>> REPLACE
```

b.py
```python
<<<<<<< SEARCH
b = 2
=======
b = 20
>>>>>>> REPLACE
```

> Tokens: 1.2k sent, 60 received.$
> Committing a.py before applying edits.$
> b.py$
> Create new file? (Y)es/(N)o [Yes]: y$
> Commit 0a0a0a0 chore: the user's change$
> The LLM did not conform to the edit format.$
> # 1 SEARCH/REPLACE block failed to match!

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in b.py
<<<<<<< SEARCH
b = 2
=======
b = 20
>>>>>>> REPLACE

The SEARCH section must exactly match an existing block of lines including all white space

# The other 1 SEARCH/REPLACE block were applied successfully.
Don't re-send them.$
> Commit 1b1b1b1 feat: tidy a$
""".replace("$\n", "  \n")


def test_a_dirty_commit_is_known_when_questions_come_between():
    (replay,) = import_text(PARTLY, "partly", min_turns=1, split_replies=True)
    (reply,) = replies(replay)
    assert [c.get("kind") for c in reply["commits"]] == ["dirty", None]


def test_a_partly_applied_reply_writes_and_commits_the_blocks_that_matched():
    (replay,) = import_text(PARTLY, "partly", min_turns=1, split_replies=True, edit_failures=True)
    (reply,) = replies(replay)
    assert reply["partly_applied"] is True and "applied" not in reply
    with bench_environment():
        result = run_session(replay, "partly.md", gardener=False)
    (record,) = result.records
    assert [m for _, m in record.aider_commits] == ["feat: tidy a"]
    s = score_session(result)
    assert s.replay_commits.precision == s.replay_commits.recall == 1.0
