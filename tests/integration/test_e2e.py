"""End to end, as a user: ``aider-gardener`` in a pseudo-terminal against a stub model.

The stub is Aider's own mechanism: a model-settings file whose ``extra_params`` carry litellm's
``mock_response``, so the real CLI, input loop, streaming and commands all run; no network.
"""

from __future__ import annotations

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import spawn as _spawn  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_session_in_a_terminal(workspace):
    repo = workspace[0]
    child = _spawn(workspace, "--gardener-max-output", "300")
    try:
        child.expect("> ")
        child.sendline("what does parse do?")
        child.expect("Stub model reply")
        child.expect("> ")

        child.sendline("/run sh import.sh")
        child.expect(
            r"output compressed from ([\d,]+) to ([\d,]+) tokens \(full text: /show (\w+)\)"
        )
        before, after, entry_id = child.match.groups()
        assert int(after.replace(",", "")) * 5 < int(before.replace(",", ""))
        child.expect("> ")

        child.sendline("why did the import fail?")
        child.expect("Stub model reply")
        child.expect("> ")

        child.sendline("/context-pressure")
        child.expect("Recommendation: ")
        report = child.before
        child.expect("> ")

        child.sendline("/recall ZebraTimeout")
        child.expect(entry_id)
        child.expect("> ")

        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    for part in ("window 128,000", "system prompt", "chat history", "total prompt", "Store ("):
        assert part in report
    assert "(summary)" in report  # the throttled output, listed by class and state
    assert (repo / ".aider.gardener" / "store.sqlite").exists()


def test_checkpoint_soft_restart_and_resume_in_a_terminal(workspace):
    """Issue 7 as a user meets it: /checkpoint, /soft-restart, /exit, then a new process in the
    same project offers the checkpoint, /resume loads it, --gardener-resume loads it at start."""
    repo = workspace[0]
    child = _spawn(workspace, "app.py")
    try:
        child.expect("> ")
        child.sendline("use orjson instead of json for the cache files")
        child.expect("Stub model reply")
        child.expect("> ")
        child.sendline("/checkpoint cache work")
        child.expect(r"Checkpoint saved and verified: (\S+) \((\d+) facts\)")
        first = child.match.group(1)
        child.expect("> ")
        child.sendline("/soft-restart")
        child.expect(r"Soft restart: cleared (\d+) messages")
        assert int(child.match.group(1)) >= 2
        child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    checkpoints = sorted((repo / ".aider.gardener" / "checkpoints").glob("*.md"))
    assert len(checkpoints) >= 2 and (repo / first).exists()
    assert "orjson" in checkpoints[-1].read_text()

    child = _spawn(workspace)
    try:
        child.expect(r"checkpoint from \S+ \(soft-restart\) available; /resume loads it")
        child.expect("> ")
        child.sendline("/resume")
        child.expect(r"resumed from checkpoint \S+ \((\d+) facts\)")
        assert int(child.match.group(1)) >= 2
        child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)

    child = _spawn(workspace, "--gardener-resume")
    try:
        child.expect(r"resumed from checkpoint")
        child.expect("> ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
