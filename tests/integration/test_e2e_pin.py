"""Issue 23 point 1 as a user meets it: ``/pin`` in the real ``aider-gardener`` in a
pseudo-terminal, against the stub model (terminal.py).

Before: ``/pin`` of a log bigger than the window put its whole original back in the chat
("restored 1 message(s) in the chat to full text"), ``/tokens`` showed a negative number of
tokens remaining, eviction then dropped the user's prompts to make room for the pin, and
``/pin --undo`` pinned again while ``/unpin`` did not exist.
"""

from __future__ import annotations

import json
import re

import pytest

pexpect = pytest.importorskip("pexpect")

from .terminal import SCRIPT  # noqa: E402
from .terminal import spawn as _spawn  # noqa: E402

pytestmark = pytest.mark.slow

COMPRESSED = r"output compressed from ([\d,]+) to ([\d,]+) tokens \(full text: /show (\w+)\)"
FAILING = (
    'echo "FAILED tests/test_app.py::test_parse - ValueError: invalid literal for int()"\n'
    'echo "====== 1 failed, 3 passed in 0.12s ======"\nsleep 1\nexit 1\n'
)


def _say(child, line: str) -> str:
    """Send a line; what the screen shows up to the next prompt, on one line."""
    child.sendline(line)
    child.expect("\n> ")
    return " ".join(child.before.split())


def _window(tmp_path, tokens: int) -> str:
    meta = tmp_path / "metadata.json"
    info = dict(max_input_tokens=tokens, max_output_tokens=4096, max_tokens=4096)
    info.update(input_cost_per_token=2.5e-06, output_cost_per_token=1e-05)
    meta.write_text(json.dumps({"gpt-4o": dict(info, litellm_provider="openai", mode="chat")}))
    return str(meta)


def _start(workspace, *extra: str):
    """A prompt, a failing test run and the 15k-token import log (compressed): (child, log id)."""
    repo = workspace[0]
    (repo / "slow_import.sh").write_text(SCRIPT + "sleep 1\n")
    (repo / "failing.sh").write_text(FAILING)
    child = _spawn(workspace, "--gardener-max-output", "300", *extra)
    child.expect("\n> ")
    _say(child, "make parse accept floats like 3.5 and round them")
    _say(child, "/run sh failing.sh")
    child.sendline("/run sh slow_import.sh")
    child.expect(COMPRESSED)
    log_id = child.match.group(3)
    child.expect("\n> ")
    return child, log_id


def _remaining(child) -> int:
    out = _say(child, "/tokens")
    return int(re.search(r"(-?[\d,]+) tokens remaining", out).group(1).replace(",", ""))


def test_pin_of_a_log_bigger_than_the_window_keeps_its_summary_and_unpins(workspace, tmp_path):
    child, log_id = _start(workspace, "--model-metadata-file", _window(tmp_path, 12_000))
    try:
        room = _remaining(child)
        out = _say(child, f"/pin {log_id}")
        assert f"Pinned {log_id}: kept in the chat as its summary" in out, out
        assert "would not fit" in out and "restored" not in out
        assert _remaining(child) == room > 8_000  # the chat is as it was

        out = _say(child, "/context-pressure")
        assert "pinned, outside the budget" in out and "Healthy" in out, out
        out = _say(child, "/evict")
        assert "nothing to evict" in out, out

        out = _say(child, f"/pin --undo {log_id}")
        assert out.endswith(
            f"Unpinned {log_id}: its message in the chat may be evicted again and"
            " the store may expire it unused."
        ), out
        assert f"{log_id} is not pinned" in _say(child, f"/unpin {log_id}")
        assert f"Pinned {log_id}" in _say(child, f"/pin {log_id}")
        assert f"Unpinned {log_id}" in _say(child, f"/unpin {log_id}")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_a_pin_that_fits_comes_back_in_full_and_costs_no_prompt(workspace):
    """The original fits gpt-4o's window, so it comes back in full; it is far over the 2,048
    budget, and eviction (one recent turn) drops none of the user's prompts to make room."""
    child, log_id = _start(workspace, "--gardener-recent-turns", "1", "--gardener-budget", "2048")
    try:
        _say(child, "and negative numbers too")
        out = _say(child, f"/pin {log_id}")
        m = re.search(rf"Pinned {log_id}: back in the chat in full \(([\d,]+) tokens\)", out)
        assert m and int(m.group(1).replace(",", "")) > 15_000, out
        for question in ("what about 1e3?", "and empty strings?"):
            out = _say(child, question)
            assert "Stub model reply" in out and "dropped" not in out, out
        out = _say(child, "/context-pressure")
        assert re.search(r"prompt +4 message\(s\)", out), out
        assert re.search(r"\d+ pinned, outside the budget", out), out
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
