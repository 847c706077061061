"""Issue 13, point 3, as a user meets it: ``/tokens``, ``/context-pressure`` and ``/evict`` in
the real ``aider-gardener`` in a pseudo-terminal, against a stub model (terminal.py).

Before this change, with history over the budget, ``/context-pressure`` evicted and wrote a
checkpoint, ``/tokens`` left out the state block and the examples (its total was hundreds of
tokens under the request's), the budget of 1,500 showed as 1,400-odd, and ``/evict`` did not exist.
"""

from __future__ import annotations

import re

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import SCRIPT  # noqa: E402
from .terminal import spawn as _spawn  # noqa: E402

pytestmark = pytest.mark.slow

PROMPT = "> "


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def _sent(text: str) -> tuple[int, int]:
    """Aider's "Tokens: N sent" (exact below 1,000, then 1.2k, then 12k) and its rounding."""
    if text.endswith("k"):
        return int(float(text[:-1]) * 1000), (50 if "." in text else 500)
    return _n(text), 0


def _command(child, line: str, end: str) -> str:
    """Send a chat command; its output up to and including the line matching ``end``."""
    child.sendline(line)
    child.expect(end)
    out = child.before + child.after
    child.expect(PROMPT)
    return " ".join((out + child.before).split())


def _tokens_total(child) -> tuple[int, str]:
    out = _command(child, "/tokens", r"tokens max context window size")
    return _n(re.search(r"([\d,]+) tokens total", out).group(1)), out


def test_pressure_reports_measure_and_evict_acts(workspace):
    repo = workspace[0]
    checkpoints = repo / ".aider.gardener" / "checkpoints"
    child = _spawn(
        workspace,
        "--gardener-budget",
        "1500",
        "--gardener-max-output",
        "100000",
        "--gardener-recent-turns",
        "1",
        "app.py",
    )
    try:
        child.expect(PROMPT)
        child.sendline("use orjson instead of json for the cache files")
        child.expect("Stub model reply")
        child.expect(PROMPT)
        child.sendline("/run sh import.sh")
        child.expect(r"Added \d+ lines of output to the chat")
        child.expect(PROMPT)
        saved = sorted(checkpoints.glob("*.md")) if checkpoints.exists() else []

        # over budget: both reports measure the same prompt, and change nothing
        before, tokens = _tokens_total(child)
        first = _command(child, "/context-pressure", r"Recommendation: [^\r\n]*")
        again = _command(child, "/context-pressure", r"Recommendation: [^\r\n]*")
        after, tokens_again = _tokens_total(child)
        assert first == again and tokens == tokens_again and before == after
        assert "checkpoint" not in first
        assert (sorted(checkpoints.glob("*.md")) if checkpoints.exists() else []) == saved
        total = _n(re.search(r"([\d,]+) [\d.]+% total prompt", first).group(1))
        assert total == before > 10_000
        assert "session state" in tokens and "example messages" in tokens
        assert "Gardener budget 1,500 tokens (--gardener-budget)" in first
        assert re.search(r"over the gardener budget \(1,500.*/evict now", first)

        # /evict N acts, and says what it did
        out = _command(child, "/evict 5000", r"/recall ID brings an entry back")
        m = re.search(r"the next request ([\d,]+) -> ([\d,]+) tokens \(freed ([\d,]+)\)", out)
        assert m and _n(m.group(3)) >= 5000
        assert re.search(r"\w+ +log +full -> summary", out)
        shrunk, _ = _tokens_total(child)
        assert (_n(m.group(1)), _n(m.group(2))) == (before, shrunk)  # "freed" is the request's
        assert before - shrunk == _n(m.group(3))

        # the next request is what /tokens said, plus the new message
        child.sendline("thanks")
        child.expect(r"Tokens: ([\d.,]+k?) sent")
        sent, rounding = _sent(child.match.group(1))
        child.expect(PROMPT)
        assert sent - rounding <= shrunk + 30 and sent + rounding > shrunk, (shrunk, sent)

        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


FAILING = (
    'echo "FAILED tests/test_app.py::test_parse - ValueError: invalid literal for int()"\n'
    'echo "====== 1 failed, 3 passed in 0.12s ======"\nsleep 1\nexit 1\n'
)


def test_one_history_number_and_the_forecast_is_what_evict_does(workspace):
    """Issue 23 point 6: the history row and the budget line showed 1,265 and 1,153, the
    forecast named one message while ``/evict 2`` took the open failing test, and "freed" was
    the messages' savings while the request fell by less."""
    repo = workspace[0]
    (repo / "failing.sh").write_text(FAILING)
    (repo / "slow_import.sh").write_text(SCRIPT + "sleep 1\n")
    child = _spawn(workspace, "--gardener-recent-turns", "1", "--gardener-max-output", "300")
    try:
        child.expect(PROMPT)
        for line, end in (
            ("make parse accept floats like 3.5", "Stub model reply"),
            ("/run sh failing.sh", r"Added \d+ lines? of output"),
            ("/run sh slow_import.sh", r"full text: /show \w+"),
            ("what about negative numbers?", "Stub model reply"),
            ("and empty strings?", "Stub model reply"),
        ):
            child.sendline(line)
            child.expect(end)
            child.expect(PROMPT)
        out = _command(child, "/context-pressure", r"Recommendation: [^\r\n]*")
        history = _n(re.search(r"([\d,]+) +[\d.]+% +chat history", out).group(1))
        assert f"and the chat history ({history:,})" in out, out
        first = re.search(
            r"First to go with /evict N, in this order: (\w+) (\w+) (\w+) -> (\w+)", out
        )
        assert first, out
        before, _ = _tokens_total(child)

        out = _command(child, "/evict 2", r"/recall ID brings an entry back")
        taken = re.search(r"tokens \(evicted above [\d,]+\): (\S+) +(\w+) +(\w+) -> (\w+)", out)
        assert taken and taken.group(1) == first.group(1), (first.group(0), out)
        assert (taken.group(3), taken.group(4)) == (first.group(3), first.group(4))
        after, _ = _tokens_total(child)
        m = re.search(r"the next request ([\d,]+) -> ([\d,]+) tokens \(freed ([\d,]+)\)", out)
        assert m and (_n(m.group(1)), _n(m.group(2)), _n(m.group(3))) == (
            before,
            after,
            before - after,
        )
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
