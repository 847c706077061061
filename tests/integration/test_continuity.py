"""Continuity in a live Aider session: facts from Aider's real events (edits, commits, /test,
/undo, /add), the session-state block, /checkpoint, /soft-restart, resume, pressure warnings."""

from __future__ import annotations

import pytest

from aider_gardener.continuity.checkpoint import list_checkpoints, parse_checkpoint, validate
from tests.integration.helpers import text_of

COMMIT_MSG = "fix: strip whitespace before parsing"


@pytest.fixture(autouse=True)
def committed(repo):
    """The repo fixture leaves app.py uncommitted; Aider would first make a "dirty" commit."""
    import git

    g = git.Repo(repo)
    g.git.add(A=True)
    g.index.commit("initial")
    return repo


def edit_reply(old: str, new: str, path: str = "app.py") -> str:
    return (
        f"Changing it.\n\n{path}\n```python\n"
        f"<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n"
    )


def failing_script(repo, name: str = "check.sh") -> None:
    """A test command whose output depends on app.py: fails until parse strips and handles
    empty strings."""
    (repo / name).write_text(
        "if grep -q 'or 0' app.py; then echo '3 passed in 0.01s'; exit 0; fi\n"
        "echo '____ test_parse ____'\n"
        "echo 'E   ValueError: invalid literal for int() with base 10: '\"'\"' '\"'\"''\n"
        "echo 'FAILED tests/test_app.py::test_parse - ValueError: invalid literal for int()'\n"
        "echo '1 failed, 2 passed in 0.02s'\n"
        "exit 1\n"
    )


def answer(llm, *replies):
    """The next requests get these replies in order (FakeLLM indexes by request count)."""
    llm.requests.clear()
    llm.replies = list(replies)


def facts(coder, kind=None):
    return [f for f in coder.gardener.facts.book if f.live and (kind is None or f.kind == kind)]


def test_edit_and_commit_become_file_facts_and_state(make_coder, llm, repo):
    coder = make_coder(fnames=[str(repo / "app.py")])
    answer(
        llm,
        edit_reply("    return int(x)\n", "    return int(x.strip())\n"),
        COMMIT_MSG,
        "Done.",
    )
    coder.run(with_message="make parse tolerate surrounding whitespace in its input")
    head = coder.repo.repo.head.commit
    assert head.message.strip() == COMMIT_MSG
    files = {f.key: f for f in facts(coder, "file")}
    assert "app.py" in files
    assert files["app.py"].detail.get("commit") and head.hexsha.startswith(
        files["app.py"].detail["commit"][:7]
    )
    assert COMMIT_MSG in files["app.py"].text
    coder.run(with_message="thanks!")
    sent = text_of(llm.last)
    assert "Session state" in sent and "app.py" in sent and head.hexsha[:7] in sent
    goal = [f for f in facts(coder, "goal")]
    assert goal and "surrounding whitespace" in goal[-1].text


def test_failed_approach_then_fix(make_coder, llm, repo):
    failing_script(repo)
    coder = make_coder(fnames=[str(repo / "app.py")])
    answer(llm, "The parse test fails on an empty string.")
    coder.run(with_message="/test sh check.sh")
    errors = facts(coder, "error")
    assert errors and any(f.status == "open" for f in errors)
    answer(llm, edit_reply("    return int(x)\n", "    return int(x.strip())\n"), "strip", "ok")
    coder.run(with_message="fix the parse failure")
    answer(llm, "Still failing, same error.")
    coder.run(with_message="/test sh check.sh")
    failed = facts(coder, "failed")
    assert failed, [f.text for f in facts(coder)]
    assert "app.py" in failed[-1].text
    answer(
        llm,
        edit_reply("    return int(x.strip())\n", "    return int(x.strip() or 0)\n"),
        "handle empty",
        "ok",
    )
    coder.run(with_message="handle the empty string case too")
    answer(llm, "All green.")
    coder.run(with_message="/test sh check.sh")
    errors = facts(coder, "error")
    assert errors and all(f.status == "resolved" for f in errors), [f.text for f in errors]
    answer(llm, "Ok.")
    coder.run(with_message="summarise where we are")
    sent = text_of(llm.last)
    assert "test_parse" in sent  # the failed approach is still in the state block


def test_checkpoint_command_writes_a_verified_file(make_coder, llm, repo, tmp_path, capsys):
    coder = make_coder(fnames=[str(repo / "app.py")])
    coder.run(with_message="use httpx instead of requests for every HTTP call")
    coder.commands.run("/checkpoint before the refactor")
    out = capsys.readouterr().out
    assert "Checkpoint saved and verified" in out
    paths = list_checkpoints(tmp_path / "store" / "checkpoints")
    assert len(paths) == 1
    text = paths[0].read_text()
    assert validate(text) == []
    cp = parse_checkpoint(text, path=paths[0])
    assert cp.trigger == "manual" and cp.verified and "before the refactor" in (cp.note or "")
    assert "httpx" in text and "app.py" in text


def test_soft_restart_clears_history_and_keeps_the_thread(make_coder, llm, repo, tmp_path):
    failing_script(repo)
    coder = make_coder(fnames=[str(repo / "app.py")])
    coder.run(with_message="we must support Python 3.9, so don't use match statements")
    answer(llm, "It fails.")
    coder.run(with_message="/test sh check.sh")
    assert coder.done_messages or coder.cur_messages
    coder.commands.run("/soft-restart")
    assert coder.done_messages == [] and coder.cur_messages == []
    cps = list_checkpoints(tmp_path / "store" / "checkpoints")
    assert cps and parse_checkpoint(cps[0].read_text()).trigger == "soft-restart"
    answer(llm, "Ok.")
    coder.run(with_message="where were we?")
    sent = text_of(llm.last)
    assert "Python 3.9" in sent
    assert "tests/test_app.py::test_parse" in sent
    assert "app.py" in sent


def test_new_session_resumes_from_the_exit_checkpoint(make_coder, llm, repo, capsys):
    coder = make_coder(fnames=[str(repo / "app.py")])
    coder.run(with_message="use orjson instead of json for the cache files")
    coder.gardener.close()  # the process ends: exit checkpoint
    capsys.readouterr()

    offered = make_coder()
    assert "/resume" in capsys.readouterr().out
    offered.gardener.close()

    resumed = make_coder(resume=True)
    assert "resumed from checkpoint" in capsys.readouterr().out
    answer(llm, "Ok.")
    resumed.run(with_message="continue")
    assert "orjson" in text_of(llm.last)


def test_resume_command_loads_latest(make_coder, llm, repo, capsys):
    first = make_coder()
    first.run(with_message="never change the public API of parse")
    first.commands.run("/checkpoint")
    second = make_coder()
    second.commands.run("/resume")
    answer(llm, "Ok.")
    second.run(with_message="go on")
    assert "never change the public API" in text_of(llm.last)


def test_pressure_warnings_and_checkpoint(make_coder, llm, repo, capsys):
    big = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(300))
    (repo / "big.py").write_text(big)
    coder = make_coder(fnames=[str(repo / "big.py")], warn_at=(50, 85))
    coder.main_model.info = dict(coder.main_model.info, max_input_tokens=8000)
    capsys.readouterr()
    coder.run(with_message="add a docstring to f1 please, keep the rest as is")
    out = capsys.readouterr()
    text = out.out + out.err
    assert "gardener: prompt at" in text and "window" in text
    assert "checkpoint saved (pressure)" in text
    coder.run(with_message="and to f2")
    again = capsys.readouterr()
    assert "gardener: prompt at 5" not in again.out + again.err  # one line per crossing


def test_checkpoint_failure_keeps_history(make_coder, llm, repo, tmp_path, capsys, monkeypatch):
    coder = make_coder()
    coder.run(with_message="use tomllib instead of toml")
    from aider_gardener.integration import continuity

    def broken(*args, **kwargs):
        raise continuity.CheckpointError("disk full")

    monkeypatch.setattr(continuity, "write_checkpoint", broken)
    before = list(coder.done_messages) + list(coder.cur_messages)
    coder.commands.run("/soft-restart")
    out = capsys.readouterr()
    assert "Soft restart cancelled" in out.out + out.err
    assert list(coder.done_messages) + list(coder.cur_messages) == before


def test_a_failing_tracker_costs_one_warning(make_coder, llm, repo, capsys, monkeypatch):
    from aider_gardener.continuity.tracker import FactTracker

    def boom(self, *args, **kwargs):
        raise RuntimeError("tracker broke")

    monkeypatch.setattr(FactTracker, "on_prompt", boom)
    coder = make_coder()
    answer(llm, "first", "second")
    coder.run(with_message="hello there, first request")
    coder.run(with_message="and a second request")
    err = capsys.readouterr()
    assert (err.out + err.err).count("tracker broke") == 1
    assert len(llm.requests) == 2


def test_undo_is_a_failed_approach(make_coder, llm, repo):
    coder = make_coder(fnames=[str(repo / "app.py")])
    answer(
        llm,
        edit_reply("    return int(x)\n", "    return float(x)\n"),
        "switch to float",
        "ok",
    )
    coder.run(with_message="parse floats as well")
    commit = coder.repo.repo.head.commit.hexsha[:7]
    coder.commands.run("/undo")
    assert coder.repo.repo.head.commit.hexsha[:7] != commit
    failed = facts(coder, "failed")
    assert failed and commit in failed[-1].text


@pytest.mark.parametrize("state_tokens", [0])
def test_state_block_can_be_turned_off(make_coder, llm, repo, state_tokens):
    coder = make_coder(state_tokens=state_tokens)
    coder.run(with_message="use httpx instead of requests")
    coder.run(with_message="ok next")
    assert "Session state" not in text_of(llm.last)


def test_architect_editor_edits_become_facts(make_coder, llm, repo):
    """The editor coder runs plain Aider (passive) but its edits and commits are the session's."""
    coder = make_coder("architect", fnames=[str(repo / "app.py")])
    answer(
        llm,
        "Strip the input before int().",  # architect
        edit_reply("    return int(x)\n", "    return int(x.strip())\n"),  # editor
        "fix: strip input",  # commit message
    )
    coder.run(with_message="make parse strip its input")
    files = {f.key: f for f in facts(coder, "file")}
    assert files["app.py"].detail.get("op") == "edited"
    assert files["app.py"].detail.get("commit") == coder.repo.repo.head.commit.hexsha[:7]


def test_partly_failed_reply_records_only_changed_files(make_coder, llm, repo):
    (repo / "other.py").write_text("VALUE = 1\n")
    coder = make_coder(fnames=[str(repo / "app.py"), str(repo / "other.py")])
    coder.max_reflections = 0
    bad = edit_reply("this text is not in the file\n", "nothing\n", path="other.py")
    answer(llm, edit_reply("    return int(x)\n", "    return int(x.strip())\n") + bad, "m", "ok")
    coder.run(with_message="strip in parse and change other.py")
    edited = {f.key for f in facts(coder, "file") if f.detail.get("op") == "edited"}
    assert "other.py" not in edited
    assert "return int(x.strip())" in (repo / "app.py").read_text()
    assert "app.py" in edited


def test_each_edit_of_a_file_is_its_own_fact(make_coder, llm, repo):
    coder = make_coder(fnames=[str(repo / "app.py")], auto_commits=False)
    coder.auto_commits = False
    answer(llm, edit_reply("    return int(x)\n", "    return int(x.strip())\n"))
    coder.run(with_message="strip it")
    answer(llm, edit_reply("    return int(x.strip())\n", "    return int(x.strip() or 0)\n"))
    coder.run(with_message="and default to zero")
    edits = [f for f in coder.gardener.facts.book if f.kind == "file" and f.key == "app.py"]
    assert sorted({f.turn for f in edits if f.detail.get("op") == "edited"}) == [1, 2]


def test_facts_reach_the_store_table(make_coder, llm, repo):
    from aider_gardener.store.facts import load_facts

    coder = make_coder(fnames=[str(repo / "app.py")])
    coder.run(with_message="use httpx instead of requests for every HTTP call")
    session = coder.gardener
    rows = session.store.read(
        lambda c: c.execute(
            "SELECT kind, text, turn FROM facts WHERE session_id = ?", (session.session_id,)
        ).fetchall()
    )
    assert ("decision", "use httpx instead of requests for every HTTP call", 1) in [
        tuple(r) for r in rows
    ]
    assert any(
        f.kind == "file" and f.key == "app.py"
        for f in load_facts(session.store, session.session_id)
    )


def test_jumping_past_every_level_still_checkpoints(make_coder, llm, repo, tmp_path, capsys):
    coder = make_coder()
    coder.run(with_message="use httpx instead of requests")
    keeper = coder.gardener.keeper()
    keeper.on_pressure(coder, 90, 100)  # 0% -> 90%: both 70 and 85 crossed in one turn
    out = capsys.readouterr()
    assert (out.out + out.err).count("gardener: prompt at 90%") == 1
    cps = list_checkpoints(tmp_path / "store" / "checkpoints")
    assert [parse_checkpoint(p.read_text()).trigger for p in cps] == ["pressure"]
