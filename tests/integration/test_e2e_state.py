"""Issue 23 point 5 as a user meets it: ``/state`` in the real ``aider-gardener`` in a
pseudo-terminal, against the stub model (terminal.py).

Before: no command showed the session-state block (only ``--verbose``), a docstring printed
with ``cat`` became an open error, and the goal was the last question asked ("where were
we?") instead of what the user asked for.
"""

from __future__ import annotations

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import spawn as _spawn  # noqa: E402

pytestmark = pytest.mark.slow

DOCUMENTED = '''"""Parsing helpers.

parse() raises ValueError: invalid literal for int() when the text is not a number.
Errors are logged as "ERROR: bad row" and the caller gets None.

    >>> parse("x")
    Traceback (most recent call last):
      ...
    ValueError: invalid literal for int() with base 10: 'x'
"""


def parse(x):
    return int(x)
'''
FAILING = (
    'echo "FAILED tests/test_app.py::test_parse - ValueError: invalid literal for int()"\n'
    'echo "====== 1 failed, 3 passed in 0.12s ======"\nsleep 1\nexit 1\n'
)
GOAL = "make parse accept floats like 3.5 and round them"


def _say(child, line: str) -> str:
    child.sendline(line)
    child.expect("\n> ")
    return child.before


def _section(state: str, title: str) -> list[str]:
    """The lines of one section of the block (``Goal: …`` is a section of one line)."""
    lines = state.replace("\r", "").splitlines()
    out, inside = [], False
    for line in lines:
        if line.startswith(title + ":"):
            inside = True
            rest = line[len(title) + 1 :].strip()
            if rest:
                return [rest]
            continue
        if inside and line.startswith("- "):
            out.append(line[2:])
        elif inside:
            break
    return out


def test_state_shows_the_goal_asked_for_and_only_errors_that_happened(workspace):
    repo = workspace[0]
    (repo / "parse_doc.py").write_text(DOCUMENTED)
    (repo / "failing.sh").write_text(FAILING)
    child = _spawn(workspace)
    try:
        child.expect("\n> ")
        out = _say(child, "/state")
        assert "No session state yet" in out, out

        _say(child, GOAL)
        _say(child, "/run cat parse_doc.py; sleep 1")
        state = _say(child, "/state")
        assert state.count("Session state kept by aider-gardener") == 1, state
        assert _section(state, "Goal") == [GOAL], state
        assert _section(state, "Open errors") == [], state  # a docstring is no error
        assert "tokens, at most 800" in state

        _say(child, "/run sh failing.sh")  # exit 1: a test that really failed
        _say(child, "where were we?")
        state = _say(child, "/state")
        assert _section(state, "Goal") == [GOAL], state
        errors = _section(state, "Open errors")
        assert len(errors) == 1 and errors[0].startswith("FAILED tests/test_app.py::test_parse")

        _say(child, "now add a --strict flag to the CLI")  # a new task: a new goal
        state = _say(child, "/state")
        assert _section(state, "Goal") == ["now add a --strict flag to the CLI"], state
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_state_says_when_the_block_is_off(workspace):
    child = _spawn(workspace, "--gardener-state-tokens", "0")
    try:
        child.expect("\n> ")
        _say(child, GOAL)
        out = _say(child, "/state")
        assert "No session state: the block is off (--gardener-state-tokens 0)." in out, out
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
