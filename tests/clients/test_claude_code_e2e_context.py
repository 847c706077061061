"""What the gardener adds to Claude Code's context, in the real CLI (issue 22, points 5 and 6).

The harness is ``test_claude_code_e2e.py``'s: the pinned CLI, headless, against the scripted
Messages API on loopback, the plugin loaded as shipped. Covered here:

- UserPromptSubmit recall in a project with history (a real session's store, replayed through
  the hooks): a prompt unrelated to it gets nothing, a related one gets the entries and the one
  line the user is shown ("UserPromptSubmit says: gardener: recalled …");
- an error fixed in the session after its compaction is not open at the next session's start:
  through the hooks with a transcript in the CLI's own format, and in the real CLI (a real
  pytest run failing, ``/compact``, the fix and the passing run, then a new session).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aider_gardener.clients.claude_hooks import handle
from aider_gardener.continuity.checkpoint import list_checkpoints, load_latest, parse_checkpoint
from tests.clients.fake_anthropic import FakeAnthropic, all_text, text, tool_use
from tests.clients.test_claude_code_e2e import (  # noqa: F401  (fixtures)
    claude_cli,
    final_result,
    gardener_env_path,
    gardener_plugin,
    hook_context,
    private_hook_servers,
    run_claude,
)
from tests.conftest import SHARED

SESSION = "cc_session__SWORDIntel-claude-backups__e1ffaf02.jsonl"
UNRELATED = "let's write the README now"
RELATED = "the DNS resolution fails inside systemd-nspawn again"


def said_to_user(events: list[dict]) -> list[str]:
    """What hooks told the user, as this CLI reports it in stream-json."""
    return [
        str(e.get("content") or "")
        for e in events
        if e.get("type") == "system" and e.get("subtype") == "informational"
    ]


@pytest.fixture
def project(tmp_path):
    repo, home = tmp_path / "work", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo, home


# --- point 5: only what helps, and one line saying what ---


def test_recall_in_the_real_cli_injects_only_what_bears_on_the_prompt(
    claude_cli, project  # noqa: F811 (the e2e module's fixture)
):
    from bench.prompt_recall import Replayer

    path = SHARED / "claude_code_transcripts" / SESSION
    if not path.is_file():
        pytest.skip(f"shared transcript not found: {path}")
    repo, home = project
    history = repo.parent / "history"
    replayer = Replayer(history)  # the project's earlier session, through the hooks
    try:
        replayer.replay(path)
    finally:
        replayer.close()
    env = {"PATH": gardener_env_path(), "AIDER_GARDENER_STORE": str(history / "store")}
    load = ["--plugin-dir", str(gardener_plugin())]

    with FakeAnthropic([[text("Sure.")]]) as api:
        events = run_claude(claude_cli, api, repo, home, UNRELATED, *load, env=env)
    assert hook_context(api.main_requests[0].body, "UserPromptSubmit") == ""
    assert not [m for m in said_to_user(events) if "gardener" in m]

    with FakeAnthropic([[text("It is the nspawn resolv.conf again.")]]) as api:
        events = run_claude(claude_cli, api, repo, home, RELATED, *load, env=env)
    ctx = hook_context(api.main_requests[0].body, "UserPromptSubmit")
    ids = [line.split()[1][3:] for line in ctx.splitlines() if line.startswith("--- id=")]
    assert ids and "systemd-nspawn" in ctx
    (line,) = [m for m in said_to_user(events) if "gardener" in m]
    noun = "entry" if len(ids) == 1 else "entries"
    assert line.startswith(f"UserPromptSubmit says: gardener: recalled {len(ids)} {noun}: ")
    assert all(f"{i} (" in line for i in ids) and "\n" not in line


# --- point 6: resolved is resolved ---

FAILING = (
    "============================= test session starts ==============================\n"
    "collected 3 items\n\ntest_calc.py .F.                                          [100%]\n\n"
    "=========================== short test summary info ============================\n"
    "FAILED test_calc.py::test_add - assert 5 == 4\n"
    "========================= 1 failed, 2 passed in 0.03s =========================="
)
PASSING = "3 passed in 0.02s"


def _record(kind: str, content, **extra) -> dict:
    return {"type": kind, "message": {"role": kind, "content": content}, **extra}


def _bash(n: int, command: str, out: str, error: bool) -> list[dict]:
    """A Bash call and its result as Claude Code records them."""
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": command}}
    body = f"Error: Exit code 1\n{out}" if error else out
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": body}
    if error:
        result["is_error"] = True
    response = {"stdout": out, "stderr": "", "interrupted": False, "isImage": False}
    return [_record("assistant", [use]), _record("user", [result], toolUseResult=response)]


def _write(path: Path, records: list[dict], cwd: Path) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps({**r, "cwd": str(cwd)}) + "\n")


def test_an_error_fixed_after_the_compaction_is_not_carried_to_the_next_session(project):
    """Through the hooks: session A's tests fail, A compacts (its checkpoint holds the open
    error), then A fixes them and they pass, and A ends (Claude Code has no exit hook). Session
    B's start reads A to its end: no open error in B's context, and none in the checkpoint B's
    own compaction carries from."""
    repo, home = project
    folder = home / ".claude" / "projects" / "-work"
    folder.mkdir(parents=True)
    a, b = folder / "sess-a.jsonl", folder / "sess-b.jsonl"
    base = {"session_id": "sess-a", "cwd": str(repo), "transcript_path": str(a)}
    _write(a, [{"type": "system", "version": "2.1.332"}, _record("user", "run the tests")], repo)
    _write(a, _bash(1, "python -m pytest -q", FAILING, error=True), repo)
    handle("PreCompact", dict(base, trigger="manual"))
    handle("SessionStart", dict(base, source="compact"))
    checkpoints = repo / ".aider.gardener" / "checkpoints"
    (compacted,) = list_checkpoints(checkpoints)
    assert "FAILED test_calc.py::test_add" in compacted.read_text()  # open when compacting
    _write(a, [_record("user", "fix it")], repo)
    fix = "sed -i 's/a + b + 1/a + b/' calc.py && python -m pytest -q"
    _write(a, _bash(2, fix, "", False), repo)
    _write(a, _bash(3, "python -m pytest -q 2>&1 | tail -3", PASSING, error=False), repo)
    _write(a, [_record("assistant", [{"type": "text", "text": "All tests pass now."}])], repo)

    b.write_text("")
    start = handle(
        "SessionStart",
        {"session_id": "sess-b", "cwd": str(repo), "transcript_path": str(b), "source": "startup"},
    )
    ctx = (start.get("hookSpecificOutput") or {}).get("additionalContext") or ""
    assert "test_add" not in ctx and "Open errors" not in ctx
    latest = load_latest(checkpoints)
    assert latest.session == "claude-sess-a" and latest.trigger == "exit"
    assert [f.status for f in latest.facts.find("error")] == ["resolved"]
    pre = handle(
        "PreCompact",
        {"session_id": "sess-b", "cwd": str(repo), "transcript_path": str(b), "trigger": "auto"},
    )
    carried = parse_checkpoint(Path(pre["checkpoint"]).read_text())
    assert not [f for f in carried.facts.find("error") if f.status == "open"]


def test_an_error_fixed_in_the_real_cli_is_not_open_at_the_next_start(
    claude_cli, project  # noqa: F811 (the e2e module's fixture)
):
    """In the real CLI: a real pytest run fails, ``/compact`` (PreCompact writes the checkpoint
    with the open error), the fix and a passing run, then a new session: its start context
    holds no open error."""
    repo, home = project
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b + 1\n")
    (repo / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) in (0, 1)\n\n\n"
        "def test_add():\n    assert add(2, 2) == 4\n\n\ndef test_type():\n"
        "    assert isinstance(add(1, 1), int)\n"
    )
    env = {"PATH": gardener_env_path()}
    load = ["--plugin-dir", str(gardener_plugin())]
    allowed = ["--allowedTools", "Bash"]
    pytest_cmd = f"{Path(sys.executable)} -m pytest -q -p no:cacheprovider"
    run = [[tool_use("Bash", {"command": pytest_cmd, "description": "tests"})], [text("Fails.")]]
    with FakeAnthropic(run) as api:
        events = run_claude(claude_cli, api, repo, home, "run the tests", *load, *allowed, env=env)
    session = final_result(events)["session_id"]
    resume = ["--resume", session]
    with FakeAnthropic([[text("Summary: test_add fails.")]]) as api:
        run_claude(claude_cli, api, repo, home, "/compact", *load, *resume, env=env)
    checkpoints = repo / ".aider.gardener" / "checkpoints"
    assert "test_add" in load_latest(checkpoints).body  # open when compacting

    fix = f"sed -i 's/a + b + 1/a + b/' calc.py && {pytest_cmd}"
    script = [
        [tool_use("Bash", {"command": fix, "description": "fix and test"})],
        [text("All tests pass now.")],
    ]
    with FakeAnthropic(script) as api:
        run_claude(claude_cli, api, repo, home, "fix it", *load, *resume, *allowed, env=env)
    assert (repo / "calc.py").read_text().endswith("return a + b\n")

    with FakeAnthropic([[text("Hello.")]]) as api:
        events = run_claude(claude_cli, api, repo, home, "hello", *load, env=env)
    (started,) = [
        e
        for e in events
        if e.get("subtype") == "hook_response" and e.get("hook_name") == "SessionStart:startup"
    ]
    assert started["exit_code"] == 0 and "test_add" not in started["output"]
    assert "test_add" not in hook_context(api.main_requests[0].body, "SessionStart")
    assert "test_add" not in all_text(api.main_requests[0].body)
    latest = load_latest(checkpoints)
    assert latest.trigger == "exit" and latest.session == f"claude-{session}"
    assert [f.status for f in latest.facts.find("error")] == ["resolved"]
    assert not os.environ.get("AIDER_GARDENER_STORE")  # the project's own store was used
